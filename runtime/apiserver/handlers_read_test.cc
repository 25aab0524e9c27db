// Discovery, get and list (selectors, pagination, resourceVersion semantics, Table output),
// driven through ApiHandlers::Handle() against a real Store.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ExpectStatus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

const nlohmann::json* FindResource(const nlohmann::json& list, const std::string& name) {
  for (const auto& r : list["resources"]) {
    if (r["name"] == name) return &r;
  }
  return nullptr;
}

std::vector<std::string> Names(const nlohmann::json& list) {
  std::vector<std::string> out;
  for (const auto& i : list["items"]) out.push_back(i["metadata"]["name"].get<std::string>());
  return out;
}

// Expects a metav1.Status failure with `code` and `reason`.
TEST(DiscoveryTest, VersionAndHealth) {
  ApiTestEnv env;
  ApiResponse v = env.Get("/version");
  ASSERT_EQ(v.code, 200);
  EXPECT_EQ(ApiTestEnv::Json(v)["major"], "1");
  EXPECT_EQ(ApiTestEnv::Json(v)["gitVersion"], "v1.32.0");
  for (const char* p : {"/healthz", "/readyz", "/livez"}) {
    ApiResponse h = env.Get(p);
    EXPECT_EQ(h.code, 200) << p;
    EXPECT_EQ(h.body, "ok") << p;
  }
  ExpectStatus(env.Get("/nothing-here"), 404, "NotFound");
  ExpectStatus(env.Do("POST", "/api", "{}"), 405, "MethodNotAllowed");
}

TEST(DiscoveryTest, CoreGroup) {
  ApiTestEnv env;
  nlohmann::json api = ApiTestEnv::Json(env.Get("/api"));
  EXPECT_EQ(api["kind"], "APIVersions");
  EXPECT_EQ(api["versions"], nlohmann::json({"v1"}));
  ApiResponse r = env.Get("/api/v1");
  ASSERT_EQ(r.code, 200);
  nlohmann::json list = ApiTestEnv::Json(r);
  EXPECT_EQ(list["kind"], "APIResourceList");
  EXPECT_EQ(list["groupVersion"], "v1");
  const nlohmann::json* cm = FindResource(list, "configmaps");
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ((*cm)["kind"], "ConfigMap");
  EXPECT_EQ((*cm)["namespaced"], true);
  EXPECT_EQ((*cm)["singularName"], "configmap");
  EXPECT_EQ((*cm)["shortNames"], nlohmann::json({"cm"}));
  EXPECT_THAT((*cm)["verbs"].get<std::vector<std::string>>(),
              UnorderedElementsAre("create", "delete", "deletecollection", "get", "list", "patch",
                                   "update", "watch"));
  const nlohmann::json* ns = FindResource(list, "namespaces");
  ASSERT_NE(ns, nullptr);
  EXPECT_EQ((*ns)["namespaced"], false);
  const nlohmann::json* ns_status = FindResource(list, "namespaces/status");
  ASSERT_NE(ns_status, nullptr);
  EXPECT_THAT((*ns_status)["verbs"].get<std::vector<std::string>>(),
              UnorderedElementsAre("get", "patch", "update"));
  for (const char* name : {"secrets", "serviceaccounts", "services", "events"}) {
    EXPECT_NE(FindResource(list, name), nullptr) << name;
  }
  ExpectStatus(env.Get("/api/v2"), 404, "NotFound");
}

