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

}  // namespace ctrlhost::apiserver::internal
