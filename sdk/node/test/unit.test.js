'use strict';
// Unit tests: controller declarations, Request accessors, Result validation, handlers, the
// listen address parser, Plugin.describe/handle (exceptions and bad results become errors).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');

const { Plugin, Result, Request, Mapping, handlers, newObject, parseListenAddress } = sdk;
sdk.log.setSink(() => {});

const ALL = new Set(['CAPABILITY_SERVER_SIDE_APPLY', 'CAPABILITY_CONDITIONS',
  'CAPABILITY_CHILDREN', 'CAPABILITY_CANCELLATION']);

function primary(extra = {}) {
  return {
    apiVersion: 'example.com/v1', kind: 'App',
    metadata: { name: 'a', namespace: 'ns', uid: 'u1', generation: 4, labels: { team: 'x', n: 1 } },
    spec: { replicas: 2 },
    ...extra,
  };
}

function call(obj = primary(), extra = {}) {
  return {
    controller: 'app', namespace: 'ns', name: 'a', uid: 'u1', reason: 'REASON_CHILD_CHANGED',
    object: obj === null ? Buffer.alloc(0) : Buffer.from(JSON.stringify(obj)),
    children: [{ api_version: 'v1', kind: 'ConfigMap',
      object: Buffer.from('{"metadata":{"name":"a-cm"},"data":{"k":"v"}}') }],
    related_objects: [], finalizing: false, attempt: 2,
    deadline: { seconds: '1700000000', nanos: 5000000 }, trace_id: 't', ...extra,
  };
}

test('controller spec: defaults, mappings, validation', () => {
  const b = new sdk.ControllerBuilder('app').for('example.com', 'v1', 'App')
    .owns('v1'.startsWith('v') ? '' : '', 'v1', 'ConfigMap', { deleteAbsent: true })
    .watches('', 'v1', 'Secret', Mapping.fieldPath('spec.secret'), { includeInRequests: true })
    .finalizer('example.com/f').maxConcurrent(3).resync(90500).namespaces(['a'])
    .labelSelector('x=y').predicates({ primaryStatusChanges: true })
    .requestContents({ stripFields: ['metadata.managedFields'] })
    .reconcile(() => undefined);
  const c = b.build();
  assert.equal(c.spec.request_contents.children, true);
  assert.equal(c.spec.request_contents.related_objects, true);
  assert.deepEqual(c.spec.resync_period, { seconds: '90', nanos: 500000000 });
  assert.deepEqual(c.spec.watches[0].field_path, { primary_field_path: 'spec.secret' });
  assert.deepEqual(c.spec.predicates, { primary_status_changes: true, ignore_child_status_changes: false });
  assert.deepEqual(c.requiredCapabilities(), ['CAPABILITY_CHILDREN', 'CAPABILITY_RELATED_OBJECTS',
    'CAPABILITY_SERVER_SIDE_APPLY']);
  const bad = (fn, re) => assert.throws(() => fn(new sdk.ControllerBuilder('app')
    .for('g', 'v1', 'K').reconcile(() => {})).build(), re);
  bad((x) => x.finalizer('nodomain'), /qualified with a domain/);
  bad((x) => x.watches('', 'v1', 'S', null), /exactly one mapping/);
  bad((x) => x.maxConcurrent(-1), /maxConcurrent/);
  bad((x) => x.reconcile(null), /no reconcile/);
  bad((x) => x.for('', '', ''), /for\(group, version, kind\)/);
  assert.throws(() => new sdk.ControllerBuilder('Bad_Name').for('g', 'v', 'K')
    .reconcile(() => {}).build(), /RFC 1123/);
});

