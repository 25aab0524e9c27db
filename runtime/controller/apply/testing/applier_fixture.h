// Test fixture for the applier: one embedded API server per test binary (in process, HTTPS,
// data under $TEST_TMPDIR) with the WebApp CRD (status subresource), a fresh namespace per test
// named after it, and helpers to read objects, conditions and events back.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_TESTING_APPLIER_FIXTURE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_TESTING_APPLIER_FIXTURE_H_

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/cache/store.h"
#include "runtime/common/clock.h"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/kube/client.h"

namespace ctrlhost::controller::apply::testing {

using nlohmann::json;

inline kube::ResourceRef Ref(const std::string& group, const std::string& version,
                             const std::string& resource, const std::string& ns,
                             const std::string& name = "") {
  kube::ResourceRef ref;
  ref.group = group;
  ref.version = version;
  ref.resource = resource;
  ref.namespace_name = ns;
  ref.name = name;
  return ref;
}
inline kube::ResourceRef WebApps(const std::string& ns, const std::string& name = "") {
  return Ref("ctrlhost.dev", "v1", "webapps", ns, name);
}
inline kube::ResourceRef ConfigMaps(const std::string& ns, const std::string& name = "") {
  return Ref("", "v1", "configmaps", ns, name);
}

class ApplierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("applier_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
    rest_ = &api_->rest();
    client_ = &api_->client();
    auto crd = client_->Create(
        Ref("apiextensions.k8s.io", "v1", "customresourcedefinitions", ""),
        R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
            "metadata":{"name":"webapps.ctrlhost.dev"},
            "spec":{"group":"ctrlhost.dev","scope":"Namespaced",
                    "names":{"plural":"webapps","singular":"webapp","kind":"WebApp"},
                    "versions":[{"name":"v1","served":true,"storage":true,
                                 "subresources":{"status":{}},
                                 "schema":{"openAPIV3Schema":{"type":"object",
                                   "x-kubernetes-preserve-unknown-fields":true}}}]}})");
    ASSERT_TRUE(crd.ok()) << crd.status();
    // Bounded wait until the new resource is served.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!client_->List(WebApps("default")).ok() && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(client_->List(WebApps("default")).ok());
  }
  static void TearDownTestSuite() {
    client_ = nullptr;
    rest_ = nullptr;
    delete api_;
  }

  // A fresh namespace per test, named after it.
  void SetUp() override {
    ns_ = absl::StrCat("t-", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (char& ch : ns_) ch = ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
    ASSERT_TRUE(
        client_->Create(Ref("", "v1", "namespaces", ""), json{{"metadata", {{"name", ns_}}}}.dump())
            .ok());
  }

  static json Parse(const absl::StatusOr<std::string>& text) {
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? json::parse(*text) : json();
  }

  // Creates WebApp `name` in the test's namespace; returns it as served.
  std::string CreateWebApp(const std::string& name, const json& extra_metadata = json::object()) {
    json object = {{"apiVersion", "ctrlhost.dev/v1"},
                   {"kind", "WebApp"},
                   {"metadata", {{"name", name}}},
                   {"spec", {{"replicas", 1}}}};
    object["metadata"].update(extra_metadata);
    absl::StatusOr<std::string> created = client_->Create(WebApps(ns_), object.dump());
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : "";
  }
  json Live(const std::string& name) { return Parse(client_->Get(WebApps(ns_, name))); }
  // The context the runner would build from the cached object.
  ReconcileContext Context(const std::string& name) {
    return ContextFor(&webapp_, CachedObject(client_->Get(WebApps(ns_, name)).value()));
  }
  // The same with the host's caches of the owned kinds (ConfigMaps, Deployments) filled from
  // the server, as the watches hold them once synced.
  ReconcileContext CachedContext(const std::string& name) {
    ReconcileContext context = Context(name);
    Fill(&configmaps_cache_, ConfigMaps(ns_));
    Fill(&deployments_cache_, Ref("apps", "v1", "deployments", ns_));
    context.owned_stores = {&configmaps_cache_, &deployments_cache_};
    return context;
  }
  void Fill(cache::Store* store, const kube::ResourceRef& ref) {
    absl::StatusOr<kube::ObjectList> list = client_->List(ref);
    ASSERT_TRUE(list.ok()) << list.status();
    std::vector<cache::ObjectPtr> objects;
    for (const std::string& item : list->items) objects.push_back(CachedObject(item));
    store->Replace(std::move(objects), list->resource_version);
  }
  std::vector<json> EventsWithReason(const std::string& reason) {
    std::vector<json> found;
    absl::StatusOr<kube::ObjectList> list = client_->List(Ref("", "v1", "events", ns_));
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return found;
    for (const std::string& item : list->items) {
      json event = json::parse(item);
      if (event.value("reason", "") == reason) found.push_back(event);
    }
    return found;
  }
  // The condition of `type` in object.status.conditions (a copy), or null.
  static json Condition(const json& object, const std::string& type) {
    if (!object.is_object() || !object.contains("status")) return json();
    const json& status = object.at("status");
    if (!status.is_object() || !status.contains("conditions")) return json();
    for (const json& c : status.at("conditions")) {
      if (c.is_object() && c.value("type", "") == type) return c;
    }
    return json();
  }

  inline static apiserver::testing::EmbeddedApiServer* api_ = nullptr;
  inline static kube::RestClient* rest_ = nullptr;  // the transport of client_ (counts requests)
  inline static kube::Client* client_ = nullptr;
  std::string ns_;
  cache::Store configmaps_cache_;
  cache::Store deployments_cache_;
  common::FakeClock clock_;
  ControllerInfo webapp_ = testing::WebAppController();
  Applier applier_{client_, ApplierOptions{.clock = &clock_}};
};

inline std::string ConfigMapJson(const std::string& name, const std::string& value = "1") {
  return json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", name}}},
              {"data", {{"v", value}}}}
      .dump();
}

}  // namespace ctrlhost::controller::apply::testing

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_TESTING_APPLIER_FIXTURE_H_
