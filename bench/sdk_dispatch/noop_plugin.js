#!/usr/bin/env node
'use strict';
// The no-op plugin of the sdk-dispatch benchmark on the Node SDK: controller "echo" answers
// every request with the status {"seen": NAME}, the same answer as the C++ baseline's.
const path = require('node:path');
const { Plugin, Result } = require(path.join(__dirname, '..', '..', 'sdk', 'node', 'src'));

const plugin = new Plugin('noop-node', '0.1.0');
plugin.controller('echo').for('example.com', 'v1', 'WebApp').reconcile((req) => {
  const result = new Result();
  result.status().seen = req.name;
  return result;
});
plugin.run();
// Exit with the benchmark: a crashed benchmark must not leave the plugin running.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 500).unref();
