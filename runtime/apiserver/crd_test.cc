// CustomResourceDefinitions: validation, serving at once (with discovery), scope, short names,
// several versions, the status subresource, printer columns, and deletion of the CRD removing
// its objects and its resource.
#include "runtime/apiserver/crd.h"

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
using ::testing::Contains;

constexpr char kCrds[] = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
constexpr char kWidgets[] = "/apis/example.com/v1/namespaces/ns1/widgets";

nlohmann::json VersionEntry(const std::string& name, bool storage) {
  return {{"name", name},
          {"served", true},
          {"storage", storage},
          {"subresources", {{"status", nlohmann::json::object()}}},
          {"additionalPrinterColumns",
           {{{"name", "Size"}, {"type", "integer"}, {"jsonPath", ".spec.size"}}}},
          {"schema",
           {{"openAPIV3Schema",
             {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
}

nlohmann::json WidgetCrd(const std::string& scope = "Namespaced") {
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "widgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"scope", scope},
            {"names",
             {{"plural", "widgets"},
              {"singular", "widget"},
              {"kind", "Widget"},
              {"shortNames", {"wd"}}}},
            {"versions", {VersionEntry("v1", true), VersionEntry("v2", false)}}}}};
}

nlohmann::json Widget(const std::string& name, int size, const std::string& version = "v1") {
  return {{"apiVersion", "example.com/" + version},
          {"kind", "Widget"},
          {"metadata", {{"name", name}}},
          {"spec", {{"size", size}}}};
}

const nlohmann::json* FindResource(const nlohmann::json& list, const std::string& name) {
  if (!list.contains("resources")) return nullptr;
  for (const auto& r : list["resources"]) {
    if (r["name"] == name) return &r;
  }
  return nullptr;
}

class CrdTest : public ::testing::Test {
 protected:
  CrdTest()
      : env_([] {
          ApiTestEnvOptions o;
          o.controllers = true;
          return o;
        }()) {}
  void SetUp() override { env_.CreateNamespace("ns1"); }
  ApiTestEnv env_;
};

TEST_F(CrdTest, ServedAndDiscoverableAtOnce) {
  EXPECT_EQ(env_.Get(kWidgets).code, 404);
  ApiResponse c = env_.Post(kCrds, WidgetCrd());
  ASSERT_EQ(c.code, 201) << c.body;
  nlohmann::json crd = ApiTestEnv::Json(c);
  EXPECT_THAT(crd["metadata"]["finalizers"], Contains(kCrdCleanupFinalizer));
  bool established = false;
  for (const auto& cond : crd["status"]["conditions"]) {
    established |= cond["type"] == "Established" && cond["status"] == "True";
  }
  EXPECT_TRUE(established);
  // No waiting: the resource is served when the create returns.
  EXPECT_EQ(env_.Get(kWidgets).code, 200);
  nlohmann::json v1 = ApiTestEnv::Json(env_.Get("/apis/example.com/v1"));
  const nlohmann::json* w = FindResource(v1, "widgets");
  ASSERT_NE(w, nullptr) << v1;
  EXPECT_EQ((*w)["kind"], "Widget");
  EXPECT_EQ((*w)["namespaced"], true);
  EXPECT_EQ((*w)["singularName"], "widget");
  EXPECT_EQ((*w)["shortNames"], nlohmann::json({"wd"}));
  EXPECT_NE(FindResource(v1, "widgets/status"), nullptr);
  nlohmann::json group = ApiTestEnv::Json(env_.Get("/apis/example.com"));
  EXPECT_EQ(group["versions"].size(), 2u);
  EXPECT_EQ(group["preferredVersion"]["version"], "v2");
  bool listed = false;
  const nlohmann::json apis = ApiTestEnv::Json(env_.Get("/apis"));
  for (const auto& g : apis["groups"]) listed |= g["name"] == "example.com";
  EXPECT_TRUE(listed) << apis;
}

// Issue 29 item 4: CEL rules are not enforced; a CRD that has them is accepted with a warning
// that names where they are (kubectl prints it), on create, update and patch alike.
TEST_F(CrdTest, CelRulesAreAcceptedWithAWarningThatTheyAreNotEnforced) {
  auto warnings = [](const ApiResponse& r) {
    std::vector<std::string> out;
    for (const auto& [name, value] : r.headers) {
      if (name == "Warning") out.push_back(value);
    }
    return out;
  };
  ApiResponse plain = env_.Post(kCrds, WidgetCrd());
  ASSERT_EQ(plain.code, 201) << plain.body;
  EXPECT_THAT(warnings(plain), ::testing::IsEmpty());

  nlohmann::json crd = WidgetCrd();
  crd["metadata"]["name"] = "gadgets.example.com";
  crd["spec"]["names"] = {{"plural", "gadgets"}, {"singular", "gadget"}, {"kind", "Gadget"}};
  nlohmann::json rule = {{{"rule", "self.size <= 10"}, {"message", "too big"}}};
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
      {"type", "object"},
      {"properties",
       {{"spec",
         {{"type", "object"},
          {"x-kubernetes-validations", rule},
          {"properties",
           {{"items",
             {{"type", "array"},
              {"items", {{"type", "string"}, {"x-kubernetes-validations", rule}}}}}}}}}}}};
  ApiResponse created = env_.Post(kCrds, crd);
  ASSERT_EQ(created.code, 201) << created.body;
  std::vector<std::string> w = warnings(created);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], ::testing::HasSubstr("x-kubernetes-validations (CEL) rules are not enforced"));
  EXPECT_THAT(w[0], ::testing::HasSubstr(
                        "spec.versions[0].schema.openAPIV3Schema.properties.spec, "
                        "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties."
                        "items.items"));

  // A merge patch that keeps the rules warns again; one that removes them does not.
  const std::string gadget = std::string(kCrds) + "/gadgets.example.com";
  ApiResponse patched =
      env_.Patch(gadget, "application/merge-patch+json", R"({"metadata":{"labels":{"a":"b"}}})");
  ASSERT_EQ(patched.code, 200) << patched.body;
  EXPECT_EQ(warnings(patched).size(), 1u);
  crd = ApiTestEnv::Json(patched);
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
      {"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};
  ApiResponse updated = env_.Put(gadget, crd);
  ASSERT_EQ(updated.code, 200) << updated.body;
  EXPECT_THAT(warnings(updated), ::testing::IsEmpty());
}

