#include "runtime/exe/rbac.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "runtime/common/yaml_json.h"

namespace ctrlhost::exe {
namespace {

using json = nlohmann::json;

// Built-in kinds that are cluster-scoped; a primary of any other kind is taken as namespaced
// unless it owns a cluster-scoped kind (only a cluster-scoped primary may).
bool WellKnownClusterScoped(const pluginpb::GroupVersionKind& gvk) {
  static const auto* const kKinds = new std::set<std::pair<std::string, std::string>>{
      {"", "Namespace"},
      {"", "Node"},
      {"", "PersistentVolume"},
      {"rbac.authorization.k8s.io", "ClusterRole"},
      {"rbac.authorization.k8s.io", "ClusterRoleBinding"},
      {"apiextensions.k8s.io", "CustomResourceDefinition"},
      {"storage.k8s.io", "StorageClass"},
      {"scheduling.k8s.io", "PriorityClass"},
      {"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"},
      {"admissionregistration.k8s.io", "MutatingWebhookConfiguration"},
  };
  return kKinds->count({gvk.group(), gvk.kind()}) > 0;
}

bool PrimaryIsClusterScoped(const pluginpb::ControllerSpec& spec) {
  if (WellKnownClusterScoped(spec.primary())) return true;
  return std::any_of(spec.owns().begin(), spec.owns().end(),
                     [](const pluginpb::OwnedKind& owned) { return owned.cluster_scoped(); });
}

void Add(ScopedRules& rules, const std::string& scope, const std::string& group,
         const std::string& resource, std::initializer_list<const char*> verbs) {
  std::set<std::string>& set = rules[scope][{group, resource}];
  for (const char* verb : verbs) set.insert(verb);
}

json RulesJson(const RuleSet& rules) {
  // One rule per (group, resource); rules with equal verbs in one group are merged so the
  // output reads like a hand-written role.
  std::map<std::pair<std::string, std::set<std::string>>, std::vector<std::string>> merged;
  for (const auto& [key, verbs] : rules) merged[{key.first, verbs}].push_back(key.second);
  json out = json::array();
  for (const auto& [key, resources] : merged) {
    out.push_back({{"apiGroups", json::array({key.first})},
                   {"resources", resources},
                   {"verbs", std::vector<std::string>(key.second.begin(), key.second.end())}});
  }
  return out;
}

json Labels() { return {{"app.kubernetes.io/managed-by", "ctrlhost-rbac"}}; }

json Subjects(const RbacOptions& options) {
  return json::array({{{"kind", "ServiceAccount"},
                       {"name", options.service_account},
                       {"namespace", options.service_account_namespace}}});
}

}  // namespace

std::string GuessResource(const std::string& kind) {
  const std::string lower = absl::AsciiStrToLower(kind);
  if (lower.empty()) return lower;
  if (lower == "endpoints") return lower;
  const char last = lower.back();
  if (last == 's') return lower + "es";
  if (last == 'y') return lower.substr(0, lower.size() - 1) + "ies";
  return lower + "s";
}

ScopedRules DeriveRules(const std::vector<DeclaredController>& controllers) {
  ScopedRules rules;
  for (const DeclaredController& c : controllers) {
    const pluginpb::ControllerSpec& spec = c.spec;
    const bool namespaced = !PrimaryIsClusterScoped(spec);
    // Where the primary (and namespaced children) are watched, and where they are written.
    const std::string read_scope =
        namespaced && c.namespaces.size() == 1 ? c.namespaces[0] : std::string();
    std::vector<std::string> write_scopes;
    if (namespaced && !c.namespaces.empty()) {
      write_scopes = c.namespaces;
    } else {
      write_scopes.push_back("");
    }
    const std::string& group = spec.primary().group();
    const std::string resource = GuessResource(spec.primary().kind());
    Add(rules, read_scope, group, resource, {"get", "list", "watch"});
    for (const std::string& scope : write_scopes) {
      Add(rules, scope, group, resource, {"patch"});
      Add(rules, scope, group, resource + "/status", {"get", "patch"});
      // Events go to the primary's namespace; a cluster-scoped primary's to "default".
      Add(rules, namespaced ? scope : "default", "", "events", {"create", "patch"});
    }
    for (const pluginpb::OwnedKind& owned : spec.owns()) {
      const std::string owned_group = owned.kind().group();
      const std::string owned_resource = GuessResource(owned.kind().kind());
      if (owned.cluster_scoped()) {
        Add(rules, "", owned_group, owned_resource, {"get", "list", "watch", "create", "patch"});
        if (owned.delete_absent()) Add(rules, "", owned_group, owned_resource, {"delete"});
        continue;
      }
      Add(rules, read_scope, owned_group, owned_resource, {"get", "list", "watch"});
      for (const std::string& scope : write_scopes) {
        Add(rules, scope, owned_group, owned_resource, {"create", "patch"});
        if (owned.delete_absent()) Add(rules, scope, owned_group, owned_resource, {"delete"});
      }
    }
    for (const pluginpb::WatchedKind& watched : spec.watches()) {
      Add(rules, "", watched.kind().group(), GuessResource(watched.kind().kind()),
          {"get", "list", "watch"});
    }
  }
  return rules;
}

void AddLeaderElectionRules(const std::string& lease_namespace, ScopedRules& rules) {
  // list and delete: the rings of Leases (a shard ring's members, the hosts that balance
  // per-operator Leases) read each other's and delete those of long-dead members.
  Add(rules, lease_namespace, "coordination.k8s.io", "leases",
      {"get", "list", "watch", "create", "update", "delete"});
}

std::string RenderRbac(const RbacOptions& options, const ScopedRules& rules) {
  std::string out;
  auto emit = [&](const json& doc) {
    if (!out.empty()) out += "---\n";
    out += common::JsonToYaml(doc);
    if (!out.empty() && out.back() != '\n') out += '\n';
  };
  for (const auto& [scope, set] : rules) {
    if (scope.empty()) {
      emit({{"apiVersion", "rbac.authorization.k8s.io/v1"},
            {"kind", "ClusterRole"},
            {"metadata", {{"name", options.name}, {"labels", Labels()}}},
            {"rules", RulesJson(set)}});
      emit({{"apiVersion", "rbac.authorization.k8s.io/v1"},
            {"kind", "ClusterRoleBinding"},
            {"metadata", {{"name", options.name}, {"labels", Labels()}}},
            {"roleRef",
             {{"apiGroup", "rbac.authorization.k8s.io"},
              {"kind", "ClusterRole"},
              {"name", options.name}}},
            {"subjects", Subjects(options)}});
      continue;
    }
    const json meta = {{"name", options.name}, {"namespace", scope}, {"labels", Labels()}};
    emit({{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", meta},
          {"rules", RulesJson(set)}});
    emit({{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "RoleBinding"},
          {"metadata", meta},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", options.name}}},
          {"subjects", Subjects(options)}});
  }
  return out;
}

}  // namespace ctrlhost::exe
