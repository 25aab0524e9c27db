'use strict';
// testing.run / testing.reconcile judge a reconcile as the live host does: every case of
// sdk/testdata/host_judgement_cases.json (the cases every SDK's harness passes), and the
// surface around them (HostWouldRefuse from reconcile, the caller's fixtures left as they were).
//
// First contact: the SDK had no offline harness that judged like the host; a desired kind the
// controller does not own, children without an owner reference and the label selector were only
// caught by `ctrlhost test --check` or the live host.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const sdk = require('../src');

const { ControllerBuilder, Result, testing } = sdk;
sdk.log.setSink(() => {});

const CASES = JSON.parse(fs.readFileSync(
  path.join(__dirname, '..', '..', 'testdata', 'host_judgement_cases.json'), 'utf8'));

/**
 * The case's controller: it answers case.answer and records the children it was given.
 * @param {any} c
 * @param {string[]} seen
 */
function caseController(c, seen) {
  const decl = c.controller;
  const b = new ControllerBuilder(decl.name).for(decl.primary[0], decl.primary[1], decl.primary[2]);
  for (const o of decl.owns) b.owns(o[0], o[1], o[2]);
  if (decl.labelSelector) b.labelSelector(decl.labelSelector);
  if (decl.namespaces) b.namespaces(decl.namespaces);
  const answer = c.answer;
  return b.reconcile((req) => {
    for (const child of req.children) {
      const ref = child.object.metadata.ownerReferences[0];
      seen.push(`${child.object.metadata.name}:${ref.kind}/${ref.name}/${ref.uid}/${ref.controller}`);
    }
    const result = new Result();
    for (const d of answer.desired || []) result.desire(structuredClone(d));
    if (answer.status) result.mergeStatus(answer.status);
    if (answer.condition) result.setCondition(answer.condition[0], answer.condition[1], answer.condition[2]);
    if (answer.statusPatch) result.patchPrimaryStatus('merge', answer.statusPatch);
    if (answer.ownedPatch) {
      result.patchOwned(answer.ownedPatch[0], answer.ownedPatch[1], answer.ownedPatch[2], 'merge', {});
    }
    if (answer.event) result.event(answer.event[0], answer.event[1], answer.event[2]);
    return result;
  });
}

/** @param {any} c */
function casePrimary(c) {
  if (c.primary === null) return null;
  const obj = structuredClone(CASES.primaries[c.primary]);
  if (c.labels) obj.metadata.labels = { ...c.labels };
  return obj;
}

test('every shared host judgement case', async (t) => {
  assert.ok(CASES.cases.length >= 20);
  for (const c of CASES.cases) {
    await t.test(c.name, async () => {
      /** @type {string[]} */
      const seen = [];
      const children = c.children || [];
      const before = structuredClone(children);
      const run = () => testing.run(caseController(c, seen), casePrimary(c),
        { children, existing: c.existing || [] });
      if (c.notSent) {
        await assert.rejects(run(), (e) => {
          assert.ok(e instanceof testing.HostWouldNotSend);
          assert.ok(e.message.startsWith('the host would not send this request: '), e.message);
          assert.ok(e.message.includes(c.notSent), e.message);
          return true;
        });
        assert.deepEqual(seen, []);
        return;
      }
      const out = await run();
      assert.equal(out.error, null);
      if (c.refused === null) {
        assert.equal(out.refused, null);
      } else {
        assert.ok(out.refused !== null && out.refused.includes(c.refused), String(out.refused));
      }
      if (c.childrenSeen) assert.deepEqual(seen, c.childrenSeen);
      assert.deepEqual(children, before); // the caller's fixtures are unchanged
    });
  }
});

test('status on every kind without a status subresource is refused', async () => {
  assert.equal(CASES.withoutStatusSubresource.length, 20);
  for (const [group, kind] of CASES.withoutStatusSubresource) {
    const apiVersion = group ? `${group}/v1` : 'v1';
    const c = new ControllerBuilder('statusful').for(group, 'v1', kind)
      .reconcile(() => new Result().mergeStatus({ phase: 'Done' }));
    const out = await testing.run(c, { apiVersion, kind,
      metadata: { name: 'x', namespace: 'prod', uid: 'u-x' } });
    assert.equal(out.refused, `status: kind ${apiVersion} ${kind} has no status subresource, so ` +
      'it has no status to write; record the outcome with an event instead');
  }
});

test('reconcile rejects a refused answer with the outcome, and resolves an applied one', async () => {
  await assert.rejects(testing.reconcile(caseController(CASES.cases[0], []), casePrimary(CASES.cases[0])),
    (e) => {
      assert.ok(e instanceof testing.HostWouldRefuse);
      assert.equal(e.message, 'the host would refuse this answer: desired_objects[1]: kind v1 ' +
        'Secret is not owned by controller greeter');
      assert.equal(e.outcome.desired.length, 2);
      return true;
    });
  const out = await testing.reconcile(caseController(CASES.cases[1], []), casePrimary(CASES.cases[1]));
  assert.equal(out.desiredOfKind('Secret').length, 1);
  assert.equal(out.desired[0].metadata.namespace, 'prod');
});

test('the harness answers errors and capabilities as the plugin does', async () => {
  const failing = new ControllerBuilder('app').for('example.com', 'v1', 'App')
    .reconcile(() => { throw new sdk.TerminalError('spec is wrong', { reason: 'BadSpec' }); });
  const app = { apiVersion: 'example.com/v1', kind: 'App', metadata: { name: 'a', namespace: 'n' } };
  const out = await testing.reconcile(failing, app);
  assert.deepEqual(out.error, { kind: 'terminal', message: 'spec is wrong', reason: 'BadSpec' });
  assert.equal(out.refused, null);
  const desiring = new ControllerBuilder('app').for('example.com', 'v1', 'App').owns('', 'v1', 'ConfigMap')
    .reconcile(() => { const r = new Result(); r.desire(sdk.newObject('v1', 'ConfigMap', 'c')); return r; });
  const noSsa = await testing.reconcile(desiring, app, { capabilities: [] });
  assert.equal(noSsa.error.kind, 'retryable');
  assert.match(noSsa.error.message, /CAPABILITY_SERVER_SIDE_APPLY/);
});
