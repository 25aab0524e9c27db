// The built-in controllers: owner-reference garbage collection with the three propagation
// policies, and namespace deletion.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ApiTestEnvOptions;
using ::ctrlhost::apiserver::testing::WaitFor;

constexpr char kCms[] = "/api/v1/namespaces/ns1/configmaps";
constexpr char kMerge[] = "application/merge-patch+json";

ApiTestEnvOptions WithControllers() {
  ApiTestEnvOptions o;
  o.controllers = true;
  return o;
}

class GcTest : public ::testing::Test {
 protected:
  GcTest() : env_(WithControllers()) {}
  void SetUp() override {
    env_.CreateNamespace("ns1");
    owner_ = env_.CreateConfigMap("ns1", "owner");
    for (const char* n : {"dep1", "dep2"}) {
      nlohmann::json dep = {{"apiVersion", "v1"},
                            {"kind", "ConfigMap"},
                            {"metadata",
                             {{"name", n},
                              {"ownerReferences",
                               {{{"apiVersion", "v1"},
                                 {"kind", "ConfigMap"},
                                 {"name", "owner"},
                                 {"uid", owner_["metadata"]["uid"]},
                                 {"controller", true},
                                 {"blockOwnerDeletion", true}}}}}}};
      ApiResponse r = env_.Post(kCms, dep);
      ASSERT_EQ(r.code, 201) << r.body;
    }
  }
  bool Exists(const std::string& name) {
    return env_.Get(absl::StrCat(kCms, "/", name)).code == 200;
  }
  nlohmann::json GetCm(const std::string& name) {
    return ApiTestEnv::Json(env_.Get(absl::StrCat(kCms, "/", name)));
  }

  ApiTestEnv env_;
  nlohmann::json owner_;
};

TEST_F(GcTest, BackgroundDeletesDependentsAfterTheOwner) {
  ASSERT_EQ(env_.Delete(absl::StrCat(kCms, "/owner")).code, 200);
  EXPECT_FALSE(Exists("owner"));
  EXPECT_TRUE(WaitFor([&] { return !Exists("dep1") && !Exists("dep2"); }));
}

TEST_F(GcTest, DependentWithAnotherLiveOwnerSurvives) {
  nlohmann::json other = env_.CreateConfigMap("ns1", "other");
  nlohmann::json refs = GetCm("dep2")["metadata"]["ownerReferences"];
  refs.push_back({{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"name", "other"},
                  {"uid", other["metadata"]["uid"]}});
  ASSERT_EQ(env_.Patch(absl::StrCat(kCms, "/dep2"), kMerge,
                       nlohmann::json{{"metadata", {{"ownerReferences", refs}}}}.dump())
                .code,
            200);
  ASSERT_EQ(env_.Delete(absl::StrCat(kCms, "/owner")).code, 200);
  EXPECT_TRUE(WaitFor([&] { return !Exists("dep1"); }));
  EXPECT_TRUE(Exists("dep2"));
}

// Regression: a dependent whose owners are all absent while the server runs (written
// after the owner's deletion, or naming an owner that never existed) was collected only at the
// next start.
TEST_F(GcTest, RegressionDependentOfAnAbsentOwnerIsCollectedWhileRunning) {
  auto dependent = [](const std::string& name, std::vector<std::string> uids) {
    nlohmann::json refs = nlohmann::json::array();
    for (const std::string& uid : uids) {
      refs.push_back({{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "x"}, {"uid", uid}});
    }
    return nlohmann::json{{"apiVersion", "v1"},
                          {"kind", "ConfigMap"},
                          {"metadata", {{"name", name}, {"ownerReferences", refs}}}};
  };
  ASSERT_EQ(env_.Post(kCms, dependent("ghost-child", {"no-such-uid"})).code, 201);
  const std::string live = owner_["metadata"]["uid"];
  ASSERT_EQ(env_.Post(kCms, dependent("half-child", {"no-such-uid", live})).code, 201);
  ASSERT_EQ(env_.Post(kCms, dependent("late-child", {})).code, 201);
  EXPECT_TRUE(WaitFor([&] { return !Exists("ghost-child"); }));
  // A later write that leaves it no live owner collects it too.
  ASSERT_EQ(env_.Patch(absl::StrCat(kCms, "/late-child"), kMerge,
                       dependent("late-child", {"gone-too"}).dump())
                .code,
            200);
  EXPECT_TRUE(WaitFor([&] { return !Exists("late-child"); }));
  EXPECT_TRUE(Exists("half-child"));  // one live owner keeps it
  EXPECT_TRUE(Exists("dep1"));
}

TEST_F(GcTest, OrphanKeepsDependentsWithoutTheReference) {
  ApiResponse r = env_.Delete(absl::StrCat(kCms, "/owner"), {{"propagationPolicy", "Orphan"}});
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_TRUE(WaitFor([&] { return !Exists("owner"); }));
  for (const char* n : {"dep1", "dep2"}) {
    EXPECT_TRUE(WaitFor([&] { return !GetCm(n)["metadata"].contains("ownerReferences"); })) << n;
  }
  EXPECT_TRUE(Exists("dep1"));
  EXPECT_TRUE(Exists("dep2"));
}

