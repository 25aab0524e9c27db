// @ts-check
'use strict';
// PassContext: what the resources of one reconcile pass tell each other (as sdk/cpp's
// pass_context.h and sdk/python's pass_context.py).
//
// A dependent's `onPass(request, desired, current, ctx)` step (chain.js) runs before the
// dependent is created or updated (`current` is undefined when it does not exist). It may:
// - ctx.cancelPass(reason): the rest of this pass does not run (later dependents are neither
//   created, updated nor deleted); the step's own dependent still is, unless it cancels itself;
// - ctx.cancelResource(reason): only this dependent is skipped this pass;
// - ctx.setFlag(name, value = true) / ctx.flag(name): per-pass booleans (unset reads false) that
//   later steps read, e.g. UPDATE_ALLOWED and UPDATE_NECESSARY.
// A skipped dependent that exists is kept as it is (freezeOnto: its current values for the
// fields the pass would set); one that does not exist is not created.

const { isObject } = require('./request');

const UPDATE_ALLOWED = 'updateAllowed';
const UPDATE_NECESSARY = 'updateNecessary';

class PassContext {
  constructor() {
    this.flagValues = new Map();
    this.passCancelled = false;
    this.passCancelReason = '';
    this.resourceCancelled = false;
    this.resourceCancelReason = '';
  }

  cancelPass(reason) {
    if (this.passCancelled) return; // the first reason wins
    this.passCancelled = true;
    this.passCancelReason = String(reason);
  }

  cancelResource(reason) {
    if (this.resourceCancelled) return;
    this.resourceCancelled = true;
    this.resourceCancelReason = String(reason);
  }

  setFlag(name, value = true) {
    this.flagValues.set(String(name), Boolean(value));
  }

  flag(name) {
    return this.flagValues.get(name) === true;
  }

  /** The flags as a plain object, keys sorted. */
  get flags() {
    /** @type {Record<string, boolean>} */
    const out = {};
    for (const k of [...this.flagValues.keys()].sort()) out[k] = this.flagValues.get(k);
    return out;
  }

  beginStep() {
    this.resourceCancelled = false;
    this.resourceCancelReason = '';
  }
}

function project(desired, current) {
  if (!isObject(desired) || !isObject(current)) return current;
  const out = {};
  for (const k of Object.keys(desired)) {
    if (k in current) out[k] = project(desired[k], current[k]);
  }
  return out;
}

/** The fields of `desired` with their values in `current`: applying it changes nothing.
 * apiVersion, kind, metadata.name and metadata.namespace come from `desired`. */
function freezeOnto(desired, current) {
  const out = project(desired, current);
  for (const k of ['apiVersion', 'kind']) if (k in desired) out[k] = desired[k];
  if (isObject(desired.metadata)) {
    for (const k of ['name', 'namespace']) {
      if (k in desired.metadata) {
        if (!isObject(out.metadata)) out.metadata = {};
        out.metadata[k] = desired.metadata[k];
      }
    }
  }
  return out;
}

module.exports = { PassContext, freezeOnto, UPDATE_ALLOWED, UPDATE_NECESSARY };
