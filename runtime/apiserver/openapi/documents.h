// Builders of the OpenAPI documents (internal to the openapi package; openapi.h serves them).
//
//   std::vector<ResourcePtr> all = registry.All();
//   nlohmann::json apps = V3Document(all, "apps", "v1");     // GET /openapi/v3/apis/apps/v1
//   nlohmann::json swagger = V2Document(all);                // GET /openapi/v2
//
// Every resource gets the paths a Kubernetes API server publishes: list, create and
// deletecollection on the collection; get, replace, patch and delete on the item; the status
// subresource when served; list across namespaces for namespaced kinds; and the (deprecated,
// still served) /watch/ paths. Each operation carries operationId, x-kubernetes-action and
// x-kubernetes-group-version-kind, and the query parameters the server honours.
//
// Patch operations accept application/json-patch+json, application/merge-patch+json and
// application/apply-patch+yaml. They do not advertise application/strategic-merge-patch+json
// although the server accepts it: kubectl computes a strategic merge patch from the OpenAPI
// schema when the document lists that type, and the schemas here do not carry the per-list
// merge keys (containers by name, ports by containerPort, ...); without it kubectl uses its
// compiled-in types, which do.
//
// Thread-safe: pure functions.
#ifndef CTRLHOST_RUNTIME_APISERVER_OPENAPI_DOCUMENTS_H_
#define CTRLHOST_RUNTIME_APISERVER_OPENAPI_DOCUMENTS_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver::openapi {

// "api/v1" or "apis/{group}/{version}": the key of a group/version in the v3 index.
std::string GroupVersionPath(absl::string_view group, absl::string_view version);

// The (group, version) pairs served by `resources`, keyed by GroupVersionPath, sorted.
std::map<std::string, std::pair<std::string, std::string>> GroupVersions(
    const std::vector<ResourcePtr>& resources);

// The OpenAPI 3.0 document of one group/version (empty paths when none of `resources` is in
// it; callers check GroupVersions first).
nlohmann::json V3Document(const std::vector<ResourcePtr>& resources, absl::string_view group,
                          absl::string_view version, absl::string_view server_version);

// The Swagger 2.0 document of every resource.
nlohmann::json V2Document(const std::vector<ResourcePtr>& resources,
                          absl::string_view server_version);

}  // namespace ctrlhost::apiserver::openapi

#endif  // CTRLHOST_RUNTIME_APISERVER_OPENAPI_DOCUMENTS_H_
