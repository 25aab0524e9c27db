// The standard operator status: one helper that writes the status fields and conditions that
// operator tooling reads (OpenShift ClusterOperator, HyperConverged / controller-lifecycle-
// operator-sdk, kstatus for Flux and Argo CD, `kubectl wait --for=condition=Available`).
//
//   sdk::SetOperatorStatus(req, {.operator_version = "1.4.0", .target_version = "1.4.0",
//                                .children_ready = state.all_ready(),
//                                .message = "waiting for web"}, &result);
//
// Writes status.phase, operatorVersion, targetVersion, observedVersion (only once every child
// is ready at the target), observedGeneration, and the conditions Available, Progressing,
// Degraded, Ready, Reconciling, Stalled (the host adds lastTransitionTime when a status
// changes). The phase, first match wins:
//   Deleting   the primary is being deleted
//   Error      `failure` is set (a persistent failure: Degraded and Stalled True)
//   Deployed   every child ready: observedVersion = targetVersion, Available True
//   Upgrading  not ready and the last observedVersion differs from the target: Progressing
//              True; Available stays True if it was (a normal upgrade is never Degraded)
//   Deploying  not ready otherwise: Progressing True, Available False
// The same in sdk/python (operator_status.py) and sdk/node (operator_status.js).
//
// Thread-safety: a pure function of its arguments.
#ifndef CTRLHOST_SDK_CPP_OPERATOR_STATUS_H_
#define CTRLHOST_SDK_CPP_OPERATOR_STATUS_H_

#include <string>

#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::sdk {

struct OperatorStatusInput {
  std::string operator_version;  // the plugin's own version
  std::string target_version;    // the version the children should run (empty: operator's)
  bool children_ready = false;
  std::string message;                    // why not ready (Progressing / Available messages)
  std::string failure;                    // non-empty: a persistent failure (phase Error, Degraded)
  std::string failure_reason = "Failed";  // CamelCase
};

void SetOperatorStatus(const Request& request, const OperatorStatusInput& input, Result* result);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_OPERATOR_STATUS_H_
