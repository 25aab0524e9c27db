// Builders for the children operators create most: Deployment, Service, ConfigMap, Secret,
// ServiceAccount, Role/RoleBinding, ClusterRole/ClusterRoleBinding. Each returns a whole desired
// object (nlohmann::json) for Result::Desire, with the same output as sdk/python's builders.py
// and sdk/node's builders.js (e2e/conformance checks it).
//
//   const nlohmann::json labels = sdk::CommonLabels("webapp", req.name());
//   absl::StatusOr<std::string> hash = sdk::ConfigHash(config);
//   result.Desire(sdk::BuildDeployment({.name = req.name(), .labels = labels,
//                                       .selector = sdk::SelectorLabels("webapp", req.name()),
//                                       .replicas = 2, .containers = {container},
//                                       .pod_annotations = {{sdk::kConfigHashAnnotation,
//                                       *hash}}}));
//
// Conventions, the same in every language:
// - labels: `labels` go on metadata.labels (and on a Deployment's pod template); `selector` is
//   a Deployment's spec.selector.matchLabels and a Service's spec.selector.
// - Service ports always carry `protocol` (default "TCP"): Kubernetes 1.20 server-side apply
//   refuses a port without it (the list-map key has no default there).
// - ConfigHash(value): FNV-1a 64 (offset basis 1469598103934665603, prime 1099511628211) over
//   the canonical JSON of `value` (no spaces, object keys sorted by their UTF-8 bytes, strings
//   with JSON's short escapes and \u00XX for other control characters, non-ASCII kept), as 16
//   lowercase hex digits. Numbers must be integers (a float with an integral value within
//   +-2^53 counts as one); any other number is InvalidArgument, so that every language writes
//   the same text.
// - OwnerReference(request): the primary as a controller owner reference. The host adds it to
//   namespaced children itself; set it where the host does not (e.g. objects a plugin
//   describes for another tool).
//
// Thread-safety: pure functions.
#ifndef CTRLHOST_SDK_CPP_BUILDERS_H_
#define CTRLHOST_SDK_CPP_BUILDERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/request.h"

namespace ctrlhost::sdk {

inline constexpr char kConfigHashAnnotation[] = "ctrlhost.dev/config-hash";

// {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": instance}
nlohmann::json SelectorLabels(absl::string_view app, absl::string_view instance);
// SelectorLabels plus "app.kubernetes.io/managed-by": "ctrlhost".
nlohmann::json CommonLabels(absl::string_view app, absl::string_view instance);

// The canonical JSON text ConfigHash hashes; InvalidArgument for a non-integer number.
absl::StatusOr<std::string> CanonicalJson(const nlohmann::json& value);
absl::StatusOr<std::string> ConfigHash(const nlohmann::json& value);

// {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true} of the primary.
nlohmann::json OwnerReference(const Request& request);

struct ObjectOptions {
  std::string name;        // empty: the primary's (filled in by the SDK)
  std::string namespace_;  // empty: the primary's (namespaced kinds)
  nlohmann::json labels;   // null: none set here (the SDK defaults to the primary's)
  nlohmann::json annotations;
  nlohmann::json owner_reference;  // null: none (see OwnerReference)
};

struct DeploymentOptions {
  std::string name;
  nlohmann::json labels;    // metadata.labels and the pod template's labels
  nlohmann::json selector;  // spec.selector.matchLabels (null: `labels`)
  int64_t replicas = 1;
  nlohmann::json containers = nlohmann::json::array();
  nlohmann::json pod_annotations;  // e.g. {{kConfigHashAnnotation, hash}}
  nlohmann::json pod_spec;         // extra pod spec fields (serviceAccountName, volumes, ...)
  nlohmann::json annotations;
  nlohmann::json owner_reference;
};
nlohmann::json BuildDeployment(const DeploymentOptions& options);

struct ServicePort {
  std::string name;
  int64_t port = 0;
  nlohmann::json target_port;  // int or named port; null: left out
  std::string protocol = "TCP";
};
struct ServiceOptions {
  std::string name;
  nlohmann::json labels;
  nlohmann::json selector;
  std::vector<ServicePort> ports;
  std::string type;  // empty: left out (ClusterIP)
  nlohmann::json annotations;
  nlohmann::json owner_reference;
};
nlohmann::json BuildService(const ServiceOptions& options);

nlohmann::json BuildConfigMap(const ObjectOptions& meta, const nlohmann::json& data);
// string_data: plain strings (the API server encodes them); type empty: Opaque by default.
nlohmann::json BuildSecret(const ObjectOptions& meta, const nlohmann::json& string_data,
                           absl::string_view type = "");
nlohmann::json BuildServiceAccount(const ObjectOptions& meta);

// {"apiGroups": ..., "resources": ..., "verbs": ...}
nlohmann::json PolicyRule(std::vector<std::string> api_groups, std::vector<std::string> resources,
                          std::vector<std::string> verbs);
// A ServiceAccount subject of a (Cluster)RoleBinding.
nlohmann::json ServiceAccountSubject(absl::string_view name, absl::string_view namespace_);

nlohmann::json BuildRole(const ObjectOptions& meta, const nlohmann::json& rules);
nlohmann::json BuildClusterRole(const ObjectOptions& meta, const nlohmann::json& rules);
// roleRef {apiGroup: rbac.authorization.k8s.io, kind: Role, name: role}.
nlohmann::json BuildRoleBinding(const ObjectOptions& meta, absl::string_view role,
                                const nlohmann::json& subjects);
nlohmann::json BuildClusterRoleBinding(const ObjectOptions& meta, absl::string_view cluster_role,
                                       const nlohmann::json& subjects);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_BUILDERS_H_
