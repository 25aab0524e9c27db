// Discovery, get and list (selectors, pagination, resourceVersion semantics, Table output, long
// lists streamed in chunks), driven through ApiHandlers::Handle() against a real Store.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/list_tokens.h"
#include "runtime/apiserver/testing/api_test_env.h"
#include "runtime/kube/shard_selector.h"

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

// KEP-5866: the two halves of the uid hash space split a LIST, each half says which selector
// it applied, a namespace selector keeps a namespace whole, and a bad selector is a 422 on the
// shardSelector field.
TEST_F(ListTest, ShardSelectorsSplitAListAndEchoTheSelector) {
  env_.CreateNamespace("sh");
  for (int i = 0; i < 100; ++i) {
    env_.CreateConfigMap("sh", absl::StrCat("cm-", i), nlohmann::json::object());
  }
  const std::string low = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
  const std::string high =
      "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";
  std::set<std::string> all;
  size_t low_size = 0;
  for (const std::string& selector : {low, high}) {
    ApiResponse r = env_.Get("/api/v1/namespaces/sh/configmaps", {{"shardSelector", selector}});
    ASSERT_EQ(r.code, 200) << r.body;
    nlohmann::json list = ApiTestEnv::Json(r);
    EXPECT_EQ(list["metadata"]["shardInfo"]["selector"], selector);
    for (const auto& item : list["items"]) {
      const std::string uid = item["metadata"]["uid"];
      EXPECT_EQ(kube::Fnv1a64(uid) < 0x8000000000000000ull, selector == low);
      EXPECT_TRUE(all.insert(item["metadata"]["name"].get<std::string>()).second);
    }
    if (selector == low) low_size = list["items"].size();
  }
  EXPECT_EQ(all.size(), 100u);
  EXPECT_GT(low_size, 20u);
  EXPECT_LT(low_size, 80u);
  // A Table says so too (kubectl get --raw, or a client that asks for Tables).
  ApiResponse table =
      env_.Do("GET", "/api/v1/namespaces/sh/configmaps", "", "", {{"shardSelector", low}},
              "application/json;as=Table;v=v1;g=meta.k8s.io");
  ASSERT_EQ(table.code, 200) << table.body;
  EXPECT_EQ(ApiTestEnv::Json(table)["metadata"]["shardInfo"]["selector"], low);
  // Without a selector: no shardInfo.
  EXPECT_FALSE(ApiTestEnv::Json(env_.Get("/api/v1/namespaces/sh/configmaps"))["metadata"].contains(
      "shardInfo"));

  // By namespace: every ConfigMap of ns1 on the side "ns1" hashes to.
  const bool ns1_low = kube::Fnv1a64("ns1") < 0x8000000000000000ull;
  std::vector<std::string> names = ListNames(
      "/api/v1/configmaps",
      {{"shardSelector",
        absl::StrReplaceAll(ns1_low ? low : high, {{"metadata.uid", "metadata.namespace"}})}});
  EXPECT_THAT(names, ::testing::IsSupersetOf({"a", "b", "c"}));

  ApiResponse bad = env_.Get("/api/v1/namespaces/sh/configmaps",
                             {{"shardSelector", "shardRange(object.metadata.name, '0x0', '0x1')"}});
  EXPECT_EQ(bad.code, 422) << bad.body;
  nlohmann::json status = ApiTestEnv::Json(bad);
  EXPECT_EQ(status["reason"], "Invalid");
  EXPECT_EQ(status["details"]["causes"][0]["field"], "shardSelector");
  EXPECT_THAT(status["details"]["causes"][0]["message"].get<std::string>(),
              ::testing::HasSubstr("expected object.metadata.uid or object.metadata.namespace"));
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

// ---- Long Table LISTs (`kubectl get`), streamed row by row. ----

constexpr char kTableAccept[] =
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json";

// kListItemsInOneBody and kListChunkBytes of handlers.cc.
constexpr size_t kItemsInOneBody = 500;
constexpr size_t kChunkBytes = 256 * 1024;

struct Drained {
  std::string body;
  std::vector<size_t> chunk_sizes;
};

// Runs a streamed answer to its end (bounded), as the transport does; `between_chunks` runs
// after each chunk.
Drained Drain(ApiResponse& r, const std::function<void()>& between_chunks = nullptr) {
  Drained out;
  for (int calls = 0; calls < 100000; ++calls) {
    const bool more = r.stream([&](absl::string_view chunk) {
      out.body.append(chunk.data(), chunk.size());
      out.chunk_sizes.push_back(chunk.size());
      return true;
    });
    if (!more) break;
    if (between_chunks) between_chunks();
  }
  return out;
}

// Where `a` and `b` first differ, with some context (two texts of megabytes are not printed).
std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return absl::StrCat("at byte ", i, ": \"", a.substr(from, 80), "\" vs \"", b.substr(from, 80),
                      "\"");
}

