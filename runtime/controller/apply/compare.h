// Comparing two answers to one reconcile call by what the host would do with each: the basis of
// plugin shadows (a second release that gets the serving instance's calls and never writes) and
// of replaying recorded calls against a new build.
//
// An answer becomes its Outcome, a JSON document of what the host would do with it after its
// own normalization (ValidateResponse's Plan: namespaces filled in, the owner reference added,
// the resourceVersion precondition folded into the patch):
//
//   {"applies":    {"Deployment.apps team/web": {...the object...}, ...},   // by identity
//    "patches":    [{"target": "configmaps team/web-config", "type": "merge", "body": {...}}],
//    "status":     {...merge patch...},
//    "conditions": {"Ready": {"status": "True", "reason": "...", "message": "..."}},   // by type
//    "events":     [{"type": "Normal", "reason": "...", "message": "..."}],
//    "requeueAfter": "30s",
//    "error":      {"kind": "retryable", "reason": "QuotaExceeded", "retryAfter": "1m"},
//    "finalized":  true}
//
// Members that would do nothing are left out (no status, no events, ...). An answer the host
// would refuse is {"invalid": "<the refusal>"}; a failed dispatch (timeout, plugin down) is
// {"failed": "<status code>"}. So two answers are the same exactly when their Outcomes are equal
// JSON: field order, map order and number spelling (1 and 1.0) do not count, and the order of
// desired objects does not either (the host applies them all). The order of patches and events
// does (the host writes them in order). What counts that a plugin may not expect: a timestamp or
// a random name the plugin writes into its own answer differs between two runs; the error
// message is left out (only the kind, reason and retry-after count), as it often carries such
// details.
//
//   apply::OutcomeDiff diff = apply::CompareOutcomes(apply::Outcome(context, serving),
//                                                    apply::Outcome(context, shadow));
//   if (!diff.same) LOG(INFO) << diff.summary << ": " << diff.patch.dump();
//
// Thread-safety: pure functions.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_COMPARE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_COMPARE_H_

#include <string>

#include "nlohmann/json.hpp"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::controller::apply {

// What the host would do with `result` as the answer to the call described by `context` (see
// the file comment). `context.controller` must be set; `context.capabilities` is ignored (both
// answers are judged the same way, whatever connection carried them).
nlohmann::json Outcome(const ReconcileContext& context, const DispatchResult& result);

struct OutcomeDiff {
  bool same = true;
  // RFC 6902 JSON Patch that turns the first Outcome into the second ([] when same).
  nlohmann::json patch = nlohmann::json::array();
  // The top-level members that differ, by name ("applies, events"); "" when same. An Outcome
  // that is not an object (never made by Outcome) gives "everything".
  std::string summary;
};

// Compares two Outcomes (`serving` first: the patch goes from it to `other`).
OutcomeDiff CompareOutcomes(const nlohmann::json& serving, const nlohmann::json& other);

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_COMPARE_H_
