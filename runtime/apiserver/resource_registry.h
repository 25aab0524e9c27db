// The set of resources the embedded API server serves: built-in kinds plus custom resources
// registered from CustomResourceDefinitions at run time.
//
//   ResourceRegistry registry;                       // starts with the built-in kinds
//   registry.AddCustomResource(info);                // a CRD was created
//   const ResourceInfo* r = registry.Find("apps", "v1", "deployments");
//
// A resource has one storage version (objects are stored with that apiVersion) and may be
// served at several versions; custom resources convert between versions by rewriting
// `apiVersion` only (the CRD conversion strategy "None"). Discovery documents are built from
// the registry on every request, so a new CRD is discoverable as soon as it is added.
//
// Thread-safe: lookups take a reader lock and return shared pointers that stay valid after a
// resource is removed.
#ifndef CTRLHOST_RUNTIME_APISERVER_RESOURCE_REGISTRY_H_
#define CTRLHOST_RUNTIME_APISERVER_RESOURCE_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver {

// How the objects of a resource are converted between their stored form and a served version.
// Built-in kinds served in two API groups (core/v1 Event and events.k8s.io/v1 Event) use it.
struct Conversion {
  // Turns an object of `version` into the stored form (which has the storage apiVersion).
  std::function<nlohmann::json(const nlohmann::json& served)> to_storage;
  // Turns a stored object into `version`.
  std::function<nlohmann::json(const nlohmann::json& stored)> from_storage;
};

// A custom resource's scale subresource (CRD `subresources.scale`): where in the object the
// replica counts and the selector of its autoscaling/v1 Scale live, as dotted JSON paths
// (".spec.replicas"). The label selector path may be empty.
struct ScaleSubresource {
  std::string spec_replicas_path;
  std::string status_replicas_path;
  std::string label_selector_path;
};

struct ResourceInfo {
  std::string group;      // "" for the core group
  std::string version;    // the version this entry serves
  std::string resource;   // plural, e.g. "deployments"
  std::string singular;   // e.g. "deployment"
  std::string kind;       // e.g. "Deployment"
  std::string list_kind;  // e.g. "DeploymentList"
  bool namespaced = true;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  bool has_status = false;                        // serves the status subresource
  std::shared_ptr<const ScaleSubresource> scale;  // serves the scale subresource when set
  bool tracks_generation = false;                 // metadata.generation bumped on spec changes
  bool custom = false;                            // defined by a CustomResourceDefinition
  bool return_deleted_object = false;             // DELETE answers with the object, not a Status
  std::string storage_group;                      // where objects are stored; usually == group
  std::string storage_resource;  //                                usually == resource
  std::string storage_version;   // apiVersion version objects are stored with
  // Conversion from/to the stored form when it is not a plain apiVersion rewrite.
  std::shared_ptr<const Conversion> conversion;
  // Field selectors this resource supports beyond metadata.name and metadata.namespace.
  std::vector<std::string> extra_field_selectors;
  // For custom resources: the CRD's additionalPrinterColumns (served in Table output).
  nlohmann::json printer_columns = nlohmann::json::array();
  // For custom resources: the version's schema.openAPIV3Schema (null when the CRD has none).
  // Shared so that copies of the entry stay cheap.
  std::shared_ptr<const nlohmann::json> schema;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  std::string StorageApiVersion() const {
    return storage_group.empty() ? storage_version : storage_group + "/" + storage_version;
  }
  // "deployments.apps" / "configmaps": how Kubernetes names a resource in messages.
  std::string QualifiedResource() const {
    return group.empty() ? resource : resource + "." + group;
  }
  // Storage key prefix of all objects of the resource, ends with '/'.
  std::string KeyPrefix() const;
  // Storage key prefix of the objects in one namespace, ends with '/'.
  std::string NamespacePrefix(absl::string_view ns) const;
  std::string Key(absl::string_view ns, absl::string_view name) const;
};

using ResourcePtr = std::shared_ptr<const ResourceInfo>;

class ResourceRegistry {
 public:
  // A registry with the built-in kinds (see builtin_resources.cc).
  ResourceRegistry();
  ResourceRegistry(const ResourceRegistry&) = delete;
  ResourceRegistry& operator=(const ResourceRegistry&) = delete;

  // The resource served at group/version/resource (plural), or null.
  ResourcePtr Find(absl::string_view group, absl::string_view version,
                   absl::string_view resource) const;
  // The resource of kind `kind` in group/version, or null.
  ResourcePtr FindKind(absl::string_view group, absl::string_view version,
                       absl::string_view kind) const;
  // Every served version of the resource stored under `storage_prefix`, e.g. to fan a stored
  // object out to watchers of each version.
  std::vector<ResourcePtr> All() const;

  // Adds or replaces the versions of one custom resource (one entry per served version, all
  // with the same group/resource). Fails if the group/resource belongs to a built-in kind.
  absl::Status SetCustomResource(absl::string_view group, absl::string_view resource,
                                 std::vector<ResourceInfo> versions);
  // Removes every version of a custom resource. No-op when absent.
  void RemoveCustomResource(absl::string_view group, absl::string_view resource);

  // Discovery documents (JSON), built from the current registry.
  nlohmann::json CoreApiVersions() const;  // /api
  nlohmann::json ApiGroupList() const;     // /apis
  // /apis/{group}; NotFound when no version of the group is served.
  absl::StatusOr<nlohmann::json> ApiGroup(absl::string_view group) const;
  // /api/v1 or /apis/{group}/{version}; NotFound when not served.
  absl::StatusOr<nlohmann::json> ResourceList(absl::string_view group,
                                              absl::string_view version) const;

 private:
  void AddLocked(ResourceInfo info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Versions of `group`, newest-preferred first.
  std::vector<std::string> GroupVersionsLocked(absl::string_view group) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable common::RwMutex mu_;
  // "group/version/resource" -> info.
  absl::flat_hash_map<std::string, ResourcePtr> by_resource_ ABSL_GUARDED_BY(mu_);
  // "group/version/Kind" -> info.
  absl::flat_hash_map<std::string, ResourcePtr> by_kind_ ABSL_GUARDED_BY(mu_);
  // Group names in the order they were first added (discovery order).
  std::vector<std::string> group_order_ ABSL_GUARDED_BY(mu_);
};

// Registers the built-in kinds into `add`. Defined in builtin_resources.cc.
void AddBuiltinResources(const std::function<void(ResourceInfo)>& add);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_RESOURCE_REGISTRY_H_
