// URL parsing of resource and non-resource requests.
#include "runtime/apiserver/request_info.h"

#include "gtest/gtest.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

RequestInfo Parse(const char* method, const char* path, const char* watch = "") {
  auto info = ParseRequestInfo(method, path, watch);
  EXPECT_TRUE(info.ok()) << path << ": " << info.status();
  return info.ok() ? *info : RequestInfo{};
}

TEST(RequestInfoTest, Discovery) {
  for (const char* p :
       {"/", "/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version", "/healthz"}) {
    EXPECT_FALSE(Parse("GET", p).is_resource_request) << p;
  }
  EXPECT_EQ(Parse("GET", "/apis/apps").parts, (std::vector<std::string>{"apis", "apps"}));
}

TEST(RequestInfoTest, ResourcePaths) {
  RequestInfo i = Parse("GET", "/apis/apps/v1/namespaces/default/deployments/web/status");
  EXPECT_TRUE(i.is_resource_request);
  EXPECT_EQ(i.verb, "get");
  EXPECT_EQ(i.group, "apps");
  EXPECT_EQ(i.version, "v1");
  EXPECT_EQ(i.namespace_, "default");
  EXPECT_EQ(i.resource, "deployments");
  EXPECT_EQ(i.name, "web");
  EXPECT_EQ(i.subresource, "status");

  i = Parse("GET", "/api/v1/configmaps");
  EXPECT_EQ(i.verb, "list");
  EXPECT_EQ(i.group, "");
  EXPECT_EQ(i.namespace_, "");
  EXPECT_EQ(i.resource, "configmaps");

  i = Parse("GET", "/api/v1/namespaces");
  EXPECT_EQ(i.resource, "namespaces");
  EXPECT_EQ(i.verb, "list");
  i = Parse("GET", "/api/v1/namespaces/ns1");
  EXPECT_EQ(i.resource, "namespaces");
  EXPECT_EQ(i.name, "ns1");
  EXPECT_EQ(i.namespace_, "");
  i = Parse("PUT", "/api/v1/namespaces/ns1/finalize");
  EXPECT_EQ(i.verb, "update");
  EXPECT_EQ(i.name, "ns1");
  EXPECT_EQ(i.subresource, "finalize");
  i = Parse("PATCH", "/api/v1/namespaces/ns1/status");
  EXPECT_EQ(i.verb, "patch");
  EXPECT_EQ(i.subresource, "status");
}

TEST(RequestInfoTest, Verbs) {
  EXPECT_EQ(Parse("POST", "/api/v1/namespaces/a/configmaps").verb, "create");
  EXPECT_EQ(Parse("PUT", "/api/v1/namespaces/a/configmaps/x").verb, "update");
  EXPECT_EQ(Parse("PATCH", "/api/v1/namespaces/a/configmaps/x").verb, "patch");
  EXPECT_EQ(Parse("DELETE", "/api/v1/namespaces/a/configmaps/x").verb, "delete");
  EXPECT_EQ(Parse("DELETE", "/api/v1/namespaces/a/configmaps").verb, "deletecollection");
  EXPECT_EQ(Parse("HEAD", "/api/v1/namespaces/a/configmaps").verb, "list");
  EXPECT_EQ(Parse("GET", "/api/v1/namespaces/a/configmaps", "true").verb, "watch");
  EXPECT_EQ(Parse("GET", "/api/v1/namespaces/a/configmaps", "1").verb, "watch");
  EXPECT_EQ(Parse("GET", "/api/v1/namespaces/a/configmaps", "false").verb, "list");
  RequestInfo w = Parse("GET", "/api/v1/watch/namespaces/a/configmaps/x");
  EXPECT_EQ(w.verb, "watch");
  EXPECT_EQ(w.namespace_, "a");
  EXPECT_EQ(w.name, "x");
}

TEST(RequestInfoTest, Errors) {
  auto r = ParseRequestInfo("GET", "/api/v1/namespaces/a/configmaps/x/status/extra", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 404);
  r = ParseRequestInfo("GET", "/api/v1/watch", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 400);
  r = ParseRequestInfo("POST", "/api/v1/watch/configmaps", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 405);
  r = ParseRequestInfo("TRACE", "/api/v1/configmaps", "");
  EXPECT_EQ(kube::HttpCode(r.status()), 405);
}

}  // namespace
}  // namespace ctrlhost::apiserver
