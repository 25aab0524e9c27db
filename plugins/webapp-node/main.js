#!/usr/bin/env node
'use strict';
// The WebApp reference plugin on the Node SDK. The host starts it with CTRLHOST_PLUGIN_ADDRESS.
const { Plugin } = require('../../sdk/node/src');
const { addController } = require('./webapp');

const plugin = new Plugin('webapp-node', '0.1.0');
addController(plugin);
plugin.run();