// 2,000 ConfigMaps cm-1000 ... cm-2999 in namespace "big" (4 times the items answered in one
// body), each with a 1 KiB annotation so that its row weighs about 1.4 KiB (a table of ~2.8 MB,
// about eleven chunks).
// With the ShardedListAndWatch gate off (`ctrlhost apiserver --feature-gates
// ShardedListAndWatch=false`) the server is one from before KEP-5866: the parameter is ignored,
// even a malformed one, and no shardInfo says it was applied.
TEST(ShardGateTest, GateOffIgnoresShardSelectors) {
  testing::ApiTestEnvOptions options;
  options.handler_options.shard_selectors = false;
  ApiTestEnv env(options);
  env.CreateNamespace("sh");
  for (int i = 0; i < 20; ++i) {
    env.CreateConfigMap("sh", absl::StrCat("cm-", i), nlohmann::json::object());
  }
  for (const std::string selector :
       {"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", "not a selector"}) {
    ApiResponse r = env.Get("/api/v1/namespaces/sh/configmaps", {{"shardSelector", selector}});
    ASSERT_EQ(r.code, 200) << r.body;
    nlohmann::json list = ApiTestEnv::Json(r);
    EXPECT_EQ(list["items"].size(), 20u);
    EXPECT_FALSE(list["metadata"].contains("shardInfo"));
  }
}

class StreamedTableTest : public ::testing::Test {
 protected:
  static constexpr int kItems = 2000;

  void SetUp() override {
    env_.CreateNamespace("big");
    const std::string note(1024, 'n');
    for (int i = 0; i < kItems; ++i) {
      nlohmann::json cm = {{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata",
                            {{"name", Name(i)},
                             {"labels", {{"i", std::to_string(i)}}},
                             {"annotations", {{"note", note}}}}},
                           {"data", {{"k", std::to_string(i)}}}};
      ApiResponse r = env_.Post("/api/v1/namespaces/big/configmaps", cm);
      ASSERT_EQ(r.code, 201) << r.body;
    }
    // Ages of a few minutes, the same in every row: the answer has one `now`.
    env_.clock().Advance(absl::Seconds(376));
  }

  static std::string Name(int i) { return absl::StrCat("cm-", 1000 + i); }
  const ResourceInfo& ConfigMaps() { return *env_.registry().Find("", "v1", "configmaps"); }

  ApiResponse Get(std::vector<std::pair<std::string, std::string>> query) {
    return env_.Do("GET", "/api/v1/namespaces/big/configmaps", "", "", query, kTableAccept);
  }

  ApiTestEnv env_;
};

// A streamed Table LIST is, byte for byte, the Table built whole (TableOf) of the same items, for
// each includeObject and with a continue token, and its Age cells all count from one `now`.
TEST_F(StreamedTableTest, StreamedIsByteIdenticalToTableOf) {
  const ResourceInfo& r = ConfigMaps();
  // A stored item that is not an object, first in key order: the Table leaves it out, and the
  // first row written is not preceded by a comma.
  ASSERT_TRUE(env_.store()
                  .Write(r.Key("big", "cm-0000-junk"),
                         [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
                           return Mutation(Mutation::Op::kPut, "[1]");
                         })
                  .ok());
  for (const char* include : {"None", "Metadata", "Object"}) {
    ApiRequest options_request;
    options_request.query["includeObject"] = include;
    const TableOptions options = *TableOptionsOf(options_request);
    for (const size_t limit : {size_t{0}, size_t{1200}}) {
      std::vector<std::pair<std::string, std::string>> query = {{"includeObject", include}};
      if (limit > 0) query.emplace_back("limit", std::to_string(limit));
      ApiResponse resp = Get(query);
      ASSERT_EQ(resp.code, 200) << resp.body;
      ASSERT_TRUE(resp.stream) << include << ": a Table of " << kItems << " rows is answered whole";
      // The clock moves while the answer is written: its rows' ages do not.
      const absl::Time asked_at = env_.clock().Now();
      const std::string streamed =
          Drain(resp, [this] { env_.clock().Advance(absl::Minutes(1)); }).body;

      Store::ListOptions list;
      list.prefix = r.NamespacePrefix("big");
      list.limit = limit;
      absl::StatusOr<Store::ListResult> items = env_.store().List(list);
      ASSERT_TRUE(items.ok()) << items.status();
      ASSERT_EQ(items->more, limit > 0);
      const std::string token =
          items->more ? EncodeContinue(items->revision, items->last_key) : std::string();
      const std::string whole =
          Dump(TableOf(r, items->items, items->revision, token, asked_at, options));
      EXPECT_EQ(streamed.size(), whole.size()) << include << ", limit " << limit;
      EXPECT_TRUE(streamed == whole)
          << include << ", limit " << limit << ": " << FirstDifference(streamed, whole);
      const nlohmann::json table = nlohmann::json::parse(whole);
      EXPECT_EQ(table["rows"].size(), limit > 0 ? limit - 1 : size_t{kItems}) << include;
      EXPECT_EQ(table["metadata"].contains("continue"), limit > 0);
      EXPECT_EQ(table["rows"][0]["cells"][0], Name(0));
    }
  }
}

