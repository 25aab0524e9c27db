'use strict';
// The VersionedApp controller (ref.ctrlhost.dev/v1alpha1) on the Node SDK: the port of the C++
// reference plugin (plugins/versioned-app/versioned_app.cc; its header and README describe the
// behaviour), with the same children, status, events and errors on the same inputs (checked by
// e2e/host/versioned_app_e2e_test.py against one golden file). Resource sets by spec.version
// major (v1, v2), a DependentChain whose ConfigMap step cancels the pass while the object is on
// hold, stage callbacks on the Deployment (pre-update refuses a downgrade, post-create records
// an event), the standard operator status, a background task polling the hold file, the
// resource builders.
//
// Node runs reconciles and the task on one event loop; a reconcile shares only constants.

const fs = require('node:fs');
const sdk = require('../../sdk/node/src');

const {
  DependentChain, ResourceRouter, Result, StageCallbacks, TerminalError, findPath,
} = sdk;

const GROUP = 'ref.ctrlhost.dev';
const VERSION = 'v1alpha1';
const KIND = 'VersionedApp';
const OPERATOR_VERSION = '1.0.0';
const HOLD_FILE_ENV = 'VERSIONED_APP_HOLD_FILE';
const APP = 'versioned-app';
const VERSION_LABEL = 'app.kubernetes.io/version';
const DEFAULT_IMAGE = 'registry.example/app';
const METRICS_PORT = 9090;
const DNS_PART = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/;
const NUMBER = /^[0-9]{1,9}$/;

class SpecError extends Error {}

/** [major, minor, patch] of "MAJOR.MINOR.PATCH"; SpecError otherwise. */
function parseSemVer(text) {
  const parts = text.split('.');
  if (parts.length !== 3 || !parts.every((p) => NUMBER.test(p))) {
    throw new SpecError(`spec.version "${text}" is not MAJOR.MINOR.PATCH`);
  }
  return parts.map((p) => Number(p));
}

function lessThan(a, b) {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i] < b[i];
  return false;
}

function parseSpec(spec) {
  if (typeof spec.version !== 'string') {
    throw new SpecError('spec.version is required (MAJOR.MINOR.PATCH)');
  }
  const semver = parseSemVer(spec.version);
  let image = DEFAULT_IMAGE;
  if (spec.image !== undefined && spec.image !== null) {
    if (typeof spec.image !== 'string' || spec.image === '') {
      throw new SpecError('spec.image must be a non-empty string');
    }
    image = spec.image;
  }
  let replicas = 1;
  if (spec.replicas !== undefined && spec.replicas !== null) {
    if (!Number.isInteger(spec.replicas) || spec.replicas < 0 || spec.replicas > 100) {
      throw new SpecError('spec.replicas must be an integer from 0 to 100');
    }
    replicas = spec.replicas;
  }
  let config = {};
  if (spec.config !== undefined && spec.config !== null) {
    if (typeof spec.config !== 'object' || Array.isArray(spec.config)) {
      throw new SpecError('spec.config must be a map of strings');
    }
    for (const [k, v] of Object.entries(spec.config)) {
      if (typeof v !== 'string') throw new SpecError(`spec.config.${k} must be a string`);
    }
    config = spec.config;
  }
  return { version: spec.version, semver, image, replicas, config };
}

const isDnsPart = (s, limit) => s.length > 0 && s.length <= limit && DNS_PART.test(s);

/** { keys: Set, malformed: [] } of the hold file; a missing file holds nothing. Throws an Error
 * naming the path when it cannot be read. */
function readHoldFile(path) {
  const keys = new Set();
  const malformed = [];
  let text;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (e) {
    if (e.code === 'ENOENT') return { keys, malformed };
    throw new Error(`hold file ${path}: ${e.message}`);
  }
  for (const line of text.split(/\r?\n/)) {
    const t = line.trim();
    if (t === '' || t.startsWith('#')) continue;
    const parts = t.split('/');
    if (parts.length === 2 && isDnsPart(parts[0], 63) && isDnsPart(parts[1], 253)) {
      keys.add(t);
    } else {
      malformed.push(t);
    }
  }
  return { keys, malformed };
}

