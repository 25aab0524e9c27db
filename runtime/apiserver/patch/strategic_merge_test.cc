// Strategic merge patch, including the patches kubectl 1.32 client-side apply computes (3-way
// diffs with $setElementOrder, $retainKeys, $patch: delete and $deleteFromPrimitiveList).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/apiserver/patch/patch.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;

const MergeStrategy* Deployments() { return BuiltinMergeStrategy("apps", "Deployment"); }

// A live Deployment as the server stores it: defaulted fields, a container injected by
// someone else (istio-proxy), server-side env var C.
json LiveDeployment() {
  return json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default", "finalizers": ["a", "b", "c"],
                 "labels": {"app": "web"}},
    "spec": {
      "replicas": 2,
      "strategy": {"type": "RollingUpdate",
                   "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
      "template": {"spec": {
        "containers": [
          {"name": "web", "image": "nginx:1", "imagePullPolicy": "IfNotPresent",
           "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"},
                   {"name": "C", "value": "server"}],
           "ports": [{"containerPort": 80, "protocol": "TCP"}]},
          {"name": "sidecar", "image": "busybox"},
          {"name": "istio-proxy", "image": "istio"}
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}]
      }}
    }
  })");
}

absl::StatusOr<json> Patch(const json& doc, const std::string& patch,
                           const MergeStrategy* strategy = Deployments()) {
  return ApplyStrategicMergePatch(doc, patch, strategy);
}

TEST(StrategicMergeTest, KubectlApplyRemovesReordersAndChangesEnv) {
  // kubectl apply: last-applied had containers [web{env A=1,B=2}, sidecar]; the new config has
  // [log, web{env A=3}]. kubectl sends this 3-way patch.
  const std::string patch = R"({"spec":{"template":{"spec":{
      "$setElementOrder/containers":[{"name":"log"},{"name":"web"}],
      "containers":[
        {"image":"fluent","name":"log"},
        {"$setElementOrder/env":[{"name":"A"}],
         "env":[{"name":"A","value":"3"},{"$patch":"delete","name":"B"}],"name":"web"},
        {"$patch":"delete","name":"sidecar"}]}}}})";
  absl::StatusOr<json> got = Patch(LiveDeployment(), patch);
  ASSERT_TRUE(got.ok()) << got.status();
  const json& containers = (*got)["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 3u) << containers.dump();
  EXPECT_EQ(containers[0], json::parse(R"({"name":"log","image":"fluent"})"));
  EXPECT_EQ(containers[1]["name"], "web");
  EXPECT_EQ(containers[1]["imagePullPolicy"], "IfNotPresent");  // server field kept
  EXPECT_EQ(containers[1]["env"],
            json::parse(R"([{"name":"A","value":"3"},{"name":"C","value":"server"}])"));
  EXPECT_EQ(containers[1]["ports"], json::parse(R"([{"containerPort":80,"protocol":"TCP"}])"));
  EXPECT_EQ(containers[2]["name"], "istio-proxy");  // server-only item keeps its place
  EXPECT_EQ(got->dump().find('$'), std::string::npos) << "directives leaked: " << got->dump();
}

TEST(StrategicMergeTest, RetainKeysSwitchesDeploymentStrategy) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"spec":{"strategy":{
      "$retainKeys":["type"],"rollingUpdate":null,"type":"Recreate"}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["strategy"], json::parse(R"({"type":"Recreate"})"));
}

TEST(StrategicMergeTest, RetainKeysDropsUnlistedServerKeys) {
  absl::StatusOr<json> got =
      Patch(LiveDeployment(), R"({"spec":{"strategy":{"$retainKeys":["type"]}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["strategy"], json::parse(R"({"type":"RollingUpdate"})"));
}

TEST(StrategicMergeTest, RetainKeysMustListPatchedKeys) {
  absl::StatusOr<json> got = Patch(
      LiveDeployment(), R"({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{}}}})");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 400);
}

TEST(StrategicMergeTest, DeleteFromPrimitiveListWithElementOrder) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"metadata":{
      "$deleteFromPrimitiveList/finalizers":["b"],"$setElementOrder/finalizers":["c","a","d"],
      "finalizers":["d"]}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["finalizers"], json::parse(R"(["c","a","d"])"));
}

