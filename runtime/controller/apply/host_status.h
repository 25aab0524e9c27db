// The standard operator status computed by the host for a controller that opts in
// (operator file: spec.controllers[].status.conditions: host; docs/operator-spec.md): the
// conditions Available, Progressing, Degraded (OpenShift / controller-lifecycle-operator-sdk)
// and Ready, Reconciling, Stalled (kstatus), from the outcome of the last reconcile and the
// readiness of the primary's children, with the semantics of sdk/cpp/operator_status.h.
//
//   HostStatusInput in{.result = ReconcileResult::kSuccess};
//   for (const nlohmann::json& child : owned) in.children.push_back(ChildReadinessOf(child));
//   std::vector<pluginpb::Condition> conditions = ComputeHostConditions(in, plugin_conditions);
//
// The rules, first match wins:
//   failed      a terminal error, or `consecutive_errors` >= `degraded_after` retryable ones:
//               Degraded True, Stalled True, Progressing False, Reconciling False, with the
//               reason of the plugin's error when it gave one, else "TerminalError" /
//               "PersistentError"
//   retrying    a retryable error below the threshold: Progressing True, Reconciling True,
//               Degraded False, Stalled False (a transient error is never Degraded)
//   converging  success, a child not ready: Progressing True, Reconciling True
//   converged   success, every child ready (or none): Progressing False, Reconciling False
// Available is True exactly when every child is ready (also while degraded: the operand may
// serve while its operator fails); Ready is True only when converged.
// A type the plugin sets itself (`plugin_given`) is left out: the host never fights the plugin.
// lastTransitionTime and observedGeneration are the merge's (conditions.h): only a change of
// status moves the time, so an unchanged outcome computes an unchanged status (no write).
//
// Thread-compatible pure functions.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_HOST_STATUS_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_HOST_STATUS_H_

#include <string>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {

// The host-computed condition types, in the order they are written.
inline constexpr const char* kHostStatusTypes[] = {"Available", "Progressing", "Degraded",
                                                   "Ready",     "Reconciling", "Stalled"};

enum class ReconcileResult { kSuccess, kRetryableError, kTerminalError };

// Whether one owned object is ready, and why not (for the condition messages).
struct ChildReadiness {
  std::string kind;
  std::string name;
  bool ready = true;
  std::string reason;  // empty when ready
};

// A Deployment (apps/v1) is ready when its controller saw the current generation and
// status.availableReplicas == spec.replicas (default 1); any other object with a Ready
// condition when it is True; any other object when it exists. Malformed fields read as not
// ready, never throw.
ChildReadiness ChildReadinessOf(const nlohmann::json& child);

struct HostStatusInput {
  ReconcileResult result = ReconcileResult::kSuccess;
  std::string error_message;  // the plugin's error, for the Degraded/Progressing messages
  // The plugin's Error.reason ("" when none): the failure reason of the failed conditions in
  // place of "TerminalError" / "PersistentError".
  std::string error_reason;
  int consecutive_errors = 0;  // retryable errors in a row for this key, this one included
  int degraded_after = 5;      // >= 1: from this many in a row a retryable error is persistent
  std::vector<ChildReadiness> children;
};

// The conditions of kHostStatusTypes (without those in `plugin_given`), status/reason/message
// set, lastTransitionTime left to MergeConditions.
std::vector<pluginpb::Condition> ComputeHostConditions(
    const HostStatusInput& input, const std::vector<pluginpb::Condition>& plugin_given);

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_HOST_STATUS_H_
