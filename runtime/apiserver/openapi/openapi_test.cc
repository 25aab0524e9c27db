#include "runtime/apiserver/openapi/openapi.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/openapi/gnostic.h"
#include "runtime/apiserver/openapi/kind_schemas.h"
#include "runtime/apiserver/resource_registry.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using nlohmann::json;

ResourceInfo Widget(const std::string& version, json schema, bool has_status = true) {
  ResourceInfo r;
  r.group = "stable.example.com";
  r.version = version;
  r.resource = "widgets";
  r.singular = "widget";
  r.kind = "Widget";
  r.list_kind = "WidgetList";
  r.namespaced = true;
  r.has_status = has_status;
  r.return_deleted_object = true;
  if (!schema.is_null()) r.schema = std::make_shared<const json>(std::move(schema));
  return r;
}

json WidgetSchema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "spec": {
        "type": "object",
        "required": ["size"],
        "properties": {
          "size": {"type": "integer", "minimum": 0},
          "color": {"type": "string", "nullable": true, "enum": ["red", "blue"]},
          "port": {"x-kubernetes-int-or-string": true},
          "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"a": {"type": "string"}}}
        }
      },
      "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
    }
  })");
}

json Get(const ResourceRegistry& registry, const std::string& path,
         const std::string& accept = "application/json", const std::string& hash = "") {
  absl::StatusOr<OpenApiResponse> r = ServeOpenApi(registry, path, accept, hash);
  EXPECT_TRUE(r.ok()) << path << ": " << r.status();
  if (!r.ok()) return nullptr;
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->content_type, "application/json");
  return json::parse(r->body);
}

std::string Header(const OpenApiResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

// kubectl's check (cli-runtime query_param_verifier_v3.go): some PATCH operation whose
// x-kubernetes-group-version-kind is the kind lists the query parameter.
bool PatchSupportsParam(const json& doc, const std::string& group, const std::string& version,
                        const std::string& kind, const std::string& param) {
  for (auto& [path, item] : doc["paths"].items()) {
    if (!item.contains("patch")) continue;
    const json& op = item["patch"];
    const json& gvk = op["x-kubernetes-group-version-kind"];
    if (gvk["group"] != group || gvk["version"] != version || gvk["kind"] != kind) continue;
    for (const json& p : op["parameters"]) {
      if (p["name"] == param) return true;
    }
    return false;
  }
  return false;
}

TEST(OpenApiV3, IndexListsEveryGroupVersionWithContentHash) {
  ResourceRegistry registry;
  json index = Get(registry, "/openapi/v3");
  for (const char* gv : {"api/v1", "apis/apps/v1", "apis/coordination.k8s.io/v1",
                         "apis/events.k8s.io/v1", "apis/apiextensions.k8s.io/v1"}) {
    ASSERT_TRUE(index["paths"].contains(gv)) << gv << " in " << index.dump();
    const std::string url = index["paths"][gv]["serverRelativeURL"];
    const std::string prefix = std::string("/openapi/v3/") + gv + "?hash=";
    ASSERT_EQ(url.substr(0, prefix.size()), prefix);
    const std::string hash = url.substr(prefix.size());
    EXPECT_EQ(hash.size(), 128u);
    // The URL from the index serves the document, marked immutable.
    absl::StatusOr<OpenApiResponse> r =
        ServeOpenApi(registry, std::string("/openapi/v3/") + gv, "application/json", hash);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->code, 200);
    EXPECT_EQ(Header(*r, "ETag"), "\"" + hash + "\"");
    EXPECT_NE(Header(*r, "Cache-Control").find("immutable"), std::string::npos);
  }
  EXPECT_EQ(BuildV3Index(registry), index);
}

TEST(OpenApiV3, EveryBuiltinKindSupportsFieldValidationOnPatch) {
  ResourceRegistry registry;
  for (const ResourcePtr& r : registry.All()) {
    const std::string gv =
        r->group.empty() ? "api/" + r->version : "apis/" + r->group + "/" + r->version;
    json doc = Get(registry, "/openapi/v3/" + gv);
    EXPECT_EQ(doc["openapi"], "3.0.0");
    EXPECT_TRUE(PatchSupportsParam(doc, r->group, r->version, r->kind, "fieldValidation"))
        << r->kind;
    EXPECT_FALSE(PatchSupportsParam(doc, r->group, r->version, r->kind, "nonsense"));
    // The kind's schema carries its GVK (how kubectl explain and apply find it).
    const json& schema = doc["components"]["schemas"][SchemaName(*r)];
    ASSERT_TRUE(schema.is_object()) << SchemaName(*r);
    EXPECT_EQ(schema["x-kubernetes-group-version-kind"][0]["kind"], r->kind);
    EXPECT_TRUE(schema["properties"].contains("metadata"));
  }
}

