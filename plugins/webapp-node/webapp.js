'use strict';
// The WebApp controller on the Node SDK: the same behaviour as plugins/webapp/webapp.cc (same
// CRD, children, status, conditions, events, finalizer and external record) on the same inputs.

const fs = require('node:fs');
const path = require('node:path');
const sdk = require('../../sdk/node/src');

const { Result, findPath, handlers } = sdk;

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

function isDnsName(s) {
  return typeof s === 'string' && s.length > 0 && s.length <= 253 &&
    /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(s);
}

// The pod template annotation holding configHash(spec.config).
const CONFIG_HASH_ANNOTATION = 'apps.ctrlhost.dev/config-hash';

// The children, from the SDK's builders: the same objects as the C++ and Python plugins.
function desireChildren(req, spec, result) {
  const name = req.name;
  const configName = `${name}-config`;
  const labels = sdk.commonLabels('webapp', name);
  const selector = sdk.selectorLabels('webapp', name);
  result.desire(sdk.buildConfigMap({ name: configName, labels, data: spec.config }));

  const env = Object.entries(spec.env).map(([k, v]) => ({ name: k, value: v }));
  const container = {
    envFrom: [{ configMapRef: { name: configName } }],
    image: spec.image,
    name: 'web',
    ports: [{ containerPort: spec.port, name: 'http' }],
  };
  if (env.length > 0) container.env = env;
  // The configuration's hash on the pod template: pods restart when (only when) it changes.
  result.desire(sdk.buildDeployment({
    name, labels, selector, replicas: spec.replicas, containers: [container],
    podAnnotations: { [CONFIG_HASH_ANNOTATION]: sdk.configHash(spec.config) },
  }));
  result.desire(sdk.buildService({
    name,
    labels,
    selector,
    ports: [sdk.servicePort({ port: spec.port, name: 'http', targetPort: 'http' })],
  }));
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

module.exports = { addController, RecordStore, parseSpec, FINALIZER };
