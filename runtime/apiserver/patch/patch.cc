#include "runtime/apiserver/patch/patch.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/body_limits.h"
#include "runtime/apiserver/patch/internal/errors.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;

// kube-apiserver refuses bigger JSON patches (maxJSONPatchOperations).
constexpr size_t kMaxJsonPatchOperations = 10000;

// How much one JSON patch may grow a document (estimated compact JSON bytes of the values its
// add, replace and copy operations insert). Without it a 1 KB patch of `copy` operations that
// double the document (`{"op":"copy","from":"/a","path":"/a/b"}` repeated) needs 2^40 bytes.
// The values of add/replace come from the body (at most the request limit); copies are what
// this bounds. Each estimate stops at the remaining budget, so the work is bounded too.
constexpr size_t kMaxJsonPatchGrowthBytes = kMaxObjectBytes;
// How many bytes (estimated) one JSON patch may copy or move in all: a patch of 10,000 moves of
// a large subtree would otherwise copy gigabytes.
constexpr size_t kMaxJsonPatchWorkBytes = 16 * kMaxObjectBytes;

// What one JSON patch has spent of its budgets so far.
struct PatchBudget {
  size_t grown = 0;
  size_t work = 0;
};

// The description of a failing operation, kept for the 422 cause.
absl::Status OperationFailed(size_t index, const std::string& path, absl::string_view why) {
  return internal::PatchDoesNotApply(path, absl::StrCat("json patch operation ", index, ": ", why));
}

absl::StatusOr<json::json_pointer> ParsePointer(size_t index, const json& op, const char* member) {
  auto it = op.find(member);
  if (it == op.end()) {
    return kube::BadRequestError(
        absl::StrCat("json patch operation ", index, " is missing \"", member, "\""));
  }
  if (!it->is_string()) {
    return kube::BadRequestError(
        absl::StrCat("json patch operation ", index, ": \"", member, "\" must be a string"));
  }
  try {
    return json::json_pointer(it->get<std::string>());
  } catch (const json::exception& e) {
    return kube::BadRequestError(absl::StrCat("json patch operation ", index, ": invalid \"",
                                              member, "\" pointer: ", e.what()));
  }
}

// Whether `ptr` names an existing value. contains() is false for malformed array indices.
bool Exists(const json& doc, const json::json_pointer& ptr) {
  try {
    return doc.contains(ptr);
  } catch (const json::exception&) {
    return false;
  }
}

// RFC 6902 §4.1: the target location's parent must exist (and be a container) for add, and
// for the destinations of move and copy. nlohmann::json would create missing parents.
absl::Status CheckParent(size_t index, const json& doc, const json::json_pointer& ptr) {
  if (ptr.empty()) return absl::OkStatus();
  const json::json_pointer parent = ptr.parent_pointer();
  if (!Exists(doc, parent)) {
    return OperationFailed(index, ptr.to_string(),
                           absl::StrCat("doc is missing path \"", parent.to_string(), "\""));
  }
  const json& container = doc.at(parent);
  if (!container.is_object() && !container.is_array()) {
    return OperationFailed(index, ptr.to_string(),
                           absl::StrCat("\"", parent.to_string(), "\" is not an object or array"));
  }
  return absl::OkStatus();
}