test('request accessors', () => {
  const ac = new AbortController();
  const r = Request.fromCall(call(), ac.signal);
  assert.equal(r.name, 'a');
  assert.equal(r.namespace, 'ns');
  assert.equal(r.generation, 4);
  assert.deepEqual(r.labels, { team: 'x' }); // non-strings dropped
  assert.deepEqual(r.spec, { replicas: 2 });
  assert.deepEqual(r.status, {});
  assert.equal(r.reason, 'ChildChanged');
  assert.equal(r.attempt, 2);
  assert.equal(r.deadline.getTime(), 1700000000005);
  assert.equal(r.exists, true);
  assert.equal(r.deleting, false);
  assert.deepEqual(r.child('ConfigMap', 'a-cm'), { metadata: { name: 'a-cm' }, data: { k: 'v' } });
  assert.equal(r.child('ConfigMap', 'other'), undefined);
  assert.equal(r.childrenOfKind('ConfigMap', 'apps/v1').length, 0);
  assert.equal(r.cancelled, false);
  ac.abort();
  assert.equal(r.cancelled, true);
  const gone = Request.fromCall(call(null));
  assert.equal(gone.exists, false);
  assert.deepEqual(gone.spec, {});
  assert.equal(gone.reason, 'ChildChanged');
  assert.throws(() => Request.fromCall({ ...call(), object: Buffer.from('{nope') }), /not valid JSON/);
  assert.throws(() => Request.fromCall({ ...call(), object: Buffer.from('[1]') }), /not a JSON object/);
  assert.throws(() => Request.fromCall(call(primary(), {
    children: [{ api_version: 'v1', kind: 'X', object: Buffer.from('x') }] })), /child v1\/X/);
});

// First contact (a Go plugin's author): a label-selected ConfigMap controller that owns
// ConfigMaps gave its children the primary's labels, so each child became a primary itself.
// Objects of the primary's own kind get no default labels; other kinds still do (every SDK).
test('result: children of the primary\'s kind get no default labels (regression)', () => {
  const cm = { apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'cm', namespace: 'ns', labels: { hello: 'true' } } };
  const req = Request.fromCall({ ...call(/** @type {any} */ (cm)), name: 'cm' });
  const res = new Result();
  res.desire(newObject('v1', 'ConfigMap', 'cm-hello'));
  res.desire(newObject('v1', 'Secret', 'cm-secret'));
  res.desire(newObject('v1', 'ConfigMap', 'cm-explicit')).metadata.labels = { 'hello-copy': 'true' };
  const desired = res.toResponse(req, '1', ALL).desired_objects.map((b) => JSON.parse(b));
  assert.deepEqual(desired[0].metadata, { name: 'cm-hello', namespace: 'ns' });
  assert.deepEqual(desired[1].metadata.labels, { hello: 'true' });
  assert.deepEqual(desired[2].metadata.labels, { 'hello-copy': 'true' });
});

test('result: desired defaults, status, conditions, events, requeue', () => {
  const req = Request.fromCall(call());
  const res = new Result();
  res.desire(newObject('v1', 'ConfigMap', 'a-cm')).data = { k: 'v' };
  res.desire({ apiVersion: 'v1', kind: 'Service' });
  res.desire({ apiVersion: 'example.com/v1', kind: 'App', metadata: { name: 'a' } }); // primary
  res.status().ready = 1;
  res.mergeStatus({ nested: { a: 1 } }).mergeStatus({ nested: { b: 2 } });
  res.setCondition('Ready', false, 'NotYet', 'x').setCondition('Ready', true, 'Done', 'y');
  res.event('Warning', 'Odd', 'msg');
  res.requeueAfter(1500);
  res.patchOwned('v1', 'ConfigMap', 'a-cm', 'json', [{ op: 'test', path: '/a', value: 1 }], '7');
  const resp = res.toResponse(req, '9', ALL);
  const desired = resp.desired_objects.map((b) => JSON.parse(b));
  assert.deepEqual(desired[0].metadata, { name: 'a-cm', namespace: 'ns', labels: { team: 'x' } });
  assert.deepEqual(desired[1].metadata, { name: 'a', namespace: 'ns', labels: { team: 'x' } });
  assert.equal(desired[2].metadata.labels, undefined); // the primary gets no copied labels
  assert.deepEqual(JSON.parse(resp.status), { ready: 1, nested: { a: 1, b: 2 } });
  assert.deepEqual(resp.conditions, [{ type: 'Ready', status: 'CONDITION_STATUS_TRUE', reason: 'Done', message: 'y' }]);
  assert.deepEqual(resp.events, [{ type: 'EVENT_TYPE_WARNING', reason: 'Odd', message: 'msg' }]);
  assert.deepEqual(resp.requeue_after, { seconds: '1', nanos: 500000000 });
  assert.equal(resp.patches[0].type, 'PATCH_TYPE_JSON_PATCH');
  assert.equal(resp.patches[0].resource_version, '7');
  assert.equal(resp.request_id, '9');
  assert.equal(resp.error, undefined);
});

