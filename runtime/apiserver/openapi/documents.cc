#include "runtime/apiserver/openapi/documents.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/openapi/kind_schemas.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using nlohmann::json;

struct Param {
  const char* name;
  const char* in;  // "path" or "query"
  const char* type;
  const char* description;
};

const Param kNamespace = {"namespace", "path", "string", "object name and auth scope"};
const Param kName = {"name", "path", "string", "name of the object"};
const Param kPretty = {"pretty", "query", "string", "If 'true', the output is pretty printed."};
const Param kDryRun = {"dryRun", "query", "string",
                       "When present (All), modifications are not persisted."};
const Param kFieldManager = {"fieldManager", "query", "string",
                             "Name of the actor making the change (managedFields)."};
const Param kFieldValidation = {
    "fieldValidation", "query", "string",
    "How to handle unknown or duplicate fields: Ignore, Warn (the default) or Strict."};
const Param kForce = {"force", "query", "boolean",
                      "Apply patches only: take over fields owned by other managers."};
const Param kListParams[] = {
    {"allowWatchBookmarks", "query", "boolean", "Request BOOKMARK watch events."},
    {"continue", "query", "string", "Continue token of a paginated list."},
    {"fieldSelector", "query", "string", "Restrict the objects returned by their fields."},
    {"labelSelector", "query", "string", "Restrict the objects returned by their labels."},
    {"limit", "query", "integer", "Maximum number of objects to return."},
    {"resourceVersion", "query", "string", "Which version of the collection to serve."},
    {"resourceVersionMatch", "query", "string", "How resourceVersion applies to lists."},
    {"sendInitialEvents", "query", "boolean", "Start a watch with the current objects."},
    {"timeoutSeconds", "query", "integer", "Timeout of the list/watch call."},
    {"watch", "query", "boolean", "Watch for changes and return them as a stream."},
};
const Param kDeleteParams[] = {
    {"dryRun", "query", "string", "When present (All), modifications are not persisted."},
    {"gracePeriodSeconds", "query", "integer", "Seconds before the object is deleted."},
    {"orphanDependents", "query", "boolean", "Deprecated: use propagationPolicy."},
    {"propagationPolicy", "query", "string", "Orphan, Background or Foreground."},
};

enum class Body { kNone, kObject, kPatch, kDeleteOptions };

struct Operation {
  std::string method;  // lower case: get, put, post, patch, delete
  std::string id;
  std::string action;  // x-kubernetes-action
  std::string kind;    // for x-kubernetes-group-version-kind
  std::string description;
  std::vector<Param> params;
  Body body = Body::kNone;
  std::vector<int> codes;       // success codes
  std::string response_schema;  // definition name of the success body
  bool watch_response = false;  // streams WatchEvents
};

struct PathItem {
  std::string path;
  std::vector<Param> params;  // path parameters and pretty, shared by the operations
  std::vector<Operation> ops;
};

const char* const kPatchTypes[] = {"application/json-patch+json", "application/merge-patch+json",
                                   "application/apply-patch+yaml"};

// "apps" -> "Apps", "coordination.k8s.io" -> "Coordination", "" -> "Core",
// "stable.example.com" -> "StableExampleCom": the group part of Kubernetes operation ids.
std::string GroupId(absl::string_view group) {
  if (group.empty()) return "Core";
  if (absl::EndsWith(group, ".k8s.io")) group.remove_suffix(7);
  std::string out;
  for (absl::string_view part : absl::StrSplit(group, absl::ByAnyChar(".-"), absl::SkipEmpty())) {
    std::string p(part);
    p[0] = absl::ascii_toupper(p[0]);
    out += p;
  }
  return out;
}

// What the paths of one resource share: URL prefix, operation id parts, schemas, parameters.
struct ResourceNaming {
  std::string prefix;   // "/api/v1", "/apis/GROUP/VERSION"
  std::string ns_path;  // "/namespaces/{namespace}" for a namespaced resource, else ""
  std::string gv;       // "AppsV1": the group-version part of operation ids
  std::string scope;    // "Namespaced" or ""
  std::string kind_schema, list_schema, delete_schema;
  std::vector<Param> scope_params, item_params;
  std::vector<Param> list_params, write_params, patch_params, delete_params,
      deletecollection_params;
};

