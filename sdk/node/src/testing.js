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

const { Plugin } = require('./plugin');
const { ControllerBuilder } = require('./controller');
const judgement = require('./host_judgement');

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
  const plugin = new Plugin('ctrlhost-testing', '0.0.0');
  plugin._controllers = new Map([[c.name, c]]); // the one controller, already built
  if (options.capabilities) plugin.capabilities = new Set(options.capabilities);
  const answer = await plugin.handle(1, call, new AbortController().signal);
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

module.exports = { run, reconcile, makeCall, Outcome, HostWouldNotSend, HostWouldRefuse };