test('result: validation errors', () => {
  const req = Request.fromCall(call());
  const gone = Request.fromCall(call(null));
  const bad = (res, re, r = req, caps = ALL) => assert.throws(() => res.toResponse(r, '1', caps), re);
  bad(new Result().setCondition('Ready', true, 'not camel', ''), /CamelCase/);
  // The values below are refused by the declarations too (tsconfig.json checks this file):
  // @ts-expect-error - status is True/False/Unknown
  bad(new Result().setCondition('Ready', 'maybe', 'Ok', ''), /status must be/);
  bad(new Result().setCondition('', true, 'Ok', ''), /without type/);
  // @ts-expect-error - events are Normal or Warning
  bad(new Result().event('Info', 'R', ''), /Normal/);
  bad(new Result().event('Normal', '', ''), /without reason/);
  bad(Result.finalized(), /not finalizing/);
  bad(Result.requeue(-1), /non-negative/);
  bad(new Result().patchPrimary('json', { a: 1 }), /array/);
  bad(new Result().patchPrimary('merge', [1]), /object/);
  bad(new Result().patchOwned('', 'K', 'n', 'merge', {}), /apiVersion, kind, name/);
  // @ts-expect-error - json or merge patches only
  bad(new Result().patchPrimary('strategic', {}), /'json' or 'merge'/);
  // @ts-expect-error - retryable or terminal
  bad(new Result().setError('fatal', 'x'), /'retryable' or 'terminal'/);
  bad(new Result().desire({ kind: 'X' }) && (() => { const r = new Result(); r.desire({ kind: 'X' }); return r; })(), /apiVersion and kind/);
  bad((() => { const r = new Result(); r.desire({ apiVersion: 'v1', kind: 'X', metadata: { name: '' } }); return r; })(), /has no name/);
  bad((() => { const r = new Result(); r.desire(newObject('v1', 'X', 'n')); return r; })(), /SERVER_SIDE_APPLY/, req, new Set());
  bad((() => { const r = new Result(); r.status().a = 1; return r; })(), /primary is gone/, gone);
  // Events, errors and requeues are fine when the primary is gone.
  const ok = Result.retryableError('later').event('Normal', 'Seen', '').requeueAfter(0);
  assert.equal(ok.toResponse(gone, '2', ALL).error.kind, 'ERROR_KIND_RETRYABLE');
  const fin = Request.fromCall(call(primary(), { finalizing: true }));
  bad(Result.finalized().setError('terminal', 'x'), /together with an error/, fin);
  assert.equal(Result.finalized().toResponse(fin, '3', ALL).finalized, true);
});

