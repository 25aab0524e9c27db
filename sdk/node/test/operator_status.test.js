'use strict';
// setOperatorStatus: the same cases as sdk/cpp operator_status_test.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');

const { Request, Result, setOperatorStatus } = sdk;

function run(status, input, deleting = false) {
  const metadata = { name: 'a', namespace: 'n', generation: 3,
    ...(deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: ['x'] } : {}) };
  const obj = { apiVersion: 'example.com/v1', kind: 'App', metadata,
    ...(status ? { status } : {}) };
  const req = Request.fromCall({ controller: 'app', namespace: 'n', name: 'a',
    object: Buffer.from(JSON.stringify(obj)) });
  const result = new Result();
  setOperatorStatus(req, result, input);
  return result;
}

const conditions = (result) => Object.fromEntries(result.conditions.map(
  (c) => [c.type, `${c.status ? 'True' : 'False'} ${c.reason}`]));

test('Deploying, then Deployed', () => {
  const deploying = run(null, { operatorVersion: '1.0.0', message: 'waiting for web' });
  assert.equal(deploying.status().phase, 'Deploying');
  assert.equal(deploying.status().targetVersion, '1.0.0');
  assert.equal(deploying.status().observedGeneration, 3);
  assert.equal(deploying.status().observedVersion, undefined);
  assert.deepEqual(conditions(deploying), {
    Available: 'False Deploying', Progressing: 'True Deploying', Degraded: 'False AsExpected',
    Ready: 'False Deploying', Reconciling: 'True Deploying', Stalled: 'False AsExpected' });
  const deployed = run(null, { operatorVersion: '1.0.0', childrenReady: true });
  assert.equal(deployed.status().phase, 'Deployed');
  assert.equal(deployed.status().observedVersion, '1.0.0');
  assert.equal(conditions(deployed).Available, 'True AsExpected');
  assert.equal(conditions(deployed).Reconciling, 'False AsExpected');
});

test('an upgrade keeps Available and is never Degraded', () => {
  const was = { observedVersion: '1.0.0', conditions: [{ type: 'Available', status: 'True' }] };
  const upgrading = run(was, { operatorVersion: '1.1.0', message: 'web 1/2' });
  assert.equal(upgrading.status().phase, 'Upgrading');
  assert.equal(upgrading.status().observedVersion, undefined);
  assert.equal(conditions(upgrading).Available, 'True PreviousVersionAvailable');
  assert.equal(conditions(upgrading).Progressing, 'True Upgrading');
  assert.equal(conditions(upgrading).Degraded, 'False AsExpected');
  assert.equal(upgrading.conditions[1].message, 'upgrading from 1.0.0 to 1.1.0: web 1/2');
  const done = run(was, { operatorVersion: '1.1.0', childrenReady: true });
  assert.equal(done.status().phase, 'Deployed');
  assert.equal(done.status().observedVersion, '1.1.0');
});

test('a persistent failure, and deletion', () => {
  const failed = run(null, { operatorVersion: '1.0.0', failure: 'image pull refused',
    failureReason: 'ImagePull' });
  assert.equal(failed.status().phase, 'Error');
  assert.equal(conditions(failed).Degraded, 'True ImagePull');
  assert.equal(conditions(failed).Stalled, 'True ImagePull');
  assert.equal(conditions(failed).Available, 'False NotReady');
  const deleting = run(null, { operatorVersion: '1.0.0', childrenReady: true }, true);
  assert.equal(deleting.status().phase, 'Deleting');
  assert.equal(conditions(deleting).Available, 'False Deleting');
});
