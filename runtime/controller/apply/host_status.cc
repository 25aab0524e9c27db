#include "runtime/controller/apply/host_status.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/controller/apply/json_member.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

// An integer member, `fallback` when absent; false when present but not an integer.
bool IntMember(const json& object, const char* key, int64_t fallback, int64_t* out) {
  const json* member = Member(object, key);
  if (member == nullptr || member->is_null()) {
    *out = fallback;
    return true;
  }
  if (!member->is_number_integer()) return false;
  *out = member->get<int64_t>();
  return true;
}

pluginpb::Condition Make(const char* type, bool status, std::string reason, std::string message) {
  pluginpb::Condition condition;
  condition.set_type(type);
  condition.set_status(status ? pluginpb::CONDITION_STATUS_TRUE : pluginpb::CONDITION_STATUS_FALSE);
  condition.set_reason(std::move(reason));
  condition.set_message(std::move(message));
  return condition;
}

}  // namespace

ChildReadiness ChildReadinessOf(const json& child) {
  ChildReadiness out;
  out.kind = StringMember(child, "kind");
  const json* meta = Member(child, "metadata");
  out.name = meta == nullptr ? "" : StringMember(*meta, "name");
  const json empty = json::object();
  const json* status = Member(child, "status");
  if (status == nullptr || !status->is_object()) status = &empty;
  const std::string api_version = StringMember(child, "apiVersion");
  if (out.kind == "Deployment" && api_version.rfind("apps/", 0) == 0) {
    const json* spec = Member(child, "spec");
    int64_t replicas = 1, available = 0, generation = 0, observed = 0;
    if (!IntMember(spec == nullptr ? empty : *spec, "replicas", 1, &replicas) ||
        !IntMember(*status, "availableReplicas", 0, &available) ||
        !IntMember(meta == nullptr ? empty : *meta, "generation", 0, &generation) ||
        !IntMember(*status, "observedGeneration", 0, &observed)) {
      out.ready = false;
      out.reason = "malformed replica counts";
    } else if (observed < generation) {
      out.ready = false;
      out.reason = absl::StrCat("generation ", generation, " not yet observed");
    } else if (available != replicas) {
      out.ready = false;
      out.reason = absl::StrCat(available, " of ", replicas, " replicas available");
    }
    return out;
  }
  const json* conditions = Member(*status, "conditions");
  if (conditions != nullptr && conditions->is_array()) {
    for (const json& condition : *conditions) {
      if (StringMember(condition, "type") != "Ready") continue;
      if (StringMember(condition, "status") != "True") {
        out.ready = false;
        const std::string message = StringMember(condition, "message");
        out.reason = message.empty() ? "Ready is not True" : message;
      }
      return out;
    }
  }
  return out;  // exists
}

std::vector<pluginpb::Condition> ComputeHostConditions(
    const HostStatusInput& input, const std::vector<pluginpb::Condition>& plugin_given) {
  std::vector<std::string> waiting;
  for (const ChildReadiness& child : input.children) {
    if (!child.ready)
      waiting.push_back(absl::StrCat(child.kind, " ", child.name, ": ", child.reason));
  }
  const bool available = waiting.empty();
  const std::string waiting_message =
      available ? "" : absl::StrCat("waiting for ", absl::StrJoin(waiting, "; "));
  const bool terminal = input.result == ReconcileResult::kTerminalError;
  const bool retrying = input.result == ReconcileResult::kRetryableError;
  const bool failed =
      terminal || (retrying && input.consecutive_errors >= std::max(1, input.degraded_after));
  const std::string failure_reason = !input.error_reason.empty() ? input.error_reason
                                     : terminal                  ? "TerminalError"
                                                                 : "PersistentError";
  const std::string failure_message =
      terminal ? input.error_message
               : absl::StrCat(input.consecutive_errors,
                              " reconciles failed in a row: ", input.error_message);

  std::vector<pluginpb::Condition> all;
  all.push_back(available ? Make("Available", true, "AsExpected", "every child is ready")
                          : Make("Available", false, "ChildrenNotReady", waiting_message));
  if (failed) {
    all.push_back(Make("Progressing", false, failure_reason, failure_message));
    all.push_back(Make("Degraded", true, failure_reason, failure_message));
  } else if (retrying) {
    all.push_back(Make("Progressing", true, "Retrying", input.error_message));
    all.push_back(Make("Degraded", false, "AsExpected", ""));
  } else if (!available) {
    all.push_back(Make("Progressing", true, "ChildrenNotReady", waiting_message));
    all.push_back(Make("Degraded", false, "AsExpected", ""));
  } else {
    all.push_back(Make("Progressing", false, "AsExpected", "reconciled"));
    all.push_back(Make("Degraded", false, "AsExpected", ""));
  }
  const bool in_progress = !failed && (retrying || !available);
  const bool ready = !failed && !in_progress;
  all.push_back(ready    ? Make("Ready", true, "AsExpected", "")
                : failed ? Make("Ready", false, failure_reason, failure_message)
                         : Make("Ready", false, all[1].reason(), all[1].message()));
  all.push_back(in_progress
                    ? Make("Reconciling", true, all[1].reason(), all[1].message())
                    : Make("Reconciling", false, failed ? failure_reason : "AsExpected", ""));
  all.push_back(Make("Stalled", failed, failed ? failure_reason : "AsExpected",
                     failed ? failure_message : ""));

  std::vector<pluginpb::Condition> out;
  for (pluginpb::Condition& condition : all) {
    bool given = false;
    for (const pluginpb::Condition& p : plugin_given) given |= p.type() == condition.type();
    if (!given) out.push_back(std::move(condition));
  }
  return out;
}

}  // namespace ctrlhost::controller::apply