test('errors: reason and retry-after, validated as the host does', async () => {
  const req = Request.fromCall(call());
  const r = Result.retryableError('quota used up', { reason: 'QuotaExceeded', retryAfterMs: 30500 });
  assert.deepEqual(r.toResponse(req, '1', ALL).error, { kind: 'ERROR_KIND_RETRYABLE',
    message: 'quota used up', reason: 'QuotaExceeded', retry_after: { seconds: '30', nanos: 500000000 } });
  assert.deepEqual(Result.terminalError('no region', { reason: 'UnknownRegion' }).toResponse(req, '1', ALL).error,
    { kind: 'ERROR_KIND_TERMINAL', message: 'no region', reason: 'UnknownRegion' });
  assert.deepEqual(Result.retryableError('later').toResponse(req, '1', ALL).error,
    { kind: 'ERROR_KIND_RETRYABLE', message: 'later' });
  assert.throws(() => Result.retryableError('x', { reason: 'quota exceeded' }),
    /error reason "quota exceeded" must be CamelCase/);
  assert.throws(() => Result.terminalError('x', { reason: 'A'.repeat(129) }), /at most 128 characters/);
  assert.throws(() => Result.retryableError('x', { retryAfterMs: -1 }), /finite number >= 0/);
  assert.throws(() => new Result().setError('terminal', 'x', { retryAfterMs: 5 }),
    /only allowed on a retryable error/);
  // Thrown from a reconcile: the answer carries them.
  const p = makePlugin(() => {
    throw new sdk.RetryableError('bucket quota used up', { reason: 'QuotaExceeded', retryAfterMs: 45000 });
  });
  p.describe({ protocol_versions: ['v1alpha1'], capabilities: [...ALL] });
  assert.deepEqual((await p.handle('4', call())).error, { kind: 'ERROR_KIND_RETRYABLE',
    message: 'bucket quota used up', reason: 'QuotaExceeded', retry_after: { seconds: '45', nanos: 0 } });
  const t = makePlugin(() => { throw new sdk.TerminalError('bad spec', { reason: 'InvalidSpec' }); });
  t.describe({ protocol_versions: ['v1alpha1'], capabilities: [...ALL] });
  assert.deepEqual((await t.handle('5', call())).error,
    { kind: 'ERROR_KIND_TERMINAL', message: 'bad spec', reason: 'InvalidSpec' });
  // An invalid one thrown is itself a retryable error naming the problem.
  const bad = makePlugin(() => { throw new sdk.RetryableError('x', { reason: 'not ok' }); });
  bad.describe({ protocol_versions: ['v1alpha1'], capabilities: [...ALL] });
  const resp = await bad.handle('6', call());
  assert.equal(resp.error.kind, 'ERROR_KIND_RETRYABLE');
  assert.match(resp.error.message, /invalid reconcile result: error reason "not ok" must be CamelCase/);
});

test('result.merge keeps the earliest requeue and the first error', () => {
  const a = Result.requeue(5000).setCondition('A', true, 'Ok');
  a.merge(Result.requeue(1000).setError('terminal', 'first').setCondition('A', false, 'No'));
  a.merge(Result.retryableError('second'));
  assert.equal(a.requeueAfterMs, 1000);
  assert.equal(a.error.message, 'first');
  assert.equal(a.conditions[0].status, false);
});

test('handlers route upsert, delete and finalizing', async () => {
  const seen = [];
  const fn = handlers({
    upsert: (r) => { seen.push('upsert'); return new Result(); },
    delete: async (r) => { seen.push('delete'); return r.name === 'fail' ? Result.retryableError('no') : undefined; },
  });
  await fn(Request.fromCall(call()));
  const gone = await fn(Request.fromCall(call(null)));
  const fin = await fn(Request.fromCall(call(primary(), { finalizing: true })));
  const failing = await fn(Request.fromCall(call(primary(), { finalizing: true, name: 'fail' })));
  const deleting = await fn(Request.fromCall(call(primary({ metadata: { name: 'a', deletionTimestamp: 'x' } }))));
  assert.deepEqual(seen, ['upsert', 'delete', 'delete', 'delete']);
  assert.equal(gone.isFinalized, false);
  assert.equal(fin.isFinalized, true);
  assert.equal(failing.isFinalized, false);
  assert.equal(deleting.desired.length, 0);
});

test('listen addresses', () => {
  assert.equal(parseListenAddress('unix:///tmp/a.sock'), 'unix:/tmp/a.sock');
  assert.equal(parseListenAddress('127.0.0.1:0'), '127.0.0.1:0');
  assert.throws(() => parseListenAddress('unix://rel.sock'), /absolute/);
  assert.throws(() => parseListenAddress(`unix:///${'x'.repeat(120)}`), /107 bytes/);
  assert.throws(() => parseListenAddress('http://x:1'), /no other scheme/);
  assert.throws(() => parseListenAddress('localhost'), /host:port/);
  assert.throws(() => parseListenAddress('h:99999'), /host:port/);
  assert.throws(() => parseListenAddress(''), /empty/);
});

