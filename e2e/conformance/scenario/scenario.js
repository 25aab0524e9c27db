#!/usr/bin/env node
'use strict';
// The conformance "scenario" controller on the Node SDK (see scenario.cc for the outcomes).
const path = require('node:path');
const {
  DependentChain, Plugin, Result, newObject, UPDATE_ALLOWED,
} = require(path.join(__dirname, '..', '..', '..', 'sdk', 'node', 'src'));

function chain(req) {
  const deps = new DependentChain();
  for (const dep of ['a', 'b', 'c']) {
    deps.add({
      name: dep, apiVersion: 'v1', kind: 'ConfigMap',
      desired: (r) => ({ ...newObject('v1', 'ConfigMap', `${r.name}-${dep}`), data: { v: 'new' } }),
      onPass: (r, desired, current, ctx) => {
        ctx.setFlag(`seen-${dep}`);
        if (dep === 'a') ctx.setFlag(UPDATE_ALLOWED, r.spec.allowUpdates === true);
        if (r.spec.cancelPass === dep) ctx.cancelPass('spec.cancelPass');
        if (r.spec.cancelResource === dep) ctx.cancelResource('spec.cancelResource');
        if (dep === 'c' && current !== undefined && !ctx.flag(UPDATE_ALLOWED)) {
          ctx.cancelResource('updates not allowed');
        }
      },
    });
  }
  return deps.build((r, state, result) => {
    Object.assign(result.status(), { phase: 'Done', cancelled: state.cancelled, flags: state.flags });
  })(req);
}

const plugin = new Plugin('scenario', '1.0.0');
plugin.controller('scenario')
  .for('e2e.ctrlhost.dev', 'v1', 'Scenario')
  .owns('', 'v1', 'ConfigMap')
  .reconcile(async (req) => {
    if (!req.exists || req.deleting) return new Result();
    const outcome = typeof req.spec.outcome === 'string' ? req.spec.outcome : 'ok';
    if (outcome === 'chain') return chain(req);
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