TEST(DiscoveryTest, NamedGroups) {
  ApiTestEnv env;
  nlohmann::json groups = ApiTestEnv::Json(env.Get("/apis"));
  EXPECT_EQ(groups["kind"], "APIGroupList");
  std::vector<std::string> names;
  for (const auto& g : groups["groups"]) names.push_back(g["name"]);
  EXPECT_THAT(names, ::testing::IsSupersetOf(
                         {"apps", "events.k8s.io", "coordination.k8s.io", "apiextensions.k8s.io"}));
  nlohmann::json apps = ApiTestEnv::Json(env.Get("/apis/apps"));
  EXPECT_EQ(apps["kind"], "APIGroup");
  EXPECT_EQ(apps["preferredVersion"]["groupVersion"], "apps/v1");
  nlohmann::json v1 = ApiTestEnv::Json(env.Get("/apis/apps/v1"));
  const nlohmann::json* deploy = FindResource(v1, "deployments");
  ASSERT_NE(deploy, nullptr);
  EXPECT_EQ((*deploy)["kind"], "Deployment");
  EXPECT_EQ((*deploy)["shortNames"], nlohmann::json({"deploy"}));
  EXPECT_NE(FindResource(v1, "deployments/status"), nullptr);
  nlohmann::json crds = ApiTestEnv::Json(env.Get("/apis/apiextensions.k8s.io/v1"));
  const nlohmann::json* crd = FindResource(crds, "customresourcedefinitions");
  ASSERT_NE(crd, nullptr);
  EXPECT_EQ((*crd)["namespaced"], false);
  ExpectStatus(env.Get("/apis/nosuch.example.com"), 404, "NotFound");
  ExpectStatus(env.Get("/apis/apps/v7"), 404, "NotFound");
}

TEST(GetTest, NotFoundAndUnknownResource) {
  ApiTestEnv env;
  env.CreateNamespace("ns1");
  ApiResponse r = env.Get("/api/v1/namespaces/ns1/configmaps/missing");
  ExpectStatus(r, 404, "NotFound");
  EXPECT_THAT(ApiTestEnv::Json(r)["message"].get<std::string>(),
              HasSubstr("configmaps \"missing\" not found"));
  EXPECT_EQ(ApiTestEnv::Json(r)["details"]["name"], "missing");
  ExpectStatus(env.Get("/api/v1/namespaces/ns1/widgets"), 404, "NotFound");
  ExpectStatus(env.Get("/apis/example.com/v1/widgets"), 404, "NotFound");
  // A cluster-scoped kind under a namespace, a namespaced one by name without namespace.
  ExpectStatus(env.Get("/api/v1/namespaces/ns1/namespaces/x/y"), 404, "NotFound");
  ExpectStatus(env.Get("/apis/apiextensions.k8s.io/v1/namespaces/ns1/customresourcedefinitions"),
               404, "NotFound");
  ExpectStatus(env.Get("/api/v1/configmaps/x"), 404, "NotFound");
  // An unknown subresource.
  env.CreateConfigMap("ns1", "a");
  ExpectStatus(env.Get("/api/v1/namespaces/ns1/configmaps/a/status"), 404, "NotFound");
  ExpectStatus(env.Get("/api/v1/namespaces/ns1/configmaps/a/b/c"), 404, "NotFound");
}

TEST(GetTest, ReturnsStoredObject) {
  ApiTestEnv env;
  env.CreateNamespace("ns1");
  nlohmann::json created = env.CreateConfigMap("ns1", "a", {{"app", "web"}}, {{"k", "v"}});
  ApiResponse r = env.Get("/api/v1/namespaces/ns1/configmaps/a");
  ASSERT_EQ(r.code, 200);
  nlohmann::json got = ApiTestEnv::Json(r);
  EXPECT_EQ(got, created);
  EXPECT_EQ(got["data"]["k"], "v");
  EXPECT_EQ(got["metadata"]["namespace"], "ns1");
}

class ListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.CreateNamespace("ns1");
    env_.CreateNamespace("ns2");
    env_.CreateConfigMap("ns1", "a", {{"app", "web"}, {"tier", "front"}});
    env_.CreateConfigMap("ns1", "b", {{"app", "db"}});
    env_.CreateConfigMap("ns1", "c", {{"app", "web"}, {"tier", "back"}});
    env_.CreateConfigMap("ns2", "d", nlohmann::json::object());
  }

  std::vector<std::string> ListNames(const std::string& path,
                                     std::vector<std::pair<std::string, std::string>> query) {
    ApiResponse r = env_.Get(path, query);
    EXPECT_EQ(r.code, 200) << r.body;
    return Names(ApiTestEnv::Json(r));
  }

  ApiTestEnv env_;
};