// Issue 29: the scale subresource of a custom resource (kubectl scale, autoscalers).
TEST_F(CrdTest, ScaleSubresourceReadsAndWritesTheReplicaPaths) {
  nlohmann::json crd = WidgetCrd();
  for (auto& v : crd["spec"]["versions"]) {
    v["subresources"]["scale"] = {{"specReplicasPath", ".spec.replicas"},
                                  {"statusReplicasPath", ".status.replicas"},
                                  {"labelSelectorPath", ".status.selector"}};
  }
  ASSERT_EQ(env_.Post(kCrds, crd).code, 201);
  const nlohmann::json discovery = ApiTestEnv::Json(env_.Get("/apis/example.com/v1"));
  const nlohmann::json* entry = FindResource(discovery, "widgets/scale");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ((*entry)["kind"], "Scale");
  EXPECT_EQ((*entry)["group"], "autoscaling");
  EXPECT_EQ((*entry)["version"], "v1");

  nlohmann::json w = Widget("w1", 1);
  w["spec"]["replicas"] = 2;
  ASSERT_EQ(env_.Post(kWidgets, w).code, 201);
  const std::string w1 = std::string(kWidgets) + "/w1";
  ASSERT_EQ(env_.Put(w1 + "/status",
                     [&] {
                       nlohmann::json o = ApiTestEnv::Json(env_.Get(w1));
                       o["status"] = {{"replicas", 2}, {"selector", "app=w1"}};
                       return o;
                     }())
                .code,
            200);
  ApiResponse got = env_.Get(w1 + "/scale");
  ASSERT_EQ(got.code, 200) << got.body;
  nlohmann::json scale = ApiTestEnv::Json(got);
  EXPECT_EQ(scale["kind"], "Scale");
  EXPECT_EQ(scale["apiVersion"], "autoscaling/v1");
  EXPECT_EQ(scale["spec"]["replicas"], 2);
  EXPECT_EQ(scale["status"]["replicas"], 2);
  EXPECT_EQ(scale["status"]["selector"], "app=w1");
  nlohmann::json object = ApiTestEnv::Json(env_.Get(w1));
  EXPECT_EQ(scale["metadata"]["resourceVersion"], object["metadata"]["resourceVersion"]);
  const int64_t generation = object["metadata"]["generation"];

  // PUT: the object's spec.replicas, with a generation bump; a stale resourceVersion is 409.
  scale["spec"]["replicas"] = 5;
  ApiResponse put = env_.Put(w1 + "/scale", scale);
  ASSERT_EQ(put.code, 200) << put.body;
  EXPECT_EQ(ApiTestEnv::Json(put)["spec"]["replicas"], 5);
  object = ApiTestEnv::Json(env_.Get(w1));
  EXPECT_EQ(object["spec"]["replicas"], 5);
  EXPECT_EQ(object["spec"]["size"], 1);  // the rest of the spec is kept
  EXPECT_EQ(object["metadata"]["generation"], generation + 1);
  EXPECT_EQ(env_.Put(w1 + "/scale", scale).code, 409);

  // Merge and JSON patches.
  ApiResponse merge =
      env_.Patch(w1 + "/scale", "application/merge-patch+json", R"({"spec":{"replicas":7}})");
  ASSERT_EQ(merge.code, 200) << merge.body;
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(w1))["spec"]["replicas"], 7);
  ApiResponse json_patch = env_.Patch(w1 + "/scale", "application/json-patch+json",
                                      R"([{"op":"replace","path":"/spec/replicas","value":1}])");
  ASSERT_EQ(json_patch.code, 200) << json_patch.body;
  EXPECT_EQ(ApiTestEnv::Json(json_patch)["spec"]["replicas"], 1);

  // Bad input.
  ApiResponse negative =
      env_.Patch(w1 + "/scale", "application/merge-patch+json", R"({"spec":{"replicas":-1}})");
  EXPECT_EQ(negative.code, 422) << negative.body;
  EXPECT_EQ(ApiTestEnv::Json(negative)["details"]["causes"][0]["field"], "spec.replicas");
  EXPECT_EQ(env_.Get(std::string(kWidgets) + "/missing/scale").code, 404);
  EXPECT_EQ(env_.Delete(w1 + "/scale").code, 405);
  EXPECT_EQ(env_.Get("/api/v1/namespaces/ns1/configmaps/x/scale").code, 404);
}

