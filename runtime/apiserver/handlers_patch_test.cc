// PATCH with the four patch types (JSON patch, merge, strategic merge, server-side apply), on
// objects and on the status subresource.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ExpectStatus;
using ::testing::HasSubstr;

constexpr char kJson[] = "application/json-patch+json";
constexpr char kMerge[] = "application/merge-patch+json";
constexpr char kStrategic[] = "application/strategic-merge-patch+json";
constexpr char kApply[] = "application/apply-patch+yaml";

class PatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.CreateNamespace("ns1");
    cm_ = env_.CreateConfigMap("ns1", "a", {{"app", "web"}}, {{"k", "v"}, {"x", "y"}});
    nlohmann::json d = {{"apiVersion", "apps/v1"},
                        {"kind", "Deployment"},
                        {"metadata", {{"name", "web"}}},
                        {"spec",
                         {{"replicas", 1},
                          {"selector", {{"matchLabels", {{"app", "web"}}}}},
                          {"template",
                           {{"metadata", {{"labels", {{"app", "web"}}}}},
                            {"spec",
                             {{"containers",
                               {{{"name", "main"}, {"image", "nginx:1"}},
                                {{"name", "side"}, {"image", "busybox"}}}}}}}}}}};
    ApiResponse r = env_.Post("/apis/apps/v1/namespaces/ns1/deployments", d);
    ASSERT_EQ(r.code, 201) << r.body;
  }

  const std::string cm_path_ = "/api/v1/namespaces/ns1/configmaps/a";
  const std::string deploy_path_ = "/apis/apps/v1/namespaces/ns1/deployments/web";
  ApiTestEnv env_;
  nlohmann::json cm_;
};

TEST_F(PatchTest, MergePatch) {
  ApiResponse r = env_.Patch(cm_path_, kMerge, R"({"data":{"k":"v2","x":null,"n":"new"}})");
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json j = ApiTestEnv::Json(r);
  EXPECT_EQ(j["data"], nlohmann::json({{"k", "v2"}, {"n", "new"}}));
  EXPECT_EQ(j["metadata"]["uid"], cm_["metadata"]["uid"]);
  EXPECT_NE(j["metadata"]["resourceVersion"], cm_["metadata"]["resourceVersion"]);
  // A resourceVersion in the patch is a precondition.
  ApiResponse stale = env_.Patch(
      cm_path_, kMerge,
      nlohmann::json{{"metadata", {{"resourceVersion", cm_["metadata"]["resourceVersion"]}}},
                     {"data", {{"k", "v3"}}}}
          .dump());
  ExpectStatus(stale, 409, "Conflict");
  ExpectStatus(env_.Patch(cm_path_, kMerge, "{not json"), 400, "BadRequest");
  ExpectStatus(env_.Patch(cm_path_, kMerge, "[1]"), 400, "BadRequest");
  // Changing the name or kind through a patch is refused.
  ExpectStatus(env_.Patch(cm_path_, kMerge, R"({"metadata":{"name":"b"}})"), 400, "BadRequest");
  ExpectStatus(env_.Patch(cm_path_, kMerge, R"({"kind":"Secret"})"), 400, "BadRequest");
  // Invalid results are refused whole.
  ExpectStatus(env_.Patch(cm_path_, kMerge, R"({"metadata":{"labels":{"a b":"c"}}})"), 422,
               "Invalid");
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(cm_path_))["data"]["k"], "v2");
}

TEST_F(PatchTest, JsonPatchWithTest) {
  ApiResponse r = env_.Patch(
      cm_path_, kJson,
      R"([{"op":"test","path":"/data/k","value":"v"},{"op":"replace","path":"/data/k","value":"w"},
          {"op":"add","path":"/metadata/labels/tier","value":"front"},
          {"op":"remove","path":"/data/x"}])");
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json j = ApiTestEnv::Json(r);
  EXPECT_EQ(j["data"], nlohmann::json({{"k", "w"}}));
  EXPECT_EQ(j["metadata"]["labels"]["tier"], "front");
  // A failing test changes nothing.
  const std::string rv = j["metadata"]["resourceVersion"];
  ApiResponse failed = env_.Patch(
      cm_path_, kJson,
      R"([{"op":"replace","path":"/data/k","value":"z"},{"op":"test","path":"/data/k","value":"nope"}])");
  ExpectStatus(failed, 422, "Invalid");
  nlohmann::json now = ApiTestEnv::Json(env_.Get(cm_path_));
  EXPECT_EQ(now["data"]["k"], "w");
  EXPECT_EQ(now["metadata"]["resourceVersion"], rv);
  ExpectStatus(env_.Patch(cm_path_, kJson, R"([{"op":"frobnicate","path":"/a"}])"), 400,
               "BadRequest");
  ExpectStatus(env_.Patch(cm_path_, kJson, R"({"op":"add"})"), 400, "BadRequest");
  ExpectStatus(env_.Patch(cm_path_, kJson, R"([{"op":"remove","path":"/data/missing"}])"), 422,
               "Invalid");
}

