#!/usr/bin/env node
'use strict';
// The VersionedApp reference plugin on the Node SDK. The host starts it with
// CTRLHOST_PLUGIN_ADDRESS; the hold file is $VERSIONED_APP_HOLD_FILE (unset: nothing on hold).
const { Plugin } = require('../../sdk/node/src');
const { addController, OPERATOR_VERSION, HOLD_FILE_ENV } = require('./versioned_app');

const plugin = new Plugin('versioned-app', OPERATOR_VERSION);
addController(plugin, process.env[HOLD_FILE_ENV] || '');
plugin.run();