TEST(StrategicMergeTest, PrimitiveSetMergesWithoutDuplicates) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"metadata":{"finalizers":["b","x"]}})");
  ASSERT_TRUE(got.ok()) << got.status();
  // As strategicpatch orders it: new items follow the patch items they were listed with.
  EXPECT_EQ((*got)["metadata"]["finalizers"], json::parse(R"(["a","b","x","c"])"));
}

TEST(StrategicMergeTest, ContainerPortsMergeByContainerPort) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"spec":{"template":{"spec":{
      "containers":[{"name":"web","ports":[{"containerPort":443},
                                           {"containerPort":80,"name":"http"}]}]}}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["template"]["spec"]["containers"][0]["ports"], json::parse(R"([
      {"containerPort":443},{"containerPort":80,"name":"http","protocol":"TCP"}])"));
}

TEST(StrategicMergeTest, AtomicListsAreReplaced) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"spec":{"template":{"spec":{
      "tolerations":[{"key":"other","operator":"Equal","value":null}]}}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["template"]["spec"]["tolerations"],
            json::parse(R"([{"key":"other","operator":"Equal"}])"));
}

TEST(StrategicMergeTest, NullDeletesAndMapsMerge) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"metadata":{"labels":{"app":null,
      "tier":"fe"}},"spec":{"replicas":null,"paused":true,"new":{"a":null,"b":1}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["labels"], json::parse(R"({"tier":"fe"})"));
  EXPECT_FALSE((*got)["spec"].contains("replicas"));
  EXPECT_EQ((*got)["spec"]["paused"], true);
  EXPECT_EQ((*got)["spec"]["new"], json::parse(R"({"b":1})"));
}

TEST(StrategicMergeTest, PatchReplaceInMapAndList) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"metadata":{"labels":{
      "$patch":"replace","only":"me"}},"spec":{"template":{"spec":{"containers":[
      {"$patch":"replace"},{"name":"solo","image":"x"}]}}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["labels"], json::parse(R"({"only":"me"})"));
  EXPECT_EQ((*got)["spec"]["template"]["spec"]["containers"],
            json::parse(R"([{"name":"solo","image":"x"}])"));
}

TEST(StrategicMergeTest, PatchDeleteInMap) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), R"({"metadata":{"labels":{
      "$patch":"delete"}}})");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["labels"], json::object());
}

TEST(StrategicMergeTest, ServicePortsMergeByPort) {
  json svc = json::parse(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},
      "spec":{"ports":[{"port":80,"targetPort":8080},{"port":443}]}})");
  absl::StatusOr<json> got =
      ApplyStrategicMergePatch(svc, R"({"spec":{"ports":[{"port":80,"targetPort":9090}]}})",
                               BuiltinMergeStrategy("", "Service"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["ports"],
            json::parse(R"([{"port":80,"targetPort":9090},{"port":443}])"));
}

TEST(StrategicMergeTest, NewListWithDirectivesIsCleaned) {
  json cm = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}})");
  absl::StatusOr<json> got = ApplyStrategicMergePatch(
      cm, R"({"metadata":{"$setElementOrder/finalizers":["x"],"finalizers":["x"],
             "ownerReferences":[{"uid":"1","name":"o","extra":null}]}})",
      BuiltinMergeStrategy("", "ConfigMap"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"], json::parse(R"({"name":"c","finalizers":["x"],
      "ownerReferences":[{"uid":"1","name":"o"}]})"));
}

TEST(StrategicMergeTest, CustomResourcesAre415) {
  json cr = json::parse(R"({"apiVersion":"x.dev/v1","kind":"Widget","metadata":{"name":"w"}})");
  absl::StatusOr<json> got = ApplyStrategicMergePatch(cr, R"({"spec":{}})", nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 415);
  EXPECT_EQ(kube::Reason(got.status()), "UnsupportedMediaType");
  EXPECT_EQ(got.status().message(),
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json-patch+json, application/merge-patch+json, "
            "application/apply-patch+yaml");
  EXPECT_EQ(BuiltinMergeStrategy("x.dev", "Widget"), nullptr);
}

