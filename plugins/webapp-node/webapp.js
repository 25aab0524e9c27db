'use strict';
// The WebApp controller on the Node SDK: the same behaviour as plugins/webapp/webapp.cc (same
// CRD, children, status, conditions, events, finalizer and external record) on the same inputs.

const fs = require('node:fs');
const path = require('node:path');
const sdk = require('../../sdk/node/src');

const { Result, newObject, findPath, handlers } = sdk;

const GROUP = 'apps.ctrlhost.dev';
const VERSION = 'v1alpha1';
const KIND = 'WebApp';
const FINALIZER = 'apps.ctrlhost.dev/external-record';

class SpecError extends Error {}

function sortedStringMap(spec, field) {
  const v = spec[field];
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) {
    throw new SpecError(`spec.${field} must be a map of strings`);
  }
  const out = {};
  for (const k of Object.keys(v).sort()) {
    if (typeof v[k] !== 'string') throw new SpecError(`spec.${field}.${k} must be a string`);
    out[k] = v[k];
  }
  return out;
}

function intAt(spec, field, fallback, min, max) {
  const v = spec[field];
  if (v === undefined || v === null) return fallback;
  if (!Number.isInteger(v)) throw new SpecError(`spec.${field} must be an integer`);
  if (v < min || v > max) {
    throw new SpecError(`spec.${field} must be between ${min} and ${max}, not ${v}`);
  }
  return v;
}

function parseSpec(spec) {
  if (typeof spec.image !== 'string' || spec.image === '') {
    throw new SpecError('spec.image is required (a container image reference)');
  }
  return {
    image: spec.image,
    replicas: intAt(spec, 'replicas', 1, 0, 1000),
    port: intAt(spec, 'port', 8080, 1, 65535),
    env: sortedStringMap(spec, 'env'),
    config: sortedStringMap(spec, 'config'),
  };
}

// FNV-1a over the UTF-8 bytes with the C++ plugin's constants (its offset basis lacks the last
// digit of FNV's), so the value is the same as the C++ plugin's and the pod template (and
// the pods) change only when the configuration does, whichever plugin wrote it.
function stableHash(text) {
  let h = 1469598103934665603n;
  for (const b of Buffer.from(text, 'utf8')) {
    h ^= BigInt(b);
    h = (h * 1099511628211n) & 0xffffffffffffffffn;
  }
  return h.toString(16).padStart(16, '0');
}

function isDnsName(s) {
  return typeof s === 'string' && s.length > 0 && s.length <= 253 &&
    /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(s);
}

const selectorLabels = (name) => ({
  'app.kubernetes.io/instance': name,
  'app.kubernetes.io/name': 'webapp',
});
const childLabels = (name) => ({
  'app.kubernetes.io/instance': name,
  'app.kubernetes.io/managed-by': 'ctrlhost',
  'app.kubernetes.io/name': 'webapp',
});

function desireChildren(req, spec, result) {
  const name = req.name;
  const configName = `${name}-config`;
  const cm = result.desire(newObject('v1', 'ConfigMap', configName));
  cm.metadata.labels = childLabels(name);
  cm.data = spec.config;

  const env = Object.entries(spec.env).map(([k, v]) => ({ name: k, value: v }));
  const container = {
    envFrom: [{ configMapRef: { name: configName } }],
    image: spec.image,
    name: 'web',
    ports: [{ containerPort: spec.port, name: 'http' }],
  };
  if (env.length > 0) container.env = env;
  const dep = result.desire(newObject('apps/v1', 'Deployment', name));
  dep.metadata.labels = childLabels(name);
  dep.spec = {
    replicas: spec.replicas,
    selector: { matchLabels: selectorLabels(name) },
    template: {
      metadata: {
        annotations: { 'apps.ctrlhost.dev/config-hash': stableHash(JSON.stringify(spec.config)) },
        labels: childLabels(name),
      },
      spec: { containers: [container] },
    },
  };

  const svc = result.desire(newObject('v1', 'Service', name));
  svc.metadata.labels = childLabels(name);
  svc.spec = {
    // `protocol`: the list-map key kube 1.20 server-side apply needs (no default there).
    ports: [{ name: 'http', port: spec.port, protocol: 'TCP', targetPort: 'http' }],
    selector: selectorLabels(name),
  };
}

