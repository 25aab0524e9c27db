// @ts-check
'use strict';
// The offline test harness: run a controller once on fixture objects, in process, without a
// host or a socket, judged as the live host judges it.
//
//   const { testing } = require('@ctrlhost/sdk');
//   const out = await testing.reconcile(controller, webapp, { children: [deployment] });
//   assert.equal(out.error, null);
//   assert.equal(out.desiredOfKind('Service')[0].spec.ports[0].port, 8080);
//   assert.equal(out.conditions.Ready.status, 'True');
//
// The answer goes through the production path (the request serialized to a ReconcileCall,
// Plugin.handle: exceptions and invalid results become errors, the result validated). The
// reconcile is judged as the host does (host_judgement.js, the same rules and messages as the
// host and the Go, C++ and Python harnesses): children given without ownerReferences get the
// controller reference to the primary; a request the host would never send (the primary outside
// the controller's label selector or namespaces, a child of a kind it does not own or
// controlled by another object) throws HostWouldNotSend; an answer the host would refuse (a
// desired object or OWNED patch of a kind the controller does not own, a child outside the
// primary's namespace, status or conditions on a ConfigMap, desiring an `existing` object the
// primary does not control: NotControlled) sets outcome.refused, and `reconcile` rejects with
// HostWouldRefuse (the test fails). To test a refusal itself, use `run`.
//
// `replay` and `assertReplay` run a controller the same way on every call of a recording (what
// `ctrlhost run --record` wrote) and compare its answers with the recorded ones:
//
//   await testing.assertReplay(controller, 'testdata/greeter-recording'); // lists differences

const { AssertionError } = require('node:assert');
const { Plugin } = require('./plugin');
const { ControllerBuilder } = require('./controller');
const judgement = require('./host_judgement');
const recording = require('./recording');
const { RecordingError } = recording;
const { ReplayResult, ReplayDifference, compare, redactResponse, primaryIsSecret } =
  require('./replay');

/** The host would never send this request (the message says why). */
class HostWouldNotSend extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'HostWouldNotSend';
  }
}

/** The host would refuse this answer (the message is the host's); `outcome` holds it. */
class HostWouldRefuse extends Error {
  /**
   * @param {string} message
   * @param {Outcome} outcome
   */
  constructor(message, outcome) {
    super(message);
    this.name = 'HostWouldRefuse';
    this.outcome = outcome;
  }
}

/** @param {any} obj */
function raw(obj) {
  return { api_version: obj.apiVersion || '', kind: obj.kind || '',
    object: Buffer.from(JSON.stringify(obj), 'utf8') };
}

/**
 * The ReconcileCall (object form) the host would send for `obj` (null: a gone primary), with
 * children and related objects as given.
 * @param {string} controller
 * @param {any} obj
 * @param {{children?: any[], related?: any[], finalizing?: boolean, reason?: string,
 *          attempt?: number}} [options]
 */
function makeCall(controller, obj, options = {}) {
  const meta = (obj && obj.metadata) || {};
  return {
    controller,
    namespace: meta.namespace || '',
    name: meta.name || '',
    uid: meta.uid || '',
    reason: options.reason || 'REASON_PRIMARY_CHANGED',
    object: obj ? Buffer.from(JSON.stringify(obj), 'utf8') : Buffer.alloc(0),
    children: (options.children || []).map(raw),
    related_objects: (options.related || []).map(raw),
    finalizing: Boolean(options.finalizing),
    attempt: options.attempt || 1,
    trace_id: '',
  };
}

const CONDITION_STATUS = { CONDITION_STATUS_TRUE: 'True', CONDITION_STATUS_FALSE: 'False',
  CONDITION_STATUS_UNKNOWN: 'Unknown' };

