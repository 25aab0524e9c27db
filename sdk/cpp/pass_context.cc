#include "sdk/cpp/pass_context.h"

namespace ctrlhost::sdk {
namespace {

nlohmann::json Project(const nlohmann::json& desired, const nlohmann::json& current) {
  if (!desired.is_object() || !current.is_object()) return current;
  nlohmann::json out = nlohmann::json::object();
  for (auto it = desired.begin(); it != desired.end(); ++it) {
    auto found = current.find(it.key());
    if (found != current.end()) out[it.key()] = Project(*it, *found);
  }
  return out;
}

}  // namespace

void PassContext::CancelPass(absl::string_view reason) {
  if (pass_cancelled_) return;  // the first reason wins
  pass_cancelled_ = true;
  pass_cancel_reason_ = std::string(reason);
}

void PassContext::CancelResource(absl::string_view reason) {
  if (resource_cancelled_) return;
  resource_cancelled_ = true;
  resource_cancel_reason_ = std::string(reason);
}

void PassContext::SetFlag(absl::string_view name, bool value) { flags_[std::string(name)] = value; }

bool PassContext::Flag(absl::string_view name) const {
  auto it = flags_.find(std::string(name));
  return it != flags_.end() && it->second;
}

void PassContext::BeginStep() {
  resource_cancelled_ = false;
  resource_cancel_reason_.clear();
}

nlohmann::json FreezeOnto(const nlohmann::json& desired, const nlohmann::json& current) {
  nlohmann::json out = Project(desired, current);
  if (!out.is_object()) return out;
  for (const char* key : {"apiVersion", "kind"}) {
    if (desired.contains(key)) out[key] = desired[key];
  }
  const nlohmann::json& meta = desired.value("metadata", nlohmann::json::object());
  for (const char* key : {"name", "namespace"}) {
    if (meta.is_object() && meta.contains(key)) out["metadata"][key] = meta[key];
  }
  return out;
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

}  // namespace ctrlhost::sdk
