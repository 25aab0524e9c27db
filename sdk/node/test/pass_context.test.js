'use strict';
// PassContext: cancelling the pass or one resource, and per-pass flags, in DependentChain and
// CrudResource (the same cases as sdk/cpp handlers_test and sdk/python chain_test).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');

const {
  DependentChain, CrudResource, PassContext, Request, TerminalError, freezeOnto,
  UPDATE_ALLOWED, UPDATE_NECESSARY,
} = sdk;
sdk.log.setSink(() => {});

const PRIMARY = { apiVersion: 'example.com/v1', kind: 'App',
  metadata: { name: 'web', namespace: 'team-a', uid: 'u-1', generation: 2 },
  spec: { cache: true } };

function request(children = [], primary = PRIMARY) {
  return Request.fromCall({ controller: 'app', namespace: 'team-a', name: 'web',
    object: Buffer.from(JSON.stringify(primary)),
    children: children.map((c) => ({ api_version: c.apiVersion, kind: c.kind,
      object: Buffer.from(JSON.stringify(c)) })) });
}

const existing = (name, value) => ({ apiVersion: 'v1', kind: 'ConfigMap',
  metadata: { name, namespace: 'team-a', resourceVersion: '7', labels: { owner: 'someone' } },
  data: { v: value, extra: 'x' } });

/** ConfigMaps a, b, c; `stepOf` runs `step`, the others set the flag seen-<name>. */
function flagChain(stepOf, step) {
  const chain = new DependentChain();
  for (const name of ['a', 'b', 'c']) {
    chain.add({ name, apiVersion: 'v1', kind: 'ConfigMap',
      desired: () => ({ metadata: { name }, data: { v: '2' } }),
      onPass: name === stepOf ? step : (req, desired, current, ctx) => ctx.setFlag(`seen-${name}`) });
  }
  return chain;
}

const byName = (result) => Object.fromEntries(result.desired.map((d) => [d.metadata.name, d]));
const condition = (result) => result.conditions.find((c) => c.type === 'DependentsReady');

test('cancelPass skips later dependents and keeps those that exist', async () => {
  const chain = flagChain('b', (req, desired, current, ctx) =>
    ctx.cancelPass('waiting for a migration'));
  const result = await chain.build()(request([existing('a', '1'), existing('c', '1')]));
  assert.equal(result.error, null);
  const desired = byName(result);
  assert.deepEqual(desired.a.data, { v: '2' });
  assert.deepEqual(desired.b.data, { v: '2' }); // the canceller's own
  assert.deepEqual(desired.c.data, { v: '1' }); // kept as it is
  assert.equal(desired.c.metadata.resourceVersion, undefined);
  const cond = condition(result);
  assert.equal(cond.status, false);
  assert.equal(cond.reason, 'Cancelled');
  assert.equal(cond.message,
    'b cancelled the pass: waiting for a migration; skipped: c; waiting for b');
  const fresh = await chain.build()(request([existing('a', '1'), existing('b', '1')]));
  assert.equal(byName(fresh).c, undefined); // absent: not created
});

test('cancelResource skips only that dependent', async () => {
  const chain = flagChain('b', (req, desired, current, ctx) => {
    if (current !== undefined) ctx.cancelResource('updates are paused');
  });
  const req = request([existing('a', '2'), existing('b', '1'), existing('c', '1')]);
  const state = chain.reconcile(req, new sdk.Result());
  assert.deepEqual(state.cancelled, ['b']);
  assert.deepEqual(state.cancelReasons, { b: 'updates are paused' });
  assert.equal(state.passCancelledBy, '');
  assert.deepEqual(state.flags, { 'seen-a': true, 'seen-c': true });
  assert.equal(state.allReady, false);
  const result = await chain.build()(req);
  assert.deepEqual(byName(result).b.data, { v: '1' });
  assert.deepEqual(byName(result).c.data, { v: '2' });
  assert.equal(condition(result).message, 'skipped: b (updates are paused)');
});

test('flags set earlier are seen later', async () => {
  const seen = [];
  const chain = new DependentChain()
    .add({ name: 'first', apiVersion: 'v1', kind: 'ConfigMap',
      desired: () => ({ metadata: { name: 'first' }, data: { v: '2' } }),
      onPass: (req, desired, current, ctx) => {
        ctx.setFlag(UPDATE_ALLOWED, Boolean(req.spec.cache));
        ctx.setFlag(UPDATE_NECESSARY, current !== undefined && !sdk.isSubset(desired, current));
      } })
    .add({ name: 'second', apiVersion: 'v1', kind: 'ConfigMap',
      desired: () => ({ metadata: { name: 'second' } }),
      onPass: (req, desired, current, ctx) => {
        seen.push([ctx.flag(UPDATE_ALLOWED), ctx.flag(UPDATE_NECESSARY)]);
        if (!ctx.flag(UPDATE_ALLOWED)) ctx.cancelResource('updates not allowed');
      } });
  const on = await chain.build()(request([existing('first', '1')]));
  assert.ok(byName(on).second);
  const off = await chain.build()(request([existing('first', '1')],
    { ...PRIMARY, spec: { cache: false } }));
  assert.equal(byName(off).second, undefined);
  assert.deepEqual(seen, [[true, true], [false, true]]);
});

test('a throwing step fails the reconcile naming the dependent', async () => {
  const result = await flagChain('a', () => { throw new TerminalError('no such mode'); })
    .build()(request());
  assert.deepEqual(result.error, { kind: 'terminal', message: 'dependent a: no such mode' });
  assert.deepEqual(result.desired, []);
});

test('CrudResource steps skip objects and the rest of the pass', async () => {
  const stepped = [];
  const copies = new CrudResource('v1', 'ConfigMap', () => ['a', 'b', 'c', 'd'].map(
    (name) => ({ metadata: { name }, data: { v: '2' } })))
    .onPass((req, desired, current, ctx) => {
      stepped.push(desired.metadata.name);
      if (desired.metadata.name === 'a') ctx.cancelResource('frozen by policy');
      if (desired.metadata.name === 'b') ctx.cancelPass('budget spent');
    });
  const req = request([existing('a', '1'), existing('c', '1')]);
  const result = await copies.build()(req);
  assert.equal(result.error, null);
  assert.deepEqual(stepped, ['a', 'b']);
  const desired = byName(result);
  assert.deepEqual(desired.a.data, { v: '1' });
  assert.deepEqual(desired.b.data, { v: '2' });
  assert.deepEqual(desired.c.data, { v: '1' });
  assert.equal(desired.d, undefined);
  assert.ok(result.events.some((e) => e.reason === 'Skipped'));
  const plan = copies.plan(req);
  assert.deepEqual(plan.skipped.map((s) => s.reason),
    ['frozen by policy', 'pass cancelled: budget spent', 'pass cancelled: budget spent']);
  assert.equal(plan.passCancelled, true);
});

test('freezeOnto keeps the current values of the desired fields; first reason wins', () => {
  assert.deepEqual(freezeOnto(
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', labels: { a: '1' } },
      data: { k: 'new', gone: 'y' } },
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', uid: 'u', labels: { a: '0' } },
      data: { k: 'old', other: 'z' } }),
  { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', labels: { a: '0' } },
    data: { k: 'old' } });
  const ctx = new PassContext();
  ctx.cancelPass('one');
  ctx.cancelPass('two');
  assert.equal(ctx.passCancelReason, 'one');
  assert.equal(ctx.flag('unset'), false);
});
