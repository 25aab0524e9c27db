#include "sdk/cpp/builders.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace ctrlhost::sdk {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// Integers stay, integral floats within +-2^53 become integers, other numbers are refused.
absl::Status Normalize(nlohmann::json* value, int depth) {
  if (depth > 64) return absl::InvalidArgumentError("config nested deeper than 64 levels");
  if (value->is_number_float()) {
    const double d = value->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) > kMaxExactInteger) {
      return absl::InvalidArgumentError(
          absl::StrFormat("config hash: %g is not an integer (only integers hash the same in "
                          "every language)",
                          d));
    }
    *value = static_cast<int64_t>(d);
    return absl::OkStatus();
  }
  if (value->is_structured()) {
    for (auto& item : *value) {
      if (absl::Status s = Normalize(&item, depth + 1); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

nlohmann::json Metadata(absl::string_view name, absl::string_view namespace_,
                        const nlohmann::json& labels, const nlohmann::json& annotations,
                        const nlohmann::json& owner_reference) {
  nlohmann::json meta = nlohmann::json::object();
  if (!name.empty()) meta["name"] = name;
  if (!namespace_.empty()) meta["namespace"] = namespace_;
  if (!labels.is_null()) meta["labels"] = labels;
  if (!annotations.is_null()) meta["annotations"] = annotations;
  if (!owner_reference.is_null())
    meta["ownerReferences"] = nlohmann::json::array({owner_reference});
  return meta;
}

nlohmann::json MetaObject(absl::string_view api_version, absl::string_view kind,
                          const ObjectOptions& o) {
  return {{"apiVersion", api_version},
          {"kind", kind},
          {"metadata", Metadata(o.name, o.namespace_, o.labels, o.annotations, o.owner_reference)}};
}

nlohmann::json StringList(std::vector<std::string> items) {
  return nlohmann::json(std::move(items));
}

}  // namespace

nlohmann::json SelectorLabels(absl::string_view app, absl::string_view instance) {
  return {{"app.kubernetes.io/name", app}, {"app.kubernetes.io/instance", instance}};
}

nlohmann::json CommonLabels(absl::string_view app, absl::string_view instance) {
  nlohmann::json labels = SelectorLabels(app, instance);
  labels["app.kubernetes.io/managed-by"] = "ctrlhost";
  return labels;
}

absl::StatusOr<std::string> CanonicalJson(const nlohmann::json& value) {
  nlohmann::json normalized = value;
  if (absl::Status s = Normalize(&normalized, 0); !s.ok()) return s;
  // nlohmann keeps object keys in a std::map (sorted by bytes) and dumps compactly.
  return normalized.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<std::string> ConfigHash(const nlohmann::json& value) {
  absl::StatusOr<std::string> text = CanonicalJson(value);
  if (!text.ok()) return text.status();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : *text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return absl::StrFormat("%016x", h);
}

nlohmann::json OwnerReference(const Request& request) {
  return {{"apiVersion", request.api_version()},
          {"kind", request.kind()},
          {"name", request.name()},
          {"uid", request.uid()},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

nlohmann::json BuildDeployment(const DeploymentOptions& o) {
  nlohmann::json d = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", Metadata(o.name, "", o.labels, o.annotations, o.owner_reference)}};
  nlohmann::json pod_meta = nlohmann::json::object();
  if (!o.labels.is_null()) pod_meta["labels"] = o.labels;
  if (!o.pod_annotations.is_null()) pod_meta["annotations"] = o.pod_annotations;
  nlohmann::json pod_spec = o.pod_spec.is_object() ? o.pod_spec : nlohmann::json::object();
  pod_spec["containers"] = o.containers;
  d["spec"] = {{"replicas", o.replicas},
               {"selector", {{"matchLabels", o.selector.is_null() ? o.labels : o.selector}}},
               {"template", {{"metadata", pod_meta}, {"spec", pod_spec}}}};
  return d;
}

nlohmann::json BuildService(const ServiceOptions& o) {
  nlohmann::json s = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", Metadata(o.name, "", o.labels, o.annotations, o.owner_reference)}};
  nlohmann::json ports = nlohmann::json::array();
  for (const ServicePort& p : o.ports) {
    nlohmann::json port = {{"port", p.port}, {"protocol", p.protocol.empty() ? "TCP" : p.protocol}};
    if (!p.name.empty()) port["name"] = p.name;
    if (!p.target_port.is_null()) port["targetPort"] = p.target_port;
    ports.push_back(std::move(port));
  }
  s["spec"] = {{"ports", ports}};
  if (!o.selector.is_null()) s["spec"]["selector"] = o.selector;
  if (!o.type.empty()) s["spec"]["type"] = o.type;
  return s;
}

nlohmann::json BuildConfigMap(const ObjectOptions& meta, const nlohmann::json& data) {
  nlohmann::json cm = MetaObject("v1", "ConfigMap", meta);
  if (!data.is_null()) cm["data"] = data;
  return cm;
}

nlohmann::json BuildSecret(const ObjectOptions& meta, const nlohmann::json& string_data,
                           absl::string_view type) {
  nlohmann::json secret = MetaObject("v1", "Secret", meta);
  if (!string_data.is_null()) secret["stringData"] = string_data;
  if (!type.empty()) secret["type"] = type;
  return secret;
}

nlohmann::json BuildServiceAccount(const ObjectOptions& meta) {
  return MetaObject("v1", "ServiceAccount", meta);
}

nlohmann::json PolicyRule(std::vector<std::string> api_groups, std::vector<std::string> resources,
                          std::vector<std::string> verbs) {
  return {{"apiGroups", StringList(std::move(api_groups))},
          {"resources", StringList(std::move(resources))},
          {"verbs", StringList(std::move(verbs))}};
}

nlohmann::json ServiceAccountSubject(absl::string_view name, absl::string_view namespace_) {
  return {{"kind", "ServiceAccount"}, {"name", name}, {"namespace", namespace_}};
}

nlohmann::json BuildRole(const ObjectOptions& meta, const nlohmann::json& rules) {
  nlohmann::json role = MetaObject("rbac.authorization.k8s.io/v1", "Role", meta);
  role["rules"] = rules.is_null() ? nlohmann::json::array() : rules;
  return role;
}

nlohmann::json BuildClusterRole(const ObjectOptions& meta, const nlohmann::json& rules) {
  nlohmann::json role = MetaObject("rbac.authorization.k8s.io/v1", "ClusterRole", meta);
  role["rules"] = rules.is_null() ? nlohmann::json::array() : rules;
  return role;
}

namespace {
nlohmann::json Binding(absl::string_view kind, absl::string_view role_kind,
                       const ObjectOptions& meta, absl::string_view role,
                       const nlohmann::json& subjects) {
  nlohmann::json b = MetaObject("rbac.authorization.k8s.io/v1", kind, meta);
  b["roleRef"] = {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role}};
  b["subjects"] = subjects.is_null() ? nlohmann::json::array() : subjects;
  return b;
}
}  // namespace

nlohmann::json BuildRoleBinding(const ObjectOptions& meta, absl::string_view role,
                                const nlohmann::json& subjects) {
  return Binding("RoleBinding", "Role", meta, role, subjects);
}

nlohmann::json BuildClusterRoleBinding(const ObjectOptions& meta, absl::string_view cluster_role,
                                       const nlohmann::json& subjects) {
  return Binding("ClusterRoleBinding", "ClusterRole", meta, cluster_role, subjects);
}

}  // namespace ctrlhost::sdk
