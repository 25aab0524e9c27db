#!/usr/bin/env node
'use strict';
// The conformance "scenario" controller on the Node SDK (see scenario.cc for the outcomes).
const path = require('node:path');
const { Plugin, Result, newObject } = require(path.join(__dirname, '..', '..', '..', 'sdk', 'node', 'src'));

const plugin = new Plugin('scenario', '1.0.0');
plugin.controller('scenario')
  .for('e2e.ctrlhost.dev', 'v1', 'Scenario')
  .owns('', 'v1', 'ConfigMap')
  .reconcile(async (req) => {
    if (!req.exists || req.deleting) return new Result();
    const outcome = typeof req.spec.outcome === 'string' ? req.spec.outcome : 'ok';
    const result = new Result();
    if (outcome === 'requeue') {
      result.status().phase = 'Waiting';
      result.requeueAfter(30000);
    } else if (outcome === 'retryable') {
      return Result.retryableError('the scenario asks for a retry');
    } else if (outcome === 'terminal') {
      result.event('Warning', 'GivingUp', 'the scenario asks to stop');
      result.setError('terminal', 'the scenario asks to stop');
    } else if (outcome === 'forbidden') {
      result.desire(newObject('v1', 'Secret', req.name)).stringData = { token: 'x' };
    } else {
      const data = req.spec.data;
      result.desire(newObject('v1', 'ConfigMap', req.name)).data =
        data && typeof data === 'object' && !Array.isArray(data) ? data : {};
      result.status().phase = 'Done';
    }
    return result;
  });
plugin.run();
