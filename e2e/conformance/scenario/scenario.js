#!/usr/bin/env node
'use strict';
// The conformance "scenario" controller on the Node SDK (see scenario.cc for the outcomes).
const fs = require('node:fs');
const path = require('node:path');
const sdk = require(path.join(__dirname, '..', '..', '..', 'sdk', 'node', 'src'));
const {
  DependentChain, Plugin, ResourceRouter, Result, RetryableError, TerminalError, newObject,
  UPDATE_ALLOWED,
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
        if (r.spec.failStep === dep) throw new TerminalError('spec.failStep');
        if (r.spec.cancelPass === dep) ctx.cancelPass('spec.cancelPass');
        if (r.spec.cancelResource === dep) ctx.cancelResource('spec.cancelResource');
        if (dep === 'c' && current !== undefined && !ctx.flag(UPDATE_ALLOWED)) {
          ctx.cancelResource('updates not allowed');
        }
      },
    });
  }
  return deps.build((r, state, result) => {
    Object.assign(result.status(), { phase: 'Done', cancelled: state.cancelled, flags: state.flags,
      allReady: state.allReady, failedAt: state.failedAt });
  })(req);
}

function callbacks(req) {
  const log = [];
  const cbs = new sdk.StageCallbacks();
  for (const stage of sdk.STAGES) {
    cbs.on('v1', 'ConfigMap', stage, 'label', (r, s, desired) => {
      if (desired) desired.metadata.labels = { ...(desired.metadata.labels || {}), stage: s };
    });
    cbs.on('v1', 'ConfigMap', stage, 'record', (r, s, desired, current) => {
      log.push(`${s}:${(desired || current).metadata.name}`);
    });
    cbs.on('v1', 'ConfigMap', stage, 'guard', (r, s) => {
      if (r.spec.failAt === s) throw new TerminalError('spec.failAt');
    });
  }
  const deps = new DependentChain().withCallbacks(cbs);
  for (const dep of ['a', 'b', 'c']) {
    deps.add({ name: dep, apiVersion: 'v1', kind: 'ConfigMap',
      desired: (r) => ({ ...newObject('v1', 'ConfigMap', `${r.name}-${dep}`), data: { v: 'new' } }),
      when: dep === 'c' ? () => false : undefined });
  }
  return deps.build((r, state, result) => {
    Object.assign(result.status(), { phase: 'Done', log });
  })(req);
}

function operatorStatus(req) {
  const stringAt = (field, fallback) => (typeof req.spec[field] === 'string' ? req.spec[field] : fallback);
  const version = stringAt('version', '1.0.0');
  const result = new Result();
  result.desire(newObject('v1', 'ConfigMap', req.name)).data = { version };
  const child = req.child('ConfigMap', req.name);
  const ready = child !== undefined && child !== null && sdk.findPath(child, 'data.version') === version;
  sdk.setOperatorStatus(req, result, { operatorVersion: '1.0.0', targetVersion: version,
    childrenReady: ready, message: ready ? '' : `waiting for ConfigMap ${req.name}`,
    failure: stringAt('failure', '') });
  return result;
}

function builders(req) {
  const name = req.name;
  const labels = sdk.commonLabels('scenario', name);
  const selector = sdk.selectorLabels('scenario', name);
  let hash;
  try {
    hash = sdk.configHash(req.spec.config === undefined ? {} : req.spec.config);
  } catch (e) {
    throw new TerminalError(e.message);
  }
  const rules = [sdk.policyRule([''], ['configmaps'], ['get', 'list']),
    sdk.policyRule(['apps'], ['deployments'], ['watch'])];
  const subjects = [sdk.serviceAccountSubject(name, req.namespace)];
  const built = [
    sdk.buildDeployment({ name, labels, selector, replicas: 2,
      containers: [{ name: 'main', image: 'busybox' }],
      podAnnotations: { [sdk.CONFIG_HASH_ANNOTATION]: hash },
      podSpec: { serviceAccountName: name } }),
    sdk.buildService({ name, labels, selector, type: 'ClusterIP',
      ports: [sdk.servicePort({ port: 80, name: 'http', targetPort: 'http' }),
        sdk.servicePort({ port: 53, name: 'dns', targetPort: 53, protocol: 'UDP' })] }),
    sdk.buildConfigMap({ name: `${name}-config`, labels, data: { a: 'b' },
      owner: sdk.ownerReference(req) }),
    sdk.buildSecret({ name: `${name}-secret`, labels, stringData: { token: 't' }, type: 'Opaque' }),
    sdk.buildServiceAccount({ name, labels }),
    sdk.buildRole({ name, labels, rules }),
    sdk.buildRoleBinding({ name, labels, role: name, subjects }),
    sdk.buildClusterRole({ name: `${name}-cluster`, labels, rules }),
    sdk.buildClusterRoleBinding({ name: `${name}-cluster`, labels, clusterRole: `${name}-cluster`,
      subjects }),
  ];
  const result = new Result();
  Object.assign(result.status(), { phase: 'Done', configHash: hash, built });
  return result;
}

