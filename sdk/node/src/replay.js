// @ts-check
'use strict';
// Comparing a controller's new answers with recorded ones (testing.replay).
//
// Both answers, the recorded ReconcileResponse and the new one (object form), become one JSON
// document each (`normalize`), compared as JSON values: key order, the order of desired objects
// and 1 vs 1.0 do not count, nor does an error's message (it often carries details such as
// timestamps). Before that, the new answer gets the redaction the host applied to the recorded
// one, unless the recording holds Secret data (`redactResponse`). The rules are the same in
// every SDK and in `ctrlhost replay` (docs/recording.md).

const crypto = require('node:crypto');

const CONDITION_STATUS = { CONDITION_STATUS_TRUE: 'True', CONDITION_STATUS_FALSE: 'False',
  CONDITION_STATUS_UNKNOWN: 'Unknown' };
const EVENT_TYPE = { EVENT_TYPE_NORMAL: 'Normal', EVENT_TYPE_WARNING: 'Warning' };
const ERROR_KIND = { ERROR_KIND_RETRYABLE: 'retryable', ERROR_KIND_TERMINAL: 'terminal' };
const PATCH_TARGET = { PATCH_TARGET_PRIMARY: 'primary', PATCH_TARGET_PRIMARY_STATUS: 'status',
  PATCH_TARGET_OWNED: 'owned' };
const PATCH_TYPE = { PATCH_TYPE_JSON_PATCH: 'json', PATCH_TYPE_MERGE_PATCH: 'merge' };
/** The members of a normalized answer, in the order a difference names them. */
const MEMBERS = ['desired', 'patches', 'status', 'conditions', 'events', 'requeueAfter', 'error',
  'finalized'];

/**
 * What the host records instead of a Secret's value: "sha256:" and the lowercase hex SHA-256 of
 * a string's UTF-8 bytes; "redacted" for a value that is not a string. A value that is a digest
 * already is kept: a controller that copies a Secret's value from a replayed call (which carries
 * digests) answers as it did when recorded.
 * @param {any} value
 */
function secretDigest(value) {
  if (typeof value !== 'string') return 'redacted';
  if (/^sha256:[0-9a-f]{64}$/.test(value)) return value;
  return `sha256:${crypto.createHash('sha256').update(value, 'utf8').digest('hex')}`;
}

/** @param {any} v */
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** @param {any} values */
function redactValues(values) {
  if (!isObject(values)) return;
  for (const key of Object.keys(values)) values[key] = secretDigest(values[key]);
}

/** @param {any} obj */
function redactMembers(obj) {
  for (const member of ['data', 'stringData']) {
    if (member in obj) redactValues(obj[member]);
  }
}

/**
 * The text of a bytes field (a Buffer, or a string).
 * @param {any} bytes
 */
function textOf(bytes) {
  if (bytes === undefined || bytes === null) return '';
  return typeof bytes === 'string' ? bytes : Buffer.from(bytes).toString('utf8');
}

/**
 * The JSON value of `text`; undefined when it is not JSON.
 * @param {string} text
 */
function parse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Compact, keys sorted: the bytes the host writes for a redacted object, mostly.
 * @param {any} value
 */
const dump = (value) => Buffer.from(JSON.stringify(sortKeys(value)), 'utf8');

/** @param {any} raw */
function redactObject(raw) {
  const obj = parse(textOf(raw));
  if (!isObject(obj) || obj.apiVersion !== 'v1' || obj.kind !== 'Secret') return raw;
  redactMembers(obj);
  return dump(obj);
}

/** @param {any} op */
function redactJsonPatchOp(op) {
  if (!isObject(op) || typeof op.path !== 'string' || !('value' in op)) return;
  if (op.path === '/data' || op.path === '/stringData') {
    redactValues(op.value);
  } else if (op.path.startsWith('/data/') || op.path.startsWith('/stringData/')) {
    op.value = secretDigest(op.value);
  }
}

/** @param {any} patch */
function redactPatch(patch) {
  const body = parse(textOf(patch.patch));
  if (patch.type === 'PATCH_TYPE_MERGE_PATCH' && isObject(body)) {
    redactMembers(body);
  } else if (patch.type === 'PATCH_TYPE_JSON_PATCH' && Array.isArray(body)) {
    body.forEach(redactJsonPatchOp);
  } else {
    return patch;
  }
  return { ...patch, patch: dump(body) };
}

/**
 * Whether the recorded controller's primary kind is the core Secret.
 * @param {any} header a RecordingHeader (object form)
 */
function primaryIsSecret(header) {
  const primary = (header.controller && header.controller.primary) || {};
  return !primary.group && primary.kind === 'Secret';
}

/**
 * A copy of `response` (object form) with the values of Secrets' data and stringData replaced
 * as the host replaces them in a recording: in desired Secrets, and in the patches of owned
 * Secrets (and of the primary when `primarySecret`).
 * @param {any} response
 * @param {boolean} primarySecret
 */
