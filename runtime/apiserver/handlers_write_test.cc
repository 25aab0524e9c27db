// Create, update (PUT) and the status subresource, driven through ApiHandlers::Handle().
// Patches are in handlers_patch_test.cc.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/testing/api_test_env.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ExpectStatus;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string Message(const ApiResponse& r) { return ApiTestEnv::Json(r).value("message", ""); }

nlohmann::json ConfigMap(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}};
}

nlohmann::json Deployment(const std::string& name, int replicas = 1) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", {{"app", name}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", name}}}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", "nginx"}}}}}}}}}}};
}

constexpr char kCms[] = "/api/v1/namespaces/ns1/configmaps";
constexpr char kDeploys[] = "/apis/apps/v1/namespaces/ns1/deployments";

class WriteTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.CreateNamespace("ns1"); }
  ApiTestEnv env_;
};

TEST_F(WriteTest, CreateSetsServerFields) {
  nlohmann::json in = ConfigMap("a");
  in["metadata"]["uid"] = "client-chosen";
  in["metadata"]["resourceVersion"] = "999";
  in["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z";
  ApiResponse r = env_.Post(kCms, in);
  ASSERT_EQ(r.code, 201) << r.body;
  nlohmann::json cm = ApiTestEnv::Json(r);
  EXPECT_THAT(cm["metadata"]["uid"].get<std::string>(),
              MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
  EXPECT_EQ(cm["metadata"]["creationTimestamp"], FormatTimestamp(env_.clock().Now()));
  EXPECT_EQ(cm["metadata"]["resourceVersion"], std::to_string(env_.store().Revision()));
  EXPECT_EQ(cm["metadata"]["namespace"], "ns1");
  EXPECT_FALSE(cm["metadata"].contains("generation"));  // ConfigMap has none
  // Another create gets another uid.
  nlohmann::json b = ApiTestEnv::Json(env_.Post(kCms, ConfigMap("b")));
  EXPECT_NE(b["metadata"]["uid"], cm["metadata"]["uid"]);
}

TEST_F(WriteTest, GenerateName) {
  nlohmann::json in = ConfigMap("");
  in["metadata"].erase("name");
  in["metadata"]["generateName"] = "job-";
  ApiResponse r = env_.Post(kCms, in);
  ASSERT_EQ(r.code, 201) << r.body;
  const std::string name = ApiTestEnv::Json(r)["metadata"]["name"];
  EXPECT_THAT(name, MatchesRegex("job-[a-z0-9]{5}"));
  EXPECT_EQ(env_.Get(std::string(kCms) + "/" + name).code, 200);
  // Neither name nor generateName.
  nlohmann::json none = ConfigMap("");
  none["metadata"].erase("name");
  ApiResponse bad = env_.Post(kCms, none);
  ExpectStatus(bad, 422, "Invalid");
  EXPECT_THAT(Message(bad), HasSubstr("name or generateName is required"));
}

TEST_F(WriteTest, CreateErrors) {
  ASSERT_EQ(env_.Post(kCms, ConfigMap("a")).code, 201);
  ApiResponse dup = env_.Post(kCms, ConfigMap("a"));
  ExpectStatus(dup, 409, "AlreadyExists");
  EXPECT_THAT(Message(dup), HasSubstr("configmaps \"a\" already exists"));

  ApiResponse invalid = env_.Post(kCms, ConfigMap("Bad_Name"));
  ExpectStatus(invalid, 422, "Invalid");
  nlohmann::json details = ApiTestEnv::Json(invalid)["details"];
  ASSERT_FALSE(details["causes"].empty()) << invalid.body;
  EXPECT_EQ(details["causes"][0]["field"], "metadata.name");
  EXPECT_EQ(details["causes"][0]["reason"], "FieldValueInvalid");
  EXPECT_EQ(details["kind"], "ConfigMap");
  // Namespaces and services are DNS-1123 labels: no dots.
  ApiResponse ns = env_.Post(
      "/api/v1/namespaces",
      nlohmann::json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "a.b"}}}});
  ExpectStatus(ns, 422, "Invalid");

  ApiResponse json = env_.Post(kCms, std::string("{\"apiVersion\": \"v1\", \"kind\": "));
  ExpectStatus(json, 400, "BadRequest");
  EXPECT_THAT(Message(json), HasSubstr("not valid JSON"));
  ExpectStatus(env_.Post(kCms, std::string("[1,2]")), 400, "BadRequest");
  ExpectStatus(env_.Post(kCms, std::string("")), 400, "BadRequest");

  ApiResponse yaml =
      env_.Do("POST", kCms, "kind: ConfigMap\napiVersion: v1\nmetadata: [\n", "application/yaml");
  ExpectStatus(yaml, 400, "BadRequest");
  EXPECT_FALSE(Message(yaml).empty());
  ExpectStatus(env_.Do("POST", kCms, "<xml/>", "application/xml"), 415, "UnsupportedMediaType");

  nlohmann::json wrong_kind = ConfigMap("x");
  wrong_kind["kind"] = "Secret";
  ExpectStatus(env_.Post(kCms, wrong_kind), 400, "BadRequest");
  // Built-in kinds take a missing apiVersion/kind from the URL, as typed decoding does.
  nlohmann::json no_kind = ConfigMap("defaulted");
  no_kind.erase("kind");
  no_kind.erase("apiVersion");
  ApiResponse defaulted = env_.Post(kCms, no_kind);
  ASSERT_EQ(defaulted.code, 201) << defaulted.body;
  EXPECT_EQ(nlohmann::json::parse(defaulted.body)["kind"], "ConfigMap");
  nlohmann::json wrong_version = ConfigMap("x");
  wrong_version["apiVersion"] = "v2";
  ExpectStatus(env_.Post(kCms, wrong_version), 400, "BadRequest");
  nlohmann::json other_ns = ConfigMap("x");
  other_ns["metadata"]["namespace"] = "ns2";
  ExpectStatus(env_.Post(kCms, other_ns), 400, "BadRequest");
  nlohmann::json bad_meta = ConfigMap("x");
  bad_meta["metadata"] = "x";
  ExpectStatus(env_.Post(kCms, bad_meta), 400, "BadRequest");
  nlohmann::json bad_labels = ConfigMap("x");
  bad_labels["metadata"]["labels"] = {{"bad key!", "v"}};
  ExpectStatus(env_.Post(kCms, bad_labels), 422, "Invalid");

  ApiResponse missing_ns = env_.Post("/api/v1/namespaces/nope/configmaps", ConfigMap("x"));
  ExpectStatus(missing_ns, 404, "NotFound");
  EXPECT_THAT(Message(missing_ns), HasSubstr("namespaces \"nope\" not found"));
  // POST to a name or to all namespaces.
  ExpectStatus(env_.Post(std::string(kCms) + "/x", ConfigMap("x")), 405, "MethodNotAllowed");
  ExpectStatus(env_.Post("/api/v1/configmaps", ConfigMap("x")), 404, "NotFound");
  // Nothing was stored by the failures (the two objects are "x" and "defaulted").
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(kCms))["items"].size(), 2u);
}

