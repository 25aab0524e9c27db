// @ts-check
'use strict';
// Resource sets: one controller, several ways of reconciling, chosen per object (operatorkit's
// ResourceRouter / ResourceSet). The same semantics as sdk/cpp resource_sets.h and the Python
// SDK's resource_sets.py; the conformance suite checks that they answer alike.
//
//   const router = new ResourceRouter()
//     .add('v1', { handles: (req) => req.labels.version !== 'v2', reconcile: reconcileV1 })
//     .add('v2', { handles: (req) => req.labels.version === 'v2', reconcile: reconcileV2,
//                  initContext: (req) => ({ replicas: 3 }) });
//   new ControllerBuilder('webapps').for(...).reconcile((req) => router.route(req));
//
// Per object:
// - exactly one set's handles(req) is true: its initContext(req) (none: {}) then its
//   reconcile(req, context) run, and their result is the answer (a throw propagates as from any
//   reconcile function; reconcile may be async);
// - none: the object is skipped: an empty Result, router.skipped counts it, a debug line;
// - several: nothing runs; the answer is a terminal error, the condition Reconciled=False reason
//   AmbiguousRoute and a Warning event AmbiguousRoute, all with the message
//   'the object matches 2 resource sets: "v2", "canary"; exactly one must handle it';
// - a request whose object is gone asks no set: an empty Result, not counted.

const { Result } = require('./result');
const log = require('./log');

const REASON_AMBIGUOUS_ROUTE = 'AmbiguousRoute';

class ResourceRouter {
  constructor() {
    this._sets = [];
    this.skipped = 0; // objects no set handled
  }

  /** Throws TypeError for an empty or duplicate name or a missing handles/reconcile. */
  /**
   * @param {string} name
   * @param {{handles?: (request: any) => boolean, reconcile?: (request: any, context: any) => any,
   *          initContext?: (request: any) => any}} [set]
   */
  add(name, { handles, reconcile, initContext } = {}) {
    if (!name) throw new TypeError('a resource set needs a name');
    if (typeof handles !== 'function' || typeof reconcile !== 'function') {
      throw new TypeError(`resource set "${name}" needs handles and reconcile`);
    }
    if (initContext !== undefined && typeof initContext !== 'function') {
      throw new TypeError(`resource set "${name}": initContext must be a function`);
    }
    if (this._sets.some((s) => s.name === name)) {
      throw new TypeError(`resource set "${name}" is already defined`);
    }
    this._sets.push({ name, handles, reconcile, initContext });
    return this;
  }

  /** The answer for `req`: usable as a controller's reconcile function. */
  route(req) {
    if (!req.exists) return new Result();
    const matches = this._sets.filter((s) => s.handles(req));
    if (matches.length === 1) {
      const [chosen] = matches;
      const context = chosen.initContext ? chosen.initContext(req) : {};
      return chosen.reconcile(req, context);
    }
    if (matches.length === 0) {
      this.skipped += 1;
      log.debug('no resource set handles the object: skipped',
        { key: `${req.namespace}/${req.name}` });
      return new Result();
    }
    const message = `the object matches ${matches.length} resource sets: ` +
      `${matches.map((s) => `"${s.name}"`).join(', ')}; exactly one must handle it`;
    return Result.terminalError(message)
      .setCondition('Reconciled', false, REASON_AMBIGUOUS_ROUTE, message)
      .event('Warning', REASON_AMBIGUOUS_ROUTE, message);
  }
}

module.exports = { ResourceRouter, REASON_AMBIGUOUS_ROUTE };
