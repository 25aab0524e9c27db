'use strict';
// testing.replay / testing.assertReplay: a recording written here with protobufjs types from
// plugin.proto (the file format of its end, framed by this test's own varint writer) replayed
// against the controller that answered it (no difference), against changed controllers (exactly
// the changed keys), with `update` (then clean), and every reader error with the host's text.

const { test, beforeEach, afterEach } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const protobuf = require('protobufjs');
const sdk = require('../src');
const { normalize, redactResponse, jsonDiff } = require('../src/replay');

const { ControllerBuilder, Plugin, Result, newObject, testing } = sdk;
sdk.log.setSink(() => {});

const root = new protobuf.Root().loadSync(
  path.join(sdk.findProtoRoot(), 'ctrlhost/plugin/v1alpha1/plugin.proto'), { keepCase: true });
const HeaderType = root.lookupType('ctrlhost.plugin.v1alpha1.RecordingHeader');
const RecordType = root.lookupType('ctrlhost.plugin.v1alpha1.ReconcileRecord');
const MAGIC = Buffer.from('CTRLREC\n');
const PASSWORD = 'hunter2';
const CAPABILITIES = ['CAPABILITY_CHILDREN', 'CAPABILITY_SERVER_SIDE_APPLY',
  'CAPABILITY_CONDITIONS'];

/** @param {number} n */
function varint(n) {
  const out = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/**
 * @param {protobuf.Type} type
 * @param {any} obj
 */
function framed(type, obj) {
  const body = Buffer.from(type.encode(type.fromObject(obj)).finish());
  return Buffer.concat([varint(body.length), body]);
}

function header(controller = 'greeter', format = 1, secretData = false) {
  const kind = (group, kindName, resource, extra = {}) => ({ group, version: 'v1', kind: kindName,
    resource, namespaced: true, ...extra });
  return { format, operator: 'greetings', plugin: 'greeter-node', host_version: '0.9.0',
    secret_data: secretData,
    controller: { name: controller, field_manager: `ctrlhost-${controller}`,
      primary: kind('example.com', 'Greeting', 'greetings', { has_status: true }),
      owns: [kind('', 'ConfigMap', 'configmaps'), kind('', 'Secret', 'secrets')] } };
}

/** The controller under test (declared on `builder`); the options change its answers. */
function greeter({ greeting = 'Hello', password = PASSWORD, failOn = '', requeue = true } = {},
  builder = new ControllerBuilder('greeter')) {
  return builder.for('example.com', 'v1', 'Greeting')
    .owns('', 'v1', 'ConfigMap').owns('', 'v1', 'Secret')
    .reconcile((req) => {
      const result = new Result();
      if (!req.exists) return result;
      if (req.name === failOn) throw new Error('no greeting today');
      if (req.spec.secret) {
        const secret = result.desire(newObject('v1', 'Secret', `${req.name}-creds`));
        secret.stringData = { password };
        result.patchOwned('v1', 'Secret', `${req.name}-creds`, 'merge',
          { data: { token: Buffer.from(password).toString('base64') } });
      } else {
        const cm = result.desire(newObject('v1', 'ConfigMap', `${req.name}-greeting`));
        cm.data = { text: `${greeting}, ${req.spec.who}!` };
      }
      result.status().replicas = 1;
      result.setCondition('Ready', true, 'Greeted', 'greeted');
      result.event('Normal', 'Greeted', `greeted ${req.name}`);
      if (req.name === 'slow' && requeue) result.requeueAfter(30_000);
      return result;
    });
}

function primary(name, spec) {
  return { apiVersion: 'example.com/v1', kind: 'Greeting',
    metadata: { name, namespace: 'default', uid: `uid-${name}` }, spec };
}

const digest = (v) => `sha256:${crypto.createHash('sha256').update(v, 'utf8').digest('hex')}`;
const digestAll = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, digest(v)]));

/**
 * The recorded answer: Secret values digested by this test, the JSON re-serialized with other
 * key orders and spacing (neither counts).
 */
