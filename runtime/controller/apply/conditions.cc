#include "runtime/controller/apply/conditions.h"

#include "absl/time/clock.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/utf8.h"

namespace ctrlhost::controller::apply {

using nlohmann::json;

const char* ConditionStatusString(pluginpb::ConditionStatus status) {
  switch (status) {
    case pluginpb::CONDITION_STATUS_TRUE:
      return "True";
    case pluginpb::CONDITION_STATUS_FALSE:
      return "False";
    default:
      return "Unknown";
  }
}

std::string Rfc3339Time(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone());
}

const json* FindCondition(const json& conditions, const std::string& type) {
  if (!conditions.is_array()) return nullptr;
  for (const json& c : conditions) {
    if (!c.is_object()) continue;
    auto it = c.find("type");
    if (it != c.end() && it->is_string() && it->get_ref<const std::string&>() == type) return &c;
  }
  return nullptr;
}

json MergeConditions(const json& existing, const std::vector<pluginpb::Condition>& updates,
                     int64_t observed_generation, absl::Time now) {
  json merged = existing.is_array() ? existing : json::array();
  const std::string now_text = Rfc3339Time(now);
  for (const pluginpb::Condition& update : updates) {
    const std::string status = ConditionStatusString(update.status());
    json* slot = const_cast<json*>(FindCondition(merged, update.type()));
    std::string transition = now_text;
    if (slot != nullptr) {
      auto old_status = slot->find("status");
      auto old_time = slot->find("lastTransitionTime");
      if (old_status != slot->end() && *old_status == status && old_time != slot->end() &&
          old_time->is_string()) {
        transition = old_time->get<std::string>();
      }
    }
    // Reason and message are shown to people (`kubectl describe`): plugin text with control
    // characters is escaped here, where every condition the host writes passes.
    json condition = {{"type", update.type()},
                      {"status", status},
                      {"reason", common::EscapeUnprintable(update.reason())},
                      {"message", common::EscapeUnprintable(update.message())},
                      {"lastTransitionTime", transition},
                      {"observedGeneration", observed_generation}};
    if (slot != nullptr) {
      *slot = std::move(condition);
    } else {
      merged.push_back(std::move(condition));
    }
  }
  return merged;
}

}  // namespace ctrlhost::controller::apply