function redactResponse(response, primarySecret) {
  const secret = (p) => (p.target === 'PATCH_TARGET_OWNED'
    ? p.api_version === 'v1' && p.kind === 'Secret'
    : p.target === 'PATCH_TARGET_PRIMARY' && primarySecret);
  return {
    ...response,
    desired_objects: (response.desired_objects || []).map(redactObject),
    patches: (response.patches || []).map((p) => (secret(p) ? redactPatch(p) : p)),
  };
}

/**
 * The JSON value of a bytes field, or its text when it is not JSON.
 * @param {any} bytes
 */
function jsonOrText(bytes) {
  const text = textOf(bytes);
  const value = parse(text);
  return value === undefined ? text : value;
}

/** @param {any} v */
const str = (v) => (v === undefined || v === null ? '' : String(v));

/**
 * @param {any} obj
 * @param {number} index
 */
function desiredKey(obj, index) {
  if (!isObject(obj)) return `desired_objects[${index}]`;
  const meta = isObject(obj.metadata) ? obj.metadata : {};
  const name = meta.namespace ? `${meta.namespace}/${str(meta.name)}` : str(meta.name);
  return `${str(obj.apiVersion)} ${str(obj.kind)} ${name}`;
}

/** @param {any} d a Duration (object form) */
const seconds = (d) => Number(d.seconds || 0) + (d.nanos || 0) / 1e9;

/** @param {any} p */
function normalizePatch(p) {
  const out = { target: PATCH_TARGET[p.target] || p.target, apiVersion: p.api_version,
    kind: p.kind, name: p.name, type: PATCH_TYPE[p.type] || p.type, body: jsonOrText(p.patch),
    resourceVersion: p.resource_version };
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== '' && v !== undefined));
}

/** @param {any} e */
function normalizeError(e) {
  /** @type {Record<string, any>} */
  const out = { kind: ERROR_KIND[e.kind] || e.kind };
  if (e.reason) out.reason = e.reason;
  if (e.retry_after) out.retryAfter = seconds(e.retry_after);
  return out;
}

/**
 * The answer (a ReconcileResponse, object form) as the JSON document replay compares; empty
 * members are left out.
 * @param {any} response
 * @returns {Record<string, any>}
 */
function normalize(response) {
  /** @type {Record<string, any>} */
  const desired = {};
  (response.desired_objects || []).forEach((raw, i) => {
    const obj = jsonOrText(raw);
    let key = desiredKey(obj, i);
    while (key in desired) key += ' (again)'; // the same object twice: both count
    desired[key] = obj;
  });
  const status = textOf(response.status);
  const doc = {
    desired,
    patches: (response.patches || []).map(normalizePatch),
    status: status ? jsonOrText(status) : null,
    conditions: Object.fromEntries((response.conditions || []).map((c) => [c.type, {
      status: CONDITION_STATUS[c.status] || c.status, reason: c.reason || '',
      message: c.message || '' }])),
    events: (response.events || []).map((e) => ({ type: EVENT_TYPE[e.type] || e.type,
      reason: e.reason || '', message: e.message || '' })),
    requeueAfter: response.requeue_after ? seconds(response.requeue_after) : null,
    error: response.error ? normalizeError(response.error) : null,
    finalized: response.finalized ? true : null,
  };
  return Object.fromEntries(Object.entries(doc).filter(([, v]) => v !== null &&
    !(Array.isArray(v) && v.length === 0) && !(isObject(v) && Object.keys(v).length === 0)));
}

/**
 * Equality of JSON values (1 and 1.0 are one number in JavaScript anyway; key order does not
 * count).
 * @param {any} a
 * @param {any} b
 * @returns {boolean}
 */
function jsonEqual(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length &&
      a.every((x, i) => jsonEqual(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length &&
      keys.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual(a[k], b[k]));
  }
  return a === b;
}

/**
 * @param {string} path
 * @param {string | number} key
 */
const pointer = (path, key) => `${path}/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`;

/**
 * An RFC 6902 JSON patch that turns `before` into `after` (ops "add", "remove", "replace"),
 * descending into objects and arrays so that each op is small.
 * @param {any} before
 * @param {any} after
 * @param {string} [path]
 * @returns {{op: string, path: string, value?: any}[]}
 */
