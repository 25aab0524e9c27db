// @ts-check
'use strict';
// A reconcile style as a thin layer over one reconcile function, as in the other SDKs' chain
// files (CrudResource, crud.js, is the other one):
//
// DependentChain: an ordered list of dependents, each ensure-created (with a readiness check)
// or, when its `when` says no, ensure-deleted. A dependent is created only once every earlier
// one is ready; unwanted ones go in reverse order (one is kept until every later unwanted one is
// gone). The built function adds the condition DependentsReady (True AllReady / False Waiting).
//
//   .reconcile(new DependentChain()
//     .add({ name: 'db', apiVersion: 'apps/v1', kind: 'StatefulSet', desired: (req) => ({...}),
//            ready: (sts) => sts.status?.readyReplicas >= 1 })
//     .add({ name: 'web', apiVersion: 'apps/v1', kind: 'Deployment', desired: (req) => ({...}) })
//     .build((req, state, result) => { result.status().ready = state.allReady; }));
//
// Steps (pass_context.js): a dependent's `onPass(request, desired, current, ctx)` runs before it
// is created or updated; it may cancel the rest of the pass, cancel only this dependent, and set
// flags later steps read. DependentsReady is then False "Cancelled": "<dependent> cancelled the
// pass: <reason>; skipped: <a> (<its reason>), <b>; waiting for <c>" (each part when it applies).
//
// A desired function or step that throws fails the reconcile: TerminalError -> terminal, else
// retryable.

const { Result, TerminalError, RetryableError } = require('./result');
const { handlers } = require('./handlers');
const { findPath, isObject } = require('./request');
const { PassContext, freezeOnto } = require('./pass_context');
const { StageCallbacks } = require('./stage_callbacks');

function nameOf(obj, request) {
  const n = findPath(obj, 'metadata.name');
  return typeof n === 'string' ? n : request.name;
}

function namespaceOf(obj, request) {
  const ns = findPath(obj, 'metadata.namespace');
  return typeof ns === 'string' ? ns : request.namespace;
}

function findChild(request, apiVersion, kind, name) {
  const found = request.childrenOfKind(kind, apiVersion)
    .find((o) => findPath(o.object, 'metadata.name') === name);
  return found ? found.object : undefined;
}

function failWith(result, prefix, e) {
  const message = `${prefix}${e && e.message !== undefined ? e.message : String(e)}`;
  if (e instanceof TerminalError) {
    result.setError('terminal', message, { reason: e.reason });
  } else if (e instanceof RetryableError) {
    result.setError('retryable', message, { reason: e.reason, retryAfterMs: e.retryAfterMs });
  } else {
    result.setError('retryable', message);
  }
}

function notReadyMessage(state) {
  const parts = [];
  if (state.passCancelledBy) {
    parts.push(`${state.passCancelledBy} cancelled the pass: ${state.passCancelReason}`);
  }
  if (state.cancelled.length > 0) {
    const skipped = state.cancelled.map((n) => (
      Object.prototype.hasOwnProperty.call(state.cancelReasons, n)
        ? `${n} (${state.cancelReasons[n]})` : n));
    parts.push(`skipped: ${skipped.join(', ')}`);
  }
  const waiting = [...state.pending, ...state.deleting];
  if (waiting.length > 0) parts.push(`waiting for ${waiting.join(', ')}`);
  return parts.join('; ');
}

class DependentChain {
  constructor() {
    this.dependents = [];
    this.callbacks = new StageCallbacks();
  }

  /** Callbacks per child kind around each create, update and delete (stage_callbacks.js). */
  withCallbacks(callbacks) {
    this.callbacks = callbacks;
    return this;
  }

  /** { name, apiVersion, kind, desired(req) -> object, when?(req) -> bool,
   *    ready?(current) -> bool, onPass?(req, desired, current, ctx) } */
  add(dependent) {
    this.dependents.push(dependent);
    return this;
  }

