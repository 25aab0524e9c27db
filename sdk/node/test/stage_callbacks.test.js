'use strict';
// StageCallbacks around DependentChain and CrudResource steps (the same cases as sdk/cpp
// handlers_test and sdk/python chain_test).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');

const {
  DependentChain, CrudResource, Request, StageCallbacks, STAGES, TerminalError,
} = sdk;
sdk.log.setSink(() => {});

const PRIMARY = { apiVersion: 'example.com/v1', kind: 'App',
  metadata: { name: 'web', namespace: 'team-a', uid: 'u-1', generation: 2 } };

function request(children = []) {
  return Request.fromCall({ controller: 'app', namespace: 'team-a', name: 'web',
    object: Buffer.from(JSON.stringify(PRIMARY)),
    children: children.map((c) => ({ api_version: c.apiVersion, kind: c.kind,
      object: Buffer.from(JSON.stringify(c)) })) });
}

const existing = (name, data) => ({ apiVersion: 'v1', kind: 'ConfigMap',
  metadata: { name, namespace: 'team-a', resourceVersion: '7' }, data });
const byName = (result) => Object.fromEntries(result.desired.map((d) => [d.metadata.name, d]));

function recordingCallbacks(log) {
  const callbacks = new StageCallbacks();
  for (const stage of STAGES) {
    for (const cb of ['label', 'record']) {
      callbacks.on('v1', 'ConfigMap', stage, cb, (req, s, desired, current) => {
        log.push(`${cb}:${s}:${(desired || current).metadata.name}`);
        if (cb === 'label' && desired) {
          desired.metadata.labels = { ...(desired.metadata.labels || {}), stage: s };
        }
      });
    }
  }
  return callbacks;
}

const EXPECTED = (a, b, c) => [
  `label:pre-update:${a}`, `record:pre-update:${a}`, `label:post-update:${a}`,
  `record:post-update:${a}`, `label:pre-create:${b}`, `record:pre-create:${b}`,
  `label:post-create:${b}`, `record:post-create:${b}`, `label:pre-delete:${c}`,
  `record:pre-delete:${c}`, `label:post-delete:${c}`, `record:post-delete:${c}`];

test('a chain runs callbacks per stage in registration order', async () => {
  const log = [];
  const chain = new DependentChain();
  for (const name of ['a', 'b', 'same', 'c']) {
    chain.add({ name, apiVersion: 'v1', kind: 'ConfigMap',
      desired: () => ({ metadata: { name }, data: { v: '2' } }),
      when: name === 'c' ? () => false : undefined });
  }
  chain.withCallbacks(recordingCallbacks(log));
  const result = await chain.build()(request([existing('a', { v: '1' }),
    existing('same', { v: '2' }), existing('c', { v: '1' })]));
  assert.equal(result.error, null);
  assert.deepEqual(log, EXPECTED('a', 'b', 'c'));
  const desired = byName(result);
  assert.equal(desired.a.metadata.labels.stage, 'pre-update');
  assert.equal(desired.b.metadata.labels.stage, 'pre-create');
  assert.equal(desired.same.metadata.labels, undefined);
  assert.equal(desired.c, undefined);
});

test('an error stops the step and names the callback', async () => {
  const later = [];
  const callbacks = new StageCallbacks()
    .on('v1', 'ConfigMap', 'pre-create', 'quota', (req, stage, desired) => {
      if (desired.metadata.name === 'b') throw new TerminalError('over quota');
    })
    .on('v1', 'ConfigMap', 'pre-create', 'after', () => later.push(1));
  const chain = new DependentChain()
    .add({ name: 'a', apiVersion: 'v1', kind: 'ConfigMap', desired: () => ({ metadata: { name: 'a' } }) })
    .add({ name: 'b', apiVersion: 'v1', kind: 'ConfigMap', desired: () => ({ metadata: { name: 'b' } }) })
    .withCallbacks(callbacks);
  const result = await chain.build()(request([{ apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'a' } }]));
  assert.deepEqual(result.error,
    { kind: 'terminal', message: 'dependent b: callback quota at pre-create: over quota' });
  assert.equal(byName(result).b, undefined);
  assert.deepEqual(later, []);
  // @ts-expect-error: not a stage
  assert.throws(() => new StageCallbacks().on('v1', 'ConfigMap', 'pre-create-ish', 'x', () => {}),
    TypeError);
});

test('a CrudResource runs callbacks around creates, updates and removals', async () => {
  const log = [];
  const copies = new CrudResource('v1', 'ConfigMap', () => ['a', 'b'].map(
    (name) => ({ metadata: { name }, data: { v: '2' } })))
    .withCallbacks(recordingCallbacks(log));
  const result = await copies.build()(request([existing('a', { v: '1' }),
    existing('old', { v: '1' })]));
  assert.equal(result.error, null);
  assert.deepEqual(log, EXPECTED('a', 'b', 'old'));
  assert.equal(byName(result).b.metadata.labels.stage, 'pre-create');
});