function redactedAsTheHostDoes(response) {
  const desired = response.desired_objects.map((raw) => {
    const obj = JSON.parse(raw.toString());
    if (obj.kind === 'Secret') obj.stringData = digestAll(obj.stringData);
    const sorted = Object.fromEntries(Object.keys(obj).sort().reverse().map((k) => [k, obj[k]]));
    return Buffer.from(JSON.stringify(sorted, null, 1));
  });
  const patches = response.patches.map((p) => {
    const body = JSON.parse(p.patch.toString());
    body.data = digestAll(body.data);
    return { ...p, patch: Buffer.from(JSON.stringify(body)) };
  });
  const status = response.status && response.status.length ? Buffer.from('{"replicas": 1.0}')
    : response.status;
  return { ...response, desired_objects: desired, patches, status };
}

/**
 * A record of `call` answered by `controller` (null: a failed dispatch).
 * @returns {Promise<any>}
 */
async function record(sequence, obj, controller) {
  const call = testing.makeCall('greeter', obj,
    obj ? {} : { reason: 'REASON_PRIMARY_DELETED' });
  const r = { sequence: String(sequence), call, capabilities: CAPABILITIES,
    time: { seconds: String(1700000000 + sequence), nanos: 0 },
    action: { result: 'HOST_ACTION_RESULT_WRITTEN' } };
  if (!controller) return { ...r, failure: { code: 4, message: 'deadline exceeded' } };
  const out = await testing.run(controller, obj, { capabilities: CAPABILITIES });
  return { ...r, response: { ...redactedAsTheHostDoes(out.response),
    request_id: String(100 + sequence) } };
}

async function records(controller) {
  const out = [await record(1, primary('a', { who: 'Ann' }), controller),
    await record(2, primary('b', { secret: true }), controller),
    await record(3, primary('c', { who: 'Cy' }), null),
    await record(4, null, controller),
    await record(5, primary('bad', { who: 'Bo' }), controller),
    await record(6, primary('slow', { who: 'Sam' }), controller)];
  // The error's message does not count: it often carries details such as timestamps.
  out[4].response.error.message = 'reconcile threw: at 12:00:01';
  return out;
}

function write(file, head, recs, extra = Buffer.alloc(0)) {
  fs.writeFileSync(file, Buffer.concat([MAGIC, framed(HeaderType, head),
    ...recs.map((r) => framed(RecordType, r)), extra]));
  return file;
}

/**
 * The encoded records of `file` (its header left out).
 * @returns {Buffer[]}
 */
function bodiesOf(file) {
  const data = fs.readFileSync(file);
  const reader = protobuf.Reader.create(data.subarray(MAGIC.length));
  const out = [];
  while (reader.pos < reader.len) out.push(Buffer.from(reader.bytes()));
  return out.slice(1);
}

/**
 * The records of `file`, decoded with protobufjs.
 * @returns {any[]}
 */
const recordsOf = (file) => bodiesOf(file).map((body) => RecordType.decode(body));

let dir;
const file = (n) => path.join(dir, `${String(n).padStart(8, '0')}.ctrlrec`);
const headerEnd = () => MAGIC.length + framed(HeaderType, header()).length;
const keys = (result) => result.differences.map((d) => [d.key, d.members]);

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), 'replay-'));
  const recs = await records(greeter({ failOn: 'bad' }));
  write(file(1), header(), recs.slice(0, 4)); // two files, read in name order
  write(file(2), header(), recs.slice(4));
});

afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

test('the same controller answers the same', async () => {
  const result = await testing.replay(greeter({ failOn: 'bad' }), dir);
  assert.deepEqual(result.differences, []);
  assert.deepEqual([result.compared, result.same, result.different, result.skipped], [5, 5, 0, 1]);
  assert.deepEqual(result.files, [file(1), file(2)]);
  assert.deepEqual(result.updated, []);
  await testing.assertReplay(greeter({ failOn: 'bad' }).build(), dir);
});

