// Schemas of the kinds the OpenAPI documents describe (internal to the openapi package).
//
// Built-in kinds get a truthful but shallow schema: ObjectMeta in full, every top-level field
// of the kind by name, and `x-kubernetes-preserve-unknown-fields` wherever the content is not
// described, so no schema here rejects an object the server accepts. Custom resources get
// their CRD version's openAPIV3Schema with apiVersion/kind/metadata filled in.
//
//   nlohmann::json schemas = nlohmann::json::object();
//   AddCommonSchemas(schemas);
//   schemas[SchemaName(r)] = KindSchema(r);
//
// Thread-safe: pure functions.
#ifndef CTRLHOST_RUNTIME_APISERVER_OPENAPI_KIND_SCHEMAS_H_
#define CTRLHOST_RUNTIME_APISERVER_OPENAPI_KIND_SCHEMAS_H_

#include <string>

#include "nlohmann/json.hpp"
#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver::openapi {

// Definition names, as Kubernetes spells them.
inline constexpr char kObjectMetaName[] = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
inline constexpr char kListMetaName[] = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
inline constexpr char kStatusName[] = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
inline constexpr char kDeleteOptionsName[] = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
inline constexpr char kPatchName[] = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
inline constexpr char kWatchEventName[] = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

// The definition name of `r`'s kind ("io.k8s.api.apps.v1.Deployment",
// "com.example.stable.v1.CronTab" for group stable.example.com) and of its list kind.
std::string SchemaName(const ResourceInfo& r);
std::string ListSchemaName(const ResourceInfo& r);

// Adds ObjectMeta, ListMeta, Status, DeleteOptions, Patch and WatchEvent to `schemas`.
// `ref_prefix` is "#/components/schemas/" (OpenAPI 3) or "#/definitions/" (Swagger 2).
void AddCommonSchemas(nlohmann::json& schemas, const std::string& ref_prefix);

// The OpenAPI 3 schema of `r`'s kind, with x-kubernetes-group-version-kind.
nlohmann::json KindSchema(const ResourceInfo& r, const std::string& ref_prefix);
// The list kind's schema (items are `r`'s kind), with x-kubernetes-group-version-kind.
nlohmann::json ListSchema(const ResourceInfo& r, const std::string& ref_prefix);

// Rewrites an OpenAPI 3 schema (as KindSchema makes) into what Swagger 2 and kubectl's
// client-side validation understand: nullable, int-or-string and preserve-unknown-fields
// values become untyped, anyOf/oneOf/not are dropped, arrays without items become untyped.
nlohmann::json ToSwaggerSchema(const nlohmann::json& schema);

// {"group": ..., "version": ..., "kind": ...}
nlohmann::json Gvk(const ResourceInfo& r, const std::string& kind);

}  // namespace ctrlhost::apiserver::openapi

#endif  // CTRLHOST_RUNTIME_APISERVER_OPENAPI_KIND_SCHEMAS_H_