// Issue 14: each LIST built its whole body (8 concurrent LISTs of a 205 MB namespace: 1.9 GB
// RSS). A large one is streamed: the chunks concatenate to the same document, and a paged one
// keeps its continue token.
TEST_F(ListTest, LargeListIsStreamedInChunks) {
  env_.CreateNamespace("big");
  for (int i = 0; i < 700; ++i) {
    env_.CreateConfigMap("big", absl::StrCat("cm-", 1000 + i), nlohmann::json::object());
  }
  auto drain = [](ApiResponse& r) {
    std::string body;
    int chunks = 0;
    for (int calls = 0; calls < 10000; ++calls) {
      const bool more = r.stream([&](absl::string_view chunk) {
        body.append(chunk.data(), chunk.size());
        ++chunks;
        return true;
      });
      if (!more) break;
    }
    return std::make_pair(body, chunks);
  };
  ApiResponse r = env_.Get("/api/v1/namespaces/big/configmaps");
  ASSERT_EQ(r.code, 200);
  ASSERT_TRUE(r.stream) << "a list of 700 items is answered whole";
  EXPECT_TRUE(r.body.empty());
  auto [body, chunks] = drain(r);
  nlohmann::json list = nlohmann::json::parse(body);
  EXPECT_EQ(list["kind"], "ConfigMapList");
  EXPECT_FALSE(list["metadata"]["resourceVersion"].get<std::string>().empty());
  ASSERT_EQ(list["items"].size(), 700u);
  EXPECT_EQ(list["items"][0]["metadata"]["name"], "cm-1000");
  EXPECT_EQ(list["items"][699]["metadata"]["name"], "cm-1699");
  EXPECT_GE(chunks, 1);

  ApiResponse page = env_.Get("/api/v1/namespaces/big/configmaps", {{"limit", "600"}});
  ASSERT_TRUE(page.stream);
  nlohmann::json first = nlohmann::json::parse(drain(page).first);
  ASSERT_EQ(first["items"].size(), 600u);
  const std::string token = first["metadata"]["continue"];
  ASSERT_FALSE(token.empty());
  ApiResponse rest = env_.Get("/api/v1/namespaces/big/configmaps", {{"continue", token}});
  ASSERT_FALSE(rest.stream) << "100 items are answered whole";
  EXPECT_EQ(ApiTestEnv::Json(rest)["items"].size(), 100u);
}

TEST_F(ListTest, ListShape) {
  ApiResponse r = env_.Get("/api/v1/namespaces/ns1/configmaps");
  ASSERT_EQ(r.code, 200);
  nlohmann::json list = ApiTestEnv::Json(r);
  EXPECT_EQ(list["kind"], "ConfigMapList");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_EQ(list["metadata"]["resourceVersion"], std::to_string(env_.store().Revision()));
  EXPECT_FALSE(list["metadata"].contains("continue"));
  EXPECT_THAT(Names(list), ElementsAre("a", "b", "c"));
  EXPECT_THAT(ListNames("/api/v1/configmaps", {}), ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(ListNames("/api/v1/namespaces/none/configmaps", {}), ElementsAre());
}

TEST_F(ListTest, LabelSelectors) {
  const std::string p = "/api/v1/namespaces/ns1/configmaps";
  EXPECT_THAT(ListNames(p, {{"labelSelector", "app=web"}}), ElementsAre("a", "c"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "app==web"}}), ElementsAre("a", "c"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "app!=web"}}), ElementsAre("b"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "tier in (front,side)"}}), ElementsAre("a"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "tier notin (front)"}}), ElementsAre("b", "c"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "tier"}}), ElementsAre("a", "c"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "!tier"}}), ElementsAre("b"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", "app=web,tier=back"}}), ElementsAre("c"));
  EXPECT_THAT(ListNames(p, {{"labelSelector", ""}}), ElementsAre("a", "b", "c"));
  for (const char* bad : {"app=(", "a b", "tier in front", "=x", "app=web,", "x==y==z"}) {
    ApiResponse r = env_.Get(p, {{"labelSelector", bad}});
    ExpectStatus(r, 400, "BadRequest");
  }
}

