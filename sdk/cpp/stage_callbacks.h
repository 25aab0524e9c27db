// StageCallbacks: code that runs per child kind around the steps a DependentChain or
// CrudResource (chain.h, crud.h) takes, at the stages pre-create, post-create, pre-update,
// post-update, pre-delete and post-delete.
//
//   sdk::StageCallbacks callbacks;
//   callbacks.On("apps/v1", "Deployment", sdk::Stage::kPreCreate, "add-sidecar",
//                [](const sdk::Request&, sdk::Stage, nlohmann::json* desired,
//                   const nlohmann::json* current) {
//                  (*desired)["spec"]["template"]["spec"]["containers"].push_back(Sidecar());
//                  return absl::OkStatus();
//                });
//   chain.WithCallbacks(callbacks);
//
// Guarantees:
// - A step is a create (the child is absent), an update (it exists and the desired object has
//   a field with another value) or a delete (the layer leaves it out to be pruned); an unchanged
//   child and a skipped one (pass_context.h) take no step.
// - pre-create / pre-update run before the object is added to the answer, with `desired`
//   mutable: a callback may change it. post-create / post-update run once it is part of the
//   answer (the host applies it after the reconcile returns; the applied object is the current
//   child of the next pass). pre-delete / post-delete run with `desired` null and `current` the
//   child being removed.
// - Several callbacks per kind and stage run in registration order. The first non-OK status
//   stops the step and the reconcile: its error is "callback <name> at <stage>: <message>" with
//   the status code (InvalidArgument: terminal), prefixed by the layer with the resource.
//
// Thread-safety: immutable once registered; Run may be called concurrently.
#ifndef CTRLHOST_SDK_CPP_STAGE_CALLBACKS_H_
#define CTRLHOST_SDK_CPP_STAGE_CALLBACKS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/request.h"

namespace ctrlhost::sdk {

enum class Stage { kPreCreate, kPostCreate, kPreUpdate, kPostUpdate, kPreDelete, kPostDelete };

// "pre-create", "post-create", ...
absl::string_view StageName(Stage stage);

using StageCallback = std::function<absl::Status(const Request&, Stage, nlohmann::json* desired,
                                                 const nlohmann::json* current)>;

class StageCallbacks {
 public:
  // `name` is used in errors. Matches children of exactly this apiVersion and kind.
  StageCallbacks& On(absl::string_view api_version, absl::string_view kind, Stage stage,
                     absl::string_view name, StageCallback callback);

  bool empty() const { return callbacks_.empty(); }

  // Runs the callbacks of that kind and stage in registration order; the first error stops.
  absl::Status Run(const Request& request, Stage stage, absl::string_view api_version,
                   absl::string_view kind, nlohmann::json* desired,
                   const nlohmann::json* current) const;

 private:
  struct Entry {
    std::string api_version;
    std::string kind;
    Stage stage;
    std::string name;
    StageCallback callback;
  };
  std::vector<Entry> callbacks_;
};

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_STAGE_CALLBACKS_H_
