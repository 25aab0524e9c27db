#include "runtime/common/builtin_kinds.h"

#include <set>
#include <string>
#include <utility>

namespace ctrlhost::common {

bool HasStatusSubresource(absl::string_view group, absl::string_view kind) {
  static const auto* const kWithout = new std::set<std::pair<std::string, std::string>>{
      {"", "ConfigMap"},
      {"", "Secret"},
      {"", "ServiceAccount"},
      {"", "Endpoints"},
      {"", "Event"},
      {"", "LimitRange"},
      {"", "PodTemplate"},
      {"events.k8s.io", "Event"},
      {"coordination.k8s.io", "Lease"},
      {"discovery.k8s.io", "EndpointSlice"},
      {"rbac.authorization.k8s.io", "Role"},
      {"rbac.authorization.k8s.io", "RoleBinding"},
      {"rbac.authorization.k8s.io", "ClusterRole"},
      {"rbac.authorization.k8s.io", "ClusterRoleBinding"},
      {"storage.k8s.io", "StorageClass"},
      {"scheduling.k8s.io", "PriorityClass"},
      {"node.k8s.io", "RuntimeClass"},
      {"networking.k8s.io", "IngressClass"},
      {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"},
      {"admissionregistration.k8s.io", "MutatingWebhookConfiguration"},
  };
  return kWithout->count({std::string(group), std::string(kind)}) == 0;
}

}  // namespace ctrlhost::common
