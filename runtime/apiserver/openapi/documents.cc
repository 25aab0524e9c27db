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

std::vector<PathItem> ResourcePaths(const ResourceInfo& r) {
  const std::string prefix = r.group.empty() ? absl::StrCat("/api/", r.version)
                                             : absl::StrCat("/apis/", r.group, "/", r.version);
  std::string version_id = r.version;
  if (!version_id.empty()) version_id[0] = absl::ascii_toupper(version_id[0]);
  const std::string gv = GroupId(r.group) + version_id;
  const std::string scope = r.namespaced ? "Namespaced" : "";
  const std::string kind_schema = SchemaName(r);
  const std::string list_schema = ListSchemaName(r);
  const std::string ns_path = r.namespaced ? "/namespaces/{namespace}" : "";
  std::vector<Param> scope_params;
  if (r.namespaced) scope_params.push_back(kNamespace);

  auto with = [](std::vector<Param> base, std::initializer_list<Param> more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  std::vector<Param> list_params(std::begin(kListParams), std::end(kListParams));
  std::vector<Param> write_params = {kDryRun, kFieldManager, kFieldValidation};
  std::vector<Param> patch_params = {kDryRun, kFieldManager, kFieldValidation, kForce};
  std::vector<Param> delete_params(std::begin(kDeleteParams), std::end(kDeleteParams));
  std::vector<Param> deletecollection_params = delete_params;
  for (const Param& p : kListParams) {
    if (std::string(p.name) != "watch" && std::string(p.name) != "allowWatchBookmarks") {
      deletecollection_params.push_back(p);
    }
  }
  const std::string delete_schema = r.return_deleted_object ? kind_schema : kStatusName;

  std::vector<PathItem> paths;
  // The collection.
  PathItem collection{prefix + ns_path + "/" + r.resource, with(scope_params, {kPretty}), {}};
  collection.ops.push_back({"get",
                            absl::StrCat("list", gv, scope, r.kind),
                            "list",
                            r.kind,
                            absl::StrCat("list or watch objects of kind ", r.kind),
                            list_params,
                            Body::kNone,
                            {200},
                            list_schema});
  collection.ops.push_back({"post",
                            absl::StrCat("create", gv, scope, r.kind),
                            "post",
                            r.kind,
                            absl::StrCat("create a ", r.kind),
                            write_params,
                            Body::kObject,
                            {200, 201, 202},
                            kind_schema});
  collection.ops.push_back({"delete",
                            absl::StrCat("delete", gv, "Collection", scope, r.kind),
                            "deletecollection",
                            r.kind,
                            absl::StrCat("delete collection of ", r.kind),
                            deletecollection_params,
                            Body::kDeleteOptions,
                            {200},
                            kStatusName});
  paths.push_back(std::move(collection));
  // One object.
  std::vector<Param> item_params = with(scope_params, {kName, kPretty});
  PathItem item{prefix + ns_path + "/" + r.resource + "/{name}", item_params, {}};
  item.ops.push_back({"get",
                      absl::StrCat("read", gv, scope, r.kind),
                      "get",
                      r.kind,
                      absl::StrCat("read the specified ", r.kind),
                      {},
                      Body::kNone,
                      {200},
                      kind_schema});
  item.ops.push_back({"put",
                      absl::StrCat("replace", gv, scope, r.kind),
                      "put",
                      r.kind,
                      absl::StrCat("replace the specified ", r.kind),
                      write_params,
                      Body::kObject,
                      {200, 201},
                      kind_schema});
  item.ops.push_back({"patch",
                      absl::StrCat("patch", gv, scope, r.kind),
                      "patch",
                      r.kind,
                      absl::StrCat("partially update the specified ", r.kind),
                      patch_params,
                      Body::kPatch,
                      {200, 201},
                      kind_schema});
  item.ops.push_back({"delete",
                      absl::StrCat("delete", gv, scope, r.kind),
                      "delete",
                      r.kind,
                      absl::StrCat("delete a ", r.kind),
                      delete_params,
                      Body::kDeleteOptions,
                      {200, 202},
                      delete_schema});
  paths.push_back(std::move(item));
  if (r.has_status) {
    PathItem status{prefix + ns_path + "/" + r.resource + "/{name}/status", item_params, {}};
    status.ops.push_back({"get",
                          absl::StrCat("read", gv, scope, r.kind, "Status"),
                          "get",
                          r.kind,
                          absl::StrCat("read status of the specified ", r.kind),
                          {},
                          Body::kNone,
                          {200},
                          kind_schema});
    status.ops.push_back({"put",
                          absl::StrCat("replace", gv, scope, r.kind, "Status"),
                          "put",
                          r.kind,
                          absl::StrCat("replace status of the specified ", r.kind),
                          write_params,
                          Body::kObject,
                          {200, 201},
                          kind_schema});
    status.ops.push_back({"patch",
                          absl::StrCat("patch", gv, scope, r.kind, "Status"),
                          "patch",
                          r.kind,
                          absl::StrCat("partially update status of the specified ", r.kind),
                          patch_params,
                          Body::kPatch,
                          {200, 201},
                          kind_schema});
    paths.push_back(std::move(status));
  }
  if (r.namespaced) {
    PathItem all{prefix + "/" + r.resource, {kPretty}, {}};
    all.ops.push_back({"get",
                       absl::StrCat("list", gv, r.kind, "ForAllNamespaces"),
                       "list",
                       r.kind,
                       absl::StrCat("list or watch objects of kind ", r.kind),
                       list_params,
                       Body::kNone,
                       {200},
                       list_schema});
    paths.push_back(std::move(all));
  }
  // The deprecated watch paths (the watch=true query parameter is the current way).
  Operation watch_list{"get",
                       absl::StrCat("watch", gv, scope, r.kind, "List"),
                       "watchlist",
                       r.kind,
                       absl::StrCat("watch individual changes to a list of ", r.kind,
                                    "; deprecated: use the 'watch' parameter with a list"),
                       list_params,
                       Body::kNone,
                       {200},
                       kWatchEventName,
                       true};
  paths.push_back(PathItem{
      prefix + "/watch" + ns_path + "/" + r.resource, with(scope_params, {kPretty}), {watch_list}});
  Operation watch_one = watch_list;
  watch_one.id = absl::StrCat("watch", gv, scope, r.kind);
  watch_one.action = "watch";
  watch_one.description = absl::StrCat(
      "watch changes to an object of kind ", r.kind,
      "; deprecated: use the 'watch' parameter with a list filtered by 'fieldSelector'");
  paths.push_back(PathItem{
      prefix + "/watch" + ns_path + "/" + r.resource + "/{name}", item_params, {watch_one}});
  if (r.namespaced) {
    Operation watch_all = watch_list;
    watch_all.id = absl::StrCat("watch", gv, r.kind, "ListForAllNamespaces");
    paths.push_back(PathItem{prefix + "/watch/" + r.resource, {kPretty}, {watch_all}});
  }
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