TEST_F(PatchTest, StrategicMergeOnBuiltinsOnly) {
  ApiResponse r = env_.Patch(
      deploy_path_, kStrategic,
      R"({"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:2"}]}}}})");
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json d = ApiTestEnv::Json(r);
  const auto& containers = d["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u) << d;  // merged by name, not replaced
  EXPECT_EQ(containers[0]["image"], "nginx:2");
  EXPECT_EQ(containers[1]["name"], "side");
  EXPECT_EQ(d["metadata"]["generation"], 2);
  ExpectStatus(env_.Patch(deploy_path_, kStrategic, "{"), 400, "BadRequest");
}

TEST_F(PatchTest, PatchErrors) {
  ExpectStatus(env_.Patch(cm_path_, "application/json", "{}"), 415, "UnsupportedMediaType");
  ExpectStatus(env_.Patch(cm_path_, "text/plain", "{}"), 415, "UnsupportedMediaType");
  ExpectStatus(env_.Patch("/api/v1/namespaces/ns1/configmaps/missing", kMerge, "{}"), 404,
               "NotFound");
  ExpectStatus(env_.Patch("/api/v1/namespaces/ns1/configmaps/missing", kJson, "[]"), 404,
               "NotFound");
}

// The values of the response's Warning headers.
std::vector<std::string> Warnings(const ApiResponse& r) {
  std::vector<std::string> out;
  for (const auto& [name, value] : r.headers) {
    if (name == "Warning") out.push_back(value);
  }
  return out;
}

// Regression (attack run, item 3): a patch body with a member given twice was applied with the
// last value and nothing said. kube-apiserver 1.27+ (handlers/patch.go: the body is decoded
// with sigs.k8s.io/json's UnmarshalStrict for merge, strategic merge and JSON patches): with
// fieldValidation=Warn, the default, a `Warning: 299 - "duplicate field \"x\""` header each
// (JSON Patch: "json patch duplicate field ...") and the patch applies (last value wins); with
// Strict, 422 Invalid `patch: Invalid value: ...: strict decoding error: duplicate field ...`
// and nothing changes; with Ignore, nothing is said.
TEST_F(PatchTest, RegressionDuplicateFieldsInPatchBodies) {
  const std::string merge = R"({"data":{"k":"1","k":"2"},"metadata":{"labels":{"l":"a","l":"b"}}})";
  ApiResponse warned = env_.Patch(cm_path_, kMerge, merge);
  ASSERT_EQ(warned.code, 200) << warned.body;
  EXPECT_EQ(ApiTestEnv::Json(warned)["data"]["k"], "2");
  EXPECT_THAT(Warnings(warned),
              ::testing::ElementsAre(R"(299 - "duplicate field \"data.k\"")",
                                     R"(299 - "duplicate field \"metadata.labels.l\"")"));

  ApiResponse strict = env_.Patch(cm_path_, kMerge, R"({"data":{"k":"3","k":"4"}})",
                                  {{"fieldValidation", "Strict"}});
  ExpectStatus(strict, 422, "Invalid");
  EXPECT_THAT(ApiTestEnv::Json(strict).value("message", ""),
              HasSubstr(R"(strict decoding error: duplicate field "data.k")"));
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(cm_path_))["data"]["k"], "2");

  ApiResponse ignored = env_.Patch(cm_path_, kMerge, R"({"data":{"k":"5","k":"6"}})",
                                   {{"fieldValidation", "Ignore"}});
  ASSERT_EQ(ignored.code, 200) << ignored.body;
  EXPECT_EQ(ApiTestEnv::Json(ignored)["data"]["k"], "6");
  EXPECT_TRUE(Warnings(ignored).empty());

  // JSON Patch: a member twice in an operation.
  ApiResponse json_patch =
      env_.Patch(cm_path_, kJson, R"([{"op":"replace","path":"/data/k","value":"7","value":"8"}])");
  ASSERT_EQ(json_patch.code, 200) << json_patch.body;
  EXPECT_EQ(ApiTestEnv::Json(json_patch)["data"]["k"], "8");
  EXPECT_THAT(Warnings(json_patch),
              ::testing::ElementsAre(R"(299 - "json patch duplicate field \"[0].value\"")"));
  ExpectStatus(
      env_.Patch(cm_path_, kJson, R"([{"op":"replace","op":"add","path":"/data/k","value":"9"}])",
                 {{"fieldValidation", "Strict"}}),
      422, "Invalid");

  // Strategic merge patch (built-in kinds).
  ApiResponse strategic =
      env_.Patch(deploy_path_, kStrategic, R"({"spec":{"replicas":2,"replicas":3}})");
  ASSERT_EQ(strategic.code, 200) << strategic.body;
  EXPECT_EQ(ApiTestEnv::Json(strategic)["spec"]["replicas"], 3);
  EXPECT_THAT(Warnings(strategic),
              ::testing::ElementsAre(R"(299 - "duplicate field \"spec.replicas\"")"));
  ExpectStatus(env_.Patch(deploy_path_, kStrategic, R"({"spec":{"replicas":4,"replicas":5}})",
                          {{"fieldValidation", "Strict"}}),
               422, "Invalid");
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(deploy_path_))["spec"]["replicas"], 3);
}