TEST_F(CrdTest, ScaleSubresourcePathsAreValidated) {
  nlohmann::json crd = WidgetCrd();
  crd["spec"]["versions"][0]["subresources"]["scale"] = {{"specReplicasPath", ".status.replicas"},
                                                         {"labelSelectorPath", ".spec[0]"}};
  ApiResponse bad = env_.Post(kCrds, crd);
  ASSERT_EQ(bad.code, 422) << bad.body;
  std::vector<std::string> fields;
  const nlohmann::json status = ApiTestEnv::Json(bad);
  for (const auto& cause : status["details"]["causes"]) {
    fields.push_back(cause["field"]);
  }
  EXPECT_THAT(fields, ::testing::UnorderedElementsAre(
                          "spec.versions[0].subresources.scale.specReplicasPath",
                          "spec.versions[0].subresources.scale.statusReplicasPath",
                          "spec.versions[0].subresources.scale.labelSelectorPath"))
      << bad.body;
}

TEST_F(CrdTest, VersionsShareObjects) {
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd()).code, 201);
  ApiResponse c = env_.Post(kWidgets, Widget("w1", 3));
  ASSERT_EQ(c.code, 201) << c.body;
  ApiResponse v2 = env_.Get("/apis/example.com/v2/namespaces/ns1/widgets/w1");
  ASSERT_EQ(v2.code, 200) << v2.body;
  EXPECT_EQ(ApiTestEnv::Json(v2)["apiVersion"], "example.com/v2");
  EXPECT_EQ(ApiTestEnv::Json(v2)["spec"]["size"], 3);
  // Created at v2, read at v1.
  ASSERT_EQ(env_.Post("/apis/example.com/v2/namespaces/ns1/widgets", Widget("w2", 4, "v2")).code,
            201);
  nlohmann::json list = ApiTestEnv::Json(env_.Get(kWidgets));
  EXPECT_EQ(list["kind"], "WidgetList");
  ASSERT_EQ(list["items"].size(), 2u);
  EXPECT_EQ(list["items"][1]["apiVersion"], "example.com/v1");
  // The body's version must match the endpoint's.
  EXPECT_EQ(env_.Post(kWidgets, Widget("w3", 1, "v2")).code, 400);
}