std::vector<Param> With(std::vector<Param> base, std::initializer_list<Param> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

ResourceNaming NamingOf(const ResourceInfo& r) {
  ResourceNaming n;
  n.prefix = r.group.empty() ? absl::StrCat("/api/", r.version)
                             : absl::StrCat("/apis/", r.group, "/", r.version);
  std::string version_id = r.version;
  if (!version_id.empty()) version_id[0] = absl::ascii_toupper(version_id[0]);
  n.gv = GroupId(r.group) + version_id;
  n.scope = r.namespaced ? "Namespaced" : "";
  n.kind_schema = SchemaName(r);
  n.list_schema = ListSchemaName(r);
  n.ns_path = r.namespaced ? "/namespaces/{namespace}" : "";
  if (r.namespaced) n.scope_params.push_back(kNamespace);
  n.item_params = With(n.scope_params, {kName, kPretty});

  n.list_params.assign(std::begin(kListParams), std::end(kListParams));
  n.write_params = {kDryRun, kFieldManager, kFieldValidation};
  n.patch_params = {kDryRun, kFieldManager, kFieldValidation, kForce};
  n.delete_params.assign(std::begin(kDeleteParams), std::end(kDeleteParams));
  n.deletecollection_params = n.delete_params;
  for (const Param& p : kListParams) {
    if (std::string(p.name) != "watch" && std::string(p.name) != "allowWatchBookmarks") {
      n.deletecollection_params.push_back(p);
    }
  }
  n.delete_schema = r.return_deleted_object ? n.kind_schema : kStatusName;
  return n;
}

// The collection: list (and watch), create, delete a collection.
PathItem CollectionPath(const ResourceInfo& r, const ResourceNaming& n) {
  PathItem collection{n.prefix + n.ns_path + "/" + r.resource, With(n.scope_params, {kPretty}), {}};
  collection.ops.push_back({"get",
                            absl::StrCat("list", n.gv, n.scope, r.kind),
                            "list",
                            r.kind,
                            absl::StrCat("list or watch objects of kind ", r.kind),
                            n.list_params,
                            Body::kNone,
                            {200},
                            n.list_schema});
  collection.ops.push_back({"post",
                            absl::StrCat("create", n.gv, n.scope, r.kind),
                            "post",
                            r.kind,
                            absl::StrCat("create a ", r.kind),
                            n.write_params,
                            Body::kObject,
                            {200, 201, 202},
                            n.kind_schema});
  collection.ops.push_back({"delete",
                            absl::StrCat("delete", n.gv, "Collection", n.scope, r.kind),
                            "deletecollection",
                            r.kind,
                            absl::StrCat("delete collection of ", r.kind),
                            n.deletecollection_params,
                            Body::kDeleteOptions,
                            {200},
                            kStatusName});
  return collection;
}

// One object: read, replace, patch, delete.
PathItem ItemPath(const ResourceInfo& r, const ResourceNaming& n) {
  PathItem item{n.prefix + n.ns_path + "/" + r.resource + "/{name}", n.item_params, {}};
  item.ops.push_back({"get",
                      absl::StrCat("read", n.gv, n.scope, r.kind),
                      "get",
                      r.kind,
                      absl::StrCat("read the specified ", r.kind),
                      {},
                      Body::kNone,
                      {200},
                      n.kind_schema});
  item.ops.push_back({"put",
                      absl::StrCat("replace", n.gv, n.scope, r.kind),
                      "put",
                      r.kind,
                      absl::StrCat("replace the specified ", r.kind),
                      n.write_params,
                      Body::kObject,
                      {200, 201},
                      n.kind_schema});
  item.ops.push_back({"patch",
                      absl::StrCat("patch", n.gv, n.scope, r.kind),
                      "patch",
                      r.kind,
                      absl::StrCat("partially update the specified ", r.kind),
                      n.patch_params,
                      Body::kPatch,
                      {200, 201},
                      n.kind_schema});
  item.ops.push_back({"delete",
                      absl::StrCat("delete", n.gv, n.scope, r.kind),
                      "delete",
                      r.kind,
                      absl::StrCat("delete a ", r.kind),
                      n.delete_params,
                      Body::kDeleteOptions,
                      {200, 202},
                      n.delete_schema});
  return item;
}

// The status subresource: read, replace, patch.
PathItem StatusPath(const ResourceInfo& r, const ResourceNaming& n) {
  PathItem status{n.prefix + n.ns_path + "/" + r.resource + "/{name}/status", n.item_params, {}};
  status.ops.push_back({"get",
                        absl::StrCat("read", n.gv, n.scope, r.kind, "Status"),
                        "get",
                        r.kind,
                        absl::StrCat("read status of the specified ", r.kind),
                        {},
                        Body::kNone,
                        {200},
                        n.kind_schema});
  status.ops.push_back({"put",
                        absl::StrCat("replace", n.gv, n.scope, r.kind, "Status"),
                        "put",
                        r.kind,
                        absl::StrCat("replace status of the specified ", r.kind),
                        n.write_params,
                        Body::kObject,
                        {200, 201},
                        n.kind_schema});
  status.ops.push_back({"patch",
                        absl::StrCat("patch", n.gv, n.scope, r.kind, "Status"),
                        "patch",
                        r.kind,
                        absl::StrCat("partially update status of the specified ", r.kind),
                        n.patch_params,
                        Body::kPatch,
                        {200, 201},
                        n.kind_schema});
  return status;
}

// A namespaced resource's list across all namespaces.
PathItem AllNamespacesPath(const ResourceInfo& r, const ResourceNaming& n) {
  PathItem all{n.prefix + "/" + r.resource, {kPretty}, {}};
  all.ops.push_back({"get",
                     absl::StrCat("list", n.gv, r.kind, "ForAllNamespaces"),
                     "list",
                     r.kind,
                     absl::StrCat("list or watch objects of kind ", r.kind),
                     n.list_params,
                     Body::kNone,
                     {200},
                     n.list_schema});
  return all;
}

// The deprecated watch paths (the watch=true query parameter is the current way).
void AddWatchPaths(const ResourceInfo& r, const ResourceNaming& n, std::vector<PathItem>& paths) {
  Operation watch_list{"get",
                       absl::StrCat("watch", n.gv, n.scope, r.kind, "List"),
                       "watchlist",
                       r.kind,
                       absl::StrCat("watch individual changes to a list of ", r.kind,
                                    "; deprecated: use the 'watch' parameter with a list"),
                       n.list_params,
                       Body::kNone,
                       {200},
                       kWatchEventName,
                       true};
  paths.push_back(PathItem{n.prefix + "/watch" + n.ns_path + "/" + r.resource,
                           With(n.scope_params, {kPretty}),
                           {watch_list}});
  Operation watch_one = watch_list;
  watch_one.id = absl::StrCat("watch", n.gv, n.scope, r.kind);
  watch_one.action = "watch";
  watch_one.description = absl::StrCat(
      "watch changes to an object of kind ", r.kind,
      "; deprecated: use the 'watch' parameter with a list filtered by 'fieldSelector'");
  paths.push_back(PathItem{
      n.prefix + "/watch" + n.ns_path + "/" + r.resource + "/{name}", n.item_params, {watch_one}});
  if (r.namespaced) {
    Operation watch_all = watch_list;
    watch_all.id = absl::StrCat("watch", n.gv, r.kind, "ListForAllNamespaces");
    paths.push_back(PathItem{n.prefix + "/watch/" + r.resource, {kPretty}, {watch_all}});
  }
}

std::vector<PathItem> ResourcePaths(const ResourceInfo& r) {
  const ResourceNaming n = NamingOf(r);
  std::vector<PathItem> paths;
  paths.push_back(CollectionPath(r, n));
  paths.push_back(ItemPath(r, n));
  if (r.has_status) paths.push_back(StatusPath(r, n));
  if (r.namespaced) paths.push_back(AllNamespacesPath(r, n));
  AddWatchPaths(r, n, paths);
  return paths;
}

// OpenAPI 3 rendering.

json V3Param(const Param& p) {
  json j = {{"name", p.name},
            {"in", p.in},
            {"description", p.description},
            {"schema", {{"type", p.type}, {"uniqueItems", true}}}};
  if (std::string(p.in) == "path") j["required"] = true;
  return j;
}

json V3Operation(const ResourceInfo& r, const Operation& op) {
  const std::string ref = "#/components/schemas/";
  json j = {{"operationId", op.id},
            {"description", op.description},
            {"tags", {GroupId(r.group) + "_" + r.version}},
            {"x-kubernetes-action", op.action},
            {"x-kubernetes-group-version-kind", Gvk(r, op.kind)}};
  if (!op.params.empty()) {
    json params = json::array();
    for (const Param& p : op.params) params.push_back(V3Param(p));
    j["parameters"] = std::move(params);
  }
  switch (op.body) {
    case Body::kNone:
      break;
    case Body::kObject:
      j["requestBody"] = {
          {"required", true},
          {"content", {{"application/json", {{"schema", {{"$ref", ref + SchemaName(r)}}}}}}}};
      break;
    case Body::kPatch: {
      json content = json::object();
      for (const char* type : kPatchTypes) {
        content[type] = {{"schema", {{"$ref", ref + kPatchName}}}};
      }
      j["requestBody"] = {{"required", true}, {"content", std::move(content)}};
      break;
    }
    case Body::kDeleteOptions:
      j["requestBody"] = {
          {"content", {{"application/json", {{"schema", {{"$ref", ref + kDeleteOptionsName}}}}}}}};
      break;
  }
  json responses = json::object();
  const std::string media =
      op.watch_response ? "application/json;stream=watch" : "application/json";
  for (int code : op.codes) {
    json body = {{"schema", {{"$ref", ref + op.response_schema}}}};
    json content = {{media, body}};
    if (op.action == "list") content["application/json;stream=watch"] = body;
    responses[std::to_string(code)] = {{"description", code == 201   ? "Created"
                                                       : code == 202 ? "Accepted"
                                                                     : "OK"},
                                       {"content", std::move(content)}};
  }
  responses["401"] = {{"description", "Unauthorized"}};
  j["responses"] = std::move(responses);
  return j;
}

// Swagger 2 rendering.

json V2Param(const Param& p) {
  json j = {{"name", p.name},
            {"in", p.in},
            {"description", p.description},
            {"type", p.type},
            {"uniqueItems", true}};
  if (std::string(p.in) == "path") j["required"] = true;
  return j;
}

json V2Operation(const ResourceInfo& r, const Operation& op) {
  const std::string ref = "#/definitions/";
  json j = {{"operationId", op.id},
            {"description", op.description},
            {"tags", {GroupId(r.group) + "_" + r.version}},
            {"schemes", {"https"}},
            {"x-kubernetes-action", op.action},
            {"x-kubernetes-group-version-kind", Gvk(r, op.kind)}};
  json params = json::array();
  switch (op.body) {
    case Body::kNone:
      break;
    case Body::kObject:
      params.push_back({{"name", "body"},
                        {"in", "body"},
                        {"required", true},
                        {"schema", {{"$ref", ref + SchemaName(r)}}}});
      j["consumes"] = {"*/*"};
      break;
    case Body::kPatch:
      params.push_back({{"name", "body"},
                        {"in", "body"},
                        {"required", true},
                        {"schema", {{"$ref", ref + kPatchName}}}});
      j["consumes"] = json::array();
      for (const char* type : kPatchTypes) j["consumes"].push_back(type);
      break;
    case Body::kDeleteOptions:
      params.push_back(
          {{"name", "body"}, {"in", "body"}, {"schema", {{"$ref", ref + kDeleteOptionsName}}}});
      j["consumes"] = {"*/*"};
      break;
  }
  for (const Param& p : op.params) params.push_back(V2Param(p));
  if (!params.empty()) j["parameters"] = std::move(params);
  j["produces"] = op.watch_response || op.action == "list"
                      ? json{"application/json", "application/json;stream=watch"}
                      : json{"application/json"};
  json responses = json::object();
  for (int code : op.codes) {
    responses[std::to_string(code)] = {{"description", code == 201   ? "Created"
                                                       : code == 202 ? "Accepted"
                                                                     : "OK"},
                                       {"schema", {{"$ref", ref + op.response_schema}}}};
  }
  responses["401"] = {{"description", "Unauthorized"}};
  j["responses"] = std::move(responses);
  return j;
}

json Info(absl::string_view server_version) {
  return {{"title", "Kubernetes"}, {"version", std::string(server_version)}};
}

}  // namespace