TEST(OpenApiV3, OperationsOfANamespacedResource) {
  ResourceRegistry registry;
  json doc = Get(registry, "/openapi/v3/apis/apps/v1");
  const json& paths = doc["paths"];
  const json& collection = paths["/apis/apps/v1/namespaces/{namespace}/deployments"];
  EXPECT_EQ(collection["get"]["operationId"], "listAppsV1NamespacedDeployment");
  EXPECT_EQ(collection["get"]["x-kubernetes-action"], "list");
  EXPECT_EQ(collection["post"]["x-kubernetes-action"], "post");
  EXPECT_EQ(collection["delete"]["x-kubernetes-action"], "deletecollection");
  const json& item = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
  EXPECT_EQ(item["get"]["operationId"], "readAppsV1NamespacedDeployment");
  EXPECT_EQ(item["put"]["operationId"], "replaceAppsV1NamespacedDeployment");
  EXPECT_EQ(item["delete"]["operationId"], "deleteAppsV1NamespacedDeployment");
  const json& patch = item["patch"];
  EXPECT_EQ(patch["operationId"], "patchAppsV1NamespacedDeployment");
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"],
            json({{"group", "apps"}, {"kind", "Deployment"}, {"version", "v1"}}));
  std::vector<std::string> params;
  for (const json& p : patch["parameters"]) params.push_back(p["name"]);
  EXPECT_EQ(params,
            (std::vector<std::string>{"dryRun", "fieldManager", "fieldValidation", "force"}));
  const json& content = patch["requestBody"]["content"];
  EXPECT_TRUE(content.contains("application/json-patch+json"));
  EXPECT_TRUE(content.contains("application/merge-patch+json"));
  EXPECT_TRUE(content.contains("application/apply-patch+yaml"));
  // See documents.h: kubectl then uses its compiled-in merge keys.
  EXPECT_FALSE(content.contains("application/strategic-merge-patch+json"));
  std::vector<std::string> item_params;
  for (const json& p : item["parameters"]) item_params.push_back(p["name"]);
  EXPECT_EQ(item_params, (std::vector<std::string>{"namespace", "name", "pretty"}));
  EXPECT_TRUE(item["parameters"][0]["required"]);

  std::vector<std::string> list_params;
  for (const json& p : collection["get"]["parameters"]) list_params.push_back(p["name"]);
  for (const char* p : {"labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
                        "watch", "timeoutSeconds", "allowWatchBookmarks"}) {
    EXPECT_NE(std::find(list_params.begin(), list_params.end(), p), list_params.end()) << p;
  }
  std::vector<std::string> delete_params;
  for (const json& p : item["delete"]["parameters"]) delete_params.push_back(p["name"]);
  for (const char* p : {"propagationPolicy", "gracePeriodSeconds", "dryRun"}) {
    EXPECT_NE(std::find(delete_params.begin(), delete_params.end(), p), delete_params.end()) << p;
  }
  EXPECT_EQ(paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]["patch"]
                 ["operationId"],
            "patchAppsV1NamespacedDeploymentStatus");
  EXPECT_EQ(paths["/apis/apps/v1/deployments"]["get"]["operationId"],
            "listAppsV1DeploymentForAllNamespaces");
  EXPECT_EQ(
      paths["/apis/apps/v1/watch/namespaces/{namespace}/deployments"]["get"]["x-kubernetes-action"],
      "watchlist");
  EXPECT_EQ(paths["/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}"]["get"]
                 ["x-kubernetes-action"],
            "watch");
  EXPECT_TRUE(paths.contains("/apis/apps/v1/watch/deployments"));
  // Every $ref resolves.
  const std::string text = doc.dump();
  const std::string marker = "\"$ref\":\"#/components/schemas/";
  for (size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    const size_t start = at + marker.size();
    const std::string name = text.substr(start, text.find('"', start) - start);
    EXPECT_TRUE(doc["components"]["schemas"].contains(name)) << name;
  }
}

