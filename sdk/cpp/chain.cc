#include "sdk/cpp/chain.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sdk/cpp/handlers.h"

namespace ctrlhost::sdk {
namespace {

std::string NameOf(const nlohmann::json& obj, const Request& request) {
  const nlohmann::json* name = FindPath(obj, "metadata.name");
  return name != nullptr && name->is_string() ? name->get<std::string>() : request.name();
}

const nlohmann::json* FindChild(const Request& request, absl::string_view api_version,
                                absl::string_view kind, absl::string_view name) {
  for (const Object* o : request.ChildrenOfKind(kind, api_version)) {
    if (o->name() == name) return &o->json;
  }
  return nullptr;
}

// A DesiredFn or step error as the result's error: InvalidArgument is terminal (the same input
// fails the same way), anything else retryable.
void FailDependent(absl::string_view name, const absl::Status& status, Result* result) {
  result->SetError(status.code() == absl::StatusCode::kInvalidArgument ? ErrorKind::kTerminal
                                                                       : ErrorKind::kRetryable,
                   absl::StrCat("dependent ", name, ": ", status.message()));
}

// DependentsReady's message when a dependent is not ready or was skipped.
std::string NotReadyMessage(const ChainState& state) {
  std::vector<std::string> parts;
  if (!state.pass_cancelled_by.empty()) {
    parts.push_back(
        absl::StrCat(state.pass_cancelled_by, " cancelled the pass: ", state.pass_cancel_reason));
  }
  if (!state.cancelled.empty()) {
    std::vector<std::string> skipped;
    for (const std::string& name : state.cancelled) {
      auto it = state.cancel_reasons.find(name);
      skipped.push_back(
          it == state.cancel_reasons.end() ? name : absl::StrCat(name, " (", it->second, ")"));
    }
    parts.push_back(absl::StrCat("skipped: ", absl::StrJoin(skipped, ", ")));
  }
  std::vector<std::string> waiting = state.pending;
  waiting.insert(waiting.end(), state.deleting.begin(), state.deleting.end());
  if (!waiting.empty()) parts.push_back(absl::StrCat("waiting for ", absl::StrJoin(waiting, ", ")));
  return absl::StrJoin(parts, "; ");
}

}  // namespace

DependentChain& DependentChain::Add(Dependent dependent) {
  dependents_.push_back(std::move(dependent));
  return *this;
}

DependentChain& DependentChain::WithCallbacks(StageCallbacks callbacks) {
  callbacks_ = std::move(callbacks);
  return *this;
}

ChainState DependentChain::Reconcile(const Request& request, Result* result) const {
  ChainState state;
  // Ensure-deleted runs in reverse: an unwanted dependent goes only once every later unwanted
  // one is gone.
  std::vector<bool> wanted(dependents_.size());
  std::vector<bool> present_unwanted(dependents_.size(), false);
  std::vector<bool> keep_for_order(dependents_.size(), false);
  std::vector<const nlohmann::json*> unwanted_current(dependents_.size(), nullptr);
  bool later_unwanted_present = false;
  for (size_t i = dependents_.size(); i-- > 0;) {
    const Dependent& d = dependents_[i];
    wanted[i] = !d.when || d.when(request);
    if (wanted[i]) continue;
    // Unwanted: its name comes from its desired object (or the primary's name).
    absl::StatusOr<nlohmann::json> obj = d.desired ? d.desired(request) : nlohmann::json();
    const std::string name = obj.ok() ? NameOf(*obj, request) : request.name();
    unwanted_current[i] = FindChild(request, d.api_version, d.kind, name);
    if (unwanted_current[i] != nullptr) {
      state.deleting.push_back(d.name);
      present_unwanted[i] = true;
      keep_for_order[i] = later_unwanted_present;
      later_unwanted_present = true;
    }
  }
  PassContext context;
  bool predecessors_ready = true;
  for (size_t i = 0; i < dependents_.size(); ++i) {
    const Dependent& d = dependents_[i];
    // After a cancelled pass nothing more is deleted: unwanted ones still present are kept.
    if (!wanted[i] && !(context.pass_cancelled() ? present_unwanted[i] : keep_for_order[i])) {
      if (present_unwanted[i] && !context.pass_cancelled()) {  // left out: pruned by the host
        for (Stage stage : {Stage::kPreDelete, Stage::kPostDelete}) {
          if (absl::Status s = callbacks_.Run(request, stage, d.api_version, d.kind, nullptr,
                                              unwanted_current[i]);
              !s.ok()) {
            FailDependent(d.name, s, result);
            state.failed_at = d.name;
            return state;
          }
        }
      }
      continue;
    }
    absl::StatusOr<nlohmann::json> obj = d.desired ? d.desired(request) : nlohmann::json();
    if (!obj.ok()) {
      FailDependent(d.name, obj.status(), result);
      state.failed_at = d.name;
      return state;
    }
    if (!obj->is_object()) {
      result->SetError(ErrorKind::kTerminal, absl::StrCat("dependent ", d.name, ": no object"));
      state.failed_at = d.name;
      return state;
    }
    nlohmann::json& desired = *obj;
    if (!desired.contains("apiVersion")) desired["apiVersion"] = d.api_version;
    if (!desired.contains("kind")) desired["kind"] = d.kind;
    const nlohmann::json* current =
        FindChild(request, d.api_version, d.kind, NameOf(desired, request));
    if (context.pass_cancelled()) {
      if (current != nullptr) result->Desire(FreezeOnto(desired, *current));
      state.cancelled.push_back(d.name);
      continue;
    }
    if (!wanted[i]) {  // kept only until the later unwanted ones are gone
      result->Desire(std::move(desired));
      continue;
    }
    if (current == nullptr && !predecessors_ready) {
      state.pending.push_back(d.name);  // ensure-created waits for its predecessors
      continue;
    }
    const bool ready = current != nullptr && (!d.ready || d.ready(*current));
    predecessors_ready = predecessors_ready && ready;
    if (d.on_pass) {
      const bool was_cancelled = context.pass_cancelled();
      context.BeginStep();
      if (absl::Status s = d.on_pass(request, desired, current, &context); !s.ok()) {
        FailDependent(d.name, s, result);
        state.failed_at = d.name;
        return state;
      }
      if (!was_cancelled && context.pass_cancelled()) {
        state.pass_cancelled_by = d.name;
        state.pass_cancel_reason = context.pass_cancel_reason();
      }
      if (context.resource_cancelled()) {
        if (current != nullptr) result->Desire(FreezeOnto(desired, *current));
        state.cancelled.push_back(d.name);
        state.cancel_reasons[d.name] = context.resource_cancel_reason();
        continue;
      }
    }
    const bool create = current == nullptr;
    const bool update = !create && !IsSubset(desired, *current);
    if (create || update) {
      absl::Status s = callbacks_.Run(request, create ? Stage::kPreCreate : Stage::kPreUpdate,
                                      d.api_version, d.kind, &desired, current);
      if (!s.ok()) {
        FailDependent(d.name, s, result);
        state.failed_at = d.name;
        return state;
      }
    }
    nlohmann::json answered = result->Desire(std::move(desired));
    if (create || update) {
      absl::Status s = callbacks_.Run(request, create ? Stage::kPostCreate : Stage::kPostUpdate,
                                      d.api_version, d.kind, &answered, current);
      if (!s.ok()) {
        FailDependent(d.name, s, result);
        state.failed_at = d.name;
        return state;
      }
    }
    (ready ? state.ready : state.pending).push_back(d.name);
  }
  state.flags = context.flags();
  return state;
}

ReconcileFn DependentChain::Build(
    std::function<void(const Request&, const ChainState&, Result*)> then) const {
  DependentChain chain = *this;
  return [chain, then](const Request& request) {
    Result result;
    if (!request.exists() || request.deleting()) return Handlers().Build()(request);
    ChainState state = chain.Reconcile(request, &result);
    if (!result.error().has_value()) {
      if (state.all_ready()) {
        result.SetCondition("DependentsReady", true, "AllReady",
                            absl::StrCat(state.ready.size(), " dependents ready"));
      } else {
        const bool cancelled = !state.pass_cancelled_by.empty() || !state.cancelled.empty();
        result.SetCondition("DependentsReady", false, cancelled ? "Cancelled" : "Waiting",
                            NotReadyMessage(state));
      }
    }
    if (then) then(request, state, &result);
    return result;
  };
}

}  // namespace ctrlhost::sdk