/** A ReconcileResponse (object form) decoded into plain values. */
class Outcome {
  constructor(response) {
    this.response = response;
    /** @type {any[]} */
    this.desired = (response.desired_objects || []).map((d) => JSON.parse(d.toString('utf8')));
    /** @type {any} */
    this.status = response.status && response.status.length > 0
      ? JSON.parse(response.status.toString('utf8')) : null;
    /** @type {Record<string, {status: string, reason: string, message: string}>} */
    this.conditions = {};
    for (const c of response.conditions || []) {
      this.conditions[c.type] = { status: CONDITION_STATUS[c.status] || c.status,
        reason: c.reason, message: c.message };
    }
    /** @type {{type: string, reason: string, message: string}[]} */
    this.events = (response.events || []).map((e) => ({
      type: e.type === 'EVENT_TYPE_WARNING' ? 'Warning' : 'Normal', reason: e.reason,
      message: e.message }));
    this.patches = response.patches || [];
    this.finalized = Boolean(response.finalized);
    /** @type {{kind: string, message: string, reason: string} | null} */
    this.error = response.error ? {
      kind: response.error.kind === 'ERROR_KIND_TERMINAL' ? 'terminal' : 'retryable',
      message: response.error.message, reason: response.error.reason || '' } : null;
    /**
     * Why the live host would refuse this answer (the host's message, e.g.
     * "desired_objects[0]: kind v1 Secret is not owned by controller greeter"); null when it
     * would apply it.
     * @type {string | null}
     */
    this.refused = null;
  }

  /** @param {string} kind */
  desiredOfKind(kind) {
    return this.desired.filter((d) => d.kind === kind);
  }
}

/**
 * The answer of `c` (a built Controller) to `call` (object form) through Plugin.handle, as the
 * plugin process would give it: exceptions and invalid results become error answers.
 * @param {any} c
 * @param {any} call
 * @param {Iterable<string>} [capabilities] those in effect (default: every one the SDK supports)
 * @param {number | string} [requestId]
 */
async function answerCall(c, call, capabilities, requestId = 1) {
  const plugin = new Plugin('ctrlhost-testing', '0.0.0');
  plugin._controllers = new Map([[c.name, c]]); // the one controller, already built
  if (capabilities) plugin.capabilities = new Set(capabilities);
  return plugin.handle(requestId, call, new AbortController().signal);
}

/**
 * Runs `controller` (a Controller or a ControllerBuilder) once on `obj` (null: the deletion
 * notice of a gone primary), judged as the host does. Resolves to an Outcome whose `refused`
 * says why the host would refuse the answer; rejects with HostWouldNotSend for a request the
 * host would never send. options.existing: objects in the cluster that are not the primary's
 * children (not in the request; desiring one the primary does not control is refused).
 * options.capabilities: those in effect (default: every one the SDK supports).
 * @param {any} controller
 * @param {any} obj
 * @param {{children?: any[], related?: any[], existing?: any[], finalizing?: boolean,
 *          reason?: string, attempt?: number, capabilities?: Iterable<string>}} [options]
 * @returns {Promise<Outcome>}
 */
async function run(controller, obj, options = {}) {
  const c = controller instanceof ControllerBuilder ? controller.build() : controller;
  const spec = c.spec;
  const call = makeCall(c.name, obj, { ...options, children: [] });
  call.children = (options.children || [])
    .map((child) => raw(judgement.withOwnerReference(child, spec, call)));
  const why = judgement.judgeRequest(spec, call, obj);
  if (why) throw new HostWouldNotSend(`the host would not send this request: ${why}`);
  const answer = await answerCall(c, call, options.capabilities);
  // An error answer carries no lists: the judgement reads them empty, as the host does.
  const response = { desired_objects: [], patches: [], conditions: [], events: [], ...answer };
  const outcome = new Outcome(response);
  outcome.refused = judgement.judgeResponse(spec, call, options.existing || [], response) || null;
  return outcome;
}

/**
 * `run`, rejecting with HostWouldRefuse when the host would refuse the answer.
 * @param {any} controller
 * @param {any} obj
 * @param {{children?: any[], related?: any[], existing?: any[], finalizing?: boolean,
 *          reason?: string, attempt?: number, capabilities?: Iterable<string>}} [options]
 * @returns {Promise<Outcome>}
 */
async function reconcile(controller, obj, options = {}) {
  const outcome = await run(controller, obj, options);
  if (outcome.refused !== null) {
    throw new HostWouldRefuse(`the host would refuse this answer: ${outcome.refused}`, outcome);
  }
  return outcome;
}

