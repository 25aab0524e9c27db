// @ts-check
'use strict';
// StageCallbacks: code that runs per child kind around the steps a DependentChain or
// CrudResource takes (as sdk/cpp's stage_callbacks.h and sdk/python's stage_callbacks.py), at
// the stages 'pre-create', 'post-create', 'pre-update', 'post-update', 'pre-delete',
// 'post-delete'.
//
//   const callbacks = new StageCallbacks().on('apps/v1', 'Deployment', 'pre-create',
//     'add-sidecar', (req, stage, desired) => {
//       desired.spec.template.spec.containers.push(sidecar());
//     });
//   chain.withCallbacks(callbacks);
//
// Guarantees:
// - A step is a create (the child is absent), an update (it exists and the desired object has a
//   field with another value) or a delete (left out to be pruned); an unchanged or skipped child
//   takes no step.
// - pre-create / pre-update run before the object is added to the answer and may change
//   `desired` in place; post-create / post-update see a copy of the answered object (the host
//   applies it after the reconcile returns). pre-delete / post-delete run with desired
//   undefined and `current` the child being removed.
// - Several callbacks per kind and stage run in registration order. The first that throws
//   stops the step and the reconcile: "callback <name> at <stage>: <message>" (a TerminalError
//   stays terminal), prefixed by the layer with the resource.

const { rethrowable } = require('./result');

/**
 * @typedef {'pre-create' | 'post-create' | 'pre-update' | 'post-update' | 'pre-delete' |
 *   'post-delete'} Stage
 */

/** @type {Stage[]} */
const STAGES = ['pre-create', 'post-create', 'pre-update', 'post-update', 'pre-delete',
  'post-delete'];

class StageCallbacks {
  constructor() {
    this.callbacks = [];
  }

  /** `name` is used in errors. Matches children of exactly this apiVersion and kind. */
  on(apiVersion, kind, stage, name, callback) {
    if (!STAGES.includes(stage)) {
      throw new TypeError(`unknown stage ${JSON.stringify(stage)} (one of ${STAGES.join(', ')})`);
    }
    this.callbacks.push({ apiVersion, kind, stage, name, callback });
    return this;
  }

  /** Runs the callbacks of that kind and stage in order; throws on the first failure. */
  run(request, stage, apiVersion, kind, desired, current) {
    for (const c of this.callbacks) {
      if (c.stage !== stage || c.apiVersion !== apiVersion || c.kind !== kind) continue;
      try {
        c.callback(request, stage, desired, current);
      } catch (e) {
        const message = `callback ${c.name} at ${stage}: ${e && e.message !== undefined ? e.message : String(e)}`;
        throw rethrowable(e, message);
      }
    }
  }

  /** The pre-stage (may change `desired`), then the post-stage on a copy. */
  runStep(request, create, apiVersion, kind, desired, current) {
    this.run(request, create ? 'pre-create' : 'pre-update', apiVersion, kind, desired, current);
    this.run(request, create ? 'post-create' : 'post-update', apiVersion, kind,
      structuredClone(desired), current);
  }
}

module.exports = { StageCallbacks, STAGES };