TEST_F(PatchTest, StatusSubresourcePatch) {
  ApiResponse r = env_.Patch(deploy_path_ + "/status", kMerge,
                             R"({"spec":{"replicas":5},"status":{"readyReplicas":1}})");
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json d = ApiTestEnv::Json(r);
  EXPECT_EQ(d["spec"]["replicas"], 1);
  EXPECT_EQ(d["status"]["readyReplicas"], 1);
  EXPECT_EQ(d["metadata"]["generation"], 1);
  // The main resource ignores status.
  d = ApiTestEnv::Json(env_.Patch(deploy_path_, kMerge, R"({"status":{"readyReplicas":9}})"));
  EXPECT_EQ(d["status"]["readyReplicas"], 1);
  EXPECT_EQ(d["metadata"]["generation"], 1);
  d = ApiTestEnv::Json(
      env_.Patch(deploy_path_ + "/status", kJson,
                 R"([{"op":"replace","path":"/status/readyReplicas","value":2}])"));
  EXPECT_EQ(d["status"]["readyReplicas"], 2);
}

TEST_F(PatchTest, ServerSideApplyCreatesThenMerges) {
  const std::string path = "/api/v1/namespaces/ns1/configmaps/applied";
  const std::string cfg =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"1\"\n";
  ApiResponse created = env_.Patch(path, kApply, cfg, {{"fieldManager", "alice"}});
  ASSERT_EQ(created.code, 201) << created.body;
  nlohmann::json j = ApiTestEnv::Json(created);
  EXPECT_EQ(j["data"]["a"], "1");
  EXPECT_FALSE(j["metadata"]["uid"].get<std::string>().empty());
  ASSERT_TRUE(j["metadata"].contains("managedFields"));
  EXPECT_EQ(j["metadata"]["managedFields"][0]["manager"], "alice");
  EXPECT_EQ(j["metadata"]["managedFields"][0]["operation"], "Apply");
  // Another manager adds its own field: merged, no conflict.
  ApiResponse bob = env_.Patch(
      path, kApply, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: x\n",
      {{"fieldManager", "bob"}});
  ASSERT_EQ(bob.code, 200) << bob.body;
  EXPECT_EQ(ApiTestEnv::Json(bob)["data"], nlohmann::json({{"a", "1"}, {"b", "x"}}));
  // Bob changing alice's field conflicts, with a cause naming the field and the manager.
  const std::string takeover =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: \"2\"\n  b: x\n";
  ApiResponse conflict = env_.Patch(path, kApply, takeover, {{"fieldManager", "bob"}});
  ExpectStatus(conflict, 409, "Conflict");
  nlohmann::json causes = ApiTestEnv::Json(conflict)["details"]["causes"];
  ASSERT_EQ(causes.size(), 1u) << conflict.body;
  EXPECT_EQ(causes[0]["reason"], "FieldManagerConflict");
  EXPECT_EQ(causes[0]["field"], ".data.a");
  EXPECT_THAT(causes[0]["message"].get<std::string>(), HasSubstr("alice"));
  // force takes it over.
  ApiResponse forced =
      env_.Patch(path, kApply, takeover, {{"fieldManager", "bob"}, {"force", "true"}});
  ASSERT_EQ(forced.code, 200) << forced.body;
  EXPECT_EQ(ApiTestEnv::Json(forced)["data"]["a"], "2");
  // A non-apply write by another manager is a conflict for the next apply too.
  ASSERT_EQ(
      env_.Patch(path, kMerge, R"({"data":{"b":"edited"}})", {{"fieldManager", "kubectl"}}).code,
      200);
  ApiResponse c2 = env_.Patch(path, kApply, takeover, {{"fieldManager", "bob"}});
  ExpectStatus(c2, 409, "Conflict");
}

