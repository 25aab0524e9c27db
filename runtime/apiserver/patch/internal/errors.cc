#include "runtime/apiserver/patch/internal/errors.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::internal {

absl::Status PatchDoesNotApply(absl::string_view field, absl::string_view why) {
  kube::StatusDetails details;
  details.causes.push_back({"FieldValueInvalid", std::string(why), std::string(field)});
  return kube::ApiError(422, "Invalid", kPatchRejected, std::move(details));
}

absl::Status UnsupportedPatchType(bool strategic_supported) {
  return kube::UnsupportedMediaTypeError(absl::StrCat(
      "the body of the request was in an unknown format - accepted media types include: "
      "application/json-patch+json, application/merge-patch+json, ",
      strategic_supported ? "application/strategic-merge-patch+json, " : "",
      "application/apply-patch+yaml"));
}

absl::Status CheckNestingDepth(const nlohmann::json& value, absl::string_view what) {
  std::vector<std::pair<const nlohmann::json*, int>> pending = {{&value, 1}};
  while (!pending.empty()) {
    auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node->is_structured()) continue;
    if (depth > kMaxNestingDepth) {
      return kube::BadRequestError(
          absl::StrCat(what, " is nested too deeply (more than ", kMaxNestingDepth, " levels)"));
    }
    for (const nlohmann::json& child : *node) pending.emplace_back(&child, depth + 1);
  }
  return absl::OkStatus();
}

}  // namespace ctrlhost::apiserver::internal
