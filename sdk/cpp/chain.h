// An ordered chain of dependent resources (each with ensure-created / ensure-deleted), one of the
// controller styles of handlers.h:
//
//     sdk::DependentChain chain;
//     chain.Add({"config", "v1", "ConfigMap", DesiredConfigMap});
//     chain.Add({"deployment", "apps/v1", "Deployment", DesiredDeployment, nullptr,
//                DeploymentAvailable});
//     .Reconcile(chain.Build())
//
// A dependent is created only once every dependent before it is ready (`ready`, default:
// it exists); dependents that already exist are always kept up to date. A dependent whose
// `when` is false is ensured deleted, in reverse order: it is left out of the desired objects
// (the host prunes it: declare its kind with Owns(..., {.delete_absent = true})) only once
// every later dependent being deleted is gone. Build() sets the condition "DependentsReady";
// nothing is requeued, because a change of a child reconciles the primary again.
// A dependent's `on_pass` step (pass_context.h) runs before it is created or updated; it may
// cancel the rest of the pass, cancel only this dependent, and set flags later steps read.
// DependentsReady is then False "Cancelled": "<dependent> cancelled the pass: <reason>;
// skipped: <a> (<its reason>), <b>; waiting for <c>" (each part only when it applies).
//
// Thread-safety: a chain is immutable once built and may be called concurrently.
#ifndef CTRLHOST_SDK_CPP_CHAIN_H_
#define CTRLHOST_SDK_CPP_CHAIN_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/pass_context.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"
#include "sdk/cpp/stage_callbacks.h"

namespace ctrlhost::sdk {

using DesiredFn = std::function<absl::StatusOr<nlohmann::json>(const Request&)>;
struct Dependent {
  std::string name;         // for conditions and messages
  std::string api_version;  // of the managed object, e.g. "apps/v1"
  std::string kind;         // e.g. "Deployment"
  DesiredFn desired;        // the whole intended object (metadata.name defaults to the primary's)
  std::function<bool(const Request&)> when;  // unset: always wanted; false: ensure deleted
  std::function<bool(const nlohmann::json& current)> ready;  // unset: ready once it exists
  StepFn on_pass;  // unset: no step; runs before the dependent is created or updated
};

// What a chain found, for the caller's status.
struct ChainState {
  std::vector<std::string> ready;     // wanted, existing and ready
  std::vector<std::string> pending;   // wanted but not (yet) ready or not created yet
  std::vector<std::string> deleting;  // unwanted and still present
  // Skipped this pass (by their own step, or after a step cancelled the pass), in chain order.
  std::vector<std::string> cancelled;
  std::map<std::string, std::string> cancel_reasons;  // dependents that cancelled themselves
  std::string pass_cancelled_by;                      // empty: the pass ran to the end
  std::string pass_cancel_reason;
  std::map<std::string, bool> flags;  // as the last step left them
  // The dependent whose desired function, step or callback failed (empty: none). The walk
  // stopped there and the result carries the error: the chain is not ready.
  std::string failed_at;
  // Nothing pending, being deleted or skipped, the pass ran to the end and no dependent failed.
  bool all_ready() const {
    return pending.empty() && deleting.empty() && cancelled.empty() && pass_cancelled_by.empty() &&
           failed_at.empty();
  }
};

class DependentChain {
 public:
  DependentChain& Add(Dependent dependent);
  // Callbacks per child kind around each create, update and delete (stage_callbacks.h).
  DependentChain& WithCallbacks(StageCallbacks callbacks);
  // Adds the chain's desired objects to `result` and returns what it found. A DesiredFn error
  // becomes the result's error (Result::FromStatus) and stops the walk.
  ChainState Reconcile(const Request& request, Result* result) const;
  // A ReconcileFn: the chain, the condition DependentsReady (True "AllReady" / False "Waiting"
  // naming the dependents not ready), then `then` (may be null) for the primary's own status.
  ReconcileFn Build(
      std::function<void(const Request&, const ChainState&, Result*)> then = nullptr) const;

 private:
  std::vector<Dependent> dependents_;
  StageCallbacks callbacks_;
};

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_CHAIN_H_