function jsonDiff(before, after, path = '') {
  if (jsonEqual(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    /** @type {{op: string, path: string, value?: any}[]} */
    const ops = Object.keys(before).filter((k) => !(k in after))
      .map((k) => ({ op: 'remove', path: pointer(path, k) }));
    for (const k of Object.keys(after)) {
      if (k in before) ops.push(...jsonDiff(before[k], after[k], pointer(path, k)));
      else ops.push({ op: 'add', path: pointer(path, k), value: after[k] });
    }
    return ops;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const common = Math.min(before.length, after.length);
    /** @type {{op: string, path: string, value?: any}[]} */
    const ops = [];
    for (let i = 0; i < common; i++) ops.push(...jsonDiff(before[i], after[i], pointer(path, i)));
    for (let i = before.length - 1; i >= common; i--) {
      ops.push({ op: 'remove', path: pointer(path, i) });
    }
    for (let i = common; i < after.length; i++) {
      ops.push({ op: 'add', path: pointer(path, i), value: after[i] });
    }
    return ops;
  }
  return [{ op: 'replace', path, value: after }];
}

/**
 * @param {any} doc
 * @param {string} ptr
 */
function resolve(doc, ptr) {
  for (const token of ptr.split('/').slice(1)) {
    doc = doc[token.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return doc;
}

/** @param {any} value */
function show(value, limit = 300) {
  const text = JSON.stringify(sortKeys(value));
  return text.length <= limit ? text : `${text.slice(0, limit)}...`;
}

/** @param {any} value */
function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isObject(value)) return value;
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sortKeys(value[k])]));
}

/**
 * A recorded answer that the new one does not match. `recorded` and `replayed` hold the
 * differing members of the two normalized answers (a member absent from one is empty there);
 * `patch` is the JSON patch (RFC 6902) that turns `recorded` into `replayed`.
 */
class ReplayDifference {
  /**
   * @param {string} file
   * @param {number} offset
   * @param {number} sequence
   * @param {string} key
   * @param {Record<string, any>} recorded
   * @param {Record<string, any>} replayed
   */
  constructor(file, offset, sequence, key, recorded, replayed) {
    this.file = file;
    this.offset = offset;
    this.sequence = sequence;
    this.key = key;
    /** @type {string[]} */
    this.members = MEMBERS.filter((m) => !jsonEqual(recorded[m], replayed[m]));
    /** @type {Record<string, any>} */
    this.recorded = Object.fromEntries(this.members.filter((m) => m in recorded)
      .map((m) => [m, recorded[m]]));
    /** @type {Record<string, any>} */
    this.replayed = Object.fromEntries(this.members.filter((m) => m in replayed)
      .map((m) => [m, replayed[m]]));
    this.patch = jsonDiff(this.recorded, this.replayed);
  }

  toString() {
    const lines = [`${this.file}: record at offset ${this.offset} (sequence ${this.sequence}) ` +
      `${this.key}: ${this.members.join(', ')} differ`];
    for (const op of this.patch) {
      const was = op.op === 'add' ? '' : show(resolve(this.recorded, op.path));
      if (op.op === 'add') lines.push(`    + ${op.path}: ${show(op.value)}`);
      else if (op.op === 'remove') lines.push(`    - ${op.path}: ${was}`);
      else lines.push(`    ~ ${op.path}: ${was} -> ${show(op.value)}`);
    }
    return lines.join('\n');
  }
}

/**
 * The difference between a record's answer and the new `answer` (already redacted as the
 * recording is); null when they are the same.
 * @param {string} file
 * @param {number} offset
 * @param {any} record a ReconcileRecord (object form)
 * @param {any} answer a ReconcileResponse (object form)
 * @returns {ReplayDifference | null}
 */
function compare(file, offset, record, answer) {
  const recorded = normalize(record.response);
  const replayed = normalize(answer);
  if (jsonEqual(recorded, replayed)) return null;
  const call = record.call || {};
  const key = call.namespace ? `${call.namespace}/${call.name}` : str(call.name);
  return new ReplayDifference(file, offset, Number(record.sequence), key, recorded, replayed);
}

/**
 * What a replay found: the answers `compared` (`same` + `different`), the records `skipped`
 * (no recorded answer: the dispatch failed), the `differences` in record order, the `files`
 * read and the files `updated` (rewritten with the new answers).
 */
class ReplayResult {
  /** @param {string[]} files */
  constructor(files) {
    this.files = [...files];
    this.compared = 0;
    this.same = 0;
    this.different = 0;
    this.skipped = 0;
    /** @type {ReplayDifference[]} */
    this.differences = [];
    /** @type {string[]} */
    this.updated = [];
  }

  /** @param {ReplayDifference | null} difference */
  add(difference) {
    this.compared++;
    if (difference === null) {
      this.same++;
    } else {
      this.different++;
      this.differences.push(difference);
    }
  }

  summary() {
    return `${this.different} of ${this.compared} replayed answers differ (${this.same} same, ` +
      `${this.skipped} skipped, ${this.files.length} files)`;
  }

  /** The summary, then the first `limit` differences. */
  report(limit = 20) {
    const parts = [this.summary(), ...this.differences.slice(0, limit).map(String)];
    if (this.differences.length > limit) {
      parts.push(`... and ${this.differences.length - limit} more`);
    }
    return parts.join('\n');
  }

  toString() {
    return this.report();
  }
}

module.exports = {
  secretDigest, redactResponse, primaryIsSecret, normalize, jsonEqual, jsonDiff, compare,
  ReplayDifference, ReplayResult, MEMBERS,
};
