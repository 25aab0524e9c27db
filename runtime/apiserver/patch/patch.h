// Patch engines of the embedded API server: JSON Patch (RFC 6902), JSON merge patch (RFC 7386)
// and Kubernetes strategic merge patch, with the errors a real kube-apiserver answers.
// Server-side apply (application/apply-patch+yaml) lives in apply.h.
//
//   ASSIGN_OR_RETURN(PatchType type, PatchTypeFromContentType(request.content_type));
//   switch (type) {
//     case PatchType::kJsonPatch: ASSIGN_OR_RETURN(next, ApplyJsonPatch(live, body)); break;
//     case PatchType::kMergePatch: ASSIGN_OR_RETURN(next, ApplyMergePatch(live, body)); break;
//     case PatchType::kStrategicMergePatch:
//       ASSIGN_OR_RETURN(next, ApplyStrategicMergePatch(live, body,
//                                                       BuiltinMergeStrategy(group, kind)));
//       break;
//     case PatchType::kApplyPatch: ...  // see apply.h
//   }
//
// Errors (runtime/kube/api_status.h), as kube-apiserver answers them:
// - a body that is not a patch of its type (bad JSON, wrong shape, unknown op, bad pointer
//   syntax, bad directive): 400 BadRequest naming the problem;
// - a JSON patch that does not apply (failing `test`, missing path or parent, index out of
//   range): 422 Invalid with the server's message "the server rejected our request due to an
//   error in our request"; ctrlhost adds one cause naming the operation and why;
// - strategic merge patch of a custom resource (no strategy) or an unknown content type: 415
//   UnsupportedMediaType listing the accepted media types.
//
// All functions are pure and thread-safe.
#ifndef CTRLHOST_RUNTIME_APISERVER_PATCH_PATCH_H_
#define CTRLHOST_RUNTIME_APISERVER_PATCH_PATCH_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/patch/merge_strategy.h"

namespace ctrlhost::apiserver {

enum class PatchType { kJsonPatch, kMergePatch, kStrategicMergePatch, kApplyPatch };

// "application/json-patch+json", "application/merge-patch+json",
// "application/strategic-merge-patch+json", "application/apply-patch+yaml".
absl::string_view ContentTypeOf(PatchType type);

// The patch type of a PATCH request's Content-Type (parameters such as "; charset=utf-8" and
// case are ignored). Anything else is 415 UnsupportedMediaType listing the four types.
absl::StatusOr<PatchType> PatchTypeFromContentType(absl::string_view content_type);

// RFC 6902 on `doc`. Applied to a copy: on error nothing is half-applied. A `test` of a missing
// member against `null` succeeds, as with kube-apiserver's json-patch library.
absl::StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& doc,
                                              absl::string_view patch_body);

// RFC 7386 on `doc` (an object). The patch must be a JSON object: a Kubernetes object cannot be
// replaced by a scalar or an array, so those are 400 BadRequest "Invalid JSON Patch".
absl::StatusOr<nlohmann::json> ApplyMergePatch(const nlohmann::json& doc,
                                               absl::string_view patch_body);

// Kubernetes strategic merge patch on `doc` (an object) for a kind with `strategy`. Implements
// map merge with `null` deleting, lists merged by key (patchMergeKey) or as primitive sets,
// atomic replacement of other lists, the directives `$patch: replace|delete|merge` (maps and
// list items), `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` and `$retainKeys`,
// with the element-order rules of k8s.io/apimachinery/pkg/util/strategicpatch.
// `strategy == nullptr` (custom resources) is 415 UnsupportedMediaType, as a real server answers.
absl::StatusOr<nlohmann::json> ApplyStrategicMergePatch(const nlohmann::json& doc,
                                                        absl::string_view patch_body,
                                                        const MergeStrategy* strategy);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PATCH_PATCH_H_