TEST_F(GcTest, ForegroundWaitsForDependents) {
  // dep1 has a finalizer of its own: the owner must wait for it.
  ASSERT_EQ(env_.Patch(absl::StrCat(kCms, "/dep1"), kMerge,
                       R"({"metadata":{"finalizers":["example.com/hold"]}})")
                .code,
            200);
  ApiResponse r = env_.Delete(absl::StrCat(kCms, "/owner"), {},
                              R"({"kind":"DeleteOptions","apiVersion":"v1",)"
                              R"("propagationPolicy":"Foreground"})");
  ASSERT_EQ(r.code, 200) << r.body;
  nlohmann::json pending = ApiTestEnv::Json(r);
  EXPECT_TRUE(pending["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pending["metadata"]["finalizers"], nlohmann::json({"foregroundDeletion"}));
  EXPECT_TRUE(WaitFor([&] { return !Exists("dep2"); }));
  EXPECT_TRUE(WaitFor([&] { return GetCm("dep1")["metadata"].contains("deletionTimestamp"); }));
  EXPECT_TRUE(Exists("owner"));
  ASSERT_EQ(
      env_.Patch(absl::StrCat(kCms, "/dep1"), kMerge, R"({"metadata":{"finalizers":null}})").code,
      200);
  EXPECT_TRUE(WaitFor([&] { return !Exists("dep1") && !Exists("owner"); }));
}

TEST(GcRestartTest, DependentsOfOwnersGoneWhileDownAreCollected) {
  std::string dir;
  std::string owner_uid;
  {
    ApiTestEnv env;  // no controllers: the owner goes without its dependents
    dir = env.dir();
    env.CreateNamespace("ns1");
    owner_uid = env.CreateConfigMap("ns1", "owner")["metadata"]["uid"];
    nlohmann::json dep = {{"apiVersion", "v1"},
                          {"kind", "ConfigMap"},
                          {"metadata",
                           {{"name", "dep"},
                            {"ownerReferences",
                             {{{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"name", "owner"},
                               {"uid", owner_uid}}}}}}};
    ASSERT_EQ(env.Post(kCms, dep).code, 201);
    ASSERT_EQ(env.Delete(absl::StrCat(kCms, "/owner")).code, 200);
    EXPECT_EQ(env.Get(absl::StrCat(kCms, "/dep")).code, 200);
  }
  ApiTestEnvOptions o = WithControllers();
  o.dir = dir;
  ApiTestEnv env(o);
  EXPECT_TRUE(WaitFor([&] { return env.Get(absl::StrCat(kCms, "/dep")).code == 404; }));
}

TEST(NamespaceDeletionTest, RemovesContentThenTheNamespace) {
  ApiTestEnv env(WithControllers());
  env.CreateNamespace("ns1");
  env.CreateNamespace("keep");
  env.CreateConfigMap("ns1", "a");
  env.CreateConfigMap("keep", "a");
  nlohmann::json held = {{"apiVersion", "v1"},
                         {"kind", "Secret"},
                         {"metadata", {{"name", "held"}, {"finalizers", {"example.com/hold"}}}}};
  ASSERT_EQ(env.Post("/api/v1/namespaces/ns1/secrets", held).code, 201);
  nlohmann::json ns = ApiTestEnv::Json(env.Get("/api/v1/namespaces/ns1"));
  EXPECT_EQ(ns["spec"]["finalizers"], nlohmann::json({"kubernetes"}));
  EXPECT_EQ(ns["status"]["phase"], "Active");
  EXPECT_EQ(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "ns1");

  ApiResponse r = env.Delete("/api/v1/namespaces/ns1");
  ASSERT_EQ(r.code, 200) << r.body;
  EXPECT_EQ(ApiTestEnv::Json(r)["status"]["phase"], "Terminating");
  // No new content in a terminating namespace.
  ApiResponse create = env.Post(
      kCms, nlohmann::json{
                {"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "late"}}}});
  EXPECT_EQ(create.code, 403) << create.body;
  EXPECT_EQ(ApiTestEnv::Json(create)["reason"], "Forbidden");
  EXPECT_TRUE(WaitFor([&] { return env.Get(absl::StrCat(kCms, "/a")).code == 404; }));
  // The held secret keeps the namespace.
  EXPECT_TRUE(WaitFor([&] {
    return ApiTestEnv::Json(env.Get("/api/v1/namespaces/ns1/secrets/held"))["metadata"].contains(
        "deletionTimestamp");
  }));
  EXPECT_EQ(env.Get("/api/v1/namespaces/ns1").code, 200);
  ASSERT_EQ(env.Patch("/api/v1/namespaces/ns1/secrets/held", kMerge,
                      R"({"metadata":{"finalizers":null}})")
                .code,
            200);
  EXPECT_TRUE(WaitFor([&] { return env.Get("/api/v1/namespaces/ns1").code == 404; }));
  // Other namespaces are untouched.
  EXPECT_EQ(env.Get("/api/v1/namespaces/keep/configmaps/a").code, 200);
  // The name can be used again.
  env.CreateNamespace("ns1");
}

}  // namespace
}  // namespace ctrlhost::apiserver