TEST(OpenApiV3, ClusterScopedResourceHasNoNamespacePaths) {
  ResourceRegistry registry;
  json doc = Get(registry, "/openapi/v3/api/v1");
  EXPECT_EQ(doc["paths"]["/api/v1/namespaces/{name}"]["get"]["operationId"], "readCoreV1Namespace");
  EXPECT_EQ(doc["paths"]["/api/v1/namespaces/{name}/status"]["put"]["operationId"],
            "replaceCoreV1NamespaceStatus");
  EXPECT_TRUE(doc["paths"].contains("/api/v1/watch/namespaces/{name}"));
  EXPECT_EQ(doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["delete"]["operationId"],
            "deleteCoreV1CollectionNamespacedConfigMap");
  // ConfigMap has no status subresource.
  EXPECT_FALSE(doc["paths"].contains("/api/v1/namespaces/{namespace}/configmaps/{name}/status"));
  const json& cm = doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"];
  EXPECT_EQ(cm["properties"]["data"]["additionalProperties"]["type"], "string");
  const json& meta =
      doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
  EXPECT_EQ(meta["properties"]["labels"]["additionalProperties"]["type"], "string");
  EXPECT_EQ(meta["properties"]["generation"]["format"], "int64");
}

TEST(OpenApiV3, CustomResourceAppearsChangesAndDisappearsAtOnce) {
  ResourceRegistry registry;
  EXPECT_FALSE(Get(registry, "/openapi/v3")["paths"].contains("apis/stable.example.com/v1"));
  ASSERT_TRUE(
      registry.SetCustomResource("stable.example.com", "widgets", {Widget("v1", WidgetSchema())})
          .ok());
  json index = Get(registry, "/openapi/v3");
  ASSERT_TRUE(index["paths"].contains("apis/stable.example.com/v1"));
  const std::string url = index["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"];
  const std::string old_hash = url.substr(url.find("hash=") + 5);

  json doc = Get(registry, "/openapi/v3/apis/stable.example.com/v1");
  EXPECT_TRUE(PatchSupportsParam(doc, "stable.example.com", "v1", "Widget", "fieldValidation"));
  const json& schema = doc["components"]["schemas"]["com.example.stable.v1.Widget"];
  EXPECT_EQ(schema["x-kubernetes-group-version-kind"],
            json::parse(R"([{"group":"stable.example.com","kind":"Widget","version":"v1"}])"));
  EXPECT_EQ(schema["properties"]["spec"]["properties"]["size"]["minimum"], 0);
  EXPECT_EQ(schema["properties"]["apiVersion"]["type"], "string");
  EXPECT_EQ(schema["properties"]["metadata"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_TRUE(doc["components"]["schemas"].contains("com.example.stable.v1.WidgetList"));
  // Custom resources answer DELETE with the object.
  EXPECT_EQ(doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/widgets/{name}"]
               ["delete"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/com.example.stable.v1.Widget");

  // A changed schema changes the document and its hash; the old URL redirects.
  json changed = WidgetSchema();
  changed["properties"]["spec"]["properties"]["size"]["maximum"] = 10;
  ASSERT_TRUE(
      registry.SetCustomResource("stable.example.com", "widgets", {Widget("v1", changed)}).ok());
  json doc2 = Get(registry, "/openapi/v3/apis/stable.example.com/v1");
  EXPECT_EQ(doc2["components"]["schemas"]["com.example.stable.v1.Widget"]["properties"]["spec"]
                ["properties"]["size"]["maximum"],
            10);
  absl::StatusOr<OpenApiResponse> stale =
      ServeOpenApi(registry, "/openapi/v3/apis/stable.example.com/v1", "", old_hash);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->code, 301);
  const std::string location = Header(*stale, "Location");
  EXPECT_EQ(location.rfind("/openapi/v3/apis/stable.example.com/v1?hash=", 0), 0u);
  EXPECT_NE(location.substr(location.find("hash=") + 5), old_hash);

  registry.RemoveCustomResource("stable.example.com", "widgets");
  EXPECT_FALSE(Get(registry, "/openapi/v3")["paths"].contains("apis/stable.example.com/v1"));
  absl::StatusOr<OpenApiResponse> gone =
      ServeOpenApi(registry, "/openapi/v3/apis/stable.example.com/v1", "", "");
  EXPECT_TRUE(kube::IsNotFound(gone.status())) << gone.status();
}

TEST(OpenApiV3, CustomResourceWithoutOrWithMalformedSchemaIsOpen) {
  ResourceRegistry registry;
  json malformed = json::parse(R"({
    "type": 7, "properties": {"spec": {"$ref": "#/definitions/nowhere", "type": ["x"],
    "properties": "nope", "items": 3}}, "definitions": {}})");
  ResourceInfo a = Widget("v1", malformed);
  ResourceInfo b = Widget("v2", nullptr);
  ASSERT_TRUE(registry.SetCustomResource("stable.example.com", "widgets", {a, b}).ok());
  json v1 = Get(registry, "/openapi/v3/apis/stable.example.com/v1");
  const json& s1 = v1["components"]["schemas"]["com.example.stable.v1.Widget"];
  EXPECT_EQ(s1["type"], "object");
  EXPECT_FALSE(s1["properties"]["spec"].contains("$ref"));
  EXPECT_FALSE(s1["properties"]["spec"].contains("type"));
  EXPECT_FALSE(s1.contains("definitions"));
  json v2 = Get(registry, "/openapi/v3/apis/stable.example.com/v2");
  EXPECT_EQ(v2["components"]["schemas"]["com.example.stable.v2.Widget"]
              ["x-kubernetes-preserve-unknown-fields"],
            true);
  // The Swagger document and its protobuf form still build.
  absl::StatusOr<OpenApiResponse> pb =
      ServeOpenApi(registry, "/openapi/v2", kOpenApiV2ProtobufType, "");
  ASSERT_TRUE(pb.ok()) << pb.status();

  // Deeply nested schemas are cut off instead of recursing without bound.
  std::string text;
  for (int i = 0; i < 1000; ++i) text += R"({"type":"object","properties":{"a":)";
  text += "{}";
  for (int i = 0; i < 1000; ++i) text += "}}";
  json deep = json::parse(text);
  ASSERT_TRUE(
      registry.SetCustomResource("stable.example.com", "widgets", {Widget("v1", deep)}).ok());
  EXPECT_TRUE(ServeOpenApi(registry, "/openapi/v2", kOpenApiV2ProtobufType, "").ok());
  EXPECT_TRUE(ServeOpenApi(registry, "/openapi/v3/apis/stable.example.com/v1", "", "").ok());
}

TEST(OpenApiServe, ErrorsAndNegotiation) {
  ResourceRegistry registry;
  absl::StatusOr<OpenApiResponse> r = ServeOpenApi(registry, "/openapi/v3/apis/nope/v1", "", "");
  EXPECT_TRUE(kube::IsNotFound(r.status())) << r.status();
  EXPECT_EQ(kube::HttpCode(r.status()), 404);
  r = ServeOpenApi(registry, "/openapi/v4", "", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 404);
  r = ServeOpenApi(registry, "/openapi/v3/apis/apps", "", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 404);
  r = ServeOpenApi(registry, "/openapi/v3/api/v1",
                   "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 406);
  r = ServeOpenApi(registry, "/openapi/v2", "text/html", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 406);
  r = ServeOpenApi(registry, "/openapi/v2", "application/json;q=0, text/plain", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 406);
  // Alternatives: the first servable type in the client's order wins.
  r = ServeOpenApi(registry, "/openapi/v3/api/v1",
                   "application/com.github.proto-openapi.spec.v3@v1.0+protobuf, application/json",
                   "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content_type, "application/json");
  r = ServeOpenApi(registry, "/openapi/v2",
                   std::string(kOpenApiV2ProtobufType) + ", application/json", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content_type, kOpenApiV2ProtobufResponseType);
  r = ServeOpenApi(registry, "/openapi/v2", "application/json, */*", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content_type, "application/json");
  r = ServeOpenApi(registry, "/openapi/v3/", "*/*", "");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(json::parse(r->body).contains("paths"));
}

TEST(OpenApiV2, SwaggerDocumentDescribesEveryKind) {
  ResourceRegistry registry;
  ASSERT_TRUE(
      registry.SetCustomResource("stable.example.com", "widgets", {Widget("v1", WidgetSchema())})
          .ok());
  json doc = Get(registry, "/openapi/v2", "");
  EXPECT_EQ(doc, BuildV2Document(registry));
  EXPECT_EQ(doc["swagger"], "2.0");
  for (const ResourcePtr& r : registry.All()) {
    const json& d = doc["definitions"][SchemaName(*r)];
    ASSERT_TRUE(d.is_object()) << SchemaName(*r);
    EXPECT_EQ(d["x-kubernetes-group-version-kind"][0]["kind"], r->kind);
    EXPECT_EQ(d["properties"]["metadata"],
              json({{"$ref", "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}}));
  }
  const json& patch =
      doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "Widget");
  EXPECT_EQ(patch["parameters"][0]["in"], "body");
  // Swagger 2 readers get untyped values where OpenAPI 3 says nullable / int-or-string /
  // preserve-unknown-fields.
  const json& spec = doc["definitions"]["com.example.stable.v1.Widget"]["properties"]["spec"];
  EXPECT_EQ(spec["properties"]["size"]["type"], "integer");
  EXPECT_FALSE(spec["properties"]["color"].contains("type"));
  EXPECT_FALSE(spec["properties"]["color"].contains("nullable"));
  EXPECT_FALSE(spec["properties"]["port"].contains("type"));
  EXPECT_FALSE(spec["properties"]["extra"].contains("properties"));
  EXPECT_EQ(spec["required"], json({"size"}));
}

TEST(ToSwaggerSchema, DropsWhatSwagger2CannotSay) {
  json in = json::parse(R"({
    "type": "object", "required": ["a", "b"],
    "properties": {
      "a": {"type": "string", "nullable": true},
      "b": {"type": "array"},
      "c": {"anyOf": [{"type": "integer"}, {"type": "string"}], "oneOf": [], "not": {}},
      "d": {"type": "array", "items": {"type": "string", "nullable": "yes"}}
    }})");
  json out = ToSwaggerSchema(in);
  EXPECT_EQ(out["required"], json({"b"}));
  EXPECT_FALSE(out["properties"]["a"].contains("type"));
  EXPECT_FALSE(out["properties"]["b"].contains("type"));  // an array without items
  EXPECT_EQ(out["properties"]["c"], json::object());
  EXPECT_EQ(out["properties"]["d"]["items"]["type"], "string");  // "yes" is not true
  EXPECT_EQ(ToSwaggerSchema(json::array()), json::object());
}

// A minimal protobuf reader: enough to check the encoding is well formed and to look at it.
struct Field {
  int number;
  int wire_type;
  uint64_t varint = 0;
  std::string bytes;
};

bool ReadVarint(const std::string& in, size_t& pos, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 64 && pos < in.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(in[pos++]);
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Parses one message level; false if malformed.
bool Parse(const std::string& in, std::vector<Field>& out) {
  size_t pos = 0;
  while (pos < in.size()) {
    uint64_t tag;
    if (!ReadVarint(in, pos, tag)) return false;
    Field f{static_cast<int>(tag >> 3), static_cast<int>(tag & 7)};
    if (f.number == 0) return false;
    if (f.wire_type == 0) {
      if (!ReadVarint(in, pos, f.varint)) return false;
    } else if (f.wire_type == 1) {
      if (pos + 8 > in.size()) return false;
      f.bytes = in.substr(pos, 8);
      pos += 8;
    } else if (f.wire_type == 2) {
      uint64_t len;
      if (!ReadVarint(in, pos, len) || len > in.size() - pos) return false;
      f.bytes = in.substr(pos, len);
      pos += len;
    } else {
      return false;
    }
    out.push_back(std::move(f));
  }
  return true;
}

std::vector<Field> Fields(const std::string& in, int number) {
  std::vector<Field> all, out;
  EXPECT_TRUE(Parse(in, all));
  for (Field& f : all) {
    if (f.number == number) out.push_back(std::move(f));
  }
  return out;
}

std::string One(const std::string& in, int number) {
  std::vector<Field> f = Fields(in, number);
  EXPECT_EQ(f.size(), 1u) << "field " << number;
  return f.empty() ? "" : f[0].bytes;
}

TEST(Gnostic, EncodesDocumentFields) {
  json swagger = json::parse(R"({
    "swagger": "2.0",
    "info": {"title": "Kubernetes", "version": "v1.32.0"},
    "paths": {"/api/v1/things/{name}": {
      "parameters": [{"name": "name", "in": "path", "required": true, "type": "string"}],
      "patch": {"operationId": "patchThing", "consumes": ["application/merge-patch+json"],
                "parameters": [{"name": "body", "in": "body", "required": true,
                                "schema": {"$ref": "#/definitions/T"}},
                               {"name": "fieldValidation", "in": "query", "type": "string"}],
                "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/T"}}},
                "x-kubernetes-group-version-kind": {"group": "", "kind": "Thing", "version": "v1"}}}},
    "definitions": {"T": {"type": "object", "required": ["spec"],
      "properties": {"spec": {"type": "integer", "minimum": -1.5, "maxLength": 300,
                              "enum": [1, 2], "additionalProperties": false}},
      "x-kubernetes-group-version-kind": [{"group": "", "kind": "Thing", "version": "v1"}]}}
  })");
  absl::StatusOr<std::string> pb = SwaggerToGnostic(swagger);
  ASSERT_TRUE(pb.ok()) << pb.status();
  EXPECT_EQ(One(*pb, 1), "2.0");
  EXPECT_EQ(One(One(*pb, 2), 1), "Kubernetes");
  EXPECT_EQ(One(One(*pb, 2), 2), "v1.32.0");
  // paths: NamedPathItem{name, PathItem{patch = 8, parameters = 9}}
  const std::string named_path = One(One(*pb, 8), 2);
  EXPECT_EQ(One(named_path, 1), "/api/v1/things/{name}");
  const std::string path_item = One(named_path, 2);
  const std::string path_param = One(One(One(path_item, 9), 1), 2);  // NonBodyParameter
  EXPECT_EQ(One(One(path_param, 4), 4), "name");                     // path sub-schema
  EXPECT_EQ(Fields(One(path_param, 4), 1)[0].varint, 1u);            // required
  const std::string op = One(path_item, 8);
  EXPECT_EQ(One(op, 5), "patchThing");
  EXPECT_EQ(One(op, 7), "application/merge-patch+json");
  std::vector<Field> params = Fields(op, 8);
  ASSERT_EQ(params.size(), 2u);
  const std::string body = One(One(params[0].bytes, 1), 1);  // Parameter.body_parameter
  EXPECT_EQ(One(body, 2), "body");
  EXPECT_EQ(One(One(body, 5), 1), "#/definitions/T");
  const std::string query = One(One(One(params[1].bytes, 1), 2), 3);
  EXPECT_EQ(One(query, 4), "fieldValidation");
  EXPECT_EQ(One(query, 6), "string");
  const std::string response = One(One(One(op, 9), 1), 2);
  EXPECT_EQ(One(One(One(One(response, 1), 2), 1), 1), "#/definitions/T");
  const std::string ext = One(op, 13);
  EXPECT_EQ(One(ext, 1), "x-kubernetes-group-version-kind");
  EXPECT_EQ(json::parse(One(One(ext, 2), 2)),
            json::parse(R"({"group": "", "kind": "Thing", "version": "v1"})"));
  // definitions: NamedSchema{name, Schema}
  const std::string named_schema = One(One(*pb, 9), 1);
  EXPECT_EQ(One(named_schema, 1), "T");
  const std::string schema = One(named_schema, 2);
  EXPECT_EQ(One(One(schema, 22), 1), "object");
  EXPECT_EQ(One(schema, 19), "spec");
  const std::string spec = One(One(One(schema, 25), 1), 2);
  double minimum;
  const std::string min_bytes = One(spec, 9);
  ASSERT_EQ(min_bytes.size(), 8u);
  uint64_t bits = 0;
  for (int i = 7; i >= 0; --i) bits = (bits << 8) | static_cast<uint8_t>(min_bytes[i]);
  std::memcpy(&minimum, &bits, sizeof minimum);
  EXPECT_EQ(minimum, -1.5);
  EXPECT_EQ(Fields(spec, 11)[0].varint, 300u);
  EXPECT_EQ(Fields(spec, 20).size(), 2u);
  const std::string additional = One(spec, 21);
  ASSERT_EQ(Fields(additional, 2).size(), 1u);  // boolean false is written (oneof)
  EXPECT_EQ(Fields(additional, 2)[0].varint, 0u);
}

TEST(Gnostic, RejectsNonObjectAndUnknownParameterLocation) {
  EXPECT_FALSE(SwaggerToGnostic(json::array()).ok());
  json bad = {{"paths", {{"/x", {{"get", {{"parameters", {{{"in", "cookie"}}}}}}}}}}};
  EXPECT_EQ(SwaggerToGnostic(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Gnostic, ServedDocumentIsWellFormedAndHasEveryDefinition) {
  ResourceRegistry registry;
  absl::StatusOr<OpenApiResponse> r =
      ServeOpenApi(registry, "/openapi/v2", kOpenApiV2ProtobufType, "");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->content_type, kOpenApiV2ProtobufResponseType);
  std::vector<std::string> names;
  for (const Field& f : Fields(One(r->body, 9), 1)) names.push_back(One(f.bytes, 1));
  json doc = BuildV2Document(registry);
  EXPECT_EQ(names.size(), doc["definitions"].size());
  EXPECT_NE(std::find(names.begin(), names.end(), "io.k8s.api.apps.v1.Deployment"), names.end());
}

}  // namespace
}  // namespace ctrlhost::apiserver::openapi