  /** Adds the desired objects to `result`; returns the ChainState (see index.d.ts). */
  reconcile(request, result) {
    const state = {
      ready: [], pending: [], deleting: [], cancelled: [], cancelReasons: {},
      passCancelledBy: '', passCancelReason: '', flags: {}, failedAt: '', allReady: false,
    };
    const deps = this.dependents;
    const wanted = deps.map(() => true);
    const presentUnwanted = deps.map(() => false);
    const keepForOrder = deps.map(() => false);
    const unwantedCurrent = deps.map(() => undefined);
    const desiredOf = (d) => {
      const obj = d.desired ? d.desired(request) : {};
      if (!isObject(obj)) throw new TerminalError('no object');
      return { apiVersion: d.apiVersion, kind: d.kind, ...obj };
    };
    let laterUnwantedPresent = false;
    for (let i = deps.length - 1; i >= 0; i--) {
      const d = deps[i];
      wanted[i] = !d.when || Boolean(d.when(request));
      if (wanted[i]) continue;
      let name = request.name;
      try {
        name = nameOf(desiredOf(d), request);
      } catch {
        // an unwanted dependent's name falls back to the primary's
      }
      unwantedCurrent[i] = findChild(request, d.apiVersion, d.kind, name);
      if (unwantedCurrent[i] !== undefined) {
        state.deleting.push(d.name);
        presentUnwanted[i] = true;
        keepForOrder[i] = laterUnwantedPresent;
        laterUnwantedPresent = true;
      }
    }
    const ctx = new PassContext();
    let predecessorsReady = true;
    for (let i = 0; i < deps.length; i++) {
      const d = deps[i];
      // After a cancelled pass nothing more is deleted: unwanted ones still present are kept.
      if (!wanted[i] && !(ctx.passCancelled ? presentUnwanted[i] : keepForOrder[i])) {
        if (presentUnwanted[i] && !ctx.passCancelled) { // left out: pruned by the host
          try {
            for (const stage of ['pre-delete', 'post-delete']) {
              this.callbacks.run(request, stage, d.apiVersion, d.kind, undefined, unwantedCurrent[i]);
            }
          } catch (e) {
            failWith(result, `dependent ${d.name}: `, e);
            state.failedAt = d.name; // the walk stops: not ready
            return state;
          }
        }
        continue;
      }
      let desired;
      try {
        desired = desiredOf(d);
      } catch (e) {
        failWith(result, `dependent ${d.name}: `, e);
        state.failedAt = d.name; // the walk stops: not ready
        return state;
      }
      const current = findChild(request, d.apiVersion, d.kind, nameOf(desired, request));
      if (ctx.passCancelled) {
        if (current !== undefined) result.desire(freezeOnto(desired, current));
        state.cancelled.push(d.name);
        continue;
      }
      if (!wanted[i]) {
        result.desire(desired); // kept only until the later unwanted ones are gone
        continue;
      }
      if (current === undefined && !predecessorsReady) {
        state.pending.push(d.name); // ensure-created waits for its predecessors
        continue;
      }
      const ready = current !== undefined && (!d.ready || Boolean(d.ready(current)));
      predecessorsReady = predecessorsReady && ready;
      if (d.onPass) {
        const wasCancelled = ctx.passCancelled;
        ctx.beginStep();
        try {
          d.onPass(request, desired, current, ctx);
        } catch (e) {
          failWith(result, `dependent ${d.name}: `, e);
          state.failedAt = d.name; // the walk stops: not ready
          return state;
        }
        if (!wasCancelled && ctx.passCancelled) {
          state.passCancelledBy = d.name;
          state.passCancelReason = ctx.passCancelReason;
        }
        if (ctx.resourceCancelled) {
          if (current !== undefined) result.desire(freezeOnto(desired, current));
          state.cancelled.push(d.name);
          state.cancelReasons[d.name] = ctx.resourceCancelReason;
          continue;
        }
      }
      if (current === undefined || !isSubset(desired, current)) {
        try {
          this.callbacks.runStep(request, current === undefined, d.apiVersion, d.kind, desired,
            current);
        } catch (e) {
          failWith(result, `dependent ${d.name}: `, e);
          state.failedAt = d.name; // the walk stops: not ready
          return state;
        }
      }
      result.desire(desired);
      (ready ? state.ready : state.pending).push(d.name);
    }
    state.flags = ctx.flags;
    state.allReady = state.pending.length === 0 && state.deleting.length === 0 &&
      state.cancelled.length === 0 && state.passCancelledBy === '' && state.failedAt === '';
    return state;
  }

  /** A reconcile function; `then(request, state, result)` may add the primary's own status. */
  build(then) {
    const fallback = handlers({});
    return async (request) => {
      if (!request.exists || request.deleting) return fallback(request);
      const result = new Result();
      const state = this.reconcile(request, result);
      if (result.error === null) {
        if (state.allReady) {
          result.setCondition('DependentsReady', true, 'AllReady',
            `${state.ready.length} dependents ready`);
        } else {
          const cancelled = state.passCancelledBy !== '' || state.cancelled.length > 0;
          result.setCondition('DependentsReady', false, cancelled ? 'Cancelled' : 'Waiting',
            notReadyMessage(state));
        }
      }
      if (then) await then(request, state, result);
      return result;
    };
  }
}

/** desired ⊆ current: every field of `desired` has the same value in `current`. */
function isSubset(desired, current) {
  if (isObject(desired) && isObject(current)) {
    return Object.keys(desired).every((k) => k in current && isSubset(desired[k], current[k]));
  }
  if (Array.isArray(desired) && Array.isArray(current)) {
    return desired.length === current.length &&
      desired.every((v, i) => isSubset(v, current[i]) && isSubset(current[i], v));
  }
  return desired === current;
}

// nameOf, namespaceOf and failWith are shared with crud.js, not exported by the package.
module.exports = { DependentChain, isSubset, nameOf, namespaceOf, failWith };
