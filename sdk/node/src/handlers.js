// @ts-check
'use strict';
// Upsert/delete handlers: the style of frameworks that call "create or update" and "delete"
// separately, as a thin layer over one reconcile function.
//
//   .reconcile(handlers({ upsert: async (req) => ..., delete: async (req) => ... }))
//
// Routing: primary gone -> delete (if any); finalizing -> delete, then `finalized` is added
// unless delete answered an error; deleting without our finalizer -> nothing; else -> upsert.

const { Result } = require('./result');

/**
 * @param {{upsert?: (request: any) => any, delete?: (request: any) => any}} [fns]
 */
function handlers({ upsert, delete: del } = {}) {
  return async (request) => {
    const call = async (fn) => (fn ? (await fn(request)) || new Result() : new Result());
    if (!request.exists) return call(del);
    if (request.finalizing) {
      const result = await call(del);
      if (result.error === null) result.setFinalized();
      return result;
    }
    if (request.deleting) return new Result();
    return call(upsert);
  };
}

module.exports = { handlers };
