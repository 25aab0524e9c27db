'use strict';
// ResourceRouter: the same cases as sdk/cpp resource_sets_test.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { Request, Result, ResourceRouter } = require('../src');

function make(labels) {
  const obj = { apiVersion: 'example.com/v1', kind: 'App',
    metadata: { name: 'a', namespace: 'n', labels } };
  return Request.fromCall({ controller: 'app', namespace: 'n', name: 'a',
    object: Buffer.from(JSON.stringify(obj)) });
}

/** The router's answer, awaited (route may return a Promise when a set's reconcile is async). */
async function routed(r, req) {
  return /** @type {import('../src').Result} */ (await r.route(req));
}

const reconcileAs = (req, ctx) => {
  const result = new Result();
  result.status().context = ctx;
  return result;
};

function router() {
  return new ResourceRouter()
    .add('v1', { handles: (r) => r.labels.version !== 'v2', reconcile: reconcileAs })
    .add('v2', { handles: (r) => r.labels.version === 'v2', reconcile: reconcileAs,
      initContext: (r) => ({ set: 'v2', name: r.name }) })
    .add('canary', { handles: (r) => r.labels.track === 'canary', reconcile: reconcileAs });
}

test('exactly one set runs, with its context', async () => {
  const r = router();
  assert.deepEqual((await routed(r, make({}))).status().context, {});
  assert.deepEqual((await routed(r, make({ version: 'v2' }))).status().context,
    { set: 'v2', name: 'a' });
  assert.equal(r.skipped, 0);
});

test('several sets are a terminal error naming them', async () => {
  const result = await routed(router(), make({ track: 'canary' }));
  const message = 'the object matches 2 resource sets: "v1", "canary"; exactly one must handle it';
  assert.deepEqual(result.error, { kind: 'terminal', message });
  assert.deepEqual(result.conditions,
    [{ type: 'Reconciled', status: false, reason: 'AmbiguousRoute', message }]);
  assert.deepEqual(result.events, [{ type: 'Warning', reason: 'AmbiguousRoute', message }]);
});

test('no set: skipped and counted; a gone object is not', async () => {
  const r = new ResourceRouter().add('v2', { handles: (q) => q.labels.version === 'v2',
    reconcile: () => Result.terminalError('must not run') });
  const result = await routed(r, make({ version: 'v3' }));
  assert.equal(result.error, null);
  assert.equal(r.skipped, 1);
  const gone = Request.fromCall({ controller: 'app', namespace: 'n', name: 'a',
    object: Buffer.alloc(0) });
  assert.equal((await routed(r, gone)).error, null);
  assert.equal(r.skipped, 1);
});

test('bad sets are refused', () => {
  const r = new ResourceRouter();
  assert.throws(() => r.add('', { handles: () => true, reconcile: reconcileAs }), /needs a name/);
  assert.throws(() => r.add('x', /** @type {any} */ ({ reconcile: reconcileAs })),
    /needs handles and reconcile/);
  r.add('x', { handles: () => true, reconcile: reconcileAs });
  assert.throws(() => r.add('x', { handles: () => true, reconcile: reconcileAs }),
    /resource set "x" is already defined/);
});
