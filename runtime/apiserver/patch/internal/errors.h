// Errors shared by the patch engines. Internal to runtime/apiserver/patch.
#ifndef CTRLHOST_RUNTIME_APISERVER_PATCH_INTERNAL_ERRORS_H_
#define CTRLHOST_RUNTIME_APISERVER_PATCH_INTERNAL_ERRORS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/body_limits.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::apiserver::internal {

// The message kube-apiserver answers a patch that does not apply with (422 Invalid).
inline constexpr absl::string_view kPatchRejected =
    "the server rejected our request due to an error in our request";

// 422 Invalid with kube-apiserver's message and one cause {FieldValueInvalid, why, field}.
absl::Status PatchDoesNotApply(absl::string_view field, absl::string_view why);

// 415 "the body of the request was in an unknown format - accepted media types include: ..."
// with the media types of built-in kinds (`strategic_supported`) or of custom resources.
absl::Status UnsupportedPatchType(bool strategic_supported);

// Bodies nested deeper than the shared limit (runtime/apiserver/body_limits.h) are refused:
// the engines recurse once per level, and no Kubernetes object comes close.
using ::ctrlhost::apiserver::CheckNestingDepth;
using ::ctrlhost::apiserver::kMaxNestingDepth;

}  // namespace ctrlhost::apiserver::internal

#endif  // CTRLHOST_RUNTIME_APISERVER_PATCH_INTERNAL_ERRORS_H_
