// PassContext: what the resources of one reconcile pass tell each other (the reconciliation
// context of a DependentChain, chain.h, or a CrudResource, crud.h).
//
//   chain.Add({"deployment", "apps/v1", "Deployment", DesiredDeployment, nullptr, nullptr,
//              [](const sdk::Request&, const nlohmann::json& desired,
//                 const nlohmann::json* current, sdk::PassContext* ctx) {
//                if (current != nullptr && !sdk::IsSubset(desired, *current)) {
//                  ctx->SetFlag(sdk::PassContext::kUpdateNecessary);
//                }
//                if (current != nullptr && !ctx->Flag(sdk::PassContext::kUpdateAllowed)) {
//                  ctx->CancelResource("updates are paused");   // only this resource
//                }
//                return absl::OkStatus();
//              }});
//
// A step may:
// - CancelPass(reason): the rest of this pass does not run (later resources are neither created
//   nor updated nor deleted); the step's own resource still is, unless it also cancels itself.
// - CancelResource(reason): only this resource is skipped this pass.
// - SetFlag / Flag: per-pass booleans (unset reads false) that later steps read, e.g.
//   kUpdateAllowed and kUpdateNecessary.
// A skipped resource that exists is kept as it is: the layer sends its current values for the
// fields the pass would have set (FreezeOnto), so neither pruning nor server-side apply changes
// it; one that does not exist is not created. The layer's result says what was skipped.
//
// Thread-safety: a PassContext belongs to one pass; not safe for concurrent use.
#ifndef CTRLHOST_SDK_CPP_PASS_CONTEXT_H_
#define CTRLHOST_SDK_CPP_PASS_CONTEXT_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/request.h"

namespace ctrlhost::sdk {

class PassContext {
 public:
  // Flag names the operator frameworks use most; any other name works the same way.
  static constexpr char kUpdateAllowed[] = "updateAllowed";
  static constexpr char kUpdateNecessary[] = "updateNecessary";

  void CancelPass(absl::string_view reason);
  void CancelResource(absl::string_view reason);
  void SetFlag(absl::string_view name, bool value = true);
  bool Flag(absl::string_view name) const;  // false when unset
  const std::map<std::string, bool>& flags() const { return flags_; }

  bool pass_cancelled() const { return pass_cancelled_; }
  const std::string& pass_cancel_reason() const { return pass_cancel_reason_; }

  // For the layers: whether the current step cancelled its resource (and why); reset per step.
  bool resource_cancelled() const { return resource_cancelled_; }
  const std::string& resource_cancel_reason() const { return resource_cancel_reason_; }
  void BeginStep();

 private:
  std::map<std::string, bool> flags_;
  bool pass_cancelled_ = false;
  std::string pass_cancel_reason_;
  bool resource_cancelled_ = false;
  std::string resource_cancel_reason_;
};

// The fields of `desired` with their values in `current` (objects key by key, recursively;
// arrays and scalars whole; fields absent from `current` are left out): applying it leaves the
// object as it is. apiVersion, kind, metadata.name and metadata.namespace come from `desired`.
nlohmann::json FreezeOnto(const nlohmann::json& desired, const nlohmann::json& current);

// A step of a pass: the resource's desired object and its current state (null: absent). It may
// cancel the pass or its resource and set or read flags. A non-OK status fails the reconcile as
// a desired function's error does.
using StepFn = std::function<absl::Status(const Request&, const nlohmann::json& desired,
                                          const nlohmann::json* current, PassContext* context)>;

// True when every field of `desired` has the same value in `current` (objects compared key by
// key, recursively; arrays and scalars compared whole). metadata.namespace defaults apply.
bool IsSubset(const nlohmann::json& desired, const nlohmann::json& current);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_PASS_CONTEXT_H_
