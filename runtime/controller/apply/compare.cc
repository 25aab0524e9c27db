#include "runtime/controller/apply/compare.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "runtime/controller/apply/validate.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

std::string ObjectName(absl::string_view namespace_name, absl::string_view name) {
  return namespace_name.empty() ? std::string(name) : absl::StrCat(namespace_name, "/", name);
}

const char* PatchTypeName(kube::PatchType type) {
  switch (type) {
    case kube::PatchType::kJson:
      return "json";
    case kube::PatchType::kMerge:
      return "merge";
    case kube::PatchType::kStrategicMerge:
      return "strategic";
    case kube::PatchType::kApply:
      return "apply";
  }
  return "unknown";
}

const char* ConditionStatusName(pluginpb::ConditionStatus status) {
  switch (status) {
    case pluginpb::CONDITION_STATUS_TRUE:
      return "True";
    case pluginpb::CONDITION_STATUS_FALSE:
      return "False";
    case pluginpb::CONDITION_STATUS_UNKNOWN:
      return "Unknown";
    default:
      return "Unspecified";
  }
}

const char* EventTypeName(pluginpb::EventType type) {
  switch (type) {
    case pluginpb::EVENT_TYPE_NORMAL:
      return "Normal";
    case pluginpb::EVENT_TYPE_WARNING:
      return "Warning";
    default:
      return "Unspecified";
  }
}

json PlanOutcome(const Plan& plan) {
  json out = json::object();
  if (!plan.applies.empty()) {
    json applies = json::object();
    for (const PlannedApply& a : plan.applies) {
      const std::string kind = a.group.empty() ? a.kind : absl::StrCat(a.kind, ".", a.group);
      applies[absl::StrCat(kind, " ", ObjectName(a.ref.namespace_name, a.ref.name))] = a.object;
    }
    out["applies"] = std::move(applies);
  }
  if (!plan.patches.empty()) {
    json patches = json::array();
    for (const PlannedPatch& p : plan.patches) {
      std::string target = p.ref.resource;
      if (!p.ref.subresource.empty()) absl::StrAppend(&target, "/", p.ref.subresource);
      absl::StrAppend(&target, " ", ObjectName(p.ref.namespace_name, p.ref.name));
      // Validated JSON; compared parsed so that spelling does not count.
      json body = json::parse(p.body, /*cb=*/nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) body = p.body;
      patches.push_back(
          {{"target", std::move(target)}, {"type", PatchTypeName(p.type)}, {"body", body}});
    }
    out["patches"] = std::move(patches);
  }
  if (plan.status.has_value()) out["status"] = *plan.status;
  if (!plan.conditions.empty()) {
    json conditions = json::object();
    for (const pluginpb::Condition& c : plan.conditions) {
      conditions[c.type()] = {{"status", ConditionStatusName(c.status())},
                              {"reason", c.reason()},
                              {"message", c.message()}};
    }
    out["conditions"] = std::move(conditions);
  }
  if (!plan.events.empty()) {
    json events = json::array();
    for (const pluginpb::Event& e : plan.events) {
      events.push_back(
          {{"type", EventTypeName(e.type())}, {"reason", e.reason()}, {"message", e.message()}});
    }
    out["events"] = std::move(events);
  }
  if (plan.requeue_after.has_value() && !plan.has_error) {
    out["requeueAfter"] = absl::FormatDuration(*plan.requeue_after);
  }
  if (plan.has_error) {
    json error = {
        {"kind", plan.error_kind == pluginpb::ERROR_KIND_TERMINAL ? "terminal" : "retryable"}};
    if (!plan.error_reason.empty()) error["reason"] = plan.error_reason;
    if (plan.error_retry_after.has_value()) {
      error["retryAfter"] = absl::FormatDuration(*plan.error_retry_after);
    }
    out["error"] = std::move(error);
  }
  if (plan.finalized) out["finalized"] = true;
  return out;
}

}  // namespace

json Outcome(const ReconcileContext& context, const DispatchResult& result) {
  if (!result.response.ok()) {
    return {{"failed", absl::StatusCodeToString(result.response.status().code())}};
  }
  ReconcileContext judged = context;
  judged.capabilities.reset();
  absl::StatusOr<Plan> plan = ValidateResponse(judged, *result.response);
  if (!plan.ok()) return {{"invalid", std::string(plan.status().message())}};
  return PlanOutcome(*plan);
}

OutcomeDiff CompareOutcomes(const json& serving, const json& other) {
  OutcomeDiff diff;
  if (serving == other) return diff;
  diff.same = false;
  diff.patch = json::diff(serving, other);
  std::vector<std::string> members;
  auto note = [&](const std::string& key) {
    for (const std::string& m : members) {
      if (m == key) return;
    }
    members.push_back(key);
  };
  if (serving.is_object() && other.is_object()) {
    for (auto it = serving.begin(); it != serving.end(); ++it) {
      auto there = other.find(it.key());
      if (there == other.end() || *there != it.value()) note(it.key());
    }
    for (auto it = other.begin(); it != other.end(); ++it) {
      if (!serving.contains(it.key())) note(it.key());
    }
  } else {
    members.push_back("everything");
  }
  diff.summary = absl::StrJoin(members, ", ");
  return diff;
}

}  // namespace ctrlhost::controller::apply