test('a changed controller differs at exactly the changed keys', async () => {
  const result = await testing.replay(greeter({ greeting: 'Hi', failOn: 'bad' }), dir);
  assert.deepEqual(keys(result), [['default/a', ['desired']], ['default/slow', ['desired']]]);
  const first = result.differences[0];
  assert.deepEqual([first.file, first.offset, first.sequence], [file(1), headerEnd(), 1]);
  assert.deepEqual(first.patch, [{ op: 'replace',
    path: '/desired/v1 ConfigMap default~1a-greeting/data/text', value: 'Hi, Ann!' }]);
  assert.match(String(first), /"Hello, Ann!" -> "Hi, Ann!"/);
  assert.deepEqual([result.compared, result.same, result.different], [5, 3, 2]);
});

test('a digest is not digested again', () => {
  // A controller that copies a Secret's value from a replayed call (which carries the digest)
  // answers with the digest: kept, so it matches the recorded answer.
  const { secretDigest } = require('../src/replay');
  const once = secretDigest('swordfish');
  assert.equal(secretDigest(once), once);
  assert.notEqual(secretDigest('sha256:short'), 'sha256:short');
});

test('a changed secret differs by its digest only', async () => {
  const result = await testing.replay(greeter({ password: 'swordfish', failOn: 'bad' }), dir);
  assert.deepEqual(keys(result), [['default/b', ['desired', 'patches']]]);
  const text = String(result.differences[0]);
  assert.ok(text.includes(digest('swordfish')));
  assert.ok(!text.replaceAll(digest('swordfish'), '').includes('swordfish'));
});

test('a failing run is compared as its error answer', async () => {
  const result = await testing.replay(greeter({ failOn: 'a' }), dir);
  const all = ['desired', 'status', 'conditions', 'events', 'error'];
  assert.deepEqual(keys(result), [['default/a', all], ['default/bad', all]]);
  assert.deepEqual(result.differences[0].replayed.error, { kind: 'retryable' });
});

test('requeueAfter counts', async () => {
  const result = await testing.replay(greeter({ failOn: 'bad', requeue: false }), dir);
  assert.deepEqual(result.differences.map((d) => [d.key, d.members, d.recorded]),
    [['default/slow', ['requeueAfter'], { requeueAfter: 30 }]]);
});

test('assertReplay lists the first twenty differences and the totals', async () => {
  const recs = [];
  for (let i = 0; i < 25; i++) {
    const name = `k${String(i).padStart(2, '0')}`;
    recs.push(await record(i + 1, primary(name, { who: 'x' }), greeter()));
  }
  const one = write(path.join(dir, 'many.ctrlrec'), header(), recs);
  await assert.rejects(testing.assertReplay(greeter({ greeting: 'Hi' }), one), (e) => {
    assert.ok(e instanceof assert.AssertionError);
    assert.match(e.message, /25 of 25 replayed answers differ \(0 same, 0 skipped, 1 files\)/);
    assert.match(e.message, /default\/k19/);
    assert.doesNotMatch(e.message, /default\/k20/);
    assert.match(e.message, /\.\.\. and 5 more$/);
    return true;
  });
});