// kube-apiserver's rule (found by running the client-go 0.32 program against kube 1.20): an
// Event regards an object of its own namespace, or a cluster-scoped one from "default" or no
// namespace.
TEST_F(WriteTest, AnEventRegardsAnObjectOfItsOwnNamespace) {
  env_.CreateNamespace("default");
  auto core = [](const std::string& name, const std::string& involved_ns) {
    nlohmann::json e = {{"apiVersion", "v1"},
                        {"kind", "Event"},
                        {"metadata", {{"name", name}, {"namespace", "ns1"}}},
                        {"involvedObject", {{"kind", "ConfigMap"}, {"name", "c"}}},
                        {"reason", "R"},
                        {"message", "m"}};
    if (!involved_ns.empty()) e["involvedObject"]["namespace"] = involved_ns;
    return e;
  };
  EXPECT_EQ(env_.Post("/api/v1/namespaces/ns1/events", core("same", "ns1")).code, 201);
  ApiResponse other = env_.Post("/api/v1/namespaces/ns1/events", core("other", "ns2"));
  EXPECT_EQ(other.code, 422) << other.body;
  EXPECT_THAT(other.body, ::testing::HasSubstr("does not match event.namespace"));
  EXPECT_THAT(other.body, ::testing::HasSubstr("involvedObject.namespace"));
  EXPECT_EQ(env_.Post("/api/v1/namespaces/ns1/events", core("cluster", "")).code, 422);
  nlohmann::json in_default = core("cluster", "");
  in_default["metadata"]["namespace"] = "default";
  EXPECT_EQ(env_.Post("/api/v1/namespaces/default/events", in_default).code, 201);
  nlohmann::json v1 = {{"apiVersion", "events.k8s.io/v1"},
                       {"kind", "Event"},
                       {"metadata", {{"name", "v1"}, {"namespace", "ns1"}}},
                       {"eventTime", "2026-11-29T00:00:00.000000Z"},
                       {"reportingController", "x/y"},
                       {"reportingInstance", "i"},
                       {"action", "A"},
                       {"reason", "R"},
                       {"type", "Normal"},
                       {"regarding", {{"kind", "Namespace"}, {"name", "ns1"}}}};
  EXPECT_EQ(env_.Post("/apis/events.k8s.io/v1/namespaces/ns1/events", v1).code, 422);
  v1["regarding"] = {{"kind", "ConfigMap"}, {"name", "c"}, {"namespace", "ns1"}};
  EXPECT_EQ(env_.Post("/apis/events.k8s.io/v1/namespaces/ns1/events", v1).code, 201);
}

