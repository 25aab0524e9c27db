// Test helpers for runtime/controller/apply: controllers, cached objects and contexts.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_TESTING_TEST_CONTROLLERS_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_TESTING_TEST_CONTROLLERS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "runtime/cache/store.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::controller::apply::testing {

// The object parsed as the cache would hold it (ADD_FAILURE and null on bad JSON).
cache::ObjectPtr CachedObject(absl::string_view json);

// Controller "webapp": primary ctrlhost.dev/v1 WebApp (namespaced, status subresource,
// resource "webapps"), owns v1 ConfigMap (delete_absent) and apps/v1 Deployment, finalizer
// "ctrlhost.dev/cleanup", field manager "ctrlhost-webapp".
ControllerInfo WebAppController();

// Controller "tenant": primary v1 Namespace (cluster-scoped), owns v1 ConfigMap and the
// cluster-scoped rbac.authorization.k8s.io/v1 ClusterRole.
ControllerInfo TenantController();

// A context for `primary` (namespace and name taken from it; null primary: `ns`/`name`).
ReconcileContext ContextFor(const ControllerInfo* controller, cache::ObjectPtr primary,
                            const std::string& ns = "", const std::string& name = "");

}  // namespace ctrlhost::controller::apply::testing

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_TESTING_TEST_CONTROLLERS_H_