function majorOf(req) {
  if (typeof req.spec.version !== 'string') return -1;
  try {
    return parseSemVer(req.spec.version)[0];
  } catch (e) {
    return -1;
  }
}

function versionLabelOf(obj) {
  const labels = obj ? findPath(obj, 'metadata.labels') : undefined;
  const v = labels && typeof labels === 'object' ? labels[VERSION_LABEL] : undefined;
  return typeof v === 'string' ? v : '';
}

function invalidSpec(req, message) {
  const result = Result.terminalError(message);
  result.event('Warning', 'InvalidSpec', message);
  sdk.setOperatorStatus(req, result, { operatorVersion: OPERATOR_VERSION, failure: message,
    failureReason: 'InvalidSpec' });
  return result;
}

function deploymentCallbacks(notes, set) {
  return new StageCallbacks()
    .on('apps/v1', 'Deployment', 'pre-update', 'refuse-downgrade', (r, s, desired, current) => {
      const from = versionLabelOf(current);
      const to = versionLabelOf(desired);
      let older;
      try {
        older = lessThan(parseSemVer(to), parseSemVer(from));
      } catch (e) {
        return;
      }
      if (!older) return;
      notes.refused = `downgrade from ${from} to ${to} refused`;
      throw new TerminalError(notes.refused);
    })
    .on('apps/v1', 'Deployment', 'post-create', 'record-created', (r, s, desired) => {
      notes.created.push(`Deployment ${desired.metadata.name || ''} created at ` +
        `${versionLabelOf(desired)} by resource set ${set}`);
    });
}

function reconcile(holdFile, req, context) {
  if (!req.exists || req.deleting) return new Result();  // children go by owner reference
  const set = context.set || '';
  let spec;
  try {
    spec = parseSpec(req.spec);
  } catch (e) {
    if (e instanceof SpecError) return invalidSpec(req, e.message);
    throw e;
  }
  if (set === 'v1' && spec.semver[0] !== 1) {
    return invalidSpec(req, `spec.version ${spec.version}: major version ${spec.semver[0]} ` +
      'is not served (1 or 2)');
  }
  let held = false;
  if (holdFile) {
    try {
      held = readHoldFile(holdFile).keys.has(`${req.namespace}/${req.name}`);
    } catch (e) {
      return Result.retryableError(e.message);
    }
  }

  const name = req.name;
  const configName = `${name}-config`;
  const labels = sdk.commonLabels(APP, name);
  // Only the Deployment carries the version: the downgrade check and readiness read it.
  const versionedLabels = { ...labels, [VERSION_LABEL]: spec.version };
  const selector = sdk.selectorLabels(APP, name);
  const metricsPort = context.metricsPort || 0;
  const v2 = set === 'v2';
  const notes = { created: [], refused: '' };

  const chain = new DependentChain().withCallbacks(deploymentCallbacks(notes, set));
  chain.add({ name: 'config', apiVersion: 'v1', kind: 'ConfigMap',
    desired: () => sdk.buildConfigMap({ name: configName, labels, data: spec.config }),
    // The precondition: an object on hold keeps its Deployment and Service as they are.
    onPass: (r, desired, current, ctx) => {
      if (held) ctx.cancelPass('on hold in the hold file');
    } });
  if (v2) {
    chain.add({ name: 'service-account', apiVersion: 'v1', kind: 'ServiceAccount',
      desired: () => sdk.buildServiceAccount({ name, labels }) });
  }
  chain.add({ name: 'deployment', apiVersion: 'apps/v1', kind: 'Deployment',
    desired: () => {
      const ports = [{ name: 'http', containerPort: 8080 }];
      if (metricsPort > 0) ports.push({ name: 'metrics', containerPort: metricsPort });
      const container = { name: 'app', image: `${spec.image}:${spec.version}`, ports,
        envFrom: [{ configMapRef: { name: configName } }] };
      return sdk.buildDeployment({ name, labels: versionedLabels, selector,
        replicas: spec.replicas, containers: [container],
        podAnnotations: { [sdk.CONFIG_HASH_ANNOTATION]: sdk.configHash(spec.config) },
        podSpec: v2 ? { serviceAccountName: name } : undefined });
    },
    // Ready once it runs the target version (the test servers run no pods).
    ready: (current) => versionLabelOf(current) === spec.version });
  chain.add({ name: 'service', apiVersion: 'v1', kind: 'Service',
    desired: () => {
      const ports = [sdk.servicePort({ port: 80, name: 'http', targetPort: 'http' })];
      if (metricsPort > 0) {
        ports.push(sdk.servicePort({ port: metricsPort, name: 'metrics', targetPort: 'metrics' }));
      }
      return sdk.buildService({ name, labels, selector, ports });
    } });

  return chain.build((r, state, result) => {
    for (const message of notes.created) result.event('Normal', 'DeploymentCreated', message);
    const failed = result.error !== null && result.error.kind === 'terminal';
    if (notes.refused) result.event('Warning', 'DowngradeRefused', notes.refused);
    // A failed step leaves the chain not ready (state.failedAt), as in every SDK.
    const ready = state.allReady;
    let message = '';
    if (result.error !== null) message = '';
    else if (held) message = 'on hold: listed in the hold file';
    else if (!ready) message = `waiting for ${state.pending.join(', ')}`;
    result.status().resourceSet = set;
    sdk.setOperatorStatus(r, result, { operatorVersion: OPERATOR_VERSION,
      targetVersion: spec.version, childrenReady: ready, message,
      failure: failed ? result.error.message : '',
      failureReason: notes.refused ? 'DowngradeRefused' : 'ReconcileFailed' });
  })(req);
}