TEST_F(PatchTest, ServerSideApplyErrors) {
  const std::string path = "/api/v1/namespaces/ns1/configmaps/applied";
  const std::string cfg = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n";
  ExpectStatus(env_.Patch(path, kApply, cfg), 422, "Invalid");  // no fieldManager
  ExpectStatus(env_.Patch(path, kApply, "metadata: [", {{"fieldManager", "m"}}), 400, "BadRequest");
  ExpectStatus(
      env_.Patch(path, kApply, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: applied\n",
                 {{"fieldManager", "m"}}),
      400, "BadRequest");
  ExpectStatus(
      env_.Patch(path, kApply, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
                 {{"fieldManager", "m"}}),
      400, "BadRequest");
  ExpectStatus(env_.Patch("/api/v1/namespaces/nope/configmaps/applied", kApply, cfg,
                          {{"fieldManager", "m"}}),
               404, "NotFound");
  ExpectStatus(
      env_.Patch(path, kApply, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
                 {{"fieldManager", "m"}}),
      400, "BadRequest");
  EXPECT_EQ(env_.Get(path).code, 404);
}

TEST_F(PatchTest, DryRunPatchChangesNothing) {
  ApiResponse r = env_.Patch(cm_path_, kMerge, R"({"data":{"k":"dry"}})", {{"dryRun", "All"}});
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(ApiTestEnv::Json(r)["data"]["k"], "dry");
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(cm_path_))["data"]["k"], "v");
}

// Patches are computed in the request thread from a snapshot and installed by the store's
// writer only if the object did not change meanwhile; concurrent patches of one object must
// still all apply, each on top of the previous one, with distinct resourceVersions.
TEST_F(PatchTest, ConcurrentPatchesOfOneObjectLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kPatches = 20;
  std::vector<std::vector<std::string>> rvs(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < kPatches; ++j) {
        ApiResponse r =
            env_.Patch(cm_path_, kMerge,
                       nlohmann::json{{"data", {{absl::StrCat("t", i, "-", j), "v"}}}}.dump());
        ASSERT_EQ(r.code, 200) << r.body;
        rvs[i].push_back(ApiTestEnv::Json(r)["metadata"]["resourceVersion"]);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> distinct;
  for (const auto& v : rvs) distinct.insert(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kPatches));
  nlohmann::json cm = ApiTestEnv::Json(env_.Get(cm_path_));
  EXPECT_EQ(cm["data"].size(), static_cast<size_t>(kThreads * kPatches + 2)) << cm;
  EXPECT_EQ(cm["metadata"]["resourceVersion"], std::to_string(env_.store().Revision()));
}

// The response, the stored object and later reads agree on the resourceVersion (the
// placeholder of a precomputed write is replaced by the revision it got).
TEST_F(PatchTest, ResponseCarriesTheStoredRevision) {
  ApiResponse r = env_.Patch(cm_path_, kJson, R"([{"op":"add","path":"/data/n","value":"1"}])");
  ASSERT_EQ(r.code, 200) << r.body;
  const std::string rv = ApiTestEnv::Json(r)["metadata"]["resourceVersion"];
  EXPECT_EQ(rv, std::to_string(env_.store().Revision()));
  EXPECT_EQ(env_.Get(cm_path_).body, r.body);
  EXPECT_EQ(env_.store().Get("/core/configmaps/ns1/a")->mod_revision, env_.store().Revision());
}

// Labels travel with the write (the store does not re-parse the object): selectors see a
// patched label at once, and stop matching the old one.
TEST_F(PatchTest, PatchedLabelsAreSelectable) {
  ApiResponse r =
      env_.Patch(cm_path_, kMerge, R"({"metadata":{"labels":{"app":"db","tier":"x"}}})");
  ASSERT_EQ(r.code, 200) << r.body;
  auto names = [&](const std::string& selector) {
    nlohmann::json list = ApiTestEnv::Json(
        env_.Get("/api/v1/namespaces/ns1/configmaps", {{"labelSelector", selector}}));
    std::vector<std::string> out;
    for (const auto& item : list["items"]) out.push_back(item["metadata"]["name"]);
    return out;
  };
  EXPECT_EQ(names("app=db,tier=x"), std::vector<std::string>{"a"});
  EXPECT_TRUE(names("app=web").empty());
  EXPECT_EQ(env_.store().Get("/core/configmaps/ns1/a")->labels,
            (Labels{{"app", "db"}, {"tier", "x"}}));
}

}  // namespace
}  // namespace ctrlhost::apiserver
