// OpenAPI documents of the embedded API server: what kubectl downloads before `apply`,
// `explain` and client-side validation.
//
//   GET /openapi/v3                     index: {"paths": {"api/v1": {"serverRelativeURL":
//                                       "/openapi/v3/api/v1?hash=HEX"}, "apis/apps/v1": ...}}
//   GET /openapi/v3/api/v1              OpenAPI 3.0 document of one group/version
//   GET /openapi/v3/apis/{group}/{ver}
//   GET /openapi/v2                     Swagger 2.0 of everything: JSON, or gnostic protobuf when
//                                       Accept asks for kOpenApiV2ProtobufType (kubectl's
//                                       validation before 1.27, and its patch fallback)
//
// The handlers route every path under /openapi/ here:
//
//   absl::StatusOr<OpenApiResponse> r = openapi::ServeOpenApi(registry, req.path, req.accept,
//                                                              req.query["hash"]);
//   if (!r.ok()) return r.status();            // 404 NotFound / 406 NotAcceptable Status
//   resp.code = r->code; resp.content_type = r->content_type; resp.body = r->body;
//   for (auto& [name, value] : r->headers) ...  // ETag, Cache-Control, Location, Vary
//
// Guarantees:
// - The documents reflect the registry at the time of the call: a CRD added, changed or
//   removed shows up in the next response (the cache is keyed by a fingerprint of the
//   registry's entries, including the identity of each custom resource's schema).
// - A v3 document URL carries `hash` = SHA-512 (hex) of the document's body, so clients can
//   cache by URL. A request whose hash is stale is redirected (301) to the current URL; one
//   whose hash matches is marked immutable.
// - Every patch operation lists the `fieldValidation` query parameter and carries
//   x-kubernetes-group-version-kind, which is how kubectl 1.27+ decides to rely on
//   server-side field validation (?fieldValidation=Strict) instead of validating itself.
// - Built-in kinds are described truthfully but shallowly (ObjectMeta in full, the kind's
//   top-level fields, open objects below), so no schema rejects an object the server accepts.
//   Custom resources carry their CRD version's openAPIV3Schema.
//
// Thread-safe: ServeOpenApi may be called concurrently; documents are built once per registry
// state and shared (immutable) between callers.
#ifndef CTRLHOST_RUNTIME_APISERVER_OPENAPI_OPENAPI_H_
#define CTRLHOST_RUNTIME_APISERVER_OPENAPI_OPENAPI_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver::openapi {

// The media type of gnostic's OpenAPIv2 Document message, protobuf-encoded, as clients ask
// for it in Accept.
inline constexpr char kOpenApiV2ProtobufType[] =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
// The Content-Type of that response. Kubernetes answers with '.' in place of '@': Go's
// mime.ParseMediaType (which client-go runs on every response) rejects the '@' form with
// "mime: unexpected content after media subtype".
inline constexpr char kOpenApiV2ProtobufResponseType[] =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

struct OpenApiResponse {
  int code = 200;
  std::string content_type;
  std::string body;
  // Extra response headers: ETag, Cache-Control, Vary, and Location for redirects.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Answers GET `path` (no query string; "/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1",
// "/openapi/v3/apis/{group}/{version}") for `accept` (the Accept header; empty means any) and
// the `hash` query parameter (empty when absent).
// Errors: 404 NotFound (kube::ApiError) for an unknown path or group/version, 406
// NotAcceptable when no type in `accept` can be served.
absl::StatusOr<OpenApiResponse> ServeOpenApi(const ResourceRegistry& registry,
                                             absl::string_view path, absl::string_view accept,
                                             absl::string_view hash,
                                             absl::string_view server_version = "v1.32.0");

// The documents themselves, built from the registry's current entries (uncached).
nlohmann::json BuildV3Index(const ResourceRegistry& registry);
// NotFound when no resource is served at group/version.
absl::StatusOr<nlohmann::json> BuildV3Document(const ResourceRegistry& registry,
                                               absl::string_view group, absl::string_view version,
                                               absl::string_view server_version = "v1.32.0");
nlohmann::json BuildV2Document(const ResourceRegistry& registry,
                               absl::string_view server_version = "v1.32.0");

}  // namespace ctrlhost::apiserver::openapi

#endif  // CTRLHOST_RUNTIME_APISERVER_OPENAPI_OPENAPI_H_