TEST_F(ListTest, FieldSelectors) {
  EXPECT_THAT(ListNames("/api/v1/configmaps", {{"fieldSelector", "metadata.name=b"}}),
              ElementsAre("b"));
  EXPECT_THAT(ListNames("/api/v1/configmaps", {{"fieldSelector", "metadata.namespace=ns2"}}),
              ElementsAre("d"));
  EXPECT_THAT(ListNames("/api/v1/configmaps", {{"fieldSelector", "metadata.namespace!=ns2"}}),
              ElementsAre("a", "b", "c"));
  EXPECT_THAT(ListNames("/api/v1/namespaces/ns1/configmaps",
                        {{"fieldSelector", "metadata.name!=a"}, {"labelSelector", "app=web"}}),
              ElementsAre("c"));
  EXPECT_THAT(ListNames("/api/v1/namespaces", {{"fieldSelector", "metadata.name=ns2"}}),
              ElementsAre("ns2"));
  ExpectStatus(env_.Get("/api/v1/configmaps", {{"fieldSelector", "spec.foo=bar"}}), 400,
               "BadRequest");
  ExpectStatus(env_.Get("/api/v1/configmaps", {{"fieldSelector", "metadata.name"}}), 400,
               "BadRequest");
}

TEST_F(ListTest, LimitAndContinueServeOneSnapshot) {
  const std::string p = "/api/v1/namespaces/ns1/configmaps";
  ApiResponse r1 = env_.Get(p, {{"limit", "2"}});
  ASSERT_EQ(r1.code, 200);
  nlohmann::json page1 = ApiTestEnv::Json(r1);
  EXPECT_THAT(Names(page1), ElementsAre("a", "b"));
  ASSERT_TRUE(page1["metadata"].contains("continue"));
  const std::string token = page1["metadata"]["continue"];
  const std::string rv1 = page1["metadata"]["resourceVersion"];

  // Writes after page 1 do not show in page 2.
  env_.CreateConfigMap("ns1", "bb");
  ASSERT_EQ(env_.Delete(p + "/c").code, 200);
  ApiResponse r2 = env_.Get(p, {{"limit", "2"}, {"continue", token}});
  ASSERT_EQ(r2.code, 200) << r2.body;
  nlohmann::json page2 = ApiTestEnv::Json(r2);
  EXPECT_THAT(Names(page2), ElementsAre("c"));
  EXPECT_EQ(page2["metadata"]["resourceVersion"], rv1);
  EXPECT_FALSE(page2["metadata"].contains("continue"));
  // A fresh list sees them.
  EXPECT_THAT(ListNames(p, {}), ElementsAre("a", "b", "bb"));
  // limit counts matching items only.
  nlohmann::json sel = ApiTestEnv::Json(env_.Get(p, {{"limit", "1"}, {"labelSelector", "app=db"}}));
  EXPECT_THAT(Names(sel), ElementsAre("b"));
}

