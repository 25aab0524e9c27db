// @ts-check
'use strict';
// Builders for the children operators create most (as sdk/cpp's builders.h and sdk/python's
// builders.py, with the same output: e2e/conformance checks it).
//
//   const labels = commonLabels('webapp', req.name);
//   result.desire(buildDeployment({ name: req.name, labels,
//     selector: selectorLabels('webapp', req.name), replicas: 2, containers: [container],
//     podAnnotations: { [CONFIG_HASH_ANNOTATION]: configHash(config) } }));
//
// Conventions, the same in every language:
// - `labels` go on metadata.labels (and a Deployment's pod template); `selector` is a
//   Deployment's spec.selector.matchLabels and a Service's spec.selector.
// - Service ports always carry `protocol` (default 'TCP'): Kubernetes 1.20 server-side apply
//   refuses a port without it.
// - configHash(value): FNV-1a 64 (offset basis 1469598103934665603, prime 1099511628211) over
//   the canonical JSON of `value` (no spaces, keys sorted by their UTF-8 bytes, not by UTF-16
//   units nor JavaScript's integer-keys-first order; JSON's short escapes and \u00XX for other
//   control characters, non-ASCII kept) as 16 hex digits. Numbers must be safe integers; any
//   other number throws a TypeError, so that every language hashes the same text.
// - ownerReference(req): the primary as a controller owner reference (the host adds one to
//   namespaced children itself).

const CONFIG_HASH_ANNOTATION = 'ctrlhost.dev/config-hash';
const RBAC = 'rbac.authorization.k8s.io';

const selectorLabels = (app, instance) => ({
  'app.kubernetes.io/instance': instance,
  'app.kubernetes.io/name': app,
});

const commonLabels = (app, instance) => ({
  ...selectorLabels(app, instance),
  'app.kubernetes.io/managed-by': 'ctrlhost',
});

function byUtf8(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function canonical(value, depth) {
  if (depth > 64) throw new TypeError('config nested deeper than 64 levels');
  if (value === null || typeof value === 'boolean' || typeof value === 'string') {
    return JSON.stringify(value);
  }
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || Math.abs(value) > 2 ** 53) {
      throw new TypeError(`config hash: ${value} is not an integer (only integers hash the ` +
        'same in every language)');
    }
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonical(v, depth + 1)).join(',')}]`;
  if (typeof value === 'object') {
    const keys = Object.keys(value).sort(byUtf8);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k], depth + 1)}`).join(',')}}`;
  }
  throw new TypeError(`config hash: ${typeof value} is not JSON`);
}

/** The text configHash hashes. */
function canonicalJson(value) {
  return canonical(value, 0);
}

function configHash(value) {
  let h = 1469598103934665603n;
  for (const b of Buffer.from(canonicalJson(value), 'utf8')) {
    h ^= BigInt(b);
    h = (h * 1099511628211n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, '0');
}

function ownerReference(req) {
  return { apiVersion: req.apiVersion, kind: req.kind, name: req.name, uid: req.uid,
    controller: true, blockOwnerDeletion: true };
}

/**
 * @param {{name?: string, namespace?: string, labels?: Record<string, string>,
 *          annotations?: Record<string, string>, owner?: any}} [options]
 */
function metadata({ name, namespace, labels, annotations, owner } = {}) {
  const meta = {};
  if (name) meta.name = name;
  if (namespace) meta.namespace = namespace;
  if (labels != null) meta.labels = { ...labels };
  if (annotations != null) meta.annotations = { ...annotations };
  if (owner != null) meta.ownerReferences = [{ ...owner }];
  return meta;
}

const object = (apiVersion, kind, o) => ({ apiVersion, kind, metadata: metadata(o) });

/** { name, labels, selector (default: labels), replicas = 1, containers, podAnnotations,
 *    podSpec (extra pod fields), annotations, owner } */
function buildDeployment(o = {}) {
  const d = object('apps/v1', 'Deployment', { ...o, namespace: undefined });
  const podMeta = {};
  if (o.labels != null) podMeta.labels = { ...o.labels };
  if (o.podAnnotations != null) podMeta.annotations = { ...o.podAnnotations };
  d.spec = {
    replicas: o.replicas === undefined ? 1 : o.replicas,
    selector: { matchLabels: { ...(o.selector != null ? o.selector : o.labels || {}) } },
    template: { metadata: podMeta, spec: { ...(o.podSpec || {}), containers: [...(o.containers || [])] } },
  };
  return d;
}

/** { port, name?, targetPort?, protocol = 'TCP' } */
function servicePort({ port, name, targetPort, protocol }) {
  const out = { port, protocol: protocol || 'TCP' };
  if (name) out.name = name;
  if (targetPort != null) out.targetPort = targetPort;
  return out;
}

/** { name, labels, selector, ports: [servicePort items], type, annotations, owner } */
function buildService(o = {}) {
  const s = object('v1', 'Service', { ...o, namespace: undefined });
  s.spec = { ports: (o.ports || []).map((p) => ({ ...p, protocol: p.protocol || 'TCP' })) };
  if (o.selector != null) s.spec.selector = { ...o.selector };
  if (o.type) s.spec.type = o.type;
  return s;
}

/** { name, namespace, labels, annotations, owner, data } */
function buildConfigMap(o = {}) {
  const cm = object('v1', 'ConfigMap', o);
  if (o.data != null) cm.data = { ...o.data };
  return cm;
}

/** { name, namespace, labels, annotations, owner, stringData, type } */
function buildSecret(o = {}) {
  const secret = object('v1', 'Secret', o);
  if (o.stringData != null) secret.stringData = { ...o.stringData };
  if (o.type) secret.type = o.type;
  return secret;
}

const buildServiceAccount = (o = {}) => object('v1', 'ServiceAccount', o);

const policyRule = (apiGroups, resources, verbs) =>
  ({ apiGroups: [...apiGroups], resources: [...resources], verbs: [...verbs] });

const serviceAccountSubject = (name, namespace) => ({ kind: 'ServiceAccount', name, namespace });

/** { name, namespace, labels, annotations, owner, rules } */
function buildRole(o = {}) {
  return { ...object(`${RBAC}/v1`, 'Role', o), rules: [...(o.rules || [])] };
}

function buildClusterRole(o = {}) {
  return { ...object(`${RBAC}/v1`, 'ClusterRole', { ...o, namespace: undefined }),
    rules: [...(o.rules || [])] };
}

/** { name, namespace, labels, annotations, owner, role, subjects } */
function buildRoleBinding(o = {}) {
  return { ...object(`${RBAC}/v1`, 'RoleBinding', o),
    roleRef: { apiGroup: RBAC, kind: 'Role', name: o.role || '' },
    subjects: [...(o.subjects || [])] };
}

/** { name, labels, annotations, owner, clusterRole, subjects } */
function buildClusterRoleBinding(o = {}) {
  return { ...object(`${RBAC}/v1`, 'ClusterRoleBinding', { ...o, namespace: undefined }),
    roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: o.clusterRole || '' },
    subjects: [...(o.subjects || [])] };
}

module.exports = {
  CONFIG_HASH_ANNOTATION,
  selectorLabels,
  commonLabels,
  canonicalJson,
  configHash,
  ownerReference,
  buildDeployment,
  servicePort,
  buildService,
  buildConfigMap,
  buildSecret,
  buildServiceAccount,
  policyRule,
  serviceAccountSubject,
  buildRole,
  buildClusterRole,
  buildRoleBinding,
  buildClusterRoleBinding,
};
