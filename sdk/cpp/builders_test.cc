#include "sdk/cpp/builders.h"

#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::sdk {
namespace {

// The same vectors are in sdk/python/tests/builders_test.py and sdk/node/test/builders.test.js.
TEST(ConfigHashTest, SameVectorsInEveryLanguage) {
  EXPECT_EQ(*ConfigHash(nlohmann::json::object()), "9bf65e00c699fdaf");
  EXPECT_EQ(*ConfigHash({{"b", "2"}, {"a", "1"}}), "18ceba3ee263f773");
  // Keys sorted by UTF-8 bytes: "10" before "9", U+FF5E before U+1F600 (UTF-16 order differs).
  nlohmann::json order = {{"10", "x"},     {"9", "y"}, {"\u00e9", "z"}, {"\U0001F600", "w"},
                          {"\uff5e", "v"}, {"B", "u"}, {"a", "t"}};
  EXPECT_EQ(*CanonicalJson(order),
            "{\"10\":\"x\",\"9\":\"y\",\"B\":\"u\",\"a\":\"t\",\"\u00e9\":\"z\",\"\uff5e\":\"v\","
            "\"\U0001F600\":\"w\"}");
  EXPECT_EQ(*ConfigHash(order), "87ce159c5184d88c");
  EXPECT_EQ(*ConfigHash({{"q", "say \"hi\"\n\t\\ \x01 \x7f /"}}), "07165b820114a692");
  nlohmann::json nested = nlohmann::json::parse(
      R"({"list": [1, -2, true, null, {"z": 1, "y": []}], "n": 9007199254740992.0})");
  EXPECT_EQ(*CanonicalJson(nested),
            R"({"list":[1,-2,true,null,{"y":[],"z":1}],"n":9007199254740992})");
  EXPECT_EQ(*ConfigHash(nested), "3abc398a2c0b7b37");
}

TEST(ConfigHashTest, RefusesNumbersOtherLanguagesWouldWriteDifferently) {
  EXPECT_EQ(ConfigHash({{"x", 1.5}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConfigHash({{"x", 1e300}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ConfigHash({{"x", 2.0}}), *ConfigHash({{"x", 2}}));
}

TEST(BuildersTest, DeploymentAndServiceCarryLabelsSelectorAndProtocol) {
  nlohmann::json d = BuildDeployment({.name = "shop",
                                      .labels = CommonLabels("webapp", "shop"),
                                      .selector = SelectorLabels("webapp", "shop"),
                                      .replicas = 3,
                                      .containers = {{{"name", "web"}, {"image", "nginx"}}},
                                      .pod_annotations = {{kConfigHashAnnotation, "abc"}}});
  EXPECT_EQ(d["apiVersion"], "apps/v1");
  EXPECT_EQ(d["metadata"]["labels"]["app.kubernetes.io/managed-by"], "ctrlhost");
  EXPECT_EQ(d["spec"]["replicas"], 3);
  EXPECT_EQ(d["spec"]["selector"]["matchLabels"], SelectorLabels("webapp", "shop"));
  EXPECT_EQ(d["spec"]["template"]["metadata"]["labels"], CommonLabels("webapp", "shop"));
  EXPECT_EQ(d["spec"]["template"]["metadata"]["annotations"]["ctrlhost.dev/config-hash"], "abc");
  EXPECT_EQ(d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx");

  nlohmann::json s = BuildService({.name = "shop",
                                   .selector = SelectorLabels("webapp", "shop"),
                                   .ports = {{.name = "http", .port = 80, .target_port = "http"},
                                             {.port = 53, .protocol = "UDP"}}});
  EXPECT_EQ(s["spec"]["ports"][0],
            nlohmann::json(
                {{"name", "http"}, {"port", 80}, {"protocol", "TCP"}, {"targetPort", "http"}}));
  EXPECT_EQ(s["spec"]["ports"][1], nlohmann::json({{"port", 53}, {"protocol", "UDP"}}));
  EXPECT_FALSE(s["metadata"].contains("labels"));
}

TEST(BuildersTest, RbacAndPlainObjects) {
  ObjectOptions meta{.name = "reader", .labels = CommonLabels("app", "x")};
  nlohmann::json role =
      BuildRole(meta, nlohmann::json::array({PolicyRule({""}, {"configmaps"}, {"get"})}));
  EXPECT_EQ(role["apiVersion"], "rbac.authorization.k8s.io/v1");
  EXPECT_EQ(role["rules"][0]["resources"][0], "configmaps");
  nlohmann::json binding = BuildClusterRoleBinding(
      meta, "reader", nlohmann::json::array({ServiceAccountSubject("runner", "team-a")}));
  EXPECT_EQ(binding["roleRef"], nlohmann::json({{"apiGroup", "rbac.authorization.k8s.io"},
                                                {"kind", "ClusterRole"},
                                                {"name", "reader"}}));
  EXPECT_EQ(binding["subjects"][0]["namespace"], "team-a");
  EXPECT_EQ(BuildRoleBinding(meta, "reader", nullptr)["subjects"], nlohmann::json::array());
  EXPECT_EQ(BuildSecret(meta, {{"token", "t"}}, "Opaque")["stringData"]["token"], "t");
  EXPECT_EQ(
      BuildServiceAccount({.name = "runner"}),
      nlohmann::json(
          {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "runner"}}}}));
  EXPECT_EQ(BuildConfigMap({}, nlohmann::json::object())["data"], nlohmann::json::object());
}

TEST(BuildersTest, OwnerReferenceNamesThePrimary) {
  absl::StatusOr<Request> req = Request::FromCall(
      testing::RequestBuilder::FromYaml(
          "apiVersion: example.com/v1\nkind: App\nmetadata: {name: shop, namespace: a, uid: u-1}")
          ->Call());
  ASSERT_TRUE(req.ok());
  nlohmann::json ref = OwnerReference(*req);
  EXPECT_EQ(ref, nlohmann::json({{"apiVersion", "example.com/v1"},
                                 {"kind", "App"},
                                 {"name", "shop"},
                                 {"uid", "u-1"},
                                 {"controller", true},
                                 {"blockOwnerDeletion", true}}));
  EXPECT_EQ(BuildConfigMap({.owner_reference = ref}, nullptr)["metadata"]["ownerReferences"][0],
            ref);
}

}  // namespace
}  // namespace ctrlhost::sdk
