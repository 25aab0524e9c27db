#include "sdk/cpp/handlers.h"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ctrlhost::sdk {
namespace {

std::string NameOf(const nlohmann::json& obj, const Request& request) {
  const nlohmann::json* name = FindPath(obj, "metadata.name");
  return name != nullptr && name->is_string() ? name->get<std::string>() : request.name();
}

std::string NamespaceOf(const nlohmann::json& obj, const Request& request) {
  const nlohmann::json* ns = FindPath(obj, "metadata.namespace");
  return ns != nullptr && ns->is_string() ? ns->get<std::string>() : request.namespace_();
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

Handlers& Handlers::OnUpsert(ReconcileFn fn) {
  upsert_ = std::move(fn);
  return *this;
}

Handlers& Handlers::OnDelete(ReconcileFn fn) {
  delete_ = std::move(fn);
  return *this;
}

ReconcileFn Handlers::Build() const {
  return [upsert = upsert_, del = delete_](const Request& request) {
    if (!request.exists()) return del ? del(request) : Result();
    if (request.finalizing()) {
      Result result = del ? del(request) : Result();
      if (!result.error().has_value()) result.SetFinalized();
      return result;
    }
    if (request.deleting()) return Result();  // going away without our finalizer
    return upsert ? upsert(request) : Result();
  };
}

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

bool IsSubset(const nlohmann::json& desired, const nlohmann::json& current) {
  if (desired.is_object() && current.is_object()) {
    for (auto it = desired.begin(); it != desired.end(); ++it) {
      auto found = current.find(it.key());
      if (found == current.end()) return false;
      if (!IsSubset(*it, *found)) return false;
    }
    return true;
  }
  return desired == current;
}

CrudResource::CrudResource(absl::string_view api_version, absl::string_view kind,
                           DesiredListFn desired)
    : api_version_(api_version), kind_(kind), desired_(std::move(desired)) {}

CrudResource& CrudResource::OnPass(StepFn step) {
  on_pass_ = std::move(step);
  return *this;
}

CrudResource& CrudResource::WithCallbacks(StageCallbacks callbacks) {
  callbacks_ = std::move(callbacks);
  return *this;
}

std::vector<const Object*> CrudResource::Current(const Request& request) const {
  return request.ChildrenOfKind(kind_, api_version_);
}

absl::StatusOr<CrudPlan> CrudResource::Plan(const Request& request) const {
  absl::StatusOr<std::vector<nlohmann::json>> desired =
      desired_ ? desired_(request) : std::vector<nlohmann::json>();
  if (!desired.ok()) return desired.status();
  std::map<std::pair<std::string, std::string>, const Object*> current;
  for (const Object* o : Current(request)) current[{o->namespace_(), o->name()}] = o;
  CrudPlan plan;
  PassContext context;
  std::set<std::pair<std::string, std::string>> seen;
  for (nlohmann::json& obj : *desired) {
    if (!obj.is_object()) return absl::InvalidArgumentError("a desired object is not an object");
    if (!obj.contains("apiVersion")) obj["apiVersion"] = api_version_;
    if (!obj.contains("kind")) obj["kind"] = kind_;
    const nlohmann::json* name = FindPath(obj, "metadata.name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("a desired ", kind_, " has no name"));
    }
    std::pair<std::string, std::string> key{NamespaceOf(obj, request), name->get<std::string>()};
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two desired ", kind_, " objects are named ", key.first, "/", key.second));
    }
    auto it = current.find(key);
    const nlohmann::json* cur = it == current.end() ? nullptr : &it->second->json;
    if (it != current.end()) current.erase(it);
    if (cur != nullptr) {
      nlohmann::json compare = obj;
      if (compare["metadata"].is_object() && !compare["metadata"].contains("namespace")) {
        compare["metadata"]["namespace"] = key.first;
      }
      if (IsSubset(compare, *cur)) {
        plan.unchanged.push_back(std::move(obj));
        continue;
      }
    }
    // A create or an update: the step may skip it.
    std::optional<std::string> skip;
    if (context.pass_cancelled()) {
      skip = absl::StrCat("pass cancelled: ", context.pass_cancel_reason());
    } else if (on_pass_) {
      context.BeginStep();
      if (absl::Status s = on_pass_(request, obj, cur, &context); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat(kind_, " ", key.first, "/", key.second, ": ", s.message()));
      }
      if (context.resource_cancelled()) skip = context.resource_cancel_reason();
    }
    if (skip.has_value()) {
      if (cur != nullptr) plan.unchanged.push_back(FreezeOnto(obj, *cur));
      plan.skipped.emplace_back(std::move(obj), *std::move(skip));
      continue;
    }
    // Pre-stage callbacks may change the object; post-stage ones see the decided object.
    const bool create = cur == nullptr;
    absl::Status s = callbacks_.Run(request, create ? Stage::kPreCreate : Stage::kPreUpdate,
                                    api_version_, kind_, &obj, cur);
    if (s.ok()) {
      nlohmann::json decided = obj;
      s = callbacks_.Run(request, create ? Stage::kPostCreate : Stage::kPostUpdate, api_version_,
                         kind_, &decided, cur);
    }
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(kind_, " ", key.first, "/", key.second, ": ", s.message()));
    }
    (cur == nullptr ? plan.create : plan.update).push_back(std::move(obj));
  }
  for (const auto& [key, obj] : current) {
    for (Stage stage : {Stage::kPreDelete, Stage::kPostDelete}) {
      if (absl::Status s = callbacks_.Run(request, stage, api_version_, kind_, nullptr, &obj->json);
          !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat(kind_, " ", key.first, "/", key.second, ": ", s.message()));
      }
    }
    plan.remove.push_back(*obj);
  }
  plan.pass_cancelled = context.pass_cancelled();
  plan.pass_cancel_reason = context.pass_cancel_reason();
  plan.flags = context.flags();
  return plan;
}

void CrudResource::Apply(const CrudPlan& plan, Result* result) const {
  auto describe = [&](const nlohmann::json& obj) {
    const nlohmann::json* ns = FindPath(obj, "metadata.namespace");
    const nlohmann::json* name = FindPath(obj, "metadata.name");
    std::string out = kind_ + " ";
    if (ns != nullptr && ns->is_string()) out += ns->get<std::string>() + "/";
    if (name != nullptr && name->is_string()) out += name->get<std::string>();
    return out;
  };
  for (const nlohmann::json& obj : plan.create) {
    result->Desire(obj);
    result->Event(EventType::kNormal, "Created", describe(obj));
  }
  for (const nlohmann::json& obj : plan.update) {
    result->Desire(obj);
    result->Event(EventType::kNormal, "Updated", describe(obj));
  }
  for (const nlohmann::json& obj : plan.unchanged) result->Desire(obj);
  for (const Object& obj : plan.remove) {
    result->Event(EventType::kNormal, "Deleted", describe(obj.json));
  }
  for (const auto& [obj, reason] : plan.skipped) {
    result->Event(EventType::kNormal, "Skipped", absl::StrCat(describe(obj), ": ", reason));
  }
}

ReconcileFn CrudResource::Build(
    std::function<void(const Request&, const CrudPlan&, Result*)> then) const {
  CrudResource resource = *this;
  return [resource, then](const Request& request) {
    if (!request.exists() || request.deleting()) return Handlers().Build()(request);
    absl::StatusOr<CrudPlan> plan = resource.Plan(request);
    if (!plan.ok()) return Result::FromStatus(plan.status());
    Result result;
    resource.Apply(*plan, &result);
    if (then) then(request, *plan, &result);
    return result;
  };
}

}  // namespace ctrlhost::sdk