function makePlugin(fn) {
  const p = new Plugin('p', '1.0');
  p.controller('app').for('example.com', 'v1', 'App').reconcile(fn);
  return p;
}

test('describe negotiates protocol and capabilities', () => {
  const p = makePlugin(() => undefined);
  p.controller('kids').for('example.com', 'v1', 'Kid').owns('', 'v1', 'ConfigMap').reconcile(() => {});
  assert.throws(() => p.describe({ protocol_versions: ['v2'] }), /speaks protocol v1alpha1 only/);
  assert.throws(() => p.describe({ protocol_versions: ['v1alpha1'], capabilities: [] }),
    (/** @type {any} */ e) => e.code === 9 && /CAPABILITY_CHILDREN/.test(e.message));
  const resp = p.describe({ protocol_versions: ['v1beta1', 'v1alpha1'],
    capabilities: ['CAPABILITY_CHILDREN', 42] });
  assert.equal(resp.protocol_version, 'v1alpha1');
  assert.equal(resp.controllers.length, 2);
  assert.deepEqual([...p.capabilities], ['CAPABILITY_CHILDREN']);
  const dup = makePlugin(() => {});
  dup.controller('app').for('g', 'v1', 'K').reconcile(() => {});
  assert.throws(() => dup.describe({ protocol_versions: ['v1alpha1'] }), /two controllers/);
  assert.throws(() => new Plugin('e', '1').describe({ protocol_versions: ['v1alpha1'] }), /no controllers/);
});

test('handle: exceptions, rejections and bad results become retryable errors', async () => {
  // Functions the declarations would refuse: typed loosely so the runtime checks are what runs.
  /** @type {[(request: any) => any, RegExp][]} */
  const cases = [
    [() => { throw new Error('boom'); }, /reconcile threw: boom/],
    [async () => { throw new TypeError('async boom'); }, /reconcile threw: async boom/],
    [() => Promise.reject('a string'), /reconcile threw: a string/],
    [() => ({ not: 'a result' }), /must return a Result/],
    [() => new Result().setCondition('Ready', true, 'bad reason'), /invalid reconcile result/],
  ];
  for (const [fn, re] of cases) {
    const p = makePlugin(fn);
    p.describe({ protocol_versions: ['v1alpha1'], capabilities: [...ALL] });
    const resp = await p.handle('7', call());
    assert.equal(resp.error.kind, 'ERROR_KIND_RETRYABLE');
    assert.match(resp.error.message, re);
    assert.equal(resp.request_id, '7');
  }
  const p = makePlugin(() => undefined);
  assert.match((await p.handle('1', { ...call(), controller: 'nope' })).error.message, /no controller "nope"/);
  assert.equal((await p.handle('1', { ...call(), controller: 'nope' })).error.kind, 'ERROR_KIND_TERMINAL');
  assert.match((await p.handle('1', { ...call(), object: Buffer.from('{') })).error.message, /cannot read the request/);
  assert.equal((await p.handle('1', call())).error, undefined);
});

test('log lines are single-line key=value', () => {
  const line = sdk.log.formatLine('warning', 'a\nb', { k: 'v', s: 'two words', n: 3, e: '' },
    new Date(0));
  assert.equal(line, '1970-01-01T00:00:00.000000Z WARNING a b k=v s="two words" n=3 e=""');
});

test('index.d.ts declares exactly what index.js exports', () => {
  const dts = require('node:fs').readFileSync(require.resolve('../src/index.d.ts'), 'utf8');
  const declared = new Set([...dts.matchAll(/^export (?:class|function|const|namespace) (\w+)/gm)].map((m) => m[1]));
  assert.deepEqual([...declared].sort(), Object.keys(sdk).sort());
});