function reconcileAs(set) {
  return (req, context) => {
    const result = new Result();
    result.desire(newObject('v1', 'ConfigMap', req.name)).data = { set };
    Object.assign(result.status(), { phase: 'Done', set, context });
    return result;
  };
}

const router = new ResourceRouter()
  .add('v1', { handles: (r) => ['', 'v1'].includes(r.labels.version || ''),
    reconcile: reconcileAs('v1') })
  .add('v2', { handles: (r) => r.labels.version === 'v2', reconcile: reconcileAs('v2'),
    initContext: () => ({ replicas: 2, set: 'v2' }) })
  .add('canary', { handles: (r) => r.labels.track === 'canary', reconcile: reconcileAs('canary') });

function route(req) {
  const skippedBefore = router.skipped;
  const result = router.route(req);
  if (router.skipped > skippedBefore) result.status().skipped = router.skipped;
  return result;
}

const TASK_FILE = process.env.SCENARIO_TASK_FILE || '';

// "namespace/name" -> token, from the lines "namespace/name token".
function readTokens() {
  const tokens = new Map();
  let text = '';
  try {
    text = fs.readFileSync(TASK_FILE, 'utf8');
  } catch (e) {
    return tokens;
  }
  for (const line of text.split('\n')) {
    const fields = line.split(/\s+/).filter((f) => f !== '');
    if (fields.length === 2) tokens.set(fields[0], fields[1]);
  }
  return tokens;
}

function task(req) {
  const token = readTokens().get(`${req.namespace}/${req.name}`) || '';
  const result = new Result();
  result.desire(newObject('v1', 'ConfigMap', req.name)).data = { token };
  Object.assign(result.status(), { phase: 'Done', token });
  return result;
}

let pokeRuns = 0;
async function poke(ctx) {
  pokeRuns += 1;
  if (pokeRuns === 1) throw new Error('scenario task fails on its first run');
  const seen = new Map();
  do {
    for (const [key, token] of [...readTokens()].sort()) {
      if (seen.get(key) === token) continue;
      seen.set(key, token);
      const slash = key.indexOf('/');
      try {
        ctx.enqueue(key.slice(0, slash), key.slice(slash + 1));
      } catch (e) {
        process.stderr.write(`scenario task: ${e.message}\n`);
      }
    }
  } while (!(await ctx.wait(200)));
}

const plugin = new Plugin('scenario', '1.0.0');
const scenario = plugin.controller('scenario');
if (TASK_FILE) scenario.backgroundTask('poke', poke);
scenario
  .for('e2e.ctrlhost.dev', 'v1', 'Scenario')
  .owns('', 'v1', 'ConfigMap')
  .owns('e2e.ctrlhost.dev', 'v1', 'Scenario')
  .reconcile(async (req) => {
    if (!req.exists || req.deleting) return new Result();
    const outcome = typeof req.spec.outcome === 'string' ? req.spec.outcome : 'ok';
    if (outcome === 'chain') return chain(req);
    if (outcome === 'builders') return builders(req);
    if (outcome === 'callbacks') return callbacks(req);
    if (outcome === 'status') return operatorStatus(req);
    if (outcome === 'route') return route(req);
    if (outcome === 'task') return task(req);
    const result = new Result();
    if (outcome === 'requeue') {
      result.status().phase = 'Waiting';
      result.requeueAfter(30000);
    } else if (outcome === 'retryable') {
      return Result.retryableError('the scenario asks for a retry');
    } else if (outcome === 'retry-after') {
      throw new RetryableError("the scenario's quota is used up",
        { reason: 'QuotaExceeded', retryAfterMs: 45000 });
    } else if (outcome === 'terminal') {
      result.event('Warning', 'GivingUp', 'the scenario asks to stop');
      result.setError('terminal', 'the scenario asks to stop');
    } else if (outcome === 'forbidden') {
      result.desire(newObject('v1', 'Secret', req.name)).stringData = { token: 'x' };
    } else if (outcome === 'labels') {
      // Default labels: a child of another kind gets the primary's, one of its own kind none.
      result.desire(newObject('v1', 'ConfigMap', req.name)).data = { k: 'v' };
      result.desire(newObject('e2e.ctrlhost.dev/v1', 'Scenario', `${req.name}-child`)).spec =
        { outcome: 'ok' };
    } else {
      const data = req.spec.data;
      result.desire(newObject('v1', 'ConfigMap', req.name)).data =
        data && typeof data === 'object' && !Array.isArray(data) ? data : {};
      result.status().phase = 'Done';
    }
    return result;
  });
plugin.run();