test('update rewrites the answers and keeps the rest', async () => {
  const before = fs.readFileSync(file(1));
  const beforeBodies = bodiesOf(file(1));
  const changed = greeter({ greeting: 'Hi', failOn: 'bad' });
  const result = await testing.replay(changed, dir, { update: true });
  assert.equal(result.different, 2);
  assert.deepEqual(result.updated, [file(1), file(2)]);
  await testing.assertReplay(changed, dir);
  assert.equal((await testing.replay(greeter({ failOn: 'bad' }), dir)).different, 2);
  // The header bytes, the failed dispatch and every other field are as they were.
  const after = fs.readFileSync(file(1));
  assert.deepEqual(after.subarray(0, headerEnd()), before.subarray(0, headerEnd()));
  assert.deepEqual(fs.readdirSync(dir).sort(), ['00000001.ctrlrec', '00000002.ctrlrec']);
  const recs = recordsOf(file(1));
  assert.deepEqual(recs.map((r) => Number(r.sequence)), [1, 2, 3, 4]);
  assert.equal(recs[2].failure.message, 'deadline exceeded');
  assert.equal(Number(recs[0].response.request_id), 101);
  assert.equal(Number(recs[0].time.seconds), 1700000001);
  assert.deepEqual(recs[0].capabilities, CAPABILITIES.map((c) => root.lookupEnum(
    'ctrlhost.plugin.v1alpha1.Capability').values[c]));
  assert.ok(Buffer.from(recs[0].response.desired_objects[0]).toString().includes('Hi, Ann!'));
  assert.ok(!after.includes(PASSWORD)); // the new answers are redacted too
  // Records whose answers did not differ keep their bytes.
  assert.deepEqual(bodiesOf(file(1)).slice(1), beforeBodies.slice(1));
  // A second update with the same controller changes nothing.
  assert.deepEqual((await testing.replay(changed, dir, { update: true })).updated, []);
});

test('update keeps fields this SDK does not know', async () => {
  const one = path.join(dir, 'unknown.ctrlrec');
  const data = fs.readFileSync(file(1));
  const reader = protobuf.Reader.create(data);
  reader.pos = headerEnd();
  const unknown = Buffer.from([0xf8, 0x06, 0x2a]); // field 111, varint 42
  const body = Buffer.concat([reader.bytes(), unknown]); // the first record, and the field
  fs.writeFileSync(one, Buffer.concat([data.subarray(0, headerEnd()), varint(body.length), body]));
  const result = await testing.replay(greeter({ greeting: 'Hi' }), one, { update: true });
  assert.deepEqual(result.updated, [one]);
  const rewritten = fs.readFileSync(one);
  assert.ok(rewritten.includes(unknown));
  assert.equal(String(recordsOf(one)[0].sequence), '1');
});

test('assertReplay with update does not fail', async () => {
  const result = await testing.assertReplay(greeter({ greeting: 'Hi', failOn: 'bad' }), dir,
    { update: true });
  assert.equal(result.different, 2);
  await testing.assertReplay(greeter({ greeting: 'Hi', failOn: 'bad' }), dir);
});

test('a recording with Secret data compares the values', async () => {
  const c = greeter();
  const obj = primary('b', { secret: true });
  const out = await testing.run(c, obj, { capabilities: CAPABILITIES });
  const r = { sequence: '1', call: testing.makeCall('greeter', obj), capabilities: CAPABILITIES,
    response: out.response };
  const one = write(path.join(dir, 'secret.ctrlrec'), header('greeter', 1, true), [r]);
  assert.deepEqual((await testing.replay(c, one)).differences, []);
  const result = await testing.replay(greeter({ password: 'swordfish' }), one);
  assert.match(String(result.differences[0]), /"swordfish"/);
});

test('layouts: a single file', async () => {
  const result = await testing.replay(greeter({ failOn: 'bad' }), file(2));
  assert.deepEqual([result.files, result.compared], [[file(2)], 2]);
});

test('layouts: one subdirectory per controller', async () => {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'replay-root-'));
  try {
    fs.cpSync(dir, path.join(top, 'greeter'), { recursive: true });
    fs.mkdirSync(path.join(top, 'other'));
    write(path.join(top, 'other', '00000001.ctrlrec'), header('other'), []);
    const result = await testing.replay(greeter({ failOn: 'bad' }), top); // the controller's name
    assert.deepEqual(result.files, [path.join(top, 'greeter', '00000001.ctrlrec'),
      path.join(top, 'greeter', '00000002.ctrlrec')]);
    const plugin = new Plugin('greeter-node', '1.0.0');
    greeter({ failOn: 'bad' }, plugin.controller('greeter'));
    assert.equal((await testing.replay(plugin, top, { controller: 'greeter' })).compared, 5);
    await assert.rejects(testing.replay(plugin, top), { name: 'RecordingError',
      message: `${top}: holds recordings of several controllers (found: greeter, other): ` +
        'name one' });
    await assert.rejects(testing.replay(plugin, top, { controller: 'nope' }), { message:
      `${top}: holds no recording of controller nope (found: greeter, other)` });
  } finally {
    fs.rmSync(top, { recursive: true, force: true });
  }
});

