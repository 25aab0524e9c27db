'use strict';
// A plugin built on the SDK, started as a child process the way the host starts it (a Unix socket
// in a temporary directory, CTRLHOST_PLUGIN_ADDRESS), driven by a host-side client: Describe,
// Health, Reconcile (answers in any order, errors, cancellation), SIGTERM during in-flight work,
// and the exit code for a missing or bad address.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { loadProtocol } = require('../src');

const FIXTURE = path.join(__dirname, '..', 'testdata', 'fixture_plugin.js');
const TIMEOUT_MS = 20000;
const { plugin: pb, health } = loadProtocol();

function socketBase() {
  const t = process.env.TEST_TMPDIR;
  return t && t.length < 70 ? t : os.tmpdir();
}

let dir;
before(() => { dir = fs.mkdtempSync(path.join(socketBase(), 'sdk-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

// Starts the fixture; resolves once its health check answers SERVING.
async function startPlugin(name) {
  const address = `unix://${path.join(dir, `${name}.sock`)}`;
  const child = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, CTRLHOST_PLUGIN_ADDRESS: address },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const lineWaiters = [];
  child.stderr.on('data', (d) => {
    stderr += d;
    for (const w of [...lineWaiters]) if (stderr.includes(w.text)) { w.resolve(); lineWaiters.splice(lineWaiters.indexOf(w), 1); }
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const opts = { 'grpc.max_receive_message_length': 64 << 20 };
  const client = new pb.ControllerPluginService(address, grpc.credentials.createInsecure(), opts);
  const healthClient = new health.Health(address, grpc.credentials.createInsecure());
  const check = () => new Promise((resolve, reject) => healthClient.Check(
    { service: 'ctrlhost.plugin.v1alpha1.ControllerPluginService' },
    { deadline: new Date(Date.now() + 2000) }, (err, r) => (err ? reject(err) : resolve(r.status))));
  const end = Date.now() + TIMEOUT_MS;
  for (;;) {
    try {
      if ((await check()) === 'SERVING') break;
    } catch (e) {
      if (Date.now() > end) throw new Error(`plugin did not start: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 50)); // poll for readiness, bounded
    }
  }
  const waitFor = (text) => (stderr.includes(text) ? Promise.resolve()
    : new Promise((resolve) => lineWaiters.push({ text, resolve })));
  return { child, client, healthClient, check, exited, waitFor, stderrText: () => stderr,
    close() { client.close(); healthClient.close(); if (child.exitCode === null) child.kill('SIGKILL'); } };
}

function describe(client, req) {
  return new Promise((resolve, reject) => client.Describe(req,
    { deadline: new Date(Date.now() + TIMEOUT_MS) }, (err, r) => (err ? reject(err) : resolve(r))));
}

function reconcileCall(id, controller, kind, name, spec = {}) {
  const obj = { apiVersion: 'example.com/v1', kind, metadata: { name, namespace: 'ns' }, spec };
  return { request_id: String(id), reconcile: { controller, namespace: 'ns', name, uid: `u${id}`,
    reason: 'REASON_PRIMARY_CHANGED', object: Buffer.from(JSON.stringify(obj)), attempt: 1 } };
}

// A stream with a promise per request_id.
function openStream(client) {
  const call = client.Reconcile({ deadline: new Date(Date.now() + TIMEOUT_MS) });
  const waiting = new Map();
  const got = [];
  call.on('data', (r) => { got.push(r); const w = waiting.get(r.request_id); if (w) w(r); });
  call.on('error', () => {});
  const ended = new Promise((resolve) => call.on('end', resolve));
  return { call, got, ended, answer: (id) => new Promise((resolve) => {
    const found = got.find((r) => r.request_id === String(id));
    if (found) resolve(found); else waiting.set(String(id), resolve);
  }) };
}

const CAPS = ['CAPABILITY_CANCELLATION', 'CAPABILITY_CONDITIONS', 'CAPABILITY_SERVER_SIDE_APPLY'];

test('describe, health, reconcile in any order, errors and cancellation', async () => {
  const p = await startPlugin('rt');
  try {
    await assert.rejects(describe(p.client, { protocol_versions: ['v9'] }),
      (/** @type {any} */ e) => e.code === grpc.status.FAILED_PRECONDITION &&
        /v1alpha1 only/.test(e.details));
    const d = await describe(p.client, { protocol_versions: ['v1alpha1'], capabilities: CAPS });
    assert.equal(d.protocol_version, 'v1alpha1');
    assert.equal(d.plugin_name, 'fixture');
    assert.deepEqual(d.controllers.map((c) => c.name), ['echo', 'gated', 'cancel', 'leaky', 'timer']);
    assert.equal(await p.check(), 'SERVING');

    const gate = path.join(dir, 'gate-rt');
    const s = openStream(p.client);
    s.call.write(reconcileCall(1, 'gated', 'Gated', 'g1', { gate }));
    await p.waitFor('gate waiting g1');
    s.call.write(reconcileCall(2, 'echo', 'Echo', 'e2'));
    s.call.write(reconcileCall(3, 'echo', 'Echo', 'boom', { throw: true }));
    s.call.write(reconcileCall(4, 'nope', 'Echo', 'x'));
    s.call.write({ request_id: '5', reconcile: { controller: 'echo', object: Buffer.from('{bad') } });
    s.call.write(reconcileCall(6, 'cancel', 'Cancel', 'c6'));
    const a2 = await s.answer(2);
    assert.deepEqual(JSON.parse(a2.status), { seen: 'e2' });
    assert.match((await s.answer(3)).error.message, /reconcile threw: asked to throw/);
    assert.equal((await s.answer(3)).error.kind, 'ERROR_KIND_RETRYABLE');
    assert.equal((await s.answer(4)).error.kind, 'ERROR_KIND_TERMINAL');
    assert.match((await s.answer(5)).error.message, /cannot read the request/);
    s.call.write(reconcileCall(7, 'leaky', 'Leaky', 'l7'));
    assert.equal((await s.answer(7)).error, null);
    await p.waitFor('unhandled promise rejection error=forgotten');
    // A synchronous exception thrown later by a user's timer is logged; the plugin keeps serving.
    s.call.write(reconcileCall(8, 'timer', 'Timer', 't8'));
    assert.equal((await s.answer(8)).error, null);
    await p.waitFor('uncaught exception error="late timer"');
    s.call.write(reconcileCall(9, 'echo', 'Echo', 'e9'));
    assert.deepEqual(JSON.parse((await s.answer(9)).status), { seen: 'e9' });
    await p.waitFor('cancel waiting c6');
    s.call.write({ request_id: '6', cancel: { reason: 'deadline' } });
    await p.waitFor('cancel aborted c6');
    // The gated reconcile was first in and answers last: answers leave in any order.
    fs.writeFileSync(gate, '');
    assert.deepEqual(JSON.parse((await s.answer(1)).status), { released: true });
    s.call.end();
    await s.ended;
    assert.equal(s.got.find((r) => r.request_id === '6'), undefined); // cancelled: no answer
    assert.equal(s.got[s.got.length - 1].request_id, '1');
  } finally {
    p.close();
  }
});

test('SIGTERM: NOT_SERVING, new work refused, in-flight work answered, exit 0', async () => {
  const p = await startPlugin('term');
  try {
    await describe(p.client, { protocol_versions: ['v1alpha1'], capabilities: CAPS });
    const gate = path.join(dir, 'gate-term');
    const s = openStream(p.client);
    s.call.write(reconcileCall(1, 'gated', 'Gated', 'g1', { gate }));
    await p.waitFor('gate waiting g1');
    p.child.kill('SIGTERM');
    await p.waitFor('plugin stopping');
    assert.equal(await p.check(), 'NOT_SERVING');
    s.call.write(reconcileCall(2, 'echo', 'Echo', 'late'));
    const late = await s.answer(2);
    assert.equal(late.error.kind, 'ERROR_KIND_RETRYABLE');
    assert.match(late.error.message, /shutting down/);
    fs.writeFileSync(gate, '');
    assert.deepEqual(JSON.parse((await s.answer(1)).status), { released: true });
    const exit = await p.exited;
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.match(p.stderrText(), /INFO plugin stopped plugin=fixture/);
  } finally {
    p.close();
  }
});

/** @type {[string, Record<string, string>, RegExp][]} */
const BAD_ADDRESSES = [
  ['an unset', {}, /CTRLHOST_PLUGIN_ADDRESS is not set/],
  ['a bad', { CTRLHOST_PLUGIN_ADDRESS: 'tcp://x:1' }, /no other scheme/],
];
for (const [what, env, re] of BAD_ADDRESSES) {
  test(`${what} address: a clear message and exit 2`, async () => {
    const e = { ...process.env, ...env };
    if (!env.CTRLHOST_PLUGIN_ADDRESS) delete e.CTRLHOST_PLUGIN_ADDRESS;
    const child = spawn(process.execPath, [FIXTURE], { env: e, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const code = await new Promise((resolve) => child.on('exit', resolve));
    assert.equal(code, 2);
    assert.match(stderr, re);
  });
}
