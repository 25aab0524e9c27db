#include "sdk/cpp/stage_callbacks.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::sdk {

absl::string_view StageName(Stage stage) {
  switch (stage) {
    case Stage::kPreCreate:
      return "pre-create";
    case Stage::kPostCreate:
      return "post-create";
    case Stage::kPreUpdate:
      return "pre-update";
    case Stage::kPostUpdate:
      return "post-update";
    case Stage::kPreDelete:
      return "pre-delete";
    case Stage::kPostDelete:
      return "post-delete";
  }
  return "unknown";
}

StageCallbacks& StageCallbacks::On(absl::string_view api_version, absl::string_view kind,
                                   Stage stage, absl::string_view name, StageCallback callback) {
  callbacks_.push_back(
      {std::string(api_version), std::string(kind), stage, std::string(name), std::move(callback)});
  return *this;
}

absl::Status StageCallbacks::Run(const Request& request, Stage stage, absl::string_view api_version,
                                 absl::string_view kind, nlohmann::json* desired,
                                 const nlohmann::json* current) const {
  for (const Entry& e : callbacks_) {
    if (e.stage != stage || e.api_version != api_version || e.kind != kind || !e.callback) {
      continue;
    }
    absl::Status s = e.callback(request, stage, desired, current);
    if (!s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("callback ", e.name, " at ", StageName(stage), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ctrlhost::sdk
