// @ts-check
'use strict';
// Result: what a reconcile wants, turned into a ReconcileResponse by toResponse(), which checks
// it the way the host will (so a mistake is a clear error from the SDK, not a refusal later).
//
//   const result = new Result();
//   const cm = result.desire(newObject('v1', 'ConfigMap', `${req.name}-config`));
//   cm.data = { greeting: 'hello' };
//   result.status().observedGeneration = req.generation;
//   result.setCondition('Ready', true, 'AllReplicasReady', '2/2 replicas ready');
//   result.event('Normal', 'Created', 'children created');
//   result.requeueAfter(30_000);
//   return result;
//
// The error contract (controller-runtime's): a retryable error is retried with backoff; a
// terminal error is not retried until the object changes; requeueAfter reconciles again later
// even on success. finalized releases the finalizer and is only valid while finalizing.

const { isObject, findPath } = require('./request');

/** Thrown by toResponse for a result the host would refuse. */
class ResultError extends Error {}

/** The reason of the terminal error answered instead of a response above the message limit. */
const RESPONSE_TOO_LARGE = 'ResponseTooLarge';
const MAX_ERROR_REASON = 128;

/**
 * Checks an error's reason and retryAfterMs as the host does; throws ResultError naming the
 * problem. reason: '' or CamelCase (<= 128); retryAfterMs: undefined/null, or a finite number
 * >= 0, retryable errors only.
 */
function checkError(kind, reason, retryAfterMs) {
  if (reason !== undefined && reason !== '' &&
      !(typeof reason === 'string' && reason.length <= MAX_ERROR_REASON &&
        /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/.test(reason))) {
    throw new ResultError(`error reason "${reason}" must be CamelCase: ` +
      `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most ${MAX_ERROR_REASON} characters`);
  }
  if (retryAfterMs === undefined || retryAfterMs === null) return;
  if (kind === 'terminal') throw new ResultError('retryAfterMs is only allowed on a retryable error');
  if (typeof retryAfterMs !== 'number' || !Number.isFinite(retryAfterMs) || retryAfterMs < 0) {
    throw new ResultError(`retryAfterMs must be a finite number >= 0, not ${retryAfterMs}`);
  }
}

/** The wire Error; the caller checked the values. */
function wireError(kind, message, reason, retryAfterMs) {
  const error = {
    message: String(message),
    kind: kind === 'terminal' ? 'ERROR_KIND_TERMINAL' : 'ERROR_KIND_RETRYABLE',
  };
  if (reason) error.reason = reason;
  if (retryAfterMs !== undefined && retryAfterMs !== null) {
    error.retry_after = msToDuration(retryAfterMs);
  }
  return error;
}

/**
 * Throw it from a reconcile function (or a chain's desired function) for a terminal error answer:
 * retrying cannot help until the object changes. Any other exception is a retryable error.
 * options.reason: a CamelCase machine-readable reason (the host's event and condition reason).
 */
class TerminalError extends Error {
  constructor(message, options = {}) {
    super(message);
    checkError('terminal', options.reason, options.retryAfterMs);
    this.reason = options.reason || '';
  }
}

/**
 * Throw it for a retryable error that says why and when to retry:
 *   throw new RetryableError('bucket quota used up', { reason: 'QuotaExceeded', retryAfterMs: 30000 });
 * The host retries no sooner than retryAfterMs (capped at its maximum backoff).
 */
class RetryableError extends Error {
  constructor(message, options = {}) {
    super(message);
    checkError('retryable', options.reason, options.retryAfterMs);
    this.reason = options.reason || '';
    this.retryAfterMs = options.retryAfterMs === undefined ? null : options.retryAfterMs;
  }
}

/** The same kind, reason and retry-after as `e` (a thrown error) with another message. */
function rethrowable(e, message) {
  if (e instanceof TerminalError) return new TerminalError(message, { reason: e.reason });
  if (e instanceof RetryableError) {
    return new RetryableError(message, { reason: e.reason, retryAfterMs: e.retryAfterMs });
  }
  return new Error(message);
}

/** { apiVersion, kind, metadata: { name } } (name omitted when empty). */
function newObject(apiVersion, kind, name = '') {
  const obj = { apiVersion, kind, metadata: {} };
  if (name) obj.metadata.name = name;
  return obj;
}

/** Composes RFC 7386 merge patch `patch` into `base` in place; returns the composed value. */
function composeMergePatch(base, patch) {
  if (!isObject(patch) || !isObject(base)) return patch;
  for (const [k, v] of Object.entries(patch)) {
    base[k] = isObject(base[k]) && isObject(v) ? composeMergePatch(base[k], v) : v;
  }
  return base;
}

// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (metav1.Condition reason).
function validConditionReason(reason) {
  return typeof reason === 'string' && reason.length <= 1024 &&
    /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/.test(reason);
}

const CONDITION_STATUS = {
  true: 'CONDITION_STATUS_TRUE',
  True: 'CONDITION_STATUS_TRUE',
  false: 'CONDITION_STATUS_FALSE',
  False: 'CONDITION_STATUS_FALSE',
  Unknown: 'CONDITION_STATUS_UNKNOWN',
};
const EVENT_TYPE = { Normal: 'EVENT_TYPE_NORMAL', Warning: 'EVENT_TYPE_WARNING' };
const PATCH_TYPE = { json: 'PATCH_TYPE_JSON_PATCH', merge: 'PATCH_TYPE_MERGE_PATCH' };

function msToDuration(ms) {
  const seconds = Math.floor(ms / 1000);
  return { seconds: String(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

function encode(json) {
  return Buffer.from(JSON.stringify(json), 'utf8');
}

// The API group of an apiVersion ('' for 'v1').
function groupOf(apiVersion) {
  if (typeof apiVersion !== 'string') return '';
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

// Whether obj is of the primary's kind (group and kind; any version): the primary itself, or a
// child that the controller's own watch (and label selector) would see as a primary too.
function isOfPrimaryKind(request, obj) {
  return obj.kind === request.kind && groupOf(obj.apiVersion) === groupOf(request.apiVersion);
}

class Result {
  constructor() {
    this.desired = [];
    this._status = null;
    this.conditions = [];
    this.events = [];
    this.patches = [];
    this._requeueAfterMs = null;
    this.error = null;
    this.isFinalized = false;
  }

  /**
   * @param {string} message
   * @param {import('./index').ErrorOptions} [options]
   */
  static retryableError(message, options) {
    return new Result().setError('retryable', message, options);
  }
  /**
   * @param {string} message
   * @param {{reason?: string}} [options]
   */
  static terminalError(message, options) {
    return new Result().setError('terminal', message, options);
  }
  static finalized() { return new Result().setFinalized(); }
  /** @param {number} ms */
  static requeue(ms) { return new Result().requeueAfter(ms); }

  /**
   * Wants `object` to exist (apply semantics). Returns the object to fill in. Defaults added by
   * toResponse: metadata.name (the primary's), metadata.namespace (the primary's) and, for a
   * child of another kind than the primary's, the primary's labels when the object has none (a
   * child of the primary's own kind with them would match the controller's label selector and
   * be reconciled as a primary too).
   */
  /**
   * @template {import('./index').JsonObject} T
   * @param {T} object
   * @returns {T}
   */
  desire(object) {
    this.desired.push(object);
    return object;
  }

  /** The status merge patch, created on first use; mutate it. */
  status() {
    if (!isObject(this._status)) this._status = {};
    return this._status;
  }

  /** @param {import('./index').JsonObject} patch */
  mergeStatus(patch) {
    this._status = composeMergePatch(this.status(), patch);
    return this;
  }

  /** status: true / false / 'True' / 'False' / 'Unknown'. One condition per type (last wins). */
  /**
   * @param {string} type
   * @param {import('./index').ConditionStatus} status
   * @param {string} reason
   * @param {string} [message]
   */
  setCondition(type, status, reason, message = '') {
    const c = { type, status, reason, message };
    const i = this.conditions.findIndex((e) => e.type === type);
    if (i >= 0) this.conditions[i] = c;
    else this.conditions.push(c);
    return this;
  }

  /** type: 'Normal' or 'Warning'. */
  /**
   * @param {import('./index').EventType} type
   * @param {string} reason
   * @param {string} [message]
   */
  event(type, reason, message = '') {
    this.events.push({ type, reason, message });
    return this;
  }

  /** type: 'json' (RFC 6902, an array) or 'merge' (RFC 7386, an object). */
  /**
   * @param {import('./index').PatchType} type
   * @param {any} patch
   * @param {string} [resourceVersion]
   */
  patchPrimary(type, patch, resourceVersion = '') {
    return this._patch('PATCH_TARGET_PRIMARY', '', '', '', type, patch, resourceVersion);
  }

  /**
   * @param {import('./index').PatchType} type
   * @param {any} patch
   * @param {string} [resourceVersion]
   */
  patchPrimaryStatus(type, patch, resourceVersion = '') {
    return this._patch('PATCH_TARGET_PRIMARY_STATUS', '', '', '', type, patch, resourceVersion);
  }

  /**
   * @param {string} apiVersion
   * @param {string} kind
   * @param {string} name
   * @param {import('./index').PatchType} type
   * @param {any} patch
   * @param {string} [resourceVersion]
   */
  patchOwned(apiVersion, kind, name, type, patch, resourceVersion = '') {
    return this._patch('PATCH_TARGET_OWNED', apiVersion, kind, name, type, patch, resourceVersion);
  }

  _patch(target, apiVersion, kind, name, type, patch, resourceVersion) {
    this.patches.push({ target, apiVersion, kind, name, type, patch, resourceVersion });
    return this;
  }

  /** Reconcile again after `ms` milliseconds. */
  /** @param {number} ms */
  requeueAfter(ms) {
    this._requeueAfterMs = ms;
    return this;
  }

  get requeueAfterMs() { return this._requeueAfterMs; }
  get statusPatch() { return this._status; }

  /**
   * kind: 'retryable' or 'terminal'. options: { reason (CamelCase), retryAfterMs (retryable
   * only) }; invalid values throw ResultError.
   */
  /**
   * @param {import('./index').ErrorKind} kind
   * @param {string} message
   * @param {import('./index').ErrorOptions} [options]
   */
  setError(kind, message, options = {}) {
    checkError(kind, options.reason, options.retryAfterMs);
    this.error = { kind, message: String(message) };
    // Only when given, so that error stays { kind, message } for errors without them.
    if (options.reason) this.error.reason = options.reason;
    if (options.retryAfterMs !== undefined && options.retryAfterMs !== null) {
      this.error.retryAfterMs = options.retryAfterMs;
    }
    return this;
  }

  /** Releases the finalizer (only while finalizing). */
  setFinalized() {
    this.isFinalized = true;
    return this;
  }

  /** Folds `other` in: lists append, status composes, the earliest requeue and first error win. */
  /** @param {Result} other */
  merge(other) {
    this.desired.push(...other.desired);
    if (other._status !== null) this.mergeStatus(other._status);
    for (const c of other.conditions) this.setCondition(c.type, c.status, c.reason, c.message);
    this.events.push(...other.events);
    this.patches.push(...other.patches);
    if (other._requeueAfterMs !== null &&
        (this._requeueAfterMs === null || other._requeueAfterMs < this._requeueAfterMs)) {
      this._requeueAfterMs = other._requeueAfterMs;
    }
    if (this.error === null) this.error = other.error;
    this.isFinalized = this.isFinalized && other.isFinalized;
    return this;
  }

  /**
   * The ReconcileResponse (proto-loader object form) for `request`. `capabilities` is the Set of
   * capabilities in effect. Throws ResultError for a result the host would refuse.
   */
  /**
   * @param {import('./index').Request} request
   * @param {string} requestId
   * @param {Set<string>} capabilities
   */
  toResponse(request, requestId, capabilities) {
    const fail = (msg) => { throw new ResultError(msg); };
    const need = (cap, what) => {
      if (!capabilities.has(cap)) fail(`${what} needs ${cap}, which the host did not offer`);
    };
    if (!request.exists && (this.desired.length > 0 || this._status !== null ||
        this.conditions.length > 0 || this.patches.length > 0 || this.isFinalized)) {
      fail('the primary is gone: only events, an error and requeue_after may be answered');
    }
    if (this.isFinalized && !request.finalizing) {
      fail('finalized answered to a request that is not finalizing');
    }
    if (this.isFinalized && this.error !== null) fail('finalized together with an error');
    if (this._requeueAfterMs !== null &&
        !(typeof this._requeueAfterMs === 'number' && this._requeueAfterMs >= 0 &&
          Number.isFinite(this._requeueAfterMs))) {
      fail('requeue_after must be a non-negative number of milliseconds');
    }
    const resp = {
      request_id: String(requestId),
      desired_objects: [],
      patches: [],
      conditions: [],
      events: [],
      finalized: this.isFinalized,
    };
    if (this.desired.length > 0) need('CAPABILITY_SERVER_SIDE_APPLY', 'a desired object');
    this.desired.forEach((d, i) => {
      if (!isObject(d)) fail(`desired object ${i} is not an object`);
      if (typeof d.apiVersion !== 'string' || !d.apiVersion ||
          typeof d.kind !== 'string' || !d.kind) {
        fail(`desired object ${i} needs apiVersion and kind`);
      }
      const obj = { ...d };
      if (obj.metadata === undefined || obj.metadata === null) obj.metadata = {};
      if (!isObject(obj.metadata)) fail(`desired object ${i}: metadata is not an object`);
      const meta = { ...obj.metadata };
      obj.metadata = meta;
      if (!('name' in meta)) meta.name = request.name;
      if (typeof meta.name !== 'string' || !meta.name) fail(`desired object ${i} has no name`);
      if (!('namespace' in meta) && request.namespace) meta.namespace = request.namespace;
      // The primary's labels by default, except on objects of the primary's own kind: a child
      // with them would match the label selector that selected the primary and be reconciled
      // as a primary itself. The same in every SDK.
      if (!('labels' in meta) && !isOfPrimaryKind(request, obj)) {
        const labels = request.labels;
        if (Object.keys(labels).length > 0) meta.labels = labels;
      }
      resp.desired_objects.push(encode(obj));
    });
    for (const p of this.patches) {
      if (p.type === 'json' && !Array.isArray(p.patch)) {
        fail('a JSON patch must be an array of operations');
      }
      if (p.type === 'merge' && !isObject(p.patch)) fail('a merge patch must be a JSON object');
      if (!PATCH_TYPE[p.type]) fail(`patch type "${p.type}" is not 'json' or 'merge'`);
      if (p.target === 'PATCH_TARGET_OWNED' && (!p.apiVersion || !p.kind || !p.name)) {
        fail('a patch of an owned object needs apiVersion, kind, name');
      }
      resp.patches.push({
        target: p.target,
        api_version: p.apiVersion,
        kind: p.kind,
        name: p.name,
        type: PATCH_TYPE[p.type],
        patch: encode(p.patch),
        resource_version: String(p.resourceVersion || ''),
      });
    }
    if (this._status !== null) {
      if (!isObject(this._status)) fail('status is not a JSON object');
      if (Object.keys(this._status).length > 0) resp.status = encode(this._status);
    }
    if (this.conditions.length > 0) need('CAPABILITY_CONDITIONS', 'a condition');
    for (const c of this.conditions) {
      if (!c.type) fail('a condition without type');
      if (!validConditionReason(c.reason)) {
        fail(`condition ${c.type}: reason "${c.reason}" is not CamelCase ([A-Za-z0-9_,:])`);
      }
      const status = CONDITION_STATUS[String(c.status)];
      if (!status) fail(`condition ${c.type}: status must be true, false or 'Unknown'`);
      resp.conditions.push({ type: c.type, status, reason: c.reason, message: String(c.message) });
    }
    for (const e of this.events) {
      if (!e.reason) fail('an event without reason');
      if (!EVENT_TYPE[e.type]) fail(`event ${e.reason}: type must be 'Normal' or 'Warning'`);
      resp.events.push({ type: EVENT_TYPE[e.type], reason: e.reason, message: String(e.message) });
    }
    if (this._requeueAfterMs !== null) resp.requeue_after = msToDuration(this._requeueAfterMs);
    if (this.error !== null) {
      if (this.error.kind !== 'retryable' && this.error.kind !== 'terminal') {
        fail(`error kind "${this.error.kind}" is not 'retryable' or 'terminal'`);
      }
      checkError(this.error.kind, this.error.reason, this.error.retryAfterMs);
      resp.error = wireError(this.error.kind, this.error.message, this.error.reason,
        this.error.retryAfterMs);
    }
    return resp;
  }
}

/**
 * A response carrying only an error. kind: 'retryable' or 'terminal'; options as setError
 * (checked: throws ResultError).
 */
function errorResponse(requestId, kind, message, options = {}) {
  checkError(kind, options.reason, options.retryAfterMs);
  return {
    request_id: String(requestId),
    error: wireError(kind, message, options.reason, options.retryAfterMs),
  };
}

const ALL_SDK_CAPABILITIES = Object.freeze([
  'CAPABILITY_CANCELLATION',
  'CAPABILITY_METADATA_ONLY',
  'CAPABILITY_CHILDREN',
  'CAPABILITY_RELATED_OBJECTS',
  'CAPABILITY_SERVER_SIDE_APPLY',
  'CAPABILITY_CONDITIONS',
  'CAPABILITY_SCHEDULES',
  'CAPABILITY_BACKGROUND_TASKS',
]);

module.exports = {
  Result, ResultError, TerminalError, RetryableError, rethrowable, RESPONSE_TOO_LARGE, newObject, composeMergePatch, errorResponse, ALL_SDK_CAPABILITIES,
};