TEST_F(CrdTest, GenerationAndStatusSubresource) {
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd()).code, 201);
  nlohmann::json w = ApiTestEnv::Json(env_.Post(kWidgets, Widget("w", 1)));
  EXPECT_EQ(w["metadata"]["generation"], 1);
  const std::string path = std::string(kWidgets) + "/w";
  const char* kMerge = "application/merge-patch+json";
  w = ApiTestEnv::Json(env_.Patch(path, kMerge, R"({"spec":{"size":2}})"));
  EXPECT_EQ(w["metadata"]["generation"], 2);
  w = ApiTestEnv::Json(env_.Patch(path, kMerge, R"({"metadata":{"labels":{"a":"b"}}})"));
  EXPECT_EQ(w["metadata"]["generation"], 2);
  w = ApiTestEnv::Json(env_.Patch(path + "/status", kMerge, R"({"status":{"ready":true}})"));
  EXPECT_EQ(w["metadata"]["generation"], 2);
  EXPECT_EQ(w["status"]["ready"], true);
  w = ApiTestEnv::Json(env_.Patch(path, kMerge, R"({"status":{"ready":false}})"));
  EXPECT_EQ(w["status"]["ready"], true);
  // Strategic merge patch has no strategy for custom resources.
  EXPECT_EQ(env_.Patch(path, "application/strategic-merge-patch+json", "{}").code, 415);
  // Delete answers with the object.
  ApiResponse d = env_.Delete(path);
  ASSERT_EQ(d.code, 200) << d.body;
  EXPECT_EQ(ApiTestEnv::Json(d)["kind"], "Widget");
}

TEST_F(CrdTest, WithoutStatusSubresourceStatusIsTrackedByGeneration) {
  nlohmann::json crd = WidgetCrd();
  for (auto& v : crd["spec"]["versions"]) v.erase("subresources");
  ASSERT_EQ(env_.Post(kCrds, crd).code, 201);
  nlohmann::json w = Widget("w", 1);
  w["status"] = {{"ready", false}};
  w = ApiTestEnv::Json(env_.Post(kWidgets, w));
  EXPECT_EQ(w["status"]["ready"], false);  // no subresource: status is part of the object
  EXPECT_EQ(env_.Get(std::string(kWidgets) + "/w/status").code, 404);
  w = ApiTestEnv::Json(env_.Patch(std::string(kWidgets) + "/w", "application/merge-patch+json",
                                  R"({"status":{"ready":true}})"));
  EXPECT_EQ(w["status"]["ready"], true);
  EXPECT_EQ(w["metadata"]["generation"], 2);
}

TEST_F(CrdTest, TableShowsPrinterColumns) {
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd()).code, 201);
  ASSERT_EQ(env_.Post(kWidgets, Widget("w", 7)).code, 201);
  nlohmann::json t = ApiTestEnv::Json(
      env_.Do("GET", kWidgets, "", "", {}, "application/json;as=Table;v=v1;g=meta.k8s.io"));
  ASSERT_EQ(t["kind"], "Table") << t;
  ASSERT_EQ(t["columnDefinitions"].size(), 2u);
  EXPECT_EQ(t["columnDefinitions"][1]["name"], "Size");
  EXPECT_EQ(t["rows"][0]["cells"][1], 7);
}

TEST_F(CrdTest, ClusterScope) {
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd("Cluster")).code, 201);
  ApiResponse c = env_.Post("/apis/example.com/v1/widgets", Widget("cw", 1));
  ASSERT_EQ(c.code, 201) << c.body;
  EXPECT_FALSE(ApiTestEnv::Json(c)["metadata"].contains("namespace"));
  EXPECT_EQ(env_.Get("/apis/example.com/v1/widgets/cw").code, 200);
  EXPECT_EQ(env_.Get(kWidgets).code, 404);
  const nlohmann::json v1 = ApiTestEnv::Json(env_.Get("/apis/example.com/v1"));
  ASSERT_NE(FindResource(v1, "widgets"), nullptr);
  EXPECT_EQ((*FindResource(v1, "widgets"))["namespaced"], false);
}

TEST_F(CrdTest, InvalidCrds) {
  nlohmann::json bad_name = WidgetCrd();
  bad_name["metadata"]["name"] = "gadgets.example.com";
  ApiResponse r = env_.Post(kCrds, bad_name);
  EXPECT_EQ(r.code, 422) << r.body;
  EXPECT_EQ(ApiTestEnv::Json(r)["details"]["causes"][0]["field"], "metadata.name");
  nlohmann::json bad_scope = WidgetCrd("Galaxy");
  EXPECT_EQ(env_.Post(kCrds, bad_scope).code, 422);
  nlohmann::json two_storage = WidgetCrd();
  two_storage["spec"]["versions"][1]["storage"] = true;
  EXPECT_EQ(env_.Post(kCrds, two_storage).code, 422);
  nlohmann::json no_spec = WidgetCrd();
  no_spec.erase("spec");
  EXPECT_EQ(env_.Post(kCrds, no_spec).code, 422);
  nlohmann::json bad_group = WidgetCrd();
  bad_group["spec"]["group"] = "nodots";
  bad_group["metadata"]["name"] = "widgets.nodots";
  EXPECT_EQ(env_.Post(kCrds, bad_group).code, 422);
  EXPECT_EQ(env_.Get("/apis/example.com/v1").code, 404);
}