absl::Status ApplyOperation(size_t index, const json& op, json& doc, PatchBudget* budget) {
  if (!op.is_object()) {
    return kube::BadRequestError(
        absl::StrCat("json patch operation ", index, " is not a JSON object"));
  }
  auto op_it = op.find("op");
  if (op_it == op.end() || !op_it->is_string()) {
    return kube::BadRequestError(
        absl::StrCat("json patch operation ", index, ": \"op\" must be a string"));
  }
  const std::string name = op_it->get<std::string>();
  if (name != "add" && name != "remove" && name != "replace" && name != "move" && name != "copy" &&
      name != "test") {
    return kube::BadRequestError(
        absl::StrCat("json patch operation ", index, ": unknown op \"", name, "\""));
  }
  ASSIGN_OR_RETURN(json::json_pointer path, ParsePointer(index, op, "path"));
  const bool needs_value = name == "add" || name == "replace" || name == "test";
  if (needs_value && !op.contains("value")) {
    return kube::BadRequestError(
        absl::StrCat("json patch operation ", index, " (", name, ") is missing \"value\""));
  }
  json::json_pointer from;
  if (name == "move" || name == "copy") {
    ASSIGN_OR_RETURN(from, ParsePointer(index, op, "from"));
    if (!Exists(doc, from)) {
      return OperationFailed(index, path.to_string(),
                             absl::StrCat("doc is missing from path \"", from.to_string(), "\""));
    }
    if (name == "move" && absl::StartsWith(path.to_string(), from.to_string() + "/")) {
      return OperationFailed(index, path.to_string(),
                             "a value cannot be moved into one of its children");
    }
  }
  if (name == "add" || name == "move" || name == "copy") {
    RETURN_IF_ERROR(CheckParent(index, doc, path));
  } else if (!Exists(doc, path)) {
    // json-patch (v4, used by kube-apiserver) lets `test` of a missing member against null pass.
    if (name == "test" && op.at("value").is_null() && !path.empty() &&
        Exists(doc, path.parent_pointer()) && doc.at(path.parent_pointer()).is_object()) {
      return absl::OkStatus();
    }
    return OperationFailed(index, path.to_string(),
                           absl::StrCat(name, ": doc is missing path \"", path.to_string(), "\""));
  }
  if (name == "remove" && path.empty()) {
    return OperationFailed(index, "", "the whole document cannot be removed");
  }
  if (name == "add" || name == "replace" || name == "copy" || name == "move") {
    const json& inserted = name == "copy" || name == "move" ? doc.at(from) : op.at("value");
    const bool grows = name != "move";
    const size_t left = grows ? std::min(kMaxJsonPatchGrowthBytes - budget->grown,
                                         kMaxJsonPatchWorkBytes - budget->work)
                              : kMaxJsonPatchWorkBytes - budget->work;
    const JsonMeasure m = MeasureJson(inserted, left);
    if (m.bytes > left) {
      return kube::RequestEntityTooLargeError(absl::StrCat(
          "json patch operation ", index, " (", name, " to \"", path.to_string(), "\") ",
          grows && budget->grown + m.bytes > kMaxJsonPatchGrowthBytes
              ? absl::StrCat("would grow the object by more than ", kMaxJsonPatchGrowthBytes,
                             " bytes, the most one patch may add")
              : absl::StrCat("would copy more than ", kMaxJsonPatchWorkBytes,
                             " bytes, the most one patch may copy or move")));
    }
    // Every intermediate document stays within the nesting limit: the value lands
    // `path`'s depth below the root.
    const std::string path_text = path.to_string();
    const size_t path_depth = std::count(path_text.begin(), path_text.end(), '/');
    if (path_depth + m.depth > static_cast<size_t>(kMaxNestingDepth)) {
      return kube::BadRequestError(absl::StrCat("json patch operation ", index,
                                                ": the patched object would be nested too deeply "
                                                "(more than ",
                                                kMaxNestingDepth, " levels)"));
    }
    if (grows) budget->grown += m.bytes;
    if (name == "copy" || name == "move") budget->work += m.bytes;
  }
  try {
    doc.patch_inplace(json::array({op}));
  } catch (const json::other_error&) {
    // other_error 501 is nlohmann's "unsuccessful test".
    return OperationFailed(index, path.to_string(),
                           absl::StrCat("test failed for path \"", path.to_string(), "\""));
  } catch (const json::exception& e) {
    return OperationFailed(index, path.to_string(), e.what());
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view ContentTypeOf(PatchType type) {
  switch (type) {
    case PatchType::kJsonPatch:
      return "application/json-patch+json";
    case PatchType::kMergePatch:
      return "application/merge-patch+json";
    case PatchType::kStrategicMergePatch:
      return "application/strategic-merge-patch+json";
    case PatchType::kApplyPatch:
      return "application/apply-patch+yaml";
  }
  return "";
}

absl::StatusOr<PatchType> PatchTypeFromContentType(absl::string_view content_type) {
  absl::string_view media = content_type.substr(0, content_type.find(';'));
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(media));
  for (PatchType type : {PatchType::kJsonPatch, PatchType::kMergePatch,
                         PatchType::kStrategicMergePatch, PatchType::kApplyPatch}) {
    if (lowered == ContentTypeOf(type)) return type;
  }
  return internal::UnsupportedPatchType(/*strategic_supported=*/true);
}

absl::StatusOr<json> ApplyJsonPatch(const json& doc, absl::string_view patch_body) {
  json patch = json::parse(patch_body.begin(), patch_body.end(), nullptr,
                           /*allow_exceptions=*/false);
  if (patch.is_discarded()) {
    return kube::BadRequestError("json patch is not valid JSON");
  }
  if (!patch.is_array()) {
    return kube::BadRequestError("json patch must be a JSON array of operations");
  }
  RETURN_IF_ERROR(internal::CheckNestingDepth(patch, "json patch"));
  if (patch.size() > kMaxJsonPatchOperations) {
    return kube::RequestEntityTooLargeError(
        absl::StrCat("The allowed maximum operations in a JSON patch is ", kMaxJsonPatchOperations,
                     ", got ", patch.size()));
  }
  json result = doc;
  PatchBudget budget;
  for (size_t i = 0; i < patch.size(); ++i) {
    RETURN_IF_ERROR(ApplyOperation(i, patch[i], result, &budget));
  }
  return result;
}

absl::StatusOr<json> ApplyMergePatch(const json& doc, absl::string_view patch_body) {
  json patch = json::parse(patch_body.begin(), patch_body.end(), nullptr,
                           /*allow_exceptions=*/false);
  if (patch.is_discarded()) {
    return kube::BadRequestError("Invalid JSON Patch: merge patch is not valid JSON");
  }
  if (!patch.is_object()) {
    return kube::BadRequestError(absl::StrCat("Invalid JSON Patch: a merge patch of an object ",
                                              "must be a JSON object, not ", patch.type_name()));
  }
  if (!doc.is_object()) {
    return kube::InternalError("merge patch target is not a JSON object");
  }
  RETURN_IF_ERROR(internal::CheckNestingDepth(patch, "merge patch"));
  json result = doc;
  result.merge_patch(patch);
  return result;
}

}  // namespace ctrlhost::apiserver
