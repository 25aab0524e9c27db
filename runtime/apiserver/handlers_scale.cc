// The scale subresource of custom resources (CRD subresources.scale): an autoscaling/v1 Scale
// read from, and written into, the object at the CRD's paths. `kubectl scale` and autoscalers
// use it. A write is an update of the object itself (its validation, generation, managedFields
// and resourceVersion rules), so a Scale's resourceVersion is the object's.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/patch/patch.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

// ".spec.replicas" -> {"spec", "replicas"} (the CRD validated the form).
std::vector<std::string> Segments(const std::string& path) {
  return absl::StrSplit(absl::string_view(path).substr(1), '.');
}

const nlohmann::json* At(const nlohmann::json& object, const std::string& path) {
  const nlohmann::json* at = &object;
  for (const std::string& s : Segments(path)) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(s);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

int64_t IntAt(const nlohmann::json& object, const std::string& path) {
  const nlohmann::json* v = At(object, path);
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : 0;
}

nlohmann::json ScaleOf(const ScaleSubresource& scale, const nlohmann::json& object) {
  const nlohmann::json& meta = object.value("metadata", nlohmann::json::object());
  nlohmann::json m = nlohmann::json::object();
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    if (meta.contains(key)) m[key] = meta[key];
  }
  nlohmann::json status = {{"replicas", IntAt(object, scale.status_replicas_path)}};
  if (!scale.label_selector_path.empty()) {
    const nlohmann::json* selector = At(object, scale.label_selector_path);
    if (selector != nullptr && selector->is_string()) status["selector"] = *selector;
  }
  return {{"kind", "Scale"},
          {"apiVersion", "autoscaling/v1"},
          {"metadata", std::move(m)},
          {"spec", {{"replicas", IntAt(object, scale.spec_replicas_path)}}},
          {"status", std::move(status)}};
}

// The replicas a Scale asks for: 422 unless a non-negative integer.
absl::StatusOr<int64_t> RequestedReplicas(const nlohmann::json& scale, const std::string& name) {
  const nlohmann::json* replicas = At(scale, ".spec.replicas");
  if (replicas == nullptr || !replicas->is_number_integer() || replicas->get<int64_t>() < 0) {
    return kube::InvalidError(
        "autoscaling", "Scale", name,
        {{"FieldValueInvalid", "Invalid value: must be a non-negative integer", "spec.replicas"}});
  }
  return replicas->get<int64_t>();
}

void SetAt(nlohmann::json& object, const std::string& path, int64_t value) {
  nlohmann::json* at = &object;
  for (const std::string& s : Segments(path)) {
    if (!at->is_object()) *at = nlohmann::json::object();
    at = &(*at)[s];
  }
  *at = value;
}

}  // namespace

absl::StatusOr<ApiResponse> ApiHandlers::Scale(const Target& t, const ApiRequest& req,
                                               const std::string& verb) {
  if (verb != "get" && verb != "update" && verb != "patch") {
    return kube::MethodNotAllowedError(absl::StrCat(verb, " is not supported on scale"));
  }
  const ScaleSubresource& scale = *t.r->scale;
  Target object_target = t;
  object_target.subresource.clear();
  // A patch whose write meets a concurrent one is tried again from the new object, as
  // kube-apiserver retries patches; a PUT with a stale resourceVersion is the client's 409.
  for (int attempt = 0;; ++attempt) {
    ObjectPtr stored = store_->Get(t.r->Key(t.ns, t.name));
    if (stored == nullptr) return kube::NotFoundError(t.r->group, t.r->resource, t.name);
    RETURN_IF_ERROR(CheckIntact(*stored));
    nlohmann::json object = nlohmann::json::parse(ServedBytes(*t.r, stored->value));
    nlohmann::json current = ScaleOf(scale, object);
    if (verb == "get") {
      ApiResponse resp;
      resp.body = Dump(current);
      return resp;
    }
    nlohmann::json wanted;
    if (verb == "update") {
      ASSIGN_OR_RETURN(wanted, ParseObjectBody(req.content_type, req.body));
    } else {
      ASSIGN_OR_RETURN(PatchType type, PatchTypeFromContentType(req.content_type));
      if (type == PatchType::kJsonPatch) {
        ASSIGN_OR_RETURN(wanted, ApplyJsonPatch(current, req.body));
      } else if (type == PatchType::kMergePatch || type == PatchType::kStrategicMergePatch) {
        // A Scale has no lists: a strategic merge patch is a merge patch here.
        ASSIGN_OR_RETURN(wanted, ApplyMergePatch(current, req.body));
      } else {
        return kube::UnsupportedMediaTypeError(
            "apply patches are not supported on the scale subresource");
      }
    }
    ASSIGN_OR_RETURN(const int64_t replicas, RequestedReplicas(wanted, t.name));
    SetAt(object, scale.spec_replicas_path, replicas);
    // The Scale's resourceVersion, when it has one, is a precondition on the object.
    const nlohmann::json* rv = At(wanted, ".metadata.resourceVersion");
    if (rv != nullptr && rv->is_string() && !rv->get<std::string>().empty()) {
      object["metadata"]["resourceVersion"] = *rv;
    }
    ApiRequest put = req;
    put.method = "PUT";
    put.content_type = "application/json";
    put.body = Dump(object);
    absl::StatusOr<ApiResponse> written = Update(object_target, put);
    if (!written.ok() && absl::IsAborted(written.status()) && verb == "patch" && attempt < 3) {
      continue;  // 409 Conflict from a write in between
    }
    if (!written.ok()) return written.status();
    ApiResponse resp;
    resp.code = written->code;
    resp.headers = written->headers;
    resp.body = Dump(ScaleOf(scale, nlohmann::json::parse(written->body)));
    return resp;
  }
}

}  // namespace ctrlhost::apiserver