std::string GroupVersionPath(absl::string_view group, absl::string_view version) {
  return group.empty() ? absl::StrCat("api/", version) : absl::StrCat("apis/", group, "/", version);
}

std::map<std::string, std::pair<std::string, std::string>> GroupVersions(
    const std::vector<ResourcePtr>& resources) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const ResourcePtr& r : resources) {
    out[GroupVersionPath(r->group, r->version)] = {r->group, r->version};
  }
  return out;
}

json V3Document(const std::vector<ResourcePtr>& resources, absl::string_view group,
                absl::string_view version, absl::string_view server_version) {
  const std::string ref = "#/components/schemas/";
  json paths = json::object();
  json schemas = json::object();
  AddCommonSchemas(schemas, ref);
  for (const ResourcePtr& r : resources) {
    if (r->group != group || r->version != version) continue;
    for (const PathItem& item : ResourcePaths(*r)) {
      json path = json::object();
      json params = json::array();
      for (const Param& p : item.params) params.push_back(V3Param(p));
      path["parameters"] = std::move(params);
      for (const Operation& op : item.ops) path[op.method] = V3Operation(*r, op);
      paths[item.path] = std::move(path);
    }
    schemas[SchemaName(*r)] = KindSchema(*r, ref);
    schemas[ListSchemaName(*r)] = ListSchema(*r, ref);
  }
  return {{"openapi", "3.0.0"},
          {"info", Info(server_version)},
          {"paths", std::move(paths)},
          {"components",
           {{"schemas", std::move(schemas)},
            {"securitySchemes",
             {{"BearerToken",
               {{"type", "apiKey"},
                {"description", "Bearer Token authentication"},
                {"name", "authorization"},
                {"in", "header"}}}}}}},
          {"security", {{{"BearerToken", json::array()}}}}};
}

