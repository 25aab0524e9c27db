'use strict';
// DependentChain and CrudResource, and TerminalError.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');

const { DependentChain, CrudResource, Request, TerminalError, Plugin, isSubset } = sdk;
sdk.log.setSink(() => {});

function request(children = [], extra = {}) {
  const obj = { apiVersion: 'example.com/v1', kind: 'App',
    metadata: { name: 'a', namespace: 'ns', ...extra }, spec: { cache: true } };
  return Request.fromCall({ controller: 'app', namespace: 'ns', name: 'a',
    object: Buffer.from(JSON.stringify(obj)),
    children: children.map((c) => ({ api_version: c.apiVersion, kind: c.kind,
      object: Buffer.from(JSON.stringify(c)) })) });
}

const child = (apiVersion, kind, name, status) =>
  ({ apiVersion, kind, metadata: { name, namespace: 'ns' }, ...(status ? { status } : {}) });

function chain(cacheWanted = true) {
  return new DependentChain()
    .add({ name: 'db', apiVersion: 'apps/v1', kind: 'StatefulSet',
      desired: (r) => ({ metadata: { name: `${r.name}-db` } }),
      ready: (cur) => (cur.status || {}).readyReplicas >= 1 })
    .add({ name: 'web', apiVersion: 'apps/v1', kind: 'Deployment', desired: () => ({}) })
    .add({ name: 'cache', apiVersion: 'v1', kind: 'Service',
      desired: (r) => ({ metadata: { name: `${r.name}-cache` } }), when: () => cacheWanted });
}

test('chain: later dependents wait for earlier ones to be ready', async () => {
  const fn = chain().build((req, state, result) => { result.status().allReady = state.allReady; });
  let res = await fn(request());
  assert.deepEqual(res.desired.map((d) => d.kind), ['StatefulSet']);
  assert.equal(res.conditions[0].reason, 'Waiting');
  assert.equal(res.conditions[0].message, 'waiting for db, web, cache');
  res = await fn(request([child('apps/v1', 'StatefulSet', 'a-db', { readyReplicas: 1 })]));
  assert.deepEqual(res.desired.map((d) => d.kind), ['StatefulSet', 'Deployment']);
  res = await fn(request([child('apps/v1', 'StatefulSet', 'a-db', { readyReplicas: 1 }),
    child('apps/v1', 'Deployment', 'a')]));
  assert.deepEqual(res.desired.map((d) => d.kind), ['StatefulSet', 'Deployment', 'Service']);
  res = await fn(request([child('apps/v1', 'StatefulSet', 'a-db', { readyReplicas: 1 }),
    child('apps/v1', 'Deployment', 'a'), child('v1', 'Service', 'a-cache')]));
  assert.equal(res.conditions[0].status, true);
  assert.equal(res.conditions[0].reason, 'AllReady');
  assert.equal(res.statusPatch.allReady, true);
});

test('chain: an unwanted dependent is dropped and reported as deleting', async () => {
  const fn = chain(false).build();
  const res = await fn(request([child('apps/v1', 'StatefulSet', 'a-db', { readyReplicas: 1 }),
    child('apps/v1', 'Deployment', 'a'), child('v1', 'Service', 'a-cache')]));
  assert.deepEqual(res.desired.map((d) => d.kind), ['StatefulSet', 'Deployment']);
  assert.equal(res.conditions[0].message, 'waiting for cache');
});

test('chain: desired errors, deleting primaries', async () => {
  const bad = new DependentChain().add({ name: 'x', apiVersion: 'v1', kind: 'ConfigMap',
    desired: () => { throw new TerminalError('spec.x is wrong'); } }).build();
  const res = await bad(request());
  assert.deepEqual(res.error, { kind: 'terminal', message: 'dependent x: spec.x is wrong' });
  assert.equal(res.conditions.length, 0);
  const flaky = new DependentChain().add({ name: 'x', apiVersion: 'v1', kind: 'ConfigMap',
    desired: () => { throw new Error('later'); } }).build();
  assert.equal((await flaky(request())).error.kind, 'retryable');
  const seen = [];
  await new DependentChain().add({ name: 'x', apiVersion: 'v1', kind: 'ConfigMap',
    desired: () => { throw new TerminalError('spec.x is wrong'); } })
    .build((req, state) => { seen.push(state); })(request());
  // The state after a failure is not ready (as in every SDK), though nothing was pending.
  assert.deepEqual(seen.map((s) => [s.failedAt, s.pending, s.allReady]), [['x', [], false]]);
  const deleting = await chain().build()(request([], { deletionTimestamp: 'now' }));
  assert.equal(deleting.desired.length, 0);
});

test('crud: create, update, unchanged, remove', async () => {
  const res = new CrudResource('v1', 'ConfigMap', () => [
    { metadata: { name: 'new' }, data: { a: '1' } },
    { metadata: { name: 'same' }, data: { a: '1' } },
    { metadata: { name: 'changed' }, data: { a: '2' } },
  ]);
  const req = request([
    { ...child('v1', 'ConfigMap', 'same'), data: { a: '1' }, extra: 'server-set' },
    { ...child('v1', 'ConfigMap', 'changed'), data: { a: '1' } },
    child('v1', 'ConfigMap', 'old'),
  ]);
  const plan = res.plan(req);
  assert.deepEqual([plan.create, plan.update, plan.unchanged, plan.remove]
    .map((l) => l.map((o) => o.metadata.name)), [['new'], ['changed'], ['same'], ['old']]);
  const out = await res.build()(req);
  assert.deepEqual(out.desired.map((o) => o.metadata.name), ['new', 'changed', 'same']);
  assert.deepEqual(out.events.map((e) => `${e.reason} ${e.message}`),
    ['Created ConfigMap new', 'Updated ConfigMap changed', 'Deleted ConfigMap ns/old']);
  const dup = new CrudResource('v1', 'ConfigMap', () => [{ metadata: { name: 'x' } }, { metadata: { name: 'x' } }]);
  assert.deepEqual((await dup.build()(req)).error,
    { kind: 'terminal', message: 'two desired ConfigMap objects are named ns/x' });
  const unnamed = new CrudResource('v1', 'ConfigMap', () => [{}]);
  assert.match((await unnamed.build()(req)).error.message, /has no name/);
  assert.equal(isSubset({ a: [1, 2] }, { a: [1, 2], b: 1 }), true);
  assert.equal(isSubset({ a: [1] }, { a: [1, 2] }), false);
});

test('a thrown TerminalError is a terminal error answer', async () => {
  const p = new Plugin('p', '1');
  p.controller('app').for('example.com', 'v1', 'App').reconcile(() => {
    throw new TerminalError('spec.image is required');
  });
  const resp = await p.handle('3', { controller: 'app', name: 'a', object: Buffer.from('{}') });
  assert.deepEqual(resp.error, { kind: 'ERROR_KIND_TERMINAL', message: 'spec.image is required' });
});
