// Parses a Kubernetes API request path and method into what is being asked.
//
//   GET /apis/apps/v1/namespaces/default/deployments/web/status
//   -> {verb "get", group "apps", version "v1", namespace "default",
//       resource "deployments", name "web", subresource "status"}
//
// Handles the core group (/api/v1/...), named groups (/apis/{group}/{version}/...), the legacy
// watch prefix (/api/v1/watch/...), the `watch` query parameter, and namespaces' own
// subresources (/api/v1/namespaces/{name}/status|finalize), the way kube-apiserver does.
// Paths that are not resource paths (discovery, health) have `is_resource_request == false`.
#ifndef CTRLHOST_RUNTIME_APISERVER_REQUEST_INFO_H_
#define CTRLHOST_RUNTIME_APISERVER_REQUEST_INFO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::apiserver {

struct RequestInfo {
  bool is_resource_request = false;
  // get, list, watch, create, update, patch, delete, deletecollection
  std::string verb;
  std::string api_prefix;  // "api" or "apis"
  std::string group;
  std::string version;
  std::string namespace_;  // empty for cluster-scoped or all-namespaces requests
  std::string resource;
  std::string name;
  std::string subresource;
  // Path segments of non-resource requests (e.g. {"apis", "apps"}).
  std::vector<std::string> parts;
};

// A boolean query parameter as Kubernetes reads it: "false" and "0" (any case) and "" are
// false, any other value ("true", "True", "1", ...) is true.
bool ParseQueryBool(absl::string_view value);

// `watch_param` is the value of the `watch` query parameter ("" when absent).
// Errors: BadRequest for malformed resource paths.
absl::StatusOr<RequestInfo> ParseRequestInfo(absl::string_view method, absl::string_view path,
                                             absl::string_view watch_param);

// The dryRun query parameter (or one item of DeleteOptions.dryRun): "" is false, "All" true,
// anything else 400 BadRequest (a typo must not turn a dry run into a real write).
absl::StatusOr<bool> ParseDryRun(absl::string_view value);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_REQUEST_INFO_H_
