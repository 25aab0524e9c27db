#include "runtime/controller/apply/noop.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

bool EmptyOrNull(const json& value) {
  return value.is_null() || ((value.is_object() || value.is_array()) && value.empty());
}

}  // namespace

bool ApplyIsCovered(const json& current, const json& desired) {
  if (desired.is_object()) {
    if (!current.is_object()) return false;
    for (auto it = desired.begin(); it != desired.end(); ++it) {
      auto found = current.find(it.key());
      if (found == current.end()) {
        if (EmptyOrNull(it.value())) continue;
        return false;
      }
      if (!ApplyIsCovered(*found, it.value())) return false;
    }
    return true;
  }
  if (desired.is_array()) {
    if (!current.is_array() || current.size() != desired.size()) return false;
    for (size_t i = 0; i < desired.size(); ++i) {
      if (!ApplyIsCovered(current[i], desired[i])) return false;
    }
    return true;
  }
  if (desired.is_number() != current.is_number()) return false;
  return current == desired;  // nlohmann compares integers and floats by value
}

bool MergePatchIsNoop(const json& target, const json& patch) {
  if (!patch.is_object()) return target == patch;  // a non-object patch replaces the target
  if (!target.is_object()) return false;
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    auto found = target.find(it.key());
    if (it.value().is_null()) {
      if (found != target.end()) return false;  // would be removed
      continue;
    }
    if (found == target.end()) return false;
    if (!MergePatchIsNoop(*found, it.value())) return false;
  }
  return true;
}

}  // namespace ctrlhost::controller::apply
