// Shaping the objects a request carries: apiVersion and kind added when missing, and the
// RequestContents reductions (metadata-only kinds, stripped fields).
//
// The API server omits them from the items of a list response for built-in kinds, so cached
// objects may have none; plugins get them in every object they receive.
//
//   std::string json = WithTypeMeta(object->json(), "apps/v1", "Deployment");
#ifndef CTRLHOST_RUNTIME_CONTROLLER_TYPE_META_H_
#define CTRLHOST_RUNTIME_CONTROLLER_TYPE_META_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/controller/field_path.h"

namespace ctrlhost::controller {

// `json` with top-level "apiVersion" and "kind" members added (first) where missing; existing
// members are kept as they are. Input that is not a JSON object is returned unchanged (the
// cache never holds such objects). Thread-safe (parse buffers are per thread).
std::string WithTypeMeta(absl::string_view json, absl::string_view api_version,
                         absl::string_view kind);

// WithTypeMeta, then RequestContents' reductions: with `metadata_only` only apiVersion, kind
// and metadata are kept; every path in `strip` is removed. Without reductions this is
// WithTypeMeta (no re-serialisation). Input that is not a JSON object is returned unchanged.
std::string ShapeObject(absl::string_view json, absl::string_view api_version,
                        absl::string_view kind, bool metadata_only,
                        const std::vector<FieldPath>& strip);

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_TYPE_META_H_
