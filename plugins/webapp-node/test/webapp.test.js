'use strict';
// The WebApp controller through Plugin.handle (the SDK path every request takes), on the
// fixture of plugins/webapp/testdata/webapp.yaml: children, status, conditions, the config hash
// the C++ plugin computes, invalid specs, the external record and the finalizer.

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Plugin, log } = require('../../../sdk/node/src');
const { addController, RecordStore } = require('../webapp');

log.setSink(() => {});
const CAPS = ['CAPABILITY_CHILDREN', 'CAPABILITY_CONDITIONS', 'CAPABILITY_SERVER_SIDE_APPLY'];

// plugins/webapp/testdata/webapp.yaml as JSON.
function webapp(spec = { image: 'nginx:1.25', replicas: 2, port: 8080,
  env: { LOG_LEVEL: 'info' }, config: { GREETING: 'hello' } }) {
  return { apiVersion: 'apps.ctrlhost.dev/v1alpha1', kind: 'WebApp',
    metadata: { name: 'shop', namespace: 'default', generation: 3,
      uid: '0b6c2d9e-4a51-4f0e-9a7e-5b1f3c2d1a00' }, spec };
}

let dir;
before(() => { dir = fs.mkdtempSync(path.join(process.env.TEST_TMPDIR || os.tmpdir(), 'webapp-')); });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function setup(recordDir = path.join(dir, 'records')) {
  const plugin = new Plugin('webapp-node', 'test');
  const records = new RecordStore(recordDir);
  addController(plugin, records);
  plugin.describe({ protocol_versions: ['v1alpha1'], capabilities: CAPS });
  const run = async (obj, { children = [], finalizing = false } = {}) => {
    const resp = await plugin.handle('1', {
      controller: 'webapp', namespace: 'default', name: 'shop', uid: obj ? obj.metadata.uid : '',
      object: obj ? Buffer.from(JSON.stringify(obj)) : Buffer.alloc(0),
      children: children.map((c) => ({ api_version: c.apiVersion, kind: c.kind,
        object: Buffer.from(JSON.stringify(c)) })),
      finalizing,
    });
    const byKind = {};
    for (const b of resp.desired_objects || []) { const o = JSON.parse(b); byKind[o.kind] = o; }
    return { resp, byKind, status: resp.status ? JSON.parse(resp.status) : null,
      cond: (t) => resp.conditions.find((c) => c.type === t) };
  };
  return { plugin, records, run };
}

test('declares the same controller as the C++ plugin', () => {
  const { plugin } = setup();
  const spec = plugin.controllers().get('webapp').spec;
  assert.deepEqual(spec.primary, { group: 'apps.ctrlhost.dev', version: 'v1alpha1', kind: 'WebApp' });
  assert.deepEqual(spec.owns.map((o) => o.kind.kind), ['Deployment', 'Service', 'ConfigMap']);
  assert.equal(spec.finalizer, 'apps.ctrlhost.dev/external-record');
  assert.equal(spec.max_concurrent_reconciles, 4);
  assert.equal(spec.request_contents.children, true);
});

test('children, status and conditions; the record is written', async () => {
  const { run, records } = setup();
  const { byKind, status, cond, resp } = await run(webapp());
  assert.equal(resp.error, undefined);
  assert.deepEqual(byKind.ConfigMap.data, { GREETING: 'hello' });
  assert.equal(byKind.ConfigMap.metadata.name, 'shop-config');
  assert.equal(byKind.ConfigMap.metadata.namespace, 'default');
  const c = byKind.Deployment.spec.template.spec.containers[0];
  assert.equal(byKind.Deployment.spec.replicas, 2);
  assert.equal(c.image, 'nginx:1.25');
  assert.deepEqual(c.env, [{ name: 'LOG_LEVEL', value: 'info' }]);
  assert.equal(c.envFrom[0].configMapRef.name, 'shop-config');
  // The value the C++ plugin computes for {"GREETING":"hello"}.
  assert.equal(byKind.Deployment.spec.template.metadata.annotations['apps.ctrlhost.dev/config-hash'],
    '56d5bfdb2ff2a622');
  assert.equal(byKind.Service.spec.ports[0].port, 8080);
  // Kube 1.20 server-side apply refuses a Service port without its list-map key (protocol).
  assert.equal(byKind.Service.spec.ports[0].protocol, 'TCP');
  assert.deepEqual(status, { observedGeneration: 3, replicas: 2, readyReplicas: 0,
    url: 'http://shop.default.svc:8080' });
  assert.equal(cond('Ready').status, 'CONDITION_STATUS_FALSE');
  assert.equal(cond('Progressing').reason, 'RollingOut');
  assert.deepEqual(records.read('default', 'shop'), { image: 'nginx:1.25', name: 'shop',
    namespace: 'default', port: 8080, replicas: 2, uid: '0b6c2d9e-4a51-4f0e-9a7e-5b1f3c2d1a00' });
});

