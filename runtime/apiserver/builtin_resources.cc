// The built-in kinds the embedded API server serves: the ones operators touch most.
#include <utility>

#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver {
namespace {

ResourceInfo Make(std::string group, std::string version, std::string resource,
                  std::string singular, std::string kind, bool namespaced,
                  std::vector<std::string> short_names = {}) {
  ResourceInfo r;
  r.group = std::move(group);
  r.version = std::move(version);
  r.resource = std::move(resource);
  r.singular = std::move(singular);
  r.list_kind = kind + "List";
  r.kind = std::move(kind);
  r.namespaced = namespaced;
  r.short_names = std::move(short_names);
  return r;
}

// Moves `from` to `to` in `j` when present.
void Rename(nlohmann::json& j, const char* from, const char* to) {
  auto it = j.find(from);
  if (it == j.end()) return;
  j[to] = std::move(*it);
  j.erase(from);
}

// events.k8s.io/v1 Event <-> core/v1 Event (the stored form). Both are views of one object,
// as in Kubernetes: `regarding` is `involvedObject`, `note` is `message`, and so on.
std::shared_ptr<const Conversion> EventsV1Conversion() {
  auto c = std::make_shared<Conversion>();
  c->to_storage = [](const nlohmann::json& served) {
    nlohmann::json j = served;
    j["apiVersion"] = "v1";
    Rename(j, "regarding", "involvedObject");
    Rename(j, "note", "message");
    Rename(j, "reportingController", "reportingComponent");
    Rename(j, "deprecatedSource", "source");
    Rename(j, "deprecatedFirstTimestamp", "firstTimestamp");
    Rename(j, "deprecatedLastTimestamp", "lastTimestamp");
    Rename(j, "deprecatedCount", "count");
    return j;
  };
  c->from_storage = [](const nlohmann::json& stored) {
    nlohmann::json j = stored;
    j["apiVersion"] = "events.k8s.io/v1";
    Rename(j, "involvedObject", "regarding");
    Rename(j, "message", "note");
    Rename(j, "reportingComponent", "reportingController");
    Rename(j, "source", "deprecatedSource");
    Rename(j, "firstTimestamp", "deprecatedFirstTimestamp");
    Rename(j, "lastTimestamp", "deprecatedLastTimestamp");
    Rename(j, "count", "deprecatedCount");
    return j;
  };
  return c;
}

}  // namespace

void AddBuiltinResources(const std::function<void(ResourceInfo)>& add) {
  {
    ResourceInfo r = Make("", "v1", "namespaces", "namespace", "Namespace", false, {"ns"});
    r.has_status = true;
    add(std::move(r));
  }
  add(Make("", "v1", "configmaps", "configmap", "ConfigMap", true, {"cm"}));
  {
    ResourceInfo r = Make("", "v1", "secrets", "secret", "Secret", true);
    r.extra_field_selectors = {"type"};
    add(std::move(r));
  }
  add(Make("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, {"sa"}));
  {
    ResourceInfo r = Make("", "v1", "services", "service", "Service", true, {"svc"});
    r.has_status = true;
    r.categories = {"all"};
    add(std::move(r));
  }
  {
    ResourceInfo r = Make("", "v1", "events", "event", "Event", true, {"ev"});
    r.extra_field_selectors = {"involvedObject.kind",
                               "involvedObject.namespace",
                               "involvedObject.name",
                               "involvedObject.uid",
                               "involvedObject.apiVersion",
                               "involvedObject.resourceVersion",
                               "involvedObject.fieldPath",
                               "reason",
                               "reportingComponent",
                               "source",
                               "type"};
    add(std::move(r));
  }
  {
    ResourceInfo r = Make("events.k8s.io", "v1", "events", "event", "Event", true, {"ev"});
    r.storage_group = "";
    r.storage_resource = "events";
    r.storage_version = "v1";
    r.conversion = EventsV1Conversion();
    add(std::move(r));
  }
  {
    ResourceInfo r =
        Make("apps", "v1", "deployments", "deployment", "Deployment", true, {"deploy"});
    r.has_status = true;
    r.tracks_generation = true;
    r.categories = {"all"};
    add(std::move(r));
  }
  add(Make("coordination.k8s.io", "v1", "leases", "lease", "Lease", true));
  {
    ResourceInfo r =
        Make("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
             "CustomResourceDefinition", false, {"crd", "crds"});
    r.has_status = true;
    r.tracks_generation = true;
    r.categories = {"api-extensions"};
    add(std::move(r));
  }
}

}  // namespace ctrlhost::apiserver