TEST_F(WriteTest, SecretStringDataIsEncodedIntoData) {
  constexpr char kSecrets[] = "/api/v1/namespaces/ns1/secrets";
  nlohmann::json in = {{"apiVersion", "v1"},
                       {"kind", "Secret"},
                       {"metadata", {{"name", "s"}}},
                       {"data", {{"kept", "a2VwdA=="}, {"both", "b2xk"}}},
                       {"stringData", {{"both", "new"}, {"password", "p@ss"}}}};
  ApiResponse r = env_.Post(kSecrets, in);
  ASSERT_EQ(r.code, 201) << r.body;
  nlohmann::json got = ApiTestEnv::Json(env_.Get(std::string(kSecrets) + "/s"));
  EXPECT_FALSE(got.contains("stringData")) << got;
  EXPECT_EQ(got["data"],
            nlohmann::json({{"kept", "a2VwdA=="}, {"both", "bmV3"}, {"password", "cEBzcw=="}}));
  // A merge patch of stringData lands in data too.
  ApiResponse p = env_.Patch(std::string(kSecrets) + "/s", "application/merge-patch+json",
                             R"({"stringData":{"kept":"x"}})");
  ASSERT_EQ(p.code, 200) << p.body;
  got = ApiTestEnv::Json(p);
  EXPECT_EQ(got["data"]["kept"], "eA==");
  EXPECT_FALSE(got.contains("stringData"));
  // A value that is not a string is a decoding error, as for a typed client.
  in["metadata"]["name"] = "bad";
  in["stringData"] = {{"n", 1}};
  ApiResponse bad = env_.Post(kSecrets, in);
  EXPECT_EQ(bad.code, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("Secret.stringData"));
}

TEST_F(WriteTest, ConfigMapDataMustBeStrings) {
  nlohmann::json in = ConfigMap("n");
  in["data"] = {{"count", 5}};
  ApiResponse bad = env_.Post(kCms, in);
  EXPECT_EQ(bad.code, 400) << bad.body;
  EXPECT_THAT(bad.body, HasSubstr("ConfigMap.data of type string"));
  // Also through a patch and server-side apply; nothing is stored.
  ASSERT_EQ(env_.Post(kCms, ConfigMap("m")).code, 201);
  EXPECT_EQ(env_.Patch(std::string(kCms) + "/m", "application/merge-patch+json",
                       R"({"binaryData":{"b":true}})")
                .code,
            400);
  EXPECT_EQ(env_.Patch(std::string(kCms) + "/n", "application/apply-patch+yaml", in.dump(),
                       {{"fieldManager", "t"}})
                .code,
            400);
  EXPECT_EQ(env_.Get(std::string(kCms) + "/n").code, 404);
}

TEST_F(WriteTest, CreateFromYaml) {
  ApiResponse r = env_.Do("POST", kCms,
                          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n",
                          "application/yaml");
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(ApiTestEnv::Json(r)["data"]["k"], "v");
}

TEST_F(WriteTest, DryRunCreateStoresNothing) {
  ApiResponse r =
      env_.Do("POST", kCms, ConfigMap("dry").dump(), "application/json", {{"dryRun", "All"}});
  ASSERT_EQ(r.code, 201) << r.body;
  EXPECT_EQ(env_.Get(std::string(kCms) + "/dry").code, 404);
}

