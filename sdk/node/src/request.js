// @ts-check
'use strict';
// Request: typed, read-only accessors over one ReconcileCall. The primary, its children and its
// related objects are parsed from their raw JSON bytes once; a malformed object makes
// Request.fromCall throw (the SDK answers that as a retryable error, never crashes).
//
//   const replicas = req.spec.replicas ?? 1;
//   const dep = req.child('Deployment', req.name);
//   if (req.signal.aborted) return Result.retryableError('cancelled');

const REASONS = {
  REASON_PRIMARY_CHANGED: 'PrimaryChanged',
  REASON_PRIMARY_DELETED: 'PrimaryDeleted',
  REASON_CHILD_CHANGED: 'ChildChanged',
  REASON_RELATED_CHANGED: 'RelatedChanged',
  REASON_REQUEUE: 'Requeue',
  REASON_RETRY: 'Retry',
  REASON_RESYNC: 'Resync',
  REASON_SCHEDULE: 'Schedule',
  REASON_PLUGIN_STARTED: 'PluginStarted',
};

const EMPTY = Object.freeze({});

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The value at a dotted path ("status.readyReplicas"), or undefined. */
function findPath(obj, path) {
  let cur = obj;
  for (const part of String(path).split('.')) {
    if (!isObject(cur) || !Object.prototype.hasOwnProperty.call(cur, part)) return undefined;
    cur = cur[part];
  }
  return cur;
}

function stringAt(obj, path) {
  const v = findPath(obj, path);
  return typeof v === 'string' ? v : '';
}

/** @returns {Record<string, string>} */
function stringMap(obj) {
  /** @type {Record<string, string>} */
  const out = {};
  if (!isObject(obj)) return out;
  for (const [k, v] of Object.entries(obj)) if (typeof v === 'string') out[k] = v;
  return out;
}

function parseJsonObject(bytes, what) {
  let json;
  try {
    json = JSON.parse(Buffer.isBuffer(bytes) ? bytes.toString('utf8') : String(bytes));
  } catch {
    throw new Error(`${what}: not valid JSON`);
  }
  if (!isObject(json)) throw new Error(`${what}: not a JSON object`);
  return json;
}

function parseObjects(raws, what) {
  return (raws || []).map((raw) => ({
    apiVersion: raw.api_version || '',
    kind: raw.kind || '',
    object: parseJsonObject(raw.object, `${what} ${raw.api_version}/${raw.kind}`),
  }));
}

function ofKind(list, kind, apiVersion) {
  return list.filter((o) => o.kind === kind && (!apiVersion || o.apiVersion === apiVersion));
}

class Request {
  /**
   * Builds a Request from a ReconcileCall as proto-loader decodes it (snake_case fields, bytes as
   * Buffers). `signal` is the AbortSignal that fires on the host's CancelNotice. Throws on
   * malformed JSON.
   */
  static fromCall(call, signal) {
    const c = call || {};
    const object =
      c.object && c.object.length > 0 ? parseJsonObject(c.object, 'primary object') : null;
    return new Request(c, object, parseObjects(c.children, 'child'),
      parseObjects(c.related_objects, 'related'), signal);
  }

  constructor(call, object, children, related, signal) {
    this._call = call;
    /** The primary as parsed JSON, or null when it is gone. */
    this.object = object;
    /** Owned children: [{ apiVersion, kind, object }]. */
    this.children = children;
    /** Declared related objects: [{ apiVersion, kind, object }]. */
    this.related = related;
    /** Fires when the host cancels this request (CancelNotice); never fires otherwise. */
    this.signal = signal || new AbortController().signal;
  }

  get controller() { return this._call.controller || ''; }
  get namespace() { return this._call.namespace || ''; }
  get name() { return this._call.name || ''; }
  get uid() { return this._call.uid || ''; }
  /** The reason hint ('PrimaryChanged', ... or 'Unspecified'); level-based code ignores it. */
  get reason() { return REASONS[this._call.reason] || 'Unspecified'; }
  get attempt() { return this._call.attempt || 0; }
  get traceId() { return this._call.trace_id || ''; }
  /** Deletion requested and our finalizer present: clean up, then answer finalized. */
  get finalizing() { return Boolean(this._call.finalizing); }
  /** The host's deadline for the answer, or null. */
  get deadline() {
    const d = this._call.deadline;
    if (!d) return null;
    return new Date(Number(d.seconds) * 1000 + Math.floor((d.nanos || 0) / 1e6));
  }
  get cancelled() { return this.signal.aborted; }
  /** False when the primary is gone (its deletion completed). */
  get exists() { return this.object !== null; }
  /** metadata.deletionTimestamp is set. */
  get deleting() {
    const ts = findPath(this.object, 'metadata.deletionTimestamp');
    return ts !== undefined && ts !== null;
  }
  get apiVersion() { return stringAt(this.object, 'apiVersion'); }
  get kind() { return stringAt(this.object, 'kind'); }
  get resourceVersion() { return stringAt(this.object, 'metadata.resourceVersion'); }
  get metadata() { return this._member(this.object, 'metadata'); }
  /** The primary's spec ({} when absent or not an object). */
  get spec() { return this._member(this.object, 'spec'); }
  get status() { return this._member(this.object, 'status'); }
  get generation() {
    const g = findPath(this.object, 'metadata.generation');
    return Number.isInteger(g) ? g : 0;
  }
  /** String labels only. */
  get labels() { return stringMap(this.metadata.labels); }
  get annotations() { return stringMap(this.metadata.annotations); }
  label(key) { return this.labels[key]; }
  annotation(key) { return this.annotations[key]; }

  /** Children of a kind (and apiVersion when given): [{ apiVersion, kind, object }]. */
  childrenOfKind(kind, apiVersion = '') { return ofKind(this.children, kind, apiVersion); }
  relatedOfKind(kind, apiVersion = '') { return ofKind(this.related, kind, apiVersion); }
  /** The child object of that kind and name, or undefined. */
  child(kind, name) {
    const found = this.children.find((o) => o.kind === kind && stringAt(o.object, 'metadata.name') === name);
    return found ? found.object : undefined;
  }
  /** The related object of that kind, name (and namespace when given), or undefined. */
  relatedObject(kind, name, namespace = '') {
    const found = this.related.find(
      (o) =>
        o.kind === kind &&
        stringAt(o.object, 'metadata.name') === name &&
        (!namespace || stringAt(o.object, 'metadata.namespace') === namespace),
    );
    return found ? found.object : undefined;
  }

  _member(obj, key) {
    return isObject(obj) && isObject(obj[key]) ? obj[key] : EMPTY;
  }
}

module.exports = { Request, findPath, stringMap, parseJsonObject, isObject };
