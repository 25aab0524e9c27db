'use strict';
// Two more reconcile styles as thin layers over one reconcile function, as in the C++ SDK:
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
// CrudResource: the desired list of one kind against the current children of that kind: a plan
// of create / update / unchanged / remove applied in that order (desired objects, plus Created /
// Updated / Deleted events; removal relies on the owned kind's deleteAbsent).
//
// A desired function that throws fails the reconcile: TerminalError -> terminal, else retryable.

const { Result, TerminalError } = require('./result');
const { handlers } = require('./handlers');
const { findPath, isObject } = require('./request');

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
  result.setError(e instanceof TerminalError ? 'terminal' : 'retryable', message);
}

class DependentChain {
  constructor() {
    this.dependents = [];
  }

  /** { name, apiVersion, kind, desired(req) -> object, when?(req) -> bool, ready?(current) -> bool } */
  add(dependent) {
    this.dependents.push(dependent);
    return this;
  }

  /** Adds the desired objects to `result`; returns { ready, pending, deleting, allReady }. */
  reconcile(request, result) {
    const state = { ready: [], pending: [], deleting: [], allReady: false };
    const deps = this.dependents;
    const wanted = deps.map(() => true);
    const keepForOrder = deps.map(() => false);
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
      if (findChild(request, d.apiVersion, d.kind, name) !== undefined) {
        state.deleting.push(d.name);
        keepForOrder[i] = laterUnwantedPresent;
        laterUnwantedPresent = true;
      }
    }
    let predecessorsReady = true;
    for (let i = 0; i < deps.length; i++) {
      const d = deps[i];
      if (!wanted[i] && !keepForOrder[i]) continue;
      let desired;
      try {
        desired = desiredOf(d);
      } catch (e) {
        failWith(result, `dependent ${d.name}: `, e);
        return state;
      }
      const current = findChild(request, d.apiVersion, d.kind, nameOf(desired, request));
      if (!wanted[i]) {
        result.desire(desired); // kept only until the later unwanted ones are gone
        continue;
      }
      if (current === undefined && !predecessorsReady) {
        state.pending.push(d.name); // ensure-created waits for its predecessors
        continue;
      }
      result.desire(desired);
      const ready = current !== undefined && (!d.ready || Boolean(d.ready(current)));
      (ready ? state.ready : state.pending).push(d.name);
      predecessorsReady = predecessorsReady && ready;
    }
    state.allReady = state.pending.length === 0 && state.deleting.length === 0;
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
          result.setCondition('DependentsReady', false, 'Waiting',
            `waiting for ${[...state.pending, ...state.deleting].join(', ')}`);
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

class CrudResource {
  /** desired(req) -> array of objects of this kind. */
  constructor(apiVersion, kind, desired) {
    this.apiVersion = apiVersion;
    this.kind = kind;
    this.desired = desired;
  }

  /** { create, update, unchanged, remove } (arrays of objects); throws on a bad desired list. */
  plan(request) {
    const list = this.desired ? this.desired(request) : [];
    if (!Array.isArray(list)) throw new TerminalError(`desired ${this.kind} list is not an array`);
    const key = (ns, name) => `${ns}/${name}`;
    const current = new Map();
    for (const o of request.childrenOfKind(this.kind, this.apiVersion)) {
      current.set(key(namespaceOf(o.object, request), nameOf(o.object, request)), o.object);
    }
    const plan = { create: [], update: [], unchanged: [], remove: [] };
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
      if (cur === undefined) {
        plan.create.push(obj);
        continue;
      }
      const compare = { ...obj, metadata: { namespace: namespaceOf(obj, request), ...obj.metadata } };
      (isSubset(compare, cur) ? plan.unchanged : plan.update).push(obj);
      current.delete(k);
    }
    plan.remove.push(...current.values());
    return plan;
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

module.exports = { DependentChain, CrudResource, isSubset };