/**
 * The controller of `target` (a built Controller, or a Plugin) named `name`.
 * @param {any} target
 * @param {string} name
 */
function controllerNamed(target, name) {
  if (!(target instanceof Plugin)) return target;
  const c = target.controllers().get(name);
  if (!c) throw new RecordingError(`plugin "${target.name}" has no controller "${name}"`);
  return c;
}

/**
 * Runs `c` on every recorded call of one file, in order, as `run` does (Plugin.handle, with the
 * capabilities the record says were in effect), and compares the answers; with `update`,
 * rewrites the records whose answers differ.
 * @param {any} c
 * @param {recording.RecordingFile} file
 * @param {ReplayResult} result
 * @param {boolean} update
 */
async function replayFile(c, file, result, update) {
  const primarySecret = primaryIsSecret(file.header);
  const bodies = [];
  let changed = false;
  for (const { offset, record, bytes } of file.records) {
    bodies.push(bytes);
    if (record.answer !== 'response') {
      result.skipped++;
      continue;
    }
    const capabilities = record.capabilities.length > 0 ? record.capabilities : undefined;
    const requestId = record.response.request_id !== '0' ? record.response.request_id : 1;
    let answer = await answerCall(c, record.call, capabilities, requestId);
    if (!file.header.secret_data) answer = redactResponse(answer, primarySecret);
    const difference = compare(file.path, offset, record, answer);
    result.add(difference);
    if (difference && update) {
      bodies[bodies.length - 1] = recording.withResponse(bytes, answer);
      changed = true;
    }
  }
  if (changed) {
    recording.replaceFile(file.path, Buffer.concat([file.start, ...bodies.map(recording.frame)]));
    result.updated.push(file.path);
  }
}

/**
 * Replays a recording (what `ctrlhost run --record` wrote) against `target` (a Controller,
 * ControllerBuilder or Plugin): runs it in process, as `run` does, on every recorded call in
 * order, and compares each new answer with the recorded one (replay.js: what counts as
 * different). `path` is a .ctrlrec file, a directory of them, or a directory with one
 * subdirectory per controller (options.controller picks one; default: the controller's name, or
 * the only one). A Plugin runs the controller the recording's header names. Records without an
 * answer (a failed dispatch) are skipped.
 *
 * options.update: rewrite the records whose answers differ with the new answers as the recorded
 * ones (header, other records and every other field kept byte for byte; a temporary file
 * renamed over each file changed).
 *
 * Rejects with RecordingError when the recording cannot be read (the message names the file and
 * offset) or holds another controller than the one asked for.
 * @param {any} target
 * @param {string} path
 * @param {{controller?: string, update?: boolean}} [options]
 * @returns {Promise<ReplayResult>}
 */
async function replay(target, path, options = {}) {
  if (target instanceof ControllerBuilder) target = target.build();
  let wanted = options.controller || (target instanceof Plugin ? null : target.name);
  const files = recording.findRecording(path, wanted);
  const result = new ReplayResult(files);
  for (const file of files) {
    const read = recording.readRecording(file);
    const held = read.header.controller ? read.header.controller.name : '';
    wanted = wanted || held;
    if (held !== wanted) {
      throw new RecordingError(`${file}: holds controller ${held}, not ${wanted}`);
    }
    await replayFile(controllerNamed(target, wanted), read, result, Boolean(options.update));
  }
  return result;
}

/**
 * `replay`, rejecting with an AssertionError when an answer differs; its message has the totals
 * and the first options.limit (20) differences. With options.update it only rewrites the files
 * and never fails, like a golden-file test run to refresh its files.
 * @param {any} target
 * @param {string} path
 * @param {{controller?: string, update?: boolean, limit?: number}} [options]
 * @returns {Promise<ReplayResult>}
 */
async function assertReplay(target, path, options = {}) {
  const result = await replay(target, path, options);
  if (result.differences.length > 0 && !options.update) {
    throw new AssertionError({ message: `replaying ${path}: ${result.report(options.limit)}` });
  }
  return result;
}

module.exports = {
  run, reconcile, makeCall, Outcome, HostWouldNotSend, HostWouldRefuse, replay, assertReplay,
  ReplayResult, ReplayDifference, RecordingError,
};
