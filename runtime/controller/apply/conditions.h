// Kubernetes conditions (metav1.Condition) merged by type into an object's status.conditions,
// with the lastTransitionTime and observedGeneration rules of apimachinery's
// meta.SetStatusCondition.
//
//   nlohmann::json merged = apply::MergeConditions(live["status"]["conditions"], updates,
//                                                  /*observed_generation=*/live_generation, now);
//
// Guarantees: entries of other types are kept as they are, in order (also malformed entries:
// they are not ours to repair); an updated entry keeps its position; new types are appended.
// lastTransitionTime is kept when the status value is unchanged and set to `now` when it
// changes or the type is new. Reasons and messages are written with control characters and
// invalid UTF-8 escaped (common::EscapeUnprintable: "\\n", "\\x1b"), as the text of plugins
// they often are. Thread-compatible pure functions.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_CONDITIONS_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_CONDITIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {

// "True", "False", "Unknown" ("Unknown" for anything else).
const char* ConditionStatusString(pluginpb::ConditionStatus status);

// RFC 3339 in UTC with second precision, as metav1.Time serializes: "2026-11-22T02:30:00Z".
std::string Rfc3339Time(absl::Time time);

// The new status.conditions array: `existing` (an array, or anything else read as empty) with
// `updates` merged by type.
nlohmann::json MergeConditions(const nlohmann::json& existing,
                               const std::vector<pluginpb::Condition>& updates,
                               int64_t observed_generation, absl::Time now);

// The condition of `type` in `conditions` (an array), or null.
const nlohmann::json* FindCondition(const nlohmann::json& conditions, const std::string& type);

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_CONDITIONS_H_
