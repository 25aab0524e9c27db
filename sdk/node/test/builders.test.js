'use strict';
// Resource builders and the config hash (the same vectors as sdk/cpp builders_test).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const sdk = require('../src');

const {
  CONFIG_HASH_ANNOTATION, Request, buildClusterRoleBinding, buildConfigMap, buildDeployment,
  buildRole, buildRoleBinding, buildSecret, buildService, buildServiceAccount, canonicalJson,
  commonLabels, configHash, ownerReference, policyRule, selectorLabels, serviceAccountSubject,
  servicePort,
} = sdk;

test('configHash: the same vectors in every language', () => {
  assert.equal(configHash({}), '9bf65e00c699fdaf');
  assert.equal(configHash({ b: '2', a: '1' }), '18ceba3ee263f773');
  // Keys by UTF-8 bytes: '10' before '9' (JavaScript enumerates integer keys first) and
  // U+FF5E before U+1F600 (UTF-16 order puts the surrogate pair first).
  const order = { 10: 'x', 9: 'y', '\u00e9': 'z', '\u{1F600}': 'w', '\uff5e': 'v', B: 'u', a: 't' };
  assert.equal(canonicalJson(order),
    '{"10":"x","9":"y","B":"u","a":"t","\u00e9":"z","\uff5e":"v","\u{1F600}":"w"}');
  assert.equal(configHash(order), '87ce159c5184d88c');
  assert.equal(configHash({ q: 'say "hi"\n\t\\ \x01 \x7f /' }), '07165b820114a692');
  const nested = { list: [1, -2, true, null, { z: 1, y: [] }], n: 9007199254740992 };
  assert.equal(canonicalJson(nested), '{"list":[1,-2,true,null,{"y":[],"z":1}],"n":9007199254740992}');
  assert.equal(configHash(nested), '3abc398a2c0b7b37');
});

test('configHash refuses numbers other languages would write differently', () => {
  assert.throws(() => configHash({ x: 1.5 }), TypeError);
  assert.throws(() => configHash({ x: 1e300 }), TypeError);
  assert.throws(() => configHash({ x: undefined }), TypeError);
});

test('Deployment and Service carry labels, selector and protocol', () => {
  const d = buildDeployment({ name: 'shop', labels: commonLabels('webapp', 'shop'),
    selector: selectorLabels('webapp', 'shop'), replicas: 3,
    containers: [{ name: 'web', image: 'nginx' }],
    podAnnotations: { [CONFIG_HASH_ANNOTATION]: 'abc' } });
  assert.equal(d.metadata.labels['app.kubernetes.io/managed-by'], 'ctrlhost');
  assert.deepEqual(d.spec.selector.matchLabels, selectorLabels('webapp', 'shop'));
  assert.deepEqual(d.spec.template.metadata, { labels: commonLabels('webapp', 'shop'),
    annotations: { 'ctrlhost.dev/config-hash': 'abc' } });
  assert.equal(d.spec.replicas, 3);
  const s = buildService({ name: 'shop', selector: selectorLabels('webapp', 'shop'),
    ports: [servicePort({ port: 80, name: 'http', targetPort: 'http' }),
      servicePort({ port: 53, protocol: 'UDP' }), { port: 1 }] });
  assert.deepEqual(s.spec.ports, [
    { name: 'http', port: 80, protocol: 'TCP', targetPort: 'http' },
    { port: 53, protocol: 'UDP' }, { port: 1, protocol: 'TCP' }]);
  assert.equal(s.metadata.labels, undefined);
});

test('RBAC and plain objects', () => {
  const labels = commonLabels('app', 'x');
  const role = buildRole({ name: 'reader', labels,
    rules: [policyRule([''], ['configmaps'], ['get'])] });
  assert.equal(role.apiVersion, 'rbac.authorization.k8s.io/v1');
  assert.deepEqual(role.rules[0].resources, ['configmaps']);
  const binding = buildClusterRoleBinding({ name: 'reader', labels, clusterRole: 'reader',
    subjects: [serviceAccountSubject('runner', 'team-a')] });
  assert.deepEqual(binding.roleRef,
    { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'reader' });
  assert.deepEqual(buildRoleBinding({ name: 'reader', role: 'reader' }).subjects, []);
  assert.deepEqual(buildSecret({ name: 's', stringData: { token: 't' }, type: 'Opaque' }).stringData,
    { token: 't' });
  assert.deepEqual(buildServiceAccount({ name: 'runner' }),
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'runner' } });
  assert.deepEqual(buildConfigMap({ data: {} }).data, {});
});

test('ownerReference names the primary', () => {
  const obj = { apiVersion: 'example.com/v1', kind: 'App',
    metadata: { name: 'shop', namespace: 'a', uid: 'u-1' } };
  const req = Request.fromCall({ controller: 'app', namespace: 'a', name: 'shop', uid: 'u-1',
    object: Buffer.from(JSON.stringify(obj)) });
  const ref = ownerReference(req);
  assert.deepEqual(ref, { apiVersion: 'example.com/v1', kind: 'App', name: 'shop', uid: 'u-1',
    controller: true, blockOwnerDeletion: true });
  assert.deepEqual(buildConfigMap({ owner: ref }).metadata.ownerReferences, [ref]);
});
