// Thin layers over `Reconcile(const Request&) -> Result` for three common controller styles.
// Each produces an ordinary ReconcileFn for ControllerBuilder::Reconcile; nothing here talks to
// the host, so every layer is a pure function of the request.
//
// 1. Upsert / delete handlers (event-handler style):
//
//      .Reconcile(sdk::Handlers()
//                     .OnUpsert([](const sdk::Request& r) { ...; return sdk::Result(); })
//                     .OnDelete([](const sdk::Request& r) { cleanup(); return sdk::Result(); })
//                     .Build())
//
//    OnUpsert runs while the object exists and is not being deleted. OnDelete runs when the
//    request is finalizing (the layer adds Finalized() when OnDelete answers without error) and
//    for the deletion notice of a gone primary (answer only events/error/requeue then). An
//    object being deleted without our finalizer gets an empty answer.
//
// 2. An ordered chain of dependent resources (each with ensure-created / ensure-deleted):
//
//      sdk::DependentChain chain;
//      chain.Add({"config", "v1", "ConfigMap", DesiredConfigMap});
//      chain.Add({"deployment", "apps/v1", "Deployment", DesiredDeployment, nullptr,
//                 DeploymentAvailable});
//      .Reconcile(chain.Build())
//
//    A dependent is created only once every dependent before it is ready (`ready`, default:
//    it exists); dependents that already exist are always kept up to date. A dependent whose
//    `when` is false is ensured deleted, in reverse order: it is left out of the desired objects
//    (the host prunes it: declare its kind with Owns(..., {.delete_absent = true})) only once
//    every later dependent being deleted is gone. Build() sets the condition "DependentsReady";
//    nothing is requeued, because a change of a child reconciles the primary again.
//    A dependent's `on_pass` step (pass_context.h) runs before it is created or updated; it may
//    cancel the rest of the pass, cancel only this dependent, and set flags later steps read.
//    DependentsReady is then False "Cancelled": "<dependent> cancelled the pass: <reason>;
//    skipped: <a> (<its reason>), <b>; waiting for <c>" (each part only when it applies).
//
// 3. A CRUD resource (current state, desired state, plan):
//
//      sdk::CrudResource replicas("v1", "ConfigMap", DesiredCopies);
//      absl::StatusOr<sdk::CrudPlan> plan = replicas.Plan(request);  // create/update/delete
//      replicas.Apply(*plan, &result);
//
//    The plan compares the desired objects with the current children of that kind (by
//    namespace/name): create what is missing, update what differs (a desired field with another
//    value in the current object), delete what is no longer desired. Apply adds the creates,
//    then the updates, then the unchanged objects to the desired objects (server-side apply
//    needs the whole intended state each time); deletes happen by pruning (delete_absent).
//    OnPass(step) runs a step (pass_context.h) per create and update, in desired-list order: a
//    cancelled object is not created / is kept as it is (FreezeOnto), a cancelled pass skips
//    every later create and update; Apply records a Normal event "Skipped" per skipped object.
//    Removals are not cancellable: an object left out of the desired list is pruned.
//
// Thread-safety: the layers are immutable once built and may be called concurrently.
#ifndef CTRLHOST_SDK_CPP_HANDLERS_H_
#define CTRLHOST_SDK_CPP_HANDLERS_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/pass_context.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"
#include "sdk/cpp/stage_callbacks.h"

namespace ctrlhost::sdk {

class Handlers {
 public:
  Handlers& OnUpsert(ReconcileFn fn);
  Handlers& OnDelete(ReconcileFn fn);
  ReconcileFn Build() const;

 private:
  ReconcileFn upsert_;
  ReconcileFn delete_;
};

using DesiredFn = std::function<absl::StatusOr<nlohmann::json>(const Request&)>;
// A step of a pass (pass_context.h): the resource's desired object and its current state (null:
// absent). It may cancel the pass or its resource and set or read flags. A non-OK status fails
// the reconcile as a DesiredFn error does.
using StepFn = std::function<absl::Status(const Request&, const nlohmann::json& desired,
                                          const nlohmann::json* current, PassContext* context)>;

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

struct CrudPlan {
  std::vector<nlohmann::json> create;
  std::vector<nlohmann::json> update;
  std::vector<nlohmann::json> unchanged;  // with skipped objects that exist, frozen
  std::vector<Object> remove;             // current children no longer desired
  // Desired objects skipped by a step, each with the reason ("" after a cancelled pass).
  std::vector<std::pair<nlohmann::json, std::string>> skipped;
  bool pass_cancelled = false;
  std::string pass_cancel_reason;
  std::map<std::string, bool> flags;
  bool empty() const { return create.empty() && update.empty() && remove.empty(); }
};

using DesiredListFn = std::function<absl::StatusOr<std::vector<nlohmann::json>>(const Request&)>;

class CrudResource {
 public:
  CrudResource(absl::string_view api_version, absl::string_view kind, DesiredListFn desired);
  // A step run before each create and update (see above).
  CrudResource& OnPass(StepFn step);
  // Callbacks around each create, update and remove, run by Plan (stage_callbacks.h).
  CrudResource& WithCallbacks(StageCallbacks callbacks);

  // The current children of this kind.
  std::vector<const Object*> Current(const Request& request) const;
  // InvalidArgument when a desired object has no name or two share one.
  absl::StatusOr<CrudPlan> Plan(const Request& request) const;
  // Adds the plan to `result` in order create, update, unchanged, with a Normal event per
  // create ("Created"), update ("Updated") and delete ("Deleted", done by pruning).
  void Apply(const CrudPlan& plan, Result* result) const;
  // Plan + Apply as a ReconcileFn; `then` (may be null) adds the primary's status.
  ReconcileFn Build(
      std::function<void(const Request&, const CrudPlan&, Result*)> then = nullptr) const;

 private:
  std::string api_version_;
  std::string kind_;
  DesiredListFn desired_;
  StepFn on_pass_;
  StageCallbacks callbacks_;
};

// True when every field of `desired` has the same value in `current` (objects compared key by
// key, recursively; arrays and scalars compared whole). metadata.namespace defaults apply.
bool IsSubset(const nlohmann::json& desired, const nlohmann::json& current);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_HANDLERS_H_
