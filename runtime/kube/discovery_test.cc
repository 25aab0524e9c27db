#include "runtime/kube/discovery.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/kube/client.h"

namespace ctrlhost::kube {
namespace {

class DiscoveryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("discovery_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
  }
  static void TearDownTestSuite() { delete api_; }

  std::unique_ptr<RestClient> Rest(common::Clock* clock) {
    RestClientOptions options;
    options.clock = clock;
    options.qps = 0;  // the fake clock would never refill the bucket
    auto rest = api_->NewRestClient(options);
    EXPECT_TRUE(rest.ok()) << rest.status();
    return std::move(*rest);
  }

  static apiserver::testing::EmbeddedApiServer* api_;
};

apiserver::testing::EmbeddedApiServer* DiscoveryTest::api_ = nullptr;

TEST_F(DiscoveryTest, BuiltInKinds) {
  auto rest = Rest(common::Clock::Real());
  Discovery discovery(rest.get());
  auto deploy = discovery.MappingFor({"apps", "v1", "Deployment"});
  ASSERT_TRUE(deploy.ok()) << deploy.status();
  EXPECT_EQ(deploy->resource, "deployments");
  EXPECT_TRUE(deploy->namespaced);
  EXPECT_TRUE(deploy->has_status);

  auto ns = discovery.MappingFor({"", "v1", "Namespace"});
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->resource, "namespaces");
  EXPECT_FALSE(ns->namespaced);

  auto lease = discovery.MappingFor({"coordination.k8s.io", "", "Lease"});  // preferred version
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->version, "v1");
  EXPECT_EQ(lease->resource, "leases");

  auto cm = discovery.MappingForResource("", "v1", "configmaps");
  ASSERT_TRUE(cm.ok()) << cm.status();
  EXPECT_EQ(cm->kind, "ConfigMap");
  EXPECT_EQ(discovery.refreshes(), 1);

  auto all = discovery.All();
  ASSERT_TRUE(all.ok());
  EXPECT_GT(all->size(), 5u);
}

TEST_F(DiscoveryTest, MissRefreshesAtMostOncePerInterval) {
  common::FakeClock clock;
  auto rest = Rest(&clock);
  Discovery discovery(rest.get(), absl::Minutes(1));
  EXPECT_TRUE(discovery.Refresh().ok());
  EXPECT_EQ(discovery.refreshes(), 1);
  auto missing = discovery.MappingFor({"example.com", "v1", "Nothing"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(discovery.refreshes(), 1);  // loaded less than a minute ago
  clock.Advance(absl::Minutes(2));
  missing = discovery.MappingFor({"example.com", "v1", "Nothing"});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(discovery.refreshes(), 2);
}

TEST_F(DiscoveryTest, CrdCreatedAfterStartBecomesMappable) {
  auto rest = Rest(common::Clock::Real());
  Discovery discovery(rest.get(), absl::ZeroDuration());
  ASSERT_TRUE(discovery.Refresh().ok());
  EXPECT_EQ(discovery.MappingFor({"ctrlhost.dev", "v1", "Widget"}).status().code(),
            absl::StatusCode::kNotFound);

  Client client(rest.get());
  auto crd = client.Create(
      {.group = "apiextensions.k8s.io", .version = "v1", .resource = "customresourcedefinitions"},
      R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
          "metadata":{"name":"widgets.ctrlhost.dev"},
          "spec":{"group":"ctrlhost.dev","scope":"Namespaced",
                  "names":{"plural":"widgets","singular":"widget","kind":"Widget"},
                  "versions":[{"name":"v1","served":true,"storage":true,
                               "subresources":{"status":{}},
                               "schema":{"openAPIV3Schema":{"type":"object",
                                 "x-kubernetes-preserve-unknown-fields":true}}}]}})");
  ASSERT_TRUE(crd.ok()) << crd.status();
  // The server establishes the CRD asynchronously: ask until it is served (bounded).
  absl::StatusOr<ResourceMapping> widget;
  const absl::Time limit = absl::Now() + absl::Seconds(20);
  do {
    widget = discovery.MappingFor({"ctrlhost.dev", "v1", "Widget"});
  } while (!widget.ok() && absl::Now() < limit);
  ASSERT_TRUE(widget.ok()) << widget.status();
  EXPECT_EQ(widget->resource, "widgets");
  EXPECT_TRUE(widget->namespaced);
  EXPECT_TRUE(widget->has_status);

  // And it is usable through the dynamic client.
  auto created = client.Create({.group = "ctrlhost.dev",
                                .version = "v1",
                                .resource = widget->resource,
                                .namespace_name = "default"},
                               R"({"apiVersion":"ctrlhost.dev/v1","kind":"Widget",
                                   "metadata":{"name":"w"},"spec":{"size":3}})");
  EXPECT_TRUE(created.ok()) << created.status();
}

}  // namespace
}  // namespace ctrlhost::kube
