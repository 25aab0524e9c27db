#include "runtime/exe/rbac.h"

#include <string>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/yaml_json.h"

namespace ctrlhost::exe {
namespace {

using Verbs = std::set<std::string>;

pluginpb::GroupVersionKind Gvk(const std::string& group, const std::string& kind) {
  pluginpb::GroupVersionKind gvk;
  gvk.set_group(group);
  gvk.set_version("v1");
  gvk.set_kind(kind);
  return gvk;
}

// The WebApp reference controller's declaration.
DeclaredController WebApp(std::vector<std::string> namespaces) {
  DeclaredController c;
  c.spec.set_name("webapp");
  *c.spec.mutable_primary() = Gvk("apps.ctrlhost.dev", "WebApp");
  *c.spec.add_owns()->mutable_kind() = Gvk("apps", "Deployment");
  *c.spec.add_owns()->mutable_kind() = Gvk("", "Service");
  pluginpb::OwnedKind* config = c.spec.add_owns();
  *config->mutable_kind() = Gvk("", "ConfigMap");
  config->set_delete_absent(true);
  c.namespaces = std::move(namespaces);
  return c;
}

TEST(GuessResourceTest, FollowsKubernetesRule) {
  EXPECT_EQ(GuessResource("WebApp"), "webapps");
  EXPECT_EQ(GuessResource("Policy"), "policies");
  EXPECT_EQ(GuessResource("Ingress"), "ingresses");
  EXPECT_EQ(GuessResource("Endpoints"), "endpoints");
  EXPECT_EQ(GuessResource("ConfigMap"), "configmaps");
}

TEST(DeriveRulesTest, OneNamespaceIsARoleThere) {
  const ScopedRules rules = DeriveRules({WebApp({"shop"})});
  ASSERT_EQ(rules.size(), 1u);
  const RuleSet& shop = rules.at("shop");
  EXPECT_EQ(shop.at({"apps.ctrlhost.dev", "webapps"}), (Verbs{"get", "list", "watch", "patch"}));
  EXPECT_EQ(shop.at({"apps.ctrlhost.dev", "webapps/status"}), (Verbs{"get", "patch"}));
  EXPECT_EQ(shop.at({"apps", "deployments"}), (Verbs{"get", "list", "watch", "create", "patch"}));
  // Only the kind with pruning may be deleted.
  EXPECT_EQ(shop.at({"", "configmaps"}),
            (Verbs{"get", "list", "watch", "create", "patch", "delete"}));
  EXPECT_EQ(shop.at({"", "events"}), (Verbs{"create", "patch"}));
  for (const auto& [resource, verbs] : shop) {
    EXPECT_EQ(verbs.count("update"), 0u) << resource.second << ": the host never PUTs";
  }
}

TEST(DeriveRulesTest, SeveralNamespacesReadClusterWideWriteInEach) {
  const ScopedRules rules = DeriveRules({WebApp({"a", "b"})});
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules.at("").at({"apps", "deployments"}), (Verbs{"get", "list", "watch"}));
  for (const char* ns : {"a", "b"}) {
    EXPECT_EQ(rules.at(ns).at({"apps", "deployments"}), (Verbs{"create", "patch"})) << ns;
    EXPECT_EQ(rules.at(ns).count({"apps.ctrlhost.dev", "webapps"}), 1u) << ns;
  }
}

TEST(DeriveRulesTest, NoNamespaceIsAClusterRole) {
  DeclaredController c = WebApp({});
  pluginpb::WatchedKind* watched = c.spec.add_watches();
  *watched->mutable_kind() = Gvk("", "Secret");
  const ScopedRules rules = DeriveRules({c});
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules.at("").at({"", "secrets"}), (Verbs{"get", "list", "watch"}));
  EXPECT_EQ(rules.at("").at({"", "events"}), (Verbs{"create", "patch"}));
}

TEST(DeriveRulesTest, ClusterScopedPrimaryEventsGoToDefault) {
  DeclaredController c;
  *c.spec.mutable_primary() = Gvk("", "Namespace");
  c.namespaces = {"ignored"};  // the host ignores namespaces for a cluster-scoped primary
  const ScopedRules rules = DeriveRules({c});
  EXPECT_EQ(rules.at("").at({"", "namespaces"}), (Verbs{"get", "list", "watch", "patch"}));
  EXPECT_EQ(rules.at("default").at({"", "events"}), (Verbs{"create", "patch"}));
  EXPECT_EQ(rules.count("ignored"), 0u);
}

TEST(AddLeaderElectionRulesTest, LeasesInTheLeaseNamespaceOnly) {
  ScopedRules rules = DeriveRules({WebApp({})});
  AddLeaderElectionRules("ctrlhost", rules);
  ASSERT_EQ(rules.count("ctrlhost"), 1u);
  const RuleSet& role = rules.at("ctrlhost");
  ASSERT_EQ(role.size(), 1u);
  EXPECT_EQ(role.at({"coordination.k8s.io", "leases"}),
            (Verbs{"get", "list", "watch", "create", "update", "delete"}));
  // Never cluster-wide: the ClusterRole is what the controller alone needs.
  EXPECT_EQ(rules.at("").count({"coordination.k8s.io", "leases"}), 0u);
}

TEST(AddLeaderElectionRulesTest, MergesIntoTheRoleOfTheSameNamespace) {
  ScopedRules rules = DeriveRules({WebApp({"shop"})});
  AddLeaderElectionRules("shop", rules);
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules.at("shop").at({"coordination.k8s.io", "leases"}),
            (Verbs{"get", "list", "watch", "create", "update", "delete"}));
  EXPECT_EQ(rules.at("shop").at({"apps", "deployments"}),
            (Verbs{"get", "list", "watch", "create", "patch"}));
}

TEST(RenderRbacTest, RoleAndBindingToTheServiceAccount) {
  RbacOptions options;
  options.name = "web";
  options.service_account = "host";
  options.service_account_namespace = "ops";
  const std::string yaml = RenderRbac(options, DeriveRules({WebApp({"shop"})}));
  absl::StatusOr<std::vector<nlohmann::json>> docs = common::YamlDocumentsToJson(yaml);
  ASSERT_TRUE(docs.ok()) << docs.status() << "\n" << yaml;
  ASSERT_EQ(docs->size(), 2u) << yaml;
  EXPECT_EQ((*docs)[0]["kind"], "Role");
  EXPECT_EQ((*docs)[0]["metadata"]["namespace"], "shop");
  EXPECT_EQ((*docs)[1]["kind"], "RoleBinding");
  EXPECT_EQ((*docs)[1]["roleRef"]["name"], "web");
  EXPECT_EQ((*docs)[1]["subjects"][0],
            (nlohmann::json{{"kind", "ServiceAccount"}, {"name", "host"}, {"namespace", "ops"}}));
  // Equal input, equal text: the output can be committed and diffed.
  EXPECT_EQ(yaml, RenderRbac(options, DeriveRules({WebApp({"shop"})})));
}

}  // namespace
}  // namespace ctrlhost::exe