TEST_F(WriteTest, UpdateWithResourceVersionConflict) {
  nlohmann::json cm = ApiTestEnv::Json(env_.Post(kCms, ConfigMap("a")));
  const std::string path = std::string(kCms) + "/a";
  nlohmann::json v1 = cm;
  v1["data"] = {{"k", "1"}};
  ApiResponse r1 = env_.Put(path, v1);
  ASSERT_EQ(r1.code, 200) << r1.body;
  nlohmann::json updated = ApiTestEnv::Json(r1);
  EXPECT_NE(updated["metadata"]["resourceVersion"], cm["metadata"]["resourceVersion"]);
  EXPECT_EQ(updated["metadata"]["uid"], cm["metadata"]["uid"]);
  EXPECT_EQ(updated["metadata"]["creationTimestamp"], cm["metadata"]["creationTimestamp"]);
  // The stale resourceVersion loses.
  nlohmann::json stale = cm;
  stale["data"] = {{"k", "2"}};
  ApiResponse conflict = env_.Put(path, stale);
  ExpectStatus(conflict, 409, "Conflict");
  EXPECT_THAT(Message(conflict), HasSubstr("the object has been modified"));
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(path))["data"]["k"], "1");
  // No resourceVersion: unconditional.
  nlohmann::json blind = ConfigMap("a");
  blind["data"] = {{"k", "3"}};
  ASSERT_EQ(env_.Put(path, blind).code, 200);
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(path))["data"]["k"], "3");
  // The server-set fields cannot be changed by the client.
  nlohmann::json sneaky = ApiTestEnv::Json(env_.Get(path));
  sneaky["metadata"]["uid"] = "other";
  sneaky["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z";
  nlohmann::json after = ApiTestEnv::Json(env_.Put(path, sneaky));
  EXPECT_EQ(after["metadata"]["uid"], cm["metadata"]["uid"]);
  EXPECT_EQ(after["metadata"]["creationTimestamp"], cm["metadata"]["creationTimestamp"]);
}

// Updates are computed from a snapshot outside the store's writer; when several carry the same
// (current) resourceVersion at once, exactly one may win and the others must get 409, as when
// every decision was made on the writer thread.
TEST_F(WriteTest, ConcurrentUpdatesWithOneResourceVersionHaveOneWinner) {
  nlohmann::json cm = ApiTestEnv::Json(env_.Post(kCms, ConfigMap("race")));
  const std::string path = std::string(kCms) + "/race";
  constexpr int kThreads = 8;
  std::atomic<int> ok{0};
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      nlohmann::json v = cm;
      v["data"] = {{"writer", std::to_string(i)}};
      ApiResponse r = env_.Put(path, v);
      if (r.code == 200) ++ok;
      if (r.code == 409) ++conflicts;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(conflicts.load(), kThreads - 1);
}

// Two creates of one name at once: one 201, one 409 AlreadyExists.
TEST_F(WriteTest, ConcurrentCreatesOfOneName) {
  for (int round = 0; round < 20; ++round) {
    const std::string name = "c" + std::to_string(round);
    std::vector<int> codes(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < codes.size(); ++i) {
      threads.emplace_back([&, i] { codes[i] = env_.Post(kCms, ConfigMap(name)).code; });
    }
    for (auto& t : threads) t.join();
    int created = 0;
    for (int c : codes) {
      created += c == 201;
      EXPECT_TRUE(c == 201 || c == 409) << c;
    }
    EXPECT_EQ(created, 1);
  }
}

TEST_F(WriteTest, UpdateErrors) {
  ASSERT_EQ(env_.Post(kCms, ConfigMap("a")).code, 201);
  const std::string path = std::string(kCms) + "/a";
  ExpectStatus(env_.Put(std::string(kCms) + "/missing", ConfigMap("missing")), 404, "NotFound");
  ApiResponse mismatch = env_.Put(path, ConfigMap("b"));
  ExpectStatus(mismatch, 400, "BadRequest");
  EXPECT_THAT(Message(mismatch), HasSubstr("does not match the name on the URL"));
  ExpectStatus(env_.Do("PUT", path, "{", "application/json"), 400, "BadRequest");
  ExpectStatus(env_.Do("PUT", path, "x", "text/plain"), 415, "UnsupportedMediaType");
  nlohmann::json bad_labels = ConfigMap("a");
  bad_labels["metadata"]["labels"] = {{"k", "not a valid value!"}};
  ExpectStatus(env_.Put(path, bad_labels), 422, "Invalid");
  // An update that changes nothing keeps the resourceVersion.
  nlohmann::json cur = ApiTestEnv::Json(env_.Get(path));
  nlohmann::json same = ApiTestEnv::Json(env_.Put(path, cur));
  EXPECT_EQ(same["metadata"]["resourceVersion"], cur["metadata"]["resourceVersion"]);
}

