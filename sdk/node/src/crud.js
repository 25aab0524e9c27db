// @ts-check
'use strict';
// CrudResource: the desired list of one kind against the current children of that kind: a plan
// of create / update / unchanged / remove applied in that order (desired objects, plus Created /
// Updated / Deleted events; removal relies on the owned kind's deleteAbsent). A reconcile style
// as a thin layer over one reconcile function, as in the other SDKs' crud files.
//
//   .reconcile(new CrudResource('v1', 'ConfigMap', (req) => [{ metadata: { name: 'a' } }])
//     .build((req, plan, result) => { ... }));
//
// Steps (pass_context.js): `onPass(step)` runs a step per create and update in desired-list
// order: a skipped object is not created or is kept as it is, a cancelled pass skips every later
// create and update, and apply records a Normal event "Skipped" per skipped object. Removals are
// not cancellable (an object left out of the desired list is pruned).
//
// A desired function or step that throws fails the reconcile: TerminalError -> terminal, else
// retryable.

const { Result, TerminalError, rethrowable } = require('./result');
const { handlers } = require('./handlers');
const { findPath, isObject } = require('./request');
const { PassContext, freezeOnto } = require('./pass_context');
const { StageCallbacks } = require('./stage_callbacks');
const { isSubset, nameOf, namespaceOf, failWith } = require('./chain');

class CrudResource {
  /** desired(req) -> array of objects of this kind. */
  constructor(apiVersion, kind, desired) {
    this.apiVersion = apiVersion;
    this.kind = kind;
    this.desired = desired;
    this.step = null;
    this.callbacks = new StageCallbacks();
  }

  /** Callbacks around each create, update and remove, run by plan (stage_callbacks.js). */
  withCallbacks(callbacks) {
    this.callbacks = callbacks;
    return this;
  }

  /** step(request, desired, current, ctx): runs before each create and update. */
  onPass(step) {
    this.step = step;
    return this;
  }

  /** { create, update, unchanged, remove, skipped, passCancelled, passCancelReason, flags };
   * throws on a bad desired list. */
  plan(request) {
    const list = this.desired ? this.desired(request) : [];
    if (!Array.isArray(list)) throw new TerminalError(`desired ${this.kind} list is not an array`);
    const key = (ns, name) => `${ns}/${name}`;
    const current = new Map();
    for (const o of request.childrenOfKind(this.kind, this.apiVersion)) {
      current.set(key(namespaceOf(o.object, request), nameOf(o.object, request)), o.object);
    }
    const plan = {
      create: [], update: [], unchanged: [], remove: [], skipped: [],
      passCancelled: false, passCancelReason: '', flags: {},
    };
    const ctx = new PassContext();
    const seen = new Set();
    for (const d of list) {
      if (!isObject(d)) throw new TerminalError('a desired object is not an object');
      const obj = { apiVersion: this.apiVersion, kind: this.kind, ...d };
      const name = findPath(obj, 'metadata.name');
      if (typeof name !== 'string' || !name) {
        throw new TerminalError(`a desired ${this.kind} has no name`);
      }
      const k = key(namespaceOf(obj, request), name);
      if (seen.has(k)) throw new TerminalError(`two desired ${this.kind} objects are named ${k}`);
      seen.add(k);
      const cur = current.get(k);
      current.delete(k);
      if (cur !== undefined) {
        const compare = { ...obj, metadata: { namespace: namespaceOf(obj, request), ...obj.metadata } };
        if (isSubset(compare, cur)) {
          plan.unchanged.push(obj);
          continue;
        }
      }
      // A create or an update: the step may skip it.
      let skip = null;
      if (ctx.passCancelled) {
        skip = `pass cancelled: ${ctx.passCancelReason}`;
      } else if (this.step) {
        ctx.beginStep();
        try {
          this.step(request, obj, cur, ctx);
        } catch (e) {
          const message = `${this.kind} ${k}: ${e && e.message !== undefined ? e.message : String(e)}`;
          throw rethrowable(e, message);
        }
        if (ctx.resourceCancelled) skip = ctx.resourceCancelReason;
      }
      if (skip !== null) {
        if (cur !== undefined) plan.unchanged.push(freezeOnto(obj, cur));
        plan.skipped.push({ object: obj, reason: skip });
        continue;
      }
      this.runCallbacks(k, () => this.callbacks.runStep(request, cur === undefined, this.apiVersion,
        this.kind, obj, cur));
      (cur === undefined ? plan.create : plan.update).push(obj);
    }
    for (const [k, cur] of current) {
      this.runCallbacks(k, () => {
        for (const stage of ['pre-delete', 'post-delete']) {
          this.callbacks.run(request, stage, this.apiVersion, this.kind, undefined, cur);
        }
      });
      plan.remove.push(cur);
    }
    plan.passCancelled = ctx.passCancelled;
    plan.passCancelReason = ctx.passCancelReason;
    plan.flags = ctx.flags;
    return plan;
  }

  runCallbacks(key, fn) {
    try {
      fn();
    } catch (e) {
      const message = `${this.kind} ${key}: ${e && e.message !== undefined ? e.message : String(e)}`;
      throw rethrowable(e, message);
    }
  }

  /** Desires create/update/unchanged and records Created / Updated / Deleted events. */
  apply(plan, result) {
    const describe = (o) => {
      const ns = findPath(o, 'metadata.namespace');
      return `${this.kind} ${typeof ns === 'string' ? `${ns}/` : ''}${findPath(o, 'metadata.name') || ''}`;
    };
    for (const o of plan.create) {
      result.desire(o);
      result.event('Normal', 'Created', describe(o));
    }
    for (const o of plan.update) {
      result.desire(o);
      result.event('Normal', 'Updated', describe(o));
    }
    for (const o of plan.unchanged) result.desire(o);
    for (const o of plan.remove) result.event('Normal', 'Deleted', describe(o));
    for (const s of plan.skipped || []) {
      result.event('Normal', 'Skipped', `${describe(s.object)}: ${s.reason}`);
    }
  }

  build(then) {
    const fallback = handlers({});
    return async (request) => {
      if (!request.exists || request.deleting) return fallback(request);
      const result = new Result();
      let plan;
      try {
        plan = this.plan(request);
      } catch (e) {
        failWith(result, '', e);
        return result;
      }
      this.apply(plan, result);
      if (then) await then(request, plan, result);
      return result;
    };
  }
}

module.exports = { CrudResource };
