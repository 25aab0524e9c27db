#include "runtime/controller/apply/testing/test_controllers.h"

#include "gtest/gtest.h"
#include "runtime/cache/object.h"

namespace ctrlhost::controller::apply::testing {

cache::ObjectPtr CachedObject(absl::string_view json) {
  cache::ObjectParser parser;
  absl::StatusOr<std::shared_ptr<const cache::Object>> parsed = parser.Parse(json);
  if (!parsed.ok()) {
    ADD_FAILURE() << parsed.status();
    return nullptr;
  }
  return *parsed;
}

namespace {
kube::ResourceMapping Mapping(const std::string& group, const std::string& version,
                              const std::string& resource, const std::string& kind, bool namespaced,
                              bool has_status) {
  kube::ResourceMapping m;
  m.group = group;
  m.version = version;
  m.resource = resource;
  m.kind = kind;
  m.namespaced = namespaced;
  m.has_status = has_status;
  return m;
}
}  // namespace

ControllerInfo WebAppController() {
  ControllerInfo c;
  c.name = "webapp";
  c.primary = Mapping("ctrlhost.dev", "v1", "webapps", "WebApp", true, true);
  c.owns.push_back({Mapping("", "v1", "configmaps", "ConfigMap", true, false), true});
  c.owns.push_back({Mapping("apps", "v1", "deployments", "Deployment", true, true), false});
  c.finalizer = "ctrlhost.dev/cleanup";
  c.field_manager = "ctrlhost-webapp";
  return c;
}

ControllerInfo TenantController() {
  ControllerInfo c;
  c.name = "tenant";
  c.primary = Mapping("", "v1", "namespaces", "Namespace", false, true);
  c.owns.push_back({Mapping("", "v1", "configmaps", "ConfigMap", true, false), false});
  c.owns.push_back(
      {Mapping("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, false),
       false});
  c.field_manager = "ctrlhost-tenant";
  return c;
}

ReconcileContext ContextFor(const ControllerInfo* controller, cache::ObjectPtr primary,
                            const std::string& ns, const std::string& name) {
  ReconcileContext context;
  context.controller = controller;
  if (primary != nullptr) {
    context.namespace_ = std::string(primary->namespace_());
    context.name = std::string(primary->name());
  } else {
    context.namespace_ = ns;
    context.name = name;
  }
  context.primary = std::move(primary);
  return context;
}

}  // namespace ctrlhost::controller::apply::testing
