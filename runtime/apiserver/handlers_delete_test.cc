// Delete and deletecollection: immediate deletion, finalizers and deletionTimestamp,
// preconditions, delete options.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ExpectStatus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kCms[] = "/api/v1/namespaces/ns1/configmaps";
constexpr char kMerge[] = "application/merge-patch+json";

std::vector<std::string> Names(const nlohmann::json& list) {
  std::vector<std::string> out;
  for (const auto& i : list["items"]) out.push_back(i["metadata"]["name"].get<std::string>());
  return out;
}

class DeleteTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.CreateNamespace("ns1"); }
  std::string Path(const std::string& name) { return std::string(kCms) + "/" + name; }
  ApiTestEnv env_;
};

TEST_F(DeleteTest, ImmediateDeleteAnswersStatus) {
  nlohmann::json cm = env_.CreateConfigMap("ns1", "a");
  ApiResponse r = env_.Delete(Path("a"));
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json s = ApiTestEnv::Json(r);
  EXPECT_EQ(s["kind"], "Status");
  EXPECT_EQ(s["status"], "Success");
  EXPECT_EQ(s["details"]["name"], "a");
  EXPECT_EQ(s["details"]["kind"], "configmaps");
  EXPECT_EQ(s["details"]["uid"], cm["metadata"]["uid"]);
  ExpectStatus(env_.Get(Path("a")), 404, "NotFound");
  ExpectStatus(env_.Delete(Path("a")), 404, "NotFound");
  ExpectStatus(env_.Delete("/api/v1/namespaces/ns1/widgets/a"), 404, "NotFound");
}

TEST_F(DeleteTest, FinalizersKeepTheObjectUntilRemoved) {
  nlohmann::json cm = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata", {{"name", "f"}, {"finalizers", {"example.com/a", "example.com/b"}}}}};
  ASSERT_EQ(env_.Post(kCms, cm).code, 201);
  env_.clock().Advance(absl::Seconds(30));
  ApiResponse r = env_.Delete(Path("f"));
  ASSERT_EQ(r.code, 200) << r.body;  // kube-apiserver answers 200 with the object
  nlohmann::json pending = ApiTestEnv::Json(r);
  EXPECT_EQ(pending["kind"], "ConfigMap");
  ASSERT_TRUE(pending["metadata"].contains("deletionTimestamp"));
  const std::string ts = pending["metadata"]["deletionTimestamp"];
  EXPECT_EQ(pending["metadata"]["deletionGracePeriodSeconds"], 0);
  // Still readable; a second delete changes nothing.
  EXPECT_EQ(env_.Get(Path("f")).code, 200);
  env_.clock().Advance(absl::Seconds(30));
  nlohmann::json again = ApiTestEnv::Json(env_.Delete(Path("f")));
  EXPECT_EQ(again["metadata"]["deletionTimestamp"], ts);
  EXPECT_EQ(again["metadata"]["resourceVersion"], pending["metadata"]["resourceVersion"]);
  // No new finalizers once deletion started.
  ApiResponse add = env_.Patch(
      Path("f"), kMerge,
      R"({"metadata":{"finalizers":["example.com/a","example.com/b","example.com/c"]}})");
  ExpectStatus(add, 422, "Invalid");
  EXPECT_THAT(ApiTestEnv::Json(add)["message"].get<std::string>(),
              HasSubstr("no new finalizers can be added if the object is being deleted"));
  // Other updates still work and the deletionTimestamp cannot be cleared.
  ApiResponse label = env_.Patch(Path("f"), kMerge,
                                 R"({"metadata":{"labels":{"x":"y"},"deletionTimestamp":null}})");
  ASSERT_EQ(label.code, 200) << label.body;
  EXPECT_EQ(ApiTestEnv::Json(label)["metadata"]["deletionTimestamp"], ts);
  // Removing one finalizer keeps it, removing the last deletes it.
  ASSERT_EQ(env_.Patch(Path("f"), kMerge, R"({"metadata":{"finalizers":["example.com/b"]}})").code,
            200);
  EXPECT_EQ(env_.Get(Path("f")).code, 200);
  ApiResponse last = env_.Patch(Path("f"), kMerge, R"({"metadata":{"finalizers":null}})");
  EXPECT_EQ(last.code, 200) << last.body;
  ExpectStatus(env_.Get(Path("f")), 404, "NotFound");
}