/** Enqueues every object whose hold state changed (all listed ones on the first read), once a
 * second until stopped; problems with the file are logged once each. */
async function pollHoldFile(path, ctx) {
  let previous = new Set();
  let lastProblem = '';
  do {
    if (!path) continue;
    let holds = null;
    let problem = '';
    try {
      holds = readHoldFile(path);
      if (holds.malformed.length > 0) {
        problem = `hold file ${path}: not namespace/name, ignored: ${holds.malformed.join(', ')}`;
      }
    } catch (e) {
      problem = e.message;
    }
    if (problem && problem !== lastProblem) {
      process.stderr.write(`WARNING versioned-app: ${problem}\n`);
    }
    lastProblem = problem;
    if (holds === null) continue;
    const changed = [...holds.keys].filter((k) => !previous.has(k)).sort()
      .concat([...previous].filter((k) => !holds.keys.has(k)).sort());
    for (const key of changed) {
      const slash = key.indexOf('/');
      try {
        ctx.enqueue(key.slice(0, slash), key.slice(slash + 1));
      } catch (e) {
        process.stderr.write(`WARNING versioned-app: enqueue ${key}: ${e.message}\n`);
      }
    }
    previous = holds.keys;
  } while (!(await ctx.wait(1000)));
}

/** Adds the controller "versioned-app" to `plugin`; `holdFile` may be empty (nothing is ever
 * on hold). */
function addController(plugin, holdFile) {
  const router = new ResourceRouter()
    .add('v1', { handles: (r) => majorOf(r) !== 2, reconcile: (r, c) => reconcile(holdFile, r, c),
      initContext: () => ({ set: 'v1' }) })
    .add('v2', { handles: (r) => majorOf(r) === 2, reconcile: (r, c) => reconcile(holdFile, r, c),
      initContext: () => ({ set: 'v2', metricsPort: METRICS_PORT }) });
  return plugin.controller('versioned-app')
    .for(GROUP, VERSION, KIND)
    .owns('apps', 'v1', 'Deployment')
    .owns('', 'v1', 'Service')
    .owns('', 'v1', 'ConfigMap')
    .owns('', 'v1', 'ServiceAccount')
    .maxConcurrent(4)
    .reconcile((req) => router.route(req))
    .backgroundTask('hold-file', (ctx) => pollHoldFile(holdFile, ctx));
}

module.exports = { addController, parseSemVer, readHoldFile, OPERATOR_VERSION, HOLD_FILE_ENV };