// `kubectl get` of a large namespace built its whole Table (as JSON, then as text). It is
// streamed in chunks of about kListChunkBytes, and is a valid Table with every row in key order.
TEST_F(StreamedTableTest, LongTableIsStreamedInBoundedChunks) {
  ApiResponse resp = Get({});
  ASSERT_EQ(resp.code, 200) << resp.body;
  ASSERT_TRUE(resp.stream) << "a Table of " << kItems << " rows is answered whole";
  EXPECT_TRUE(resp.body.empty());
  EXPECT_EQ(resp.content_type, "application/json");
  const Drained drained = Drain(resp);
  const nlohmann::json table = nlohmann::json::parse(drained.body, nullptr, false);
  ASSERT_FALSE(table.is_discarded()) << "the chunks do not join to JSON";
  EXPECT_EQ(table["kind"], "Table");
  EXPECT_EQ(table["apiVersion"], "meta.k8s.io/v1");
  EXPECT_EQ(table["metadata"]["resourceVersion"], std::to_string(env_.store().Revision()));
  EXPECT_FALSE(table["metadata"].contains("continue"));
  ASSERT_EQ(table["columnDefinitions"].size(), 3u);
  EXPECT_EQ(table["columnDefinitions"][0]["name"], "Name");
  ASSERT_EQ(table["rows"].size(), size_t{kItems});
  size_t largest_row = 0;
  for (int i = 0; i < kItems; ++i) {
    const nlohmann::json& row = table["rows"][i];
    ASSERT_EQ(row["cells"], nlohmann::json({Name(i), 1, "6m16s"})) << i;
    ASSERT_EQ(row["object"]["kind"], "PartialObjectMetadata") << i;
    ASSERT_EQ(row["object"]["metadata"]["name"], Name(i)) << i;
    largest_row = std::max(largest_row, Dump(row).size());
  }
  // About eleven chunks: each past kListChunkBytes by at most one row (and the "]}"), and every
  // one but the last at least kListChunkBytes.
  const std::vector<size_t>& sizes = drained.chunk_sizes;
  ASSERT_GE(sizes.size(), drained.body.size() / (kChunkBytes + largest_row + 2));
  ASSERT_GE(sizes.size(), 5u);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_LE(sizes[i], kChunkBytes + largest_row + 2) << "chunk " << i;
    if (i + 1 < sizes.size()) {
      EXPECT_GE(sizes[i], kChunkBytes) << "chunk " << i;
    }
  }
}

// Pages of a streamed Table: each carries the continue token of the next, the last none, and
// together they hold every row once, in key order. A page of up to kListItemsInOneBody rows is
// one body.
TEST_F(StreamedTableTest, LimitAndContinue) {
  std::vector<std::string> names;
  std::string token;
  std::vector<bool> streamed;
  for (int page = 0; page < 10; ++page) {
    std::vector<std::pair<std::string, std::string>> query = {{"limit", "1200"}};
    if (!token.empty()) query.emplace_back("continue", token);
    ApiResponse resp = Get(query);
    ASSERT_EQ(resp.code, 200) << resp.body;
    streamed.push_back(static_cast<bool>(resp.stream));
    const nlohmann::json table =
        nlohmann::json::parse(resp.stream ? Drain(resp).body : resp.body, nullptr, false);
    ASSERT_EQ(table["kind"], "Table") << table;
    for (const auto& row : table["rows"]) names.push_back(row["cells"][0].get<std::string>());
    token = table["metadata"].value("continue", "");
    if (token.empty()) break;
  }
  EXPECT_EQ(streamed, std::vector<bool>({true, true}));
  ASSERT_EQ(names.size(), size_t{kItems});
  for (int i = 0; i < kItems; ++i) ASSERT_EQ(names[i], Name(i)) << i;

  // 2,000 - 1,600 = 400 rows: one body.
  ApiResponse first = Get({{"limit", "1600"}});
  ASSERT_TRUE(first.stream);
  token = nlohmann::json::parse(Drain(first).body)["metadata"]["continue"];
  ApiResponse rest = Get({{"continue", token}});
  ASSERT_EQ(rest.code, 200) << rest.body;
  EXPECT_FALSE(rest.stream) << "400 rows are streamed";
  const nlohmann::json table = ApiTestEnv::Json(rest);
  ASSERT_EQ(table["rows"].size(), 400u);
  EXPECT_EQ(table["rows"][0]["cells"][0], Name(1600));
  EXPECT_FALSE(table["metadata"].contains("continue"));
  static_assert(2000 - 1600 <= kItemsInOneBody, "the last page must be one body");
}

}  // namespace
}  // namespace ctrlhost::apiserver