json V2Document(const std::vector<ResourcePtr>& resources, absl::string_view server_version) {
  const std::string ref = "#/definitions/";
  json paths = json::object();
  json definitions = json::object();
  json common = json::object();
  AddCommonSchemas(common, ref);
  for (auto& [name, schema] : common.items()) definitions[name] = ToSwaggerSchema(schema);
  for (const ResourcePtr& r : resources) {
    for (const PathItem& item : ResourcePaths(*r)) {
      json path = json::object();
      json params = json::array();
      for (const Param& p : item.params) params.push_back(V2Param(p));
      path["parameters"] = std::move(params);
      for (const Operation& op : item.ops) path[op.method] = V2Operation(*r, op);
      paths[item.path] = std::move(path);
    }
    definitions[SchemaName(*r)] = ToSwaggerSchema(KindSchema(*r, ref));
    definitions[ListSchemaName(*r)] = ToSwaggerSchema(ListSchema(*r, ref));
  }
  return {{"swagger", "2.0"},
          {"info", Info(server_version)},
          {"paths", std::move(paths)},
          {"definitions", std::move(definitions)},
          {"securityDefinitions",
           {{"BearerToken",
             {{"type", "apiKey"},
              {"description", "Bearer Token authentication"},
              {"name", "authorization"},
              {"in", "header"}}}}},
          {"security", {{{"BearerToken", json::array()}}}}};
}

}  // namespace ctrlhost::apiserver::openapi
