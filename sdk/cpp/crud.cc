#include "sdk/cpp/crud.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sdk/cpp/handlers.h"

namespace ctrlhost::sdk {
namespace {

std::string NamespaceOf(const nlohmann::json& obj, const Request& request) {
  const nlohmann::json* ns = FindPath(obj, "metadata.namespace");
  return ns != nullptr && ns->is_string() ? ns->get<std::string>() : request.namespace_();
}

}  // namespace

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
