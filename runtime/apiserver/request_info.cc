#include "runtime/apiserver/request_info.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {

absl::StatusOr<RequestInfo> ParseRequestInfo(absl::string_view method, absl::string_view path,
                                             absl::string_view watch_param) {
  RequestInfo info;
  std::vector<std::string> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  info.parts = parts;
  if (parts.empty() || (parts[0] != "api" && parts[0] != "apis")) return info;
  info.api_prefix = parts[0];
  size_t i = 1;
  if (parts[0] == "api") {
    if (parts.size() < 2) return info;  // /api: discovery
    info.version = parts[1];
    i = 2;
  } else {
    if (parts.size() < 3) return info;  // /apis, /apis/{group}: discovery
    info.group = parts[1];
    info.version = parts[2];
    i = 3;
  }
  if (i >= parts.size()) return info;  // /api/v1, /apis/g/v: discovery
  info.is_resource_request = true;

  bool legacy_watch = false;
  if (parts[i] == "watch") {
    legacy_watch = true;
    ++i;
    if (i >= parts.size()) return kube::BadRequestError("watch requires a resource");
  }

  // namespaces/{ns}/{resource}/... unless the part after the namespace is one of the
  // namespace's own subresources.
  std::vector<std::string> rest(parts.begin() + i, parts.end());
  bool namespace_prefix = false;
  if (rest[0] == "namespaces" && rest.size() > 1) {
    info.namespace_ = rest[1];
    if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
      rest.erase(rest.begin(), rest.begin() + 2);
      namespace_prefix = true;
    }
  }
  info.resource = rest[0];
  // Namespaces are cluster-scoped: /api/v1/namespaces/default/namespaces/default is no path
  // (kube-apiserver: 404), not the namespace "default".
  if (namespace_prefix && info.resource == "namespaces") {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  if (info.resource == "namespaces" && rest.size() > 1) {
    info.namespace_.clear();  // a namespace object is cluster-scoped
  }
  if (rest.size() > 1) info.name = rest[1];
  if (rest.size() > 2) info.subresource = rest[2];
  if (rest.size() > 3) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }

  const bool watch = legacy_watch || ParseQueryBool(watch_param);
  if (method == "GET" || method == "HEAD") {
    if (watch) {
      info.verb = "watch";
    } else {
      info.verb = info.name.empty() ? "list" : "get";
    }
  } else if (legacy_watch) {
    return kube::MethodNotAllowedError(absl::StrCat(method, " is not allowed on watch paths"));
  } else if (method == "POST") {
    info.verb = "create";
  } else if (method == "PUT") {
    if (info.name.empty()) {
      return kube::MethodNotAllowedError(absl::StrCat(
          "the server does not allow this method on the requested resource: PUT ", path));
    }
    info.verb = "update";
  } else if (method == "PATCH") {
    info.verb = "patch";
  } else if (method == "DELETE") {
    info.verb = info.name.empty() ? "deletecollection" : "delete";
  } else {
    return kube::MethodNotAllowedError(absl::StrCat("method ", method, " is not supported"));
  }
  return info;
}

bool ParseQueryBool(absl::string_view value) {
  if (value.empty()) return false;
  return !absl::EqualsIgnoreCase(value, "false") && value != "0";
}

absl::StatusOr<bool> ParseDryRun(absl::string_view value) {
  if (value.empty()) return false;
  if (value == "All") return true;
  return kube::BadRequestError(absl::StrCat(
      "dryRun: Unsupported value: \"", absl::CHexEscape(value), "\": supported values: \"All\""));
}

}  // namespace ctrlhost::apiserver