test('a plugin runs the controller the header names', async () => {
  const plugin = new Plugin('greeter-node', '1.0.0');
  plugin.controller('unrelated').for('example.com', 'v1', 'Other').reconcile(() => null);
  greeter({ failOn: 'bad' }, plugin.controller('greeter'));
  assert.deepEqual((await testing.replay(plugin, dir)).differences, []);
  const lonely = new Plugin('other-node', '1.0.0');
  lonely.controller('unrelated').for('example.com', 'v1', 'Other').reconcile(() => null);
  await assert.rejects(testing.replay(lonely, dir), { name: 'RecordingError',
    message: 'plugin "other-node" has no controller "greeter"' });
});

/** Replaying `file` rejects with RecordingError "<file>: <message>". */
async function expectError(where, message) {
  await assert.rejects(testing.replay(greeter({ failOn: 'bad' }), where),
    { name: 'RecordingError', message: `${where}: ${message}` });
}

test('reader errors name the file and the offset', async (t) => {
  const x = () => path.join(dir, 'x.ctrlrec');
  await t.test('wrong magic', async () => {
    fs.writeFileSync(x(), Buffer.concat([Buffer.from('CTRLREQ\n'), framed(HeaderType, header())]));
    await expectError(x(), 'not a ctrlhost recording (no CTRLREC magic at offset 0)');
  });
  await t.test('a newer format', async () => {
    write(x(), header('greeter', 2), []);
    await expectError(x(), 'recording format 2 is newer than this reader (it reads format 1)');
  });
  await t.test('cut short inside a record', async () => {
    const data = fs.readFileSync(file(1));
    const recs = recordsOf(file(1));
    const want = RecordType.encodeDelimited(recs[recs.length - 1]).finish().length;
    fs.writeFileSync(x(), data.subarray(0, data.length - 3));
    await expectError(x(), `record at offset ${data.length - want} is cut short ` +
      `(${want - 3} of ${want} bytes): the recording was interrupted`);
  });
  await t.test('cut short inside a length', async () => {
    write(x(), header(), [], Buffer.from([0x96]));
    await expectError(x(), `record at offset ${headerEnd()} is cut short (1 of 2 bytes): the ` +
      'recording was interrupted');
  });
  await t.test('a record that does not parse', async () => {
    // Field 4 (call) claims 5 bytes and has 2.
    write(x(), header(), [], Buffer.concat([varint(4), Buffer.from([0x22, 0x05, 0x61, 0x62])]));
    await expectError(x(), `record at offset ${headerEnd()} is not a valid ReconcileRecord`);
  });
  await t.test('a length over the limit', async () => {
    write(x(), header(), [], varint(256 * 1024 * 1024 + 1));
    await expectError(x(), `record at offset ${headerEnd()} claims 268435457 bytes, more than ` +
      'the limit of 268435456 bytes: the file is corrupt');
  });
  await t.test('another controller', async () => {
    write(x(), header('other'), []);
    await expectError(x(), 'holds controller other, not greeter');
  });
  await t.test('no recording files', async () => {
    const empty = fs.mkdtempSync(path.join(dir, 'empty-'));
    await expectError(empty, 'holds no recording of controller greeter (none)');
  });
});