TEST_F(ListTest, BadPaginationParameters) {
  const std::string p = "/api/v1/namespaces/ns1/configmaps";
  ExpectStatus(env_.Get(p, {{"limit", "-1"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(p, {{"limit", "many"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(p, {{"continue", "%%%"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(p, {{"continue", "e30"}}), 400, "BadRequest");  // "{}"
  // A token of another list.
  nlohmann::json page = ApiTestEnv::Json(env_.Get("/api/v1/namespaces", {{"limit", "1"}}));
  ASSERT_TRUE(page["metadata"].contains("continue"));
  ExpectStatus(env_.Get(p, {{"continue", page["metadata"]["continue"]}}), 400, "BadRequest");
  nlohmann::json own = ApiTestEnv::Json(env_.Get(p, {{"limit", "1"}}));
  ExpectStatus(env_.Get(p, {{"continue", own["metadata"]["continue"]}, {"resourceVersion", "5"}}),
               400, "BadRequest");
}

TEST_F(ListTest, ExpiredContinueTokenIsGone) {
  const std::string p = "/api/v1/namespaces/ns1/configmaps";
  nlohmann::json page1 = ApiTestEnv::Json(env_.Get(p, {{"limit", "1"}}));
  const std::string token = page1["metadata"]["continue"];
  env_.CreateConfigMap("ns1", "later");
  ASSERT_TRUE(env_.store().Compact(env_.store().Revision()).ok());
  ApiResponse r = env_.Get(p, {{"limit", "1"}, {"continue", token}});
  ExpectStatus(r, 410, "Expired");
  // The server keeps serving.
  EXPECT_THAT(ListNames(p, {}), ElementsAre("a", "b", "c", "later"));
}

TEST_F(ListTest, ResourceVersionSemantics) {
  const std::string p = "/api/v1/namespaces/ns1/configmaps";
  const int64_t before = env_.store().Revision();
  env_.CreateConfigMap("ns1", "e");
  EXPECT_THAT(ListNames(p, {{"resourceVersion", "0"}}), ElementsAre("a", "b", "c", "e"));
  EXPECT_THAT(ListNames(p, {{"resourceVersion", ""}}), ElementsAre("a", "b", "c", "e"));
  EXPECT_THAT(ListNames(p, {{"resourceVersion", std::to_string(before)},
                            {"resourceVersionMatch", "NotOlderThan"}}),
              ElementsAre("a", "b", "c", "e"));
  EXPECT_THAT(ListNames(p, {{"resourceVersion", std::to_string(before)}}),
              ElementsAre("a", "b", "c", "e"));
  // Exact: the state as of that revision.
  ApiResponse exact =
      env_.Get(p, {{"resourceVersion", std::to_string(before)}, {"resourceVersionMatch", "Exact"}});
  ASSERT_EQ(exact.code, 200) << exact.body;
  EXPECT_THAT(Names(ApiTestEnv::Json(exact)), ElementsAre("a", "b", "c"));
  EXPECT_EQ(ApiTestEnv::Json(exact)["metadata"]["resourceVersion"], std::to_string(before));
  // Too new.
  const std::string future = std::to_string(env_.store().Revision() + 100);
  ExpectStatus(env_.Get(p, {{"resourceVersion", future}}), 504, "Timeout");
  ExpectStatus(env_.Get(p, {{"resourceVersion", future}, {"resourceVersionMatch", "Exact"}}), 504,
               "Timeout");
  // Malformed.
  ExpectStatus(env_.Get(p, {{"resourceVersion", "abc"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(p, {{"resourceVersionMatch", "Exact"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(p, {{"resourceVersion", "1"}, {"resourceVersionMatch", "Newest"}}), 400,
               "BadRequest");
  // Exact at a compacted revision is gone.
  ASSERT_TRUE(env_.store().Compact(env_.store().Revision()).ok());
  ExpectStatus(
      env_.Get(p, {{"resourceVersion", std::to_string(before)}, {"resourceVersionMatch", "Exact"}}),
      410, "Expired");
}

TEST_F(ListTest, TableOutput) {
  const std::string accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
  ApiResponse r = env_.Do("GET", "/api/v1/namespaces/ns1/configmaps", "", "", {}, accept);
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json t = ApiTestEnv::Json(r);
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["apiVersion"], "meta.k8s.io/v1");
  ASSERT_GE(t["columnDefinitions"].size(), 2u);
  EXPECT_EQ(t["columnDefinitions"][0]["name"], "Name");
  ASSERT_EQ(t["rows"].size(), 3u);
  EXPECT_EQ(t["rows"][0]["cells"][0], "a");
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(t["rows"][0]["object"]["metadata"]["name"], "a");
  // Age from the (fake) clock.
  env_.clock().Advance(absl::Minutes(5));
  t = ApiTestEnv::Json(env_.Do("GET", "/api/v1/namespaces/ns1/configmaps/b", "", "", {}, accept));
  ASSERT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"].back(), "5m");
}

}  // namespace
}  // namespace ctrlhost::apiserver