TEST_F(WriteTest, GenerationTracksSpecOnly) {
  ApiResponse c = env_.Post(kDeploys, Deployment("web"));
  ASSERT_EQ(c.code, 201) << c.body;
  const std::string path = std::string(kDeploys) + "/web";
  nlohmann::json d = ApiTestEnv::Json(c);
  EXPECT_EQ(d["metadata"]["generation"], 1);
  // Metadata only: no bump.
  d["metadata"]["labels"] = {{"x", "y"}};
  d["metadata"]["annotations"] = {{"note", "n"}};
  d = ApiTestEnv::Json(env_.Put(path, d));
  EXPECT_EQ(d["metadata"]["generation"], 1) << d;
  EXPECT_EQ(d["metadata"]["labels"]["x"], "y");
  // Spec: bump.
  d["spec"]["replicas"] = 3;
  d = ApiTestEnv::Json(env_.Put(path, d));
  EXPECT_EQ(d["metadata"]["generation"], 2);
  // Status through the status subresource: no bump.
  d["status"] = {{"replicas", 3}};
  ApiResponse s = env_.Put(path + "/status", d);
  ASSERT_EQ(s.code, 200) << s.body;
  d = ApiTestEnv::Json(s);
  EXPECT_EQ(d["metadata"]["generation"], 2);
  EXPECT_EQ(d["status"]["replicas"], 3);
  // A client cannot set the generation.
  d["metadata"]["generation"] = 42;
  d = ApiTestEnv::Json(env_.Put(path, d));
  EXPECT_EQ(d["metadata"]["generation"], 2);
}

TEST_F(WriteTest, StatusSubresourceChangesOnlyStatus) {
  nlohmann::json d = ApiTestEnv::Json(env_.Post(kDeploys, Deployment("web")));
  const std::string path = std::string(kDeploys) + "/web";
  // Create drops status (it has its own subresource).
  nlohmann::json with_status = Deployment("other");
  with_status["status"] = {{"replicas", 9}};
  EXPECT_FALSE(ApiTestEnv::Json(env_.Post(kDeploys, with_status)).contains("status"));
  // PUT /status with spec and label changes: only the status is taken.
  nlohmann::json s = d;
  s["spec"]["replicas"] = 7;
  s["metadata"]["labels"] = {{"sneaky", "yes"}};
  s["status"] = {{"readyReplicas", 1}};
  nlohmann::json after = ApiTestEnv::Json(env_.Put(path + "/status", s));
  EXPECT_EQ(after["spec"]["replicas"], 1);
  EXPECT_FALSE(after["metadata"].contains("labels"));
  EXPECT_EQ(after["status"]["readyReplicas"], 1);
  // PUT on the main resource ignores status changes.
  nlohmann::json m = after;
  m["status"] = {{"readyReplicas", 5}};
  m["spec"]["replicas"] = 2;
  nlohmann::json after2 = ApiTestEnv::Json(env_.Put(path, m));
  EXPECT_EQ(after2["status"]["readyReplicas"], 1);
  EXPECT_EQ(after2["spec"]["replicas"], 2);
  // Kinds without a status subresource have no /status.
  ASSERT_EQ(env_.Post(kCms, ConfigMap("a")).code, 201);
  ExpectStatus(env_.Put(std::string(kCms) + "/a/status", ConfigMap("a")), 404, "NotFound");
  // Status write with a stale resourceVersion.
  nlohmann::json stale = d;
  stale["status"] = {{"readyReplicas", 2}};
  ExpectStatus(env_.Put(path + "/status", stale), 409, "Conflict");
}

// First contact (a Go plugin's author): a condition written on a ConfigMap was kept here, where
// kube-apiserver drops `status` of a built-in kind that has none as an unknown field.
TEST_F(WriteTest, RegressionBuiltinKindWithoutStatusKeepsNone) {
  nlohmann::json cm = ConfigMap("hello");
  cm["status"] = {{"conditions", nlohmann::json::array({{{"type", "Ready"}}})}};
  nlohmann::json created = ApiTestEnv::Json(env_.Post(kCms, cm));
  EXPECT_FALSE(created.contains("status")) << created;
  const std::string path = std::string(kCms) + "/hello";
  nlohmann::json patched = ApiTestEnv::Json(env_.Patch(
      path, "application/merge-patch+json", R"({"status":{"phase":"Copied"},"data":{"a":"1"}})"));
  EXPECT_FALSE(patched.contains("status")) << patched;
  EXPECT_EQ(patched["data"]["a"], "1");
  nlohmann::json put = patched;
  put["status"] = {{"phase", "Copied"}};
  EXPECT_FALSE(ApiTestEnv::Json(env_.Put(path, put)).contains("status"));
  EXPECT_FALSE(ApiTestEnv::Json(env_.Get(path)).contains("status"));
}

TEST_F(WriteTest, DeploymentDefaultsReplicas) {
  nlohmann::json in = Deployment("web");
  in["spec"].erase("replicas");
  nlohmann::json d = ApiTestEnv::Json(env_.Post(kDeploys, in));
  EXPECT_EQ(d["spec"]["replicas"], 1);
}

}  // namespace
}  // namespace ctrlhost::apiserver