TEST(StrategicMergeTest, BuiltinStrategies) {
  for (auto [group, kind] :
       std::vector<std::pair<std::string, std::string>>{{"", "ConfigMap"},
                                                        {"", "Secret"},
                                                        {"", "Namespace"},
                                                        {"", "ServiceAccount"},
                                                        {"", "Service"},
                                                        {"", "Event"},
                                                        {"apps", "Deployment"},
                                                        {"coordination.k8s.io", "Lease"},
                                                        {"events.k8s.io", "Event"}}) {
    const MergeStrategy* s = BuiltinMergeStrategy(group, kind);
    ASSERT_NE(s, nullptr) << group << "/" << kind;
    const MergeStrategy::Node* owners = s->root().Find("metadata.ownerReferences");
    ASSERT_NE(owners, nullptr);
    EXPECT_EQ(owners->strategy.merge_key, "uid");
    EXPECT_TRUE(s->root().Find("metadata.finalizers")->strategy.IsPrimitiveSet());
  }
  const MergeStrategy::Node& d = Deployments()->root();
  EXPECT_EQ(d.Find("spec.template.spec.containers.ports")->strategy.merge_key, "containerPort");
  EXPECT_EQ(d.Find("spec.template.spec.initContainers.env")->strategy.merge_key, "name");
  EXPECT_EQ(d.Find("spec.template.spec.containers.volumeMounts")->strategy.merge_key, "mountPath");
  EXPECT_TRUE(d.Find("spec.strategy")->strategy.retain_keys);
  EXPECT_EQ(d.Find("spec.template.spec.tolerations"), nullptr);
  EXPECT_EQ(BuiltinMergeStrategy("apps", "StatefulSet"), nullptr);
}

struct BadPatchCase {
  std::string name;
  std::string patch;
  int want_code;
};

class StrategicMergeBadPatchTest : public testing::TestWithParam<BadPatchCase> {};

TEST_P(StrategicMergeBadPatchTest, Refused) {
  absl::StatusOr<json> got = Patch(LiveDeployment(), GetParam().patch);
  ASSERT_FALSE(got.ok()) << got->dump();
  EXPECT_EQ(kube::HttpCode(got.status()), GetParam().want_code) << got.status();
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, StrategicMergeBadPatchTest,
    testing::ValuesIn(std::vector<BadPatchCase>{
        {"NotJson", "{", 400},
        {"NotObject", "[]", 400},
        {"UnknownMapDirective", R"({"metadata":{"$patch":"explode"}})", 400},
        {"UnknownListDirective",
         R"({"spec":{"template":{"spec":{"containers":[{"$patch":"explode"}]}}}})", 400},
        {"MergeDirectiveInList",
         R"({"spec":{"template":{"spec":{"containers":[{"$patch":"merge"}]}}}})", 400},
        {"DeleteWithoutMergeKey",
         R"({"spec":{"template":{"spec":{"containers":[{"$patch":"delete"}]}}}})", 400},
        {"ItemWithoutMergeKey", R"({"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}})",
         400},
        {"UnknownDirective", R"({"spec":{"$frob":1}})", 400},
        {"RetainKeysNotList", R"({"spec":{"strategy":{"$retainKeys":"type"}}})", 400},
        {"DeleteListNotList", R"({"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}})", 400},
        {"ElementOrderNotList", R"({"metadata":{"$setElementOrder/finalizers":"a"}})", 400},
        {"ElementOrderMismatch", R"({"spec":{"template":{"spec":{
            "$setElementOrder/containers":[{"name":"a"}],
            "containers":[{"name":"b","image":"x"}]}}}})",
         400},
        {"ListOfLists", R"({"metadata":{"finalizers":[["a"]]}})", 422},
        {"MixedElementTypes", R"({"metadata":{"finalizers":[1]}})", 400},
    }),
    [](const testing::TestParamInfo<BadPatchCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ctrlhost::apiserver