test('redaction: desired Secrets and patches of Secrets', () => {
  const patch = (target, kind, type, body) => ({ target, api_version: kind ? 'v1' : '', kind,
    name: kind ? 's' : '', type, patch: Buffer.from(JSON.stringify(body)) });
  const response = {
    desired_objects: [
      Buffer.from(JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' },
        data: { a: 'x', n: 5 }, stringData: { b: 'y' } })),
      Buffer.from(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', data: { a: 'x' } })),
      Buffer.from('not json')],
    patches: [
      patch('PATCH_TARGET_OWNED', 'Secret', 'PATCH_TYPE_JSON_PATCH', [
        { op: 'add', path: '/data', value: { a: 'x' } },
        { op: 'replace', path: '/stringData/b', value: 'y' },
        { op: 'add', path: '/data/n', value: 7 },
        { op: 'remove', path: '/data/c' },
        { op: 'add', path: '/metadata/labels/a', value: 'x' }]),
      patch('PATCH_TARGET_OWNED', 'ConfigMap', 'PATCH_TYPE_MERGE_PATCH', { data: { a: 'x' } }),
      patch('PATCH_TARGET_PRIMARY', '', 'PATCH_TYPE_MERGE_PATCH', { stringData: { a: 'x' } })],
  };
  const out = normalize(redactResponse(response, false));
  assert.deepEqual(out.desired['v1 Secret s'].data, { a: digest('x'), n: 'redacted' });
  assert.deepEqual(out.desired['v1 Secret s'].stringData, { b: digest('y') });
  assert.deepEqual(out.desired['v1 ConfigMap '].data, { a: 'x' });
  assert.equal(out.desired['desired_objects[2]'], 'not json');
  assert.deepEqual(out.patches[0].body.map((op) => op.value),
    [{ a: digest('x') }, digest('y'), 'redacted', undefined, 'x']);
  assert.deepEqual(out.patches[1].body, { data: { a: 'x' } });
  assert.deepEqual(out.patches[2].body, { stringData: { a: 'x' } });
  const primarySecret = normalize(redactResponse(response, true));
  assert.deepEqual(primarySecret.patches[2].body, { stringData: { a: digest('x') } });
  assert.equal(JSON.parse(response.desired_objects[0].toString()).data.a, 'x'); // a copy
  const utf8 = normalize(redactResponse({ desired_objects: [Buffer.from(JSON.stringify(
    { apiVersion: 'v1', kind: 'Secret', data: { k: 'h\u00e9' } }))] }, false));
  assert.equal(utf8.desired['v1 Secret '].data.k, digest('h\u00e9'));
});

test('normalize: order, numbers and error messages do not count; true is not 1', () => {
  const a = { desired_objects: [Buffer.from('{"kind":"A","apiVersion":"v1"}'),
    Buffer.from('{"apiVersion":"v1","kind":"B","n":1}')],
  error: { kind: 'ERROR_KIND_TERMINAL', message: 'at 12:00', reason: '' } };
  const b = { desired_objects: [Buffer.from('{"apiVersion":"v1","kind":"B","n":1.0}'),
    Buffer.from('{"apiVersion":"v1","kind":"A"}')],
  error: { kind: 'ERROR_KIND_TERMINAL', message: 'at 12:01', reason: '' } };
  assert.deepEqual(jsonDiff(normalize(a), normalize(b)), []);
  b.error.reason = 'Quota';
  assert.deepEqual(jsonDiff(normalize(a), normalize(b)),
    [{ op: 'add', path: '/error/reason', value: 'Quota' }]);
  assert.deepEqual(normalize({ status: Buffer.alloc(0), patches: [], error: null }), {});
  assert.deepEqual(jsonDiff(normalize({ status: Buffer.from('{"x":true}') }),
    normalize({ status: Buffer.from('{"x":1}') })),
  [{ op: 'replace', path: '/status/x', value: 1 }]);
  assert.deepEqual(jsonDiff({ e: [1, 2, 3] }, { e: [1, 5] }),
    [{ op: 'replace', path: '/e/1', value: 5 }, { op: 'remove', path: '/e/2' }]);
});
