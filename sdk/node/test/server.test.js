'use strict';
// The server in process (Plugin.start): the concurrency bound, the message-size guard, health
// Watch across a shutdown, and an unknown health service.

const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { Plugin, Result, loadProtocol, log } = require('../src');

log.setSink(() => {});
const { plugin: pb, health } = loadProtocol();
const dir = fs.mkdtempSync(path.join(
  process.env.TEST_TMPDIR && process.env.TEST_TMPDIR.length < 70 ? process.env.TEST_TMPDIR : os.tmpdir(), 'srv-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));
const DEADLINE = () => new Date(Date.now() + 20000);

function call(id, name) {
  const obj = { apiVersion: 'example.com/v1', kind: 'App', metadata: { name, namespace: 'ns' } };
  return { request_id: String(id), reconcile: { controller: 'app', namespace: 'ns', name,
    object: Buffer.from(JSON.stringify(obj)) } };
}

test('at most `concurrency` reconciles run at once; oversized answers become errors', async () => {
  let running = 0;
  let maxRunning = 0;
  const releases = [];
  const plugin = new Plugin('srv', '1', { concurrency: 2, maxMessageBytes: 1 << 20 });
  plugin.controller('app').for('example.com', 'v1', 'App').reconcile(async (req) => {
    if (req.name === 'huge') {
      const r = new Result();
      r.status().blob = 'x'.repeat(2 << 20);
      return r;
    }
    running++;
    maxRunning = Math.max(maxRunning, running);
    await new Promise((resolve) => releases.push(resolve));
    running--;
    return undefined;
  });
  const server = await plugin.start(`unix://${path.join(dir, 'c.sock')}`);
  const client = new pb.ControllerPluginService(server.address, grpc.credentials.createInsecure());
  try {
    const stream = client.Reconcile({ deadline: DEADLINE() });
    const got = [];
    /** @type {(value?: unknown) => void} */
    let onData = () => {};
    stream.on('data', (r) => { got.push(r); onData(); });
    stream.on('error', () => {});
    for (let i = 1; i <= 5; i++) stream.write(call(i, `gated-${i}`));
    // Release one at a time; each release lets exactly one waiting reconcile start.
    for (let answered = 0; answered < 5; answered++) {
      while (releases.length === 0) await new Promise((resolve) => setImmediate(resolve));
      assert.ok(running <= 2);
      releases.shift()();
      if (got.length <= answered) await new Promise((resolve) => { onData = resolve; });
    }
    assert.equal(maxRunning, 2);
    assert.equal(got.length, 5);
    assert.ok(got.every((r) => !r.error));
    stream.write(call(6, 'huge'));
    await new Promise((resolve) => { onData = resolve; });
    const huge = got[5];
    assert.equal(huge.request_id, '6');
    assert.equal(huge.error.kind, 'ERROR_KIND_TERMINAL');
    assert.equal(huge.error.reason, 'ResponseTooLarge');
    assert.match(huge.error.message, /exceeds the message limit of 1048576/);
    stream.end();
  } finally {
    client.close();
    await server.shutdown(1000);
  }
});

test('health: Watch sees SERVING then NOT_SERVING; unknown services', async () => {
  const plugin = new Plugin('srv', '1');
  plugin.controller('app').for('example.com', 'v1', 'App').reconcile(() => undefined);
  const server = await plugin.start(`unix://${path.join(dir, 'h.sock')}`);
  const client = new health.Health(server.address, grpc.credentials.createInsecure());
  try {
    await assert.rejects(new Promise((resolve, reject) => client.Check({ service: 'other' },
      { deadline: DEADLINE() }, (e, r) => (e ? reject(e) : resolve(r)))),
    (/** @type {any} */ e) => e.code === grpc.status.NOT_FOUND);
    const seen = [];
    const watch = client.Watch({ service: '' }, { deadline: DEADLINE() });
    watch.on('error', () => {});
    const ended = new Promise((resolve) => watch.on('end', resolve));
    await new Promise((resolve) => watch.once('data', (r) => { seen.push(r.status); resolve(); }));
    watch.on('data', (r) => seen.push(r.status));
    await server.shutdown(1000);
    await ended;
    assert.deepEqual(seen, ['SERVING', 'NOT_SERVING']);
  } finally {
    client.close();
  }
});

test('setServing: NOT_SERVING on purpose for both names, seen by Check and Watch', async () => {
  const plugin = new Plugin('srv', '1');
  plugin.controller('app').for('example.com', 'v1', 'App').reconcile(() => undefined);
  const server = await plugin.start(`unix://${path.join(dir, 's.sock')}`);
  const client = new health.Health(server.address, grpc.credentials.createInsecure());
  const check = (service) => new Promise((resolve, reject) => client.Check({ service },
    { deadline: DEADLINE() }, (e, r) => (e ? reject(e) : resolve(r.status))));
  const SERVICE = 'ctrlhost.plugin.v1alpha1.ControllerPluginService';
  try {
    const statuses = [];
    const waiters = [];
    const watch = client.Watch({ service: SERVICE }, { deadline: DEADLINE() });
    const record = (status) => {
      statuses.push(status);
      while (waiters.length > 0) waiters.shift()();
    };
    watch.on('data', (r) => record(r.status));
    // A broken Watch (at the latest at DEADLINE) ends the waits, and the assertions then fail.
    watch.on('error', (e) => record(`error ${e.code}`));
    const seen = async (n) => {
      while (statuses.length < n) await new Promise((resolve) => waiters.push(resolve));
    };
    await seen(1);

    plugin.setServing(false); // through the plugin: every server it runs
    await seen(2);
    assert.equal(statuses[1], 'NOT_SERVING');
    assert.equal(await check(''), 'NOT_SERVING');
    assert.equal(await check(SERVICE), 'NOT_SERVING');
    plugin.setServing(false); // no change, no Watch message
    server.setServing(true); // through the server
    await seen(3);
    assert.equal(await check(''), 'SERVING');
    assert.equal(await check(SERVICE), 'SERVING');
    assert.deepEqual(statuses, ['SERVING', 'NOT_SERVING', 'SERVING']);

    const ended = new Promise((resolve) => watch.on('end', resolve));
    const stopping = server.shutdown(1000);
    server.setServing(true); // ignored while draining
    plugin.setServing(true); // the draining server has left the plugin
    await stopping;
    await ended;
    // No SERVING after the drain began.
    assert.deepEqual(statuses, ['SERVING', 'NOT_SERVING', 'SERVING', 'NOT_SERVING']);
  } finally {
    client.close();
  }
});