test('ready once the Deployment reports its replicas; a config change changes the hash', async () => {
  const { run } = setup();
  const dep = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'shop' },
    status: { readyReplicas: 2 } };
  const out = await run(webapp(), { children: [dep] });
  assert.equal(out.cond('Ready').status, 'CONDITION_STATUS_TRUE');
  assert.equal(out.cond('Ready').reason, 'AllReplicasReady');
  assert.equal(out.cond('Progressing').reason, 'Stable');
  assert.equal(out.status.readyReplicas, 2);
  const changed = await run(webapp({ image: 'x', config: { GREETING: 'bye' } }));
  assert.notEqual(changed.byKind.Deployment.spec.template.metadata.annotations['apps.ctrlhost.dev/config-hash'],
    out.byKind.Deployment.spec.template.metadata.annotations['apps.ctrlhost.dev/config-hash']);
  assert.equal(changed.byKind.Deployment.spec.replicas, 1); // defaults
  assert.equal(changed.byKind.Service.spec.ports[0].port, 8080);
  // The SDK's config hash of { GREETING: 'hello' }: the value the plugins wrote before they used
  // the SDK's builders, so no pod restarts.
  const hash = out.byKind.Deployment.spec.template.metadata.annotations;
  assert.equal(hash['apps.ctrlhost.dev/config-hash'], '56d5bfdb2ff2a622');
});

test('invalid specs are terminal errors with InvalidSpec and no children', async () => {
  const { run } = setup();
  for (const [spec, msg] of [
    [{}, 'spec.image is required (a container image reference)'],
    [{ image: 'x', replicas: 1001 }, 'spec.replicas must be between 0 and 1000, not 1001'],
    [{ image: 'x', replicas: 1.5 }, 'spec.replicas must be an integer'],
    [{ image: 'x', port: 0 }, 'spec.port must be between 1 and 65535, not 0'],
    [{ image: 'x', env: ['a'] }, 'spec.env must be a map of strings'],
    [{ image: 'x', config: { a: 1 } }, 'spec.config.a must be a string'],
  ]) {
    const { resp, status, cond } = await run(webapp(spec));
    assert.equal(resp.error.kind, 'ERROR_KIND_TERMINAL');
    assert.equal(resp.error.message, msg);
    assert.equal(resp.desired_objects.length, 0);
    assert.deepEqual(status, { observedGeneration: 3 });
    assert.equal(cond('Ready').reason, 'InvalidSpec');
    assert.deepEqual(resp.events, [{ type: 'EVENT_TYPE_WARNING', reason: 'InvalidSpec', message: msg }]);
  }
});

test('finalizing removes the record and answers finalized (also when repeated)', async () => {
  const { run, records } = setup();
  await run(webapp());
  assert.ok(records.read('default', 'shop'));
  const deleting = webapp();
  deleting.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
  for (let i = 0; i < 2; i++) {
    const { resp } = await run(deleting, { finalizing: true });
    assert.equal(resp.finalized, true);
    assert.deepEqual(resp.events, [{ type: 'EVENT_TYPE_NORMAL', reason: 'RecordRemoved',
      message: 'external record removed' }]);
  }
  assert.equal(records.read('default', 'shop'), undefined);
  const gone = await run(null);
  assert.equal(gone.resp.error, undefined);
  assert.equal(gone.resp.finalized, false);
});

test('an unwritable record directory is retryable and still applies the children', async () => {
  const file = path.join(dir, 'not-a-dir');
  fs.writeFileSync(file, '');
  const { run } = setup(path.join(file, 'records'));
  const { resp, byKind } = await run(webapp());
  assert.equal(resp.error.kind, 'ERROR_KIND_RETRYABLE');
  assert.match(resp.error.message, /^external record: /);
  assert.ok(byKind.Deployment);
});