// Found running k8s.io/sample-controller's CRD against Kubernetes 1.20 (the embedded server took
// it): groups of the Kubernetes project need the api-approved.kubernetes.io annotation (KEP 1111).
TEST_F(CrdTest, ProtectedGroupsNeedTheApprovalAnnotation) {
  nlohmann::json crd = WidgetCrd();
  crd["spec"]["group"] = "samplecontroller.k8s.io";
  crd["metadata"]["name"] = "widgets.samplecontroller.k8s.io";
  ApiResponse r = env_.Post(kCrds, crd);
  ASSERT_EQ(r.code, 422) << r.body;
  const nlohmann::json cause = ApiTestEnv::Json(r)["details"]["causes"][0];
  EXPECT_EQ(cause["field"], "metadata.annotations[api-approved.kubernetes.io]");
  EXPECT_THAT(cause["message"].get<std::string>(),
              ::testing::HasSubstr("protected groups must have approval annotation"));
  crd["metadata"]["annotations"]["api-approved.kubernetes.io"] = "maybe";
  EXPECT_EQ(env_.Post(kCrds, crd).code, 422);
  crd["metadata"]["annotations"]["api-approved.kubernetes.io"] = "unapproved, testing only";
  EXPECT_EQ(env_.Post(kCrds, crd).code, 201);
  nlohmann::json url = WidgetCrd();
  url["spec"]["group"] = "x.kubernetes.io";
  url["metadata"]["name"] = "widgets.x.kubernetes.io";
  url["metadata"]["annotations"]["api-approved.kubernetes.io"] =
      "https://github.com/kubernetes/kubernetes/pull/1";
  EXPECT_EQ(env_.Post(kCrds, url).code, 201);
}

TEST_F(CrdTest, DeletingTheCrdRemovesObjectsAndResource) {
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd()).code, 201);
  ASSERT_EQ(env_.Post(kWidgets, Widget("w1", 1)).code, 201);
  ASSERT_EQ(env_.Post(kWidgets, Widget("w2", 2)).code, 201);
  ApiResponse d = env_.Delete(std::string(kCrds) + "/widgets.example.com");
  ASSERT_EQ(d.code, 200) << d.body;
  // The CRD leaves the store just before its resource leaves the registry.
  EXPECT_TRUE(WaitFor([&] {
    return env_.Get(std::string(kCrds) + "/widgets.example.com").code == 404 &&
           env_.Get(kWidgets).code == 404;
  }));
  EXPECT_EQ(env_.Get("/apis/example.com/v1").code, 404);
  // Recreating the CRD does not bring the old objects back.
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd()).code, 201);
  EXPECT_EQ(ApiTestEnv::Json(env_.Get(kWidgets))["items"].size(), 0u);
}

TEST_F(CrdTest, CustomResourceNamesAndBadBodies) {
  ASSERT_EQ(env_.Post(kCrds, WidgetCrd()).code, 201);
  EXPECT_EQ(env_.Post(kWidgets, Widget("a/b", 1)).code, 422);
  EXPECT_EQ(env_.Post(kWidgets, Widget("..", 1)).code, 422);
  EXPECT_EQ(env_.Post(kWidgets, std::string("{")).code, 400);
  nlohmann::json gadget = Widget("g", 1);
  gadget["kind"] = "Gadget";
  EXPECT_EQ(env_.Post(kWidgets, gadget).code, 400);
}

TEST(CrdRestartTest, StoredCrdsAreServedAfterRestart) {
  std::string dir;
  {
    ApiTestEnvOptions o;
    o.controllers = true;
    ApiTestEnv env(o);
    dir = env.dir();
    env.CreateNamespace("ns1");
    ASSERT_EQ(env.Post(kCrds, WidgetCrd()).code, 201);
    ASSERT_EQ(env.Post(kWidgets, Widget("w", 1)).code, 201);
  }
  ApiTestEnvOptions o;
  o.controllers = true;
  o.dir = dir;
  ApiTestEnv env(o);
  EXPECT_EQ(env.Get(std::string(kWidgets) + "/w").code, 200);
}

}  // namespace
}  // namespace ctrlhost::apiserver
