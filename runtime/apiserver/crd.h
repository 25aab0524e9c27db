// CustomResourceDefinitions: validation, defaults on create, and the resources a CRD serves.
#ifndef CTRLHOST_RUNTIME_APISERVER_CRD_H_
#define CTRLHOST_RUNTIME_APISERVER_CRD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/resource_registry.h"

namespace ctrlhost::apiserver {

// The finalizer that keeps a CRD until its custom resources are deleted.
inline constexpr char kCrdCleanupFinalizer[] = "customresourcecleanup.apiextensions.k8s.io";

// Validates a CRD object (apiextensions.k8s.io/v1) and returns one ResourceInfo per served
// version. Errors are 422 Invalid with one cause per problem.
absl::StatusOr<std::vector<ResourceInfo>> ValidateCrd(const nlohmann::json& crd);

// Server-set parts of a new CRD: the cleanup finalizer and a status whose conditions say the
// names are accepted and the resource is established (registration is synchronous here).
void PrepareCrdCreate(nlohmann::json& crd);

// A CRD with CEL rules (x-kubernetes-validations) is accepted, but this server does not enforce
// them (docs/apiserver.md): appends a warning naming where they are (the first five schema
// paths, then how many more), so that kubectl shows it. Nothing when there are none.
void WarnUnenforcedCelRules(const nlohmann::json& crd, std::vector<std::string>* warnings);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_CRD_H_