TEST_F(DeleteTest, DeletionBumpsGenerationOfKindsThatTrackIt) {
  nlohmann::json d = {{"apiVersion", "apps/v1"},
                      {"kind", "Deployment"},
                      {"metadata", {{"name", "web"}, {"finalizers", {"example.com/keep"}}}},
                      {"spec",
                       {{"selector", {{"matchLabels", {{"app", "web"}}}}},
                        {"template",
                         {{"metadata", {{"labels", {{"app", "web"}}}}},
                          {"spec", {{"containers", {{{"name", "main"}, {"image", "nginx"}}}}}}}}}}};
  const std::string path = "/apis/apps/v1/namespaces/ns1/deployments";
  ASSERT_EQ(env_.Post(path, d).code, 201);
  nlohmann::json pending = ApiTestEnv::Json(env_.Delete(path + "/web"));
  EXPECT_EQ(pending["metadata"]["generation"], 2) << pending;
}

TEST_F(DeleteTest, Preconditions) {
  nlohmann::json cm = env_.CreateConfigMap("ns1", "p");
  nlohmann::json wrong_uid = {
      {"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"preconditions", {{"uid", "not-the-uid"}}}};
  ExpectStatus(env_.Delete(Path("p"), {}, wrong_uid.dump()), 409, "Conflict");
  nlohmann::json wrong_rv = {{"preconditions", {{"resourceVersion", "1"}}}};
  ExpectStatus(env_.Delete(Path("p"), {}, wrong_rv.dump()), 409, "Conflict");
  EXPECT_EQ(env_.Get(Path("p")).code, 200);
  nlohmann::json right = {
      {"preconditions",
       {{"uid", cm["metadata"]["uid"]}, {"resourceVersion", cm["metadata"]["resourceVersion"]}}}};
  EXPECT_EQ(env_.Delete(Path("p"), {}, right.dump()).code, 200);
  ExpectStatus(env_.Get(Path("p")), 404, "NotFound");
}

TEST_F(DeleteTest, BadDeleteOptions) {
  env_.CreateConfigMap("ns1", "o");
  ExpectStatus(env_.Delete(Path("o"), {{"propagationPolicy", "Sometimes"}}), 422, "Invalid");
  ExpectStatus(env_.Delete(Path("o"), {}, "{bad"), 400, "BadRequest");
  ExpectStatus(env_.Delete(Path("o"), {}, "[]"), 400, "BadRequest");
  ExpectStatus(env_.Delete(Path("o") + "/status"), 404, "NotFound");
  // dryRun deletes nothing.
  EXPECT_EQ(env_.Delete(Path("o"), {{"dryRun", "All"}}).code, 200);
  EXPECT_EQ(env_.Get(Path("o")).code, 200);
}

TEST_F(DeleteTest, DeleteCollection) {
  env_.CreateConfigMap("ns1", "a", {{"app", "web"}});
  env_.CreateConfigMap("ns1", "b", {{"app", "db"}});
  env_.CreateConfigMap("ns1", "c", {{"app", "web"}});
  ApiResponse r = env_.Delete(kCms, {{"labelSelector", "app=web"}});
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json deleted = ApiTestEnv::Json(r);
  EXPECT_EQ(deleted["kind"], "ConfigMapList");
  EXPECT_THAT(Names(deleted), ElementsAre("a", "c"));
  EXPECT_THAT(Names(ApiTestEnv::Json(env_.Get(kCms))), ElementsAre("b"));
  ExpectStatus(env_.Delete(kCms, {{"labelSelector", "app in"}}), 400, "BadRequest");
  EXPECT_THAT(Names(ApiTestEnv::Json(env_.Get(kCms))), ElementsAre("b"));
  EXPECT_EQ(env_.Delete(kCms).code, 200);
  EXPECT_THAT(Names(ApiTestEnv::Json(env_.Get(kCms))), ElementsAre());
}

}  // namespace
}  // namespace ctrlhost::apiserver