function reportStatus(req, spec, result) {
  let ready = 0;
  const dep = req.child('Deployment', req.name);
  if (dep) {
    const r = findPath(dep, 'status.readyReplicas');
    if (Number.isInteger(r)) ready = r;
  }
  const status = result.status();
  status.observedGeneration = req.generation;
  status.replicas = spec.replicas;
  status.readyReplicas = ready;
  status.url = `http://${req.name}.${req.namespace}.svc:${spec.port}`;
  const progress = `${ready}/${spec.replicas} replicas ready`;
  if (ready >= spec.replicas) {
    result.setCondition('Ready', true, 'AllReplicasReady', progress);
    result.setCondition('Progressing', false, 'Stable', progress);
  } else {
    result.setCondition('Ready', false, 'ReplicasNotReady', progress);
    result.setCondition('Progressing', true, 'RollingOut', progress);
  }
}

/** The external record files: <dir>/<namespace>_<name>.json, as the C++ plugin keeps them. */
class RecordStore {
  constructor(dir = RecordStore.defaultDir()) {
    this.dir = dir;
  }

  static defaultDir() {
    if (process.env.WEBAPP_RECORD_DIR) return process.env.WEBAPP_RECORD_DIR;
    return `${process.env.TMPDIR || '/tmp'}/ctrlhost-webapp-records`;
  }

  pathFor(ns, name) {
    if (!isDnsName(ns) || !isDnsName(name)) {
      const e = new Error(`"${ns}/${name}" is not a valid namespace/name`);
      e.invalid = true;
      throw e;
    }
    return path.join(this.dir, `${ns}_${name}.json`);
  }

  read(ns, name) {
    try {
      return JSON.parse(fs.readFileSync(this.pathFor(ns, name), 'utf8'));
    } catch {
      return undefined;
    }
  }

  write(ns, name, record) {
    const file = this.pathFor(ns, name);
    const text = `${JSON.stringify(record, null, 2)}\n`;
    const old = this.read(ns, name);
    if (old !== undefined && JSON.stringify(old) === JSON.stringify(record)) return;
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${file}.tmp`;
    fs.writeFileSync(tmp, text);
    fs.renameSync(tmp, file);
  }

  remove(ns, name) {
    try {
      fs.unlinkSync(this.pathFor(ns, name));
    } catch (e) {
      if (e.code !== 'ENOENT') throw e;
    }
  }
}

function upsert(records, req) {
  let spec;
  try {
    spec = parseSpec(req.spec);
  } catch (e) {
    if (!(e instanceof SpecError)) throw e;
    // Retrying cannot fix the spec; the next edit reconciles it again. Children are kept.
    const result = Result.terminalError(e.message);
    result.status().observedGeneration = req.generation;
    result.setCondition('Ready', false, 'InvalidSpec', e.message);
    result.setCondition('Progressing', false, 'InvalidSpec', e.message);
    result.event('Warning', 'InvalidSpec', e.message);
    return result;
  }
  const result = new Result();
  desireChildren(req, spec, result);
  reportStatus(req, spec, result);
  // Keys in the C++ plugin's order (nlohmann sorts them), so both write identical files.
  const record = {
    image: spec.image, name: req.name, namespace: req.namespace, port: spec.port,
    replicas: spec.replicas, uid: req.uid,
  };
  try {
    records.write(req.namespace, req.name, record);
  } catch (e) {
    // The children and status are still applied; the record is retried with backoff.
    result.setError(e.invalid ? 'terminal' : 'retryable', `external record: ${e.message}`);
  }
  return result;
}

function remove(records, req) {
  if (!req.finalizing) return new Result(); // deletion notice: nothing left to forget
  try {
    records.remove(req.namespace, req.name);
  } catch (e) {
    return Result.retryableError(`removing the external record: ${e.message}`);
  }
  return new Result().event('Normal', 'RecordRemoved', 'external record removed');
}

/** Declares the webapp controller on `plugin`. */
function addController(plugin, records = new RecordStore()) {
  return plugin.controller('webapp')
    .for(GROUP, VERSION, KIND)
    .owns('apps', 'v1', 'Deployment')
    .owns('', 'v1', 'Service')
    .owns('', 'v1', 'ConfigMap')
    .finalizer(FINALIZER)
    .maxConcurrent(4)
    .reconcile(handlers({
      upsert: (req) => upsert(records, req),
      delete: (req) => remove(records, req),
    }));
}

module.exports = { addController, RecordStore, stableHash, parseSpec, FINALIZER };
