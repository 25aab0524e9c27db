#include "runtime/apiserver/openapi/kind_schemas.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using nlohmann::json;

json Str(const char* description) { return {{"type", "string"}, {"description", description}}; }
json Int64(const char* description) {
  return {{"type", "integer"}, {"format", "int64"}, {"description", description}};
}
json Int32(const char* description) {
  return {{"type", "integer"}, {"format", "int32"}, {"description", description}};
}
json Bool(const char* description) { return {{"type", "boolean"}, {"description", description}}; }
json Time(const char* description) {
  return {{"type", "string"}, {"format", "date-time"}, {"description", description}};
}
json StringMap(const char* description) {
  return {{"type", "object"},
          {"additionalProperties", {{"type", "string"}}},
          {"description", description}};
}
// Content the documents do not describe field by field: any object is valid.
json AnyObject(const char* description) {
  return {{"type", "object"},
          {"x-kubernetes-preserve-unknown-fields", true},
          {"description", description}};
}
json AnyObjectArray(const char* description) {
  return {{"type", "array"},
          {"items", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
          {"description", description}};
}
json Ref(const std::string& prefix, const char* name) {
  return {{"$ref", absl::StrCat(prefix, name)}};
}

json ObjectMetaSchema() {
  json owner_ref = {
      {"type", "object"},
      {"required", {"apiVersion", "kind", "name", "uid"}},
      {"properties",
       {{"apiVersion", Str("API version of the referent.")},
        {"blockOwnerDeletion",
         Bool("If true, the owner cannot be deleted from storage before this reference is "
              "removed.")},
        {"controller", Bool("If true, this reference points to the managing controller.")},
        {"kind", Str("Kind of the referent.")},
        {"name", Str("Name of the referent.")},
        {"uid", Str("UID of the referent.")}}},
      {"x-kubernetes-map-type", "atomic"}};
  json managed = {
      {"type", "object"},
      {"properties",
       {{"apiVersion", Str("The version of this resource that this field set applies to.")},
        {"fieldsType", Str("The format of the fields field; only FieldsV1.")},
        {"fieldsV1", AnyObject("The set of fields owned, in the FieldsV1 format.")},
        {"manager", Str("The identifier of the workflow managing these fields.")},
        {"operation", Str("Apply or Update.")},
        {"subresource", Str("The subresource used to update the object.")},
        {"time", Time("When the entry was last changed.")}}}};
  return {
      {"type", "object"},
      {"description",
       "Standard object metadata: what all persisted resources must have, including objects "
       "users create."},
      {"properties",
       {{"annotations", StringMap("Unstructured key value map set by external tools.")},
        {"creationTimestamp", Time("When this object was created; set by the server.")},
        {"deletionGracePeriodSeconds",
         Int64("Seconds allowed for graceful termination before removal.")},
        {"deletionTimestamp", Time("When this object will be deleted; set by the server.")},
        {"finalizers",
         {{"type", "array"},
          {"items", {{"type", "string"}}},
          {"x-kubernetes-list-type", "set"},
          {"description", "Must be empty before the object is deleted from storage."}}},
        {"generateName", Str("Prefix for a server-generated unique name.")},
        {"generation", Int64("A sequence number for a specific generation of the desired state.")},
        {"labels", StringMap("Map of string keys and values to organize and select objects.")},
        {"managedFields",
         {{"type", "array"},
          {"items", managed},
          {"description", "Which workflow manages which fields."}}},
        {"name", Str("Name, unique within a namespace.")},
        {"namespace", Str("The namespace the object lives in; empty for cluster-scoped kinds.")},
        {"ownerReferences",
         {{"type", "array"},
          {"items", owner_ref},
          {"x-kubernetes-list-type", "map"},
          {"x-kubernetes-list-map-keys", {"uid"}},
          {"description", "Objects this object depends on."}}},
        {"resourceVersion", Str("Opaque version of this object, for optimistic concurrency.")},
        {"selfLink", Str("Deprecated, not set.")},
        {"uid", Str("Unique in time and space; set by the server.")}}}};
}

json KindProperties(const ResourceInfo& r) {
  const std::string& g = r.group;
  const std::string& k = r.kind;
  if (g.empty() && k == "ConfigMap") {
    return {{"data", StringMap("Configuration data (UTF-8 strings).")},
            {"binaryData",
             {{"type", "object"},
              {"additionalProperties", {{"type", "string"}, {"format", "byte"}}},
              {"description", "Binary configuration data (base64)."}}},
            {"immutable", Bool("If true, data cannot be updated.")}};
  }
  if (g.empty() && k == "Secret") {
    return {{"data",
             {{"type", "object"},
              {"additionalProperties", {{"type", "string"}, {"format", "byte"}}},
              {"description", "Secret data (base64)."}}},
            {"stringData", StringMap("Write-only convenience: merged into data on write.")},
            {"type", Str("Used to facilitate programmatic handling of secret data.")},
            {"immutable", Bool("If true, data cannot be updated.")}};
  }
  if (g.empty() && k == "ServiceAccount") {
    return {{"automountServiceAccountToken",
             Bool("Whether pods should mount an API token automatically.")},
            {"imagePullSecrets", AnyObjectArray("References to secrets for pulling images.")},
            {"secrets", AnyObjectArray("Secrets pods running as this account may use.")}};
  }
  if (g.empty() && k == "Event") {
    return {{"action", Str("What action was taken or failed.")},
            {"count", Int32("The number of times this event has occurred.")},
            {"eventTime", Time("When this event was first observed (microseconds).")},
            {"firstTimestamp", Time("When this event was first recorded.")},
            {"involvedObject", AnyObject("The object this event is about.")},
            {"lastTimestamp", Time("When this event most recently occurred.")},
            {"message", Str("A human-readable description of the status of this operation.")},
            {"reason", Str("Short, machine understandable reason for the transition.")},
            {"related", AnyObject("Optional secondary object for more complex actions.")},
            {"reportingComponent", Str("Name of the controller that emitted this event.")},
            {"reportingInstance", Str("ID of the controller instance.")},
            {"series", AnyObject("Data about the event series this event represents.")},
            {"source", AnyObject("The component reporting this event.")},
            {"type", Str("Type of this event (Normal, Warning).")}};
  }
  if (g == "events.k8s.io" && k == "Event") {
    return {{"action", Str("What action was taken or failed.")},
            {"deprecatedCount", Int32("Deprecated field for backward compatibility.")},
            {"deprecatedFirstTimestamp", Time("Deprecated field for backward compatibility.")},
            {"deprecatedLastTimestamp", Time("Deprecated field for backward compatibility.")},
            {"deprecatedSource", AnyObject("Deprecated field for backward compatibility.")},
            {"eventTime", Time("When this event was first observed (microseconds).")},
            {"note", Str("A human-readable description of the status of this operation.")},
            {"reason", Str("Why the action was taken.")},
            {"regarding", AnyObject("The object this event is about.")},
            {"related", AnyObject("Optional secondary object for more complex actions.")},
            {"reportingController", Str("Name of the controller that emitted this event.")},
            {"reportingInstance", Str("ID of the controller instance.")},
            {"series", AnyObject("Data about the event series this event represents.")},
            {"type", Str("Type of this event (Normal, Warning).")}};
  }
  // Namespace, Service, Deployment, Lease, CustomResourceDefinition and any kind added later
  // keep their content in spec (and status).
  json props = {{"spec", AnyObject("The desired state.")}};
  if (r.has_status) props["status"] = AnyObject("The observed state, written by controllers.");
  return props;
}

// Kinds this file names field by field; any other built-in kind added later is described as
// an open object, so its schema never rejects a valid object.
bool KnownBuiltin(const ResourceInfo& r) {
  static const char* const kKnown[][2] = {{"", "ConfigMap"},
                                          {"", "Secret"},
                                          {"", "ServiceAccount"},
                                          {"", "Event"},
                                          {"", "Namespace"},
                                          {"", "Service"},
                                          {"events.k8s.io", "Event"},
                                          {"apps", "Deployment"},
                                          {"coordination.k8s.io", "Lease"},
                                          {"apiextensions.k8s.io", "CustomResourceDefinition"}};
  for (const auto& kv : kKnown) {
    if (r.group == kv[0] && r.kind == kv[1]) return true;
  }
  return false;
}

json TypeMetaProperties(const std::string& ref_prefix) {
  return {
      {"apiVersion", Str("Versioned schema of this representation of an object.")},
      {"kind", Str("REST resource this object represents.")},
      {"metadata", {{"allOf", {Ref(ref_prefix, kObjectMetaName)}}, {"default", json::object()}}}};
}

// True when `j` has `key` set to boolean true (any other type counts as false).
bool IsTrue(const json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// A CRD's schema made safe to publish: no references (the documents define no targets for
// them), no "type" that is not a JSON type name, and nothing nested deeper than clients
// recurse; the dropped parts become open ("anything goes") schemas.
json SanitizeCrdSchema(const json& in, int depth) {
  if (!in.is_object() || depth > 64) return {{"x-kubernetes-preserve-unknown-fields", true}};
  json s = json::object();
  for (auto& [key, value] : in.items()) {
    if (key == "$ref" || key == "$schema" || key == "id" || key == "definitions") continue;
    if (key == "type") {
      static const char* const kTypes[] = {"object",  "array",  "string",
                                           "integer", "number", "boolean"};
      if (!value.is_string()) continue;
      bool ok = false;
      for (const char* t : kTypes) ok = ok || value == t;
      if (ok) s[key] = value;
    } else if (key == "properties" || key == "patternProperties") {
      if (!value.is_object()) continue;
      json props = json::object();
      for (auto& [name, sub] : value.items()) props[name] = SanitizeCrdSchema(sub, depth + 1);
      s[key] = std::move(props);
    } else if (key == "items" || key == "additionalProperties" || key == "not") {
      if (value.is_object()) {
        s[key] = SanitizeCrdSchema(value, depth + 1);
      } else if (value.is_boolean() && key == "additionalProperties") {
        s[key] = value;
      }
    } else if (key == "allOf" || key == "anyOf" || key == "oneOf") {
      if (!value.is_array()) continue;
      json all = json::array();
      for (const json& sub : value) all.push_back(SanitizeCrdSchema(sub, depth + 1));
      s[key] = std::move(all);
    } else {
      s[key] = value;
    }
  }
  return s;
}

}  // namespace

json Gvk(const ResourceInfo& r, const std::string& kind) {
  return {{"group", r.group}, {"kind", kind}, {"version", r.version}};
}

std::string SchemaName(const ResourceInfo& r) {
  std::string prefix;
  if (r.group.empty()) {
    prefix = "io.k8s.api.core";
  } else if (r.group == "apiextensions.k8s.io") {
    prefix = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions";
  } else if (!r.custom && absl::EndsWith(r.group, ".k8s.io")) {
    prefix = absl::StrCat("io.k8s.api.", r.group.substr(0, r.group.size() - 7));
  } else if (!r.custom && r.group.find('.') == std::string::npos) {
    prefix = absl::StrCat("io.k8s.api.", r.group);
  } else {
    // Custom resources: the group's DNS labels reversed, as Kubernetes names them.
    std::vector<std::string> parts = absl::StrSplit(r.group, '.');
    std::reverse(parts.begin(), parts.end());
    prefix = absl::StrJoin(parts, ".");
  }
  return absl::StrCat(prefix, ".", r.version, ".", r.kind);
}

std::string ListSchemaName(const ResourceInfo& r) {
  std::string name = SchemaName(r);
  return absl::StrCat(name.substr(0, name.size() - r.kind.size()), r.list_kind);
}

void AddCommonSchemas(json& schemas, const std::string& ref_prefix) {
  schemas[kObjectMetaName] = ObjectMetaSchema();
  schemas[kListMetaName] = {
      {"type", "object"},
      {"description", "Metadata of synthetic resources such as lists."},
      {"properties",
       {{"continue", Str("Token to fetch the next page of a paginated list.")},
        {"remainingItemCount", Int64("Number of items after this page, when known.")},
        {"resourceVersion", Str("The version of the collection.")},
        {"selfLink", Str("Deprecated, not set.")}}}};
  schemas[kStatusName] = {
      {"type", "object"},
      {"description", "The result of operations that do not return other objects."},
      {"properties",
       {{"apiVersion", Str("Versioned schema of this representation of an object.")},
        {"code", Int32("Suggested HTTP return code.")},
        {"details", AnyObject("Extended data associated with the reason.")},
        {"kind", Str("REST resource this object represents.")},
        {"message", Str("A human-readable description of the status of this operation.")},
        {"metadata", {{"allOf", {Ref(ref_prefix, kListMetaName)}}, {"default", json::object()}}},
        {"reason", Str("Machine-readable reason for a Failure.")},
        {"status", Str("Success or Failure.")}}},
      {"x-kubernetes-group-version-kind",
       {{{"group", ""}, {"kind", "Status"}, {"version", "v1"}}}}};
  schemas[kDeleteOptionsName] = {
      {"type", "object"},
      {"description", "Options of a deletion."},
      {"properties",
       {{"apiVersion", Str("Versioned schema of this representation of an object.")},
        {"dryRun",
         {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", "All: dry run."}}},
        {"gracePeriodSeconds", Int64("Seconds before the object should be deleted.")},
        {"kind", Str("REST resource this object represents.")},
        {"orphanDependents", Bool("Deprecated: use propagationPolicy.")},
        {"preconditions", AnyObject("Must be fulfilled before a deletion is carried out.")},
        {"propagationPolicy", Str("Orphan, Background or Foreground.")}}}};
  schemas[kPatchName] = {{"type", "object"},
                         {"description", "A patch document; its format is the Content-Type."}};
  schemas[kWatchEventName] = {{"type", "object"},
                              {"required", {"type", "object"}},
                              {"properties",
                               {{"object", AnyObject("The object (or a Status for ERROR events).")},
                                {"type", Str("ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.")}}}};
}

json KindSchema(const ResourceInfo& r, const std::string& ref_prefix) {
  json schema;
  if (r.custom) {
    if (r.schema != nullptr && r.schema->is_object() &&
        (!r.schema->contains("properties") || (*r.schema)["properties"].is_object())) {
      schema = SanitizeCrdSchema(*r.schema, 0);
    } else {
      // No (usable) schema: the server stores anything, so the document says so.
      schema = {{"x-kubernetes-preserve-unknown-fields", true}};
    }
    schema["type"] = "object";
    if (!schema.contains("properties")) schema["properties"] = json::object();
    // apiVersion, kind and metadata are the server's, whatever the CRD says about them.
    const json type_meta = TypeMetaProperties(ref_prefix);
    for (auto& [name, value] : type_meta.items()) schema["properties"][name] = value;
  } else {
    schema = {{"type", "object"},
              {"description", absl::StrCat(r.kind, " (", r.ApiVersion(), ").")},
              {"properties", TypeMetaProperties(ref_prefix)}};
    const json properties = KindProperties(r);
    for (auto& [name, value] : properties.items()) schema["properties"][name] = value;
    if (!KnownBuiltin(r)) schema["x-kubernetes-preserve-unknown-fields"] = true;
  }
  schema["x-kubernetes-group-version-kind"] = json::array({Gvk(r, r.kind)});
  return schema;
}

json ListSchema(const ResourceInfo& r, const std::string& ref_prefix) {
  return {
      {"type", "object"},
      {"description", absl::StrCat(r.list_kind, " is a list of ", r.kind, ".")},
      {"required", {"items"}},
      {"properties",
       {{"apiVersion", Str("Versioned schema of this representation of an object.")},
        {"items",
         {{"type", "array"},
          {"items", {{"$ref", absl::StrCat(ref_prefix, SchemaName(r))}}},
          {"description", absl::StrCat("List of ", r.resource, ".")}}},
        {"kind", Str("REST resource this object represents.")},
        {"metadata", {{"allOf", {Ref(ref_prefix, kListMetaName)}}, {"default", json::object()}}}}},
      {"x-kubernetes-group-version-kind", json::array({Gvk(r, r.list_kind)})}};
}

namespace {
json ToSwaggerSchemaAt(const json& in, int depth);
}  // namespace

json ToSwaggerSchema(const json& in) { return ToSwaggerSchemaAt(in, 0); }

namespace {

json ToSwaggerSchemaAt(const json& in, int depth) {
  if (!in.is_object() || depth > 100) return json::object();
  json s = json::object();
  for (auto& [key, value] : in.items()) {
    if (key == "anyOf" || key == "oneOf" || key == "not" || key == "nullable") continue;
    if (key == "properties") {
      if (!value.is_object()) continue;
      json props = json::object();
      for (auto& [name, sub] : value.items()) props[name] = ToSwaggerSchemaAt(sub, depth + 1);
      s[key] = std::move(props);
    } else if (key == "items" || (key == "additionalProperties" && value.is_object())) {
      s[key] = ToSwaggerSchemaAt(value, depth + 1);
    } else if (key == "allOf" && value.is_array() && value.size() == 1 && value[0].is_object() &&
               value[0].size() == 1 && value[0].contains("$ref")) {
      // {"allOf": [{"$ref": X}]} is how OpenAPI 3 gives a reference siblings; Swagger 2
      // clients (kubectl's validation) only follow a plain $ref.
      s["$ref"] = value[0]["$ref"];
    } else if (key == "allOf" && value.is_array()) {
      json all = json::array();
      for (const json& sub : value) all.push_back(ToSwaggerSchemaAt(sub, depth + 1));
      s[key] = std::move(all);
    } else {
      s[key] = value;
    }
  }
  // kubectl cannot validate these precisely: untyped values accept anything, and a typed one
  // with properties would flag the unknown fields the server keeps.
  if (s.contains("$ref")) {
    // Siblings of a reference are ignored by Swagger 2 readers; drop them.
    return {{"$ref", s["$ref"]}};
  }
  if (IsTrue(in, "nullable") || IsTrue(in, "x-kubernetes-int-or-string")) {
    s.erase("type");
    s.erase("format");
    s.erase("items");
    s.erase("properties");
  }
  if (IsTrue(in, "x-kubernetes-preserve-unknown-fields")) {
    s.erase("items");
    s.erase("properties");
    s.erase("required");
  }
  auto type = s.find("type");
  if (type != s.end() && *type == "array" && !s.contains("items")) s.erase("type");
  // A required field that may be null cannot be checked by a client that drops nulls.
  if (s.contains("required") && s["required"].is_array() && in.contains("properties") &&
      in["properties"].is_object()) {
    json req = json::array();
    for (const json& f : s["required"]) {
      if (!f.is_string()) continue;
      auto it = in["properties"].find(f.get<std::string>());
      if (it != in["properties"].end() && IsTrue(*it, "nullable")) {
        continue;
      }
      req.push_back(f);
    }
    s["required"] = std::move(req);
  }
  return s;
}

}  // namespace

}  // namespace ctrlhost::apiserver::openapi
