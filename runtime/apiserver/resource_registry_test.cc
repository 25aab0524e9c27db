// The registry of served resources: built-in kinds, custom resources, discovery documents.
#include "runtime/apiserver/resource_registry.h"

#include "gtest/gtest.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

ResourceInfo Custom(const std::string& version) {
  ResourceInfo r;
  r.group = "example.com";
  r.version = version;
  r.resource = "widgets";
  r.singular = "widget";
  r.kind = "Widget";
  r.list_kind = "WidgetList";
  r.storage_group = "example.com";
  r.storage_resource = "widgets";
  r.storage_version = "v1";
  return r;
}

TEST(ResourceRegistryTest, BuiltinKinds) {
  ResourceRegistry reg;
  for (auto [g, v, r] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"", "v1", "namespaces"},
           {"", "v1", "configmaps"},
           {"", "v1", "secrets"},
           {"", "v1", "serviceaccounts"},
           {"", "v1", "services"},
           {"", "v1", "events"},
           {"events.k8s.io", "v1", "events"},
           {"apps", "v1", "deployments"},
           {"coordination.k8s.io", "v1", "leases"},
           {"apiextensions.k8s.io", "v1", "customresourcedefinitions"}}) {
    EXPECT_NE(reg.Find(g, v, r), nullptr) << g << "/" << v << "/" << r;
  }
  EXPECT_EQ(reg.Find("", "v1", "pods-not-served"), nullptr);
  ResourcePtr d = reg.FindKind("apps", "v1", "Deployment");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->Key("ns", "web"), "/apps/deployments/ns/web");
  EXPECT_EQ(reg.Find("", "v1", "namespaces")->Key("", "a"), "/core/namespaces/a");
  // Both Event APIs store in one place.
  EXPECT_EQ(reg.Find("events.k8s.io", "v1", "events")->KeyPrefix(),
            reg.Find("", "v1", "events")->KeyPrefix());
}

TEST(ResourceRegistryTest, CustomResources) {
  ResourceRegistry reg;
  ASSERT_TRUE(
      reg.SetCustomResource("example.com", "widgets", {Custom("v1"), Custom("v2beta1")}).ok());
  EXPECT_NE(reg.Find("example.com", "v1", "widgets"), nullptr);
  EXPECT_TRUE(reg.Find("example.com", "v1", "widgets")->custom);
  auto group = reg.ApiGroup("example.com");
  ASSERT_TRUE(group.ok());
  EXPECT_EQ((*group)["preferredVersion"]["version"], "v1");  // GA before beta
  // Replacing drops versions no longer listed.
  ASSERT_TRUE(reg.SetCustomResource("example.com", "widgets", {Custom("v1")}).ok());
  EXPECT_EQ(reg.Find("example.com", "v2beta1", "widgets"), nullptr);
  EXPECT_EQ(kube::HttpCode(reg.ResourceList("example.com", "v2beta1").status()), 404);
  // A built-in group/resource cannot be taken over.
  ResourceInfo deploy = Custom("v1");
  deploy.group = "apps";
  deploy.resource = "deployments";
  EXPECT_FALSE(reg.SetCustomResource("apps", "deployments", {deploy}).ok());
  EXPECT_NE(reg.Find("apps", "v1", "deployments"), nullptr);
  EXPECT_FALSE(reg.Find("apps", "v1", "deployments")->custom);
  reg.RemoveCustomResource("example.com", "widgets");
  EXPECT_EQ(reg.Find("example.com", "v1", "widgets"), nullptr);
  EXPECT_EQ(kube::HttpCode(reg.ApiGroup("example.com").status()), 404);
  reg.RemoveCustomResource("example.com", "widgets");  // no-op
}

TEST(ResourceRegistryTest, DiscoveryDocuments) {
  ResourceRegistry reg;
  nlohmann::json core = reg.CoreApiVersions();
  EXPECT_EQ(core["versions"], nlohmann::json({"v1"}));
  nlohmann::json groups = reg.ApiGroupList();
  for (const auto& g : groups["groups"]) EXPECT_NE(g["name"], "");
  auto v1 = reg.ResourceList("", "v1");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ((*v1)["groupVersion"], "v1");
  auto apps = reg.ResourceList("apps", "v1");
  ASSERT_TRUE(apps.ok());
  EXPECT_EQ((*apps)["groupVersion"], "apps/v1");
  EXPECT_EQ(kube::HttpCode(reg.ApiGroup("").status()), 404);
  EXPECT_EQ(kube::HttpCode(reg.ResourceList("nope", "v1").status()), 404);
}

}  // namespace
}  // namespace ctrlhost::apiserver
