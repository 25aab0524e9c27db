// A CRUD resource (current state, desired state, plan), one of the controller styles of
// handlers.h:
//
//     sdk::CrudResource replicas("v1", "ConfigMap", DesiredCopies);
//     absl::StatusOr<sdk::CrudPlan> plan = replicas.Plan(request);  // create/update/delete
//     replicas.Apply(*plan, &result);
//
// The plan compares the desired objects with the current children of that kind (by
// namespace/name): create what is missing, update what differs (a desired field with another
// value in the current object), delete what is no longer desired. Apply adds the creates,
// then the updates, then the unchanged objects to the desired objects (server-side apply
// needs the whole intended state each time); deletes happen by pruning (delete_absent).
// OnPass(step) runs a step (pass_context.h) per create and update, in desired-list order: a
// cancelled object is not created / is kept as it is (FreezeOnto), a cancelled pass skips
// every later create and update; Apply records a Normal event "Skipped" per skipped object.
// Removals are not cancellable: an object left out of the desired list is pruned.
//
// Thread-safety: a CrudResource is immutable once built and may be called concurrently.
#ifndef CTRLHOST_SDK_CPP_CRUD_H_
#define CTRLHOST_SDK_CPP_CRUD_H_

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

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_CRUD_H_
