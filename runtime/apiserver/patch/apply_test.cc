#include "runtime/apiserver/patch/apply.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/apiserver/patch/managed_fields.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);  // 2023-11-14T22:13:20Z

const MergeStrategy* Deployments() { return BuiltinMergeStrategy("apps", "Deployment"); }

ApplyOptions Opts(const std::string& manager, bool force = false) {
  ApplyOptions o;
  o.manager = manager;
  o.force = force;
  o.now = kT0;
  o.api_version = "apps/v1";
  o.kind = "Deployment";
  o.name = "web";
  o.namespace_name = "default";
  return o;
}

json Config(const std::string& spec) {
  json c = json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment",
                           "metadata":{"name":"web","namespace":"default"}})");
  c["spec"] = json::parse(spec);
  return c;
}

json Entry(const json& obj, const std::string& manager, const std::string& op = "Apply") {
  for (const json& e : obj["metadata"]["managedFields"]) {
    if (e["manager"] == manager && e["operation"] == op) return e;
  }
  return nullptr;
}

absl::StatusOr<json> Apply(const json* live, const json& config, const ApplyOptions& opts) {
  return ServerSideApply(live, config, opts, Deployments());
}

const char* kWebSpec = R"({"replicas":3,"template":{"spec":{"containers":[
    {"name":"web","image":"nginx:1","ports":[{"containerPort":80}]}]}}})";

TEST(ServerSideApplyTest, CreateRecordsApplyEntry) {
  absl::StatusOr<json> got = Apply(nullptr, Config(kWebSpec), Opts("alice"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["replicas"], 3);
  ASSERT_EQ((*got)["metadata"]["managedFields"].size(), 1u);
  EXPECT_EQ((*got)["metadata"]["managedFields"][0], json::parse(R"({"manager":"alice",
      "operation":"Apply","apiVersion":"apps/v1","time":"2023-11-14T22:13:20Z",
      "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{
        "f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},
          "f:ports":{"k:{\"containerPort\":80}":{".":{},"f:containerPort":{}}}}}}}}}})"));
}

TEST(ServerSideApplyTest, ReapplyWithoutAFieldRemovesIt) {
  json live = *Apply(nullptr, Config(R"({"replicas":3,"paused":true,"template":{"spec":{
      "containers":[{"name":"web","image":"nginx:1"},{"name":"log","image":"fluent"}]}}})"),
                     Opts("alice"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":3,"template":{"spec":{
      "containers":[{"name":"web","image":"nginx:1"}]}}})"),
                                   Opts("alice"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE((*got)["spec"].contains("paused"));
  EXPECT_EQ((*got)["spec"]["template"]["spec"]["containers"],
            json::parse(R"([{"name":"web","image":"nginx:1"}])"));
  EXPECT_EQ(Entry(*got, "alice")["fieldsV1"]["f:spec"].count("f:paused"), 0u);
}

TEST(ServerSideApplyTest, DroppedFieldOwnedByAnotherManagerStays) {
  json live = *Apply(nullptr, Config(R"({"replicas":3,"paused":true})"), Opts("alice"));
  live = *Apply(&live, Config(R"({"paused":true})"), Opts("bob"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":3})"), Opts("alice"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["paused"], true);
  EXPECT_EQ(Entry(*got, "bob")["fieldsV1"], json::parse(R"({"f:spec":{"f:paused":{}}})"));
}

TEST(ServerSideApplyTest, SameValueIsSharedOwnership) {
  json live = *Apply(nullptr, Config(R"({"replicas":3})"), Opts("alice"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":3})"), Opts("bob"));
  ASSERT_TRUE(got.ok()) << got.status();
  const json owned = json::parse(R"({"f:spec":{"f:replicas":{}}})");
  EXPECT_EQ(Entry(*got, "alice")["fieldsV1"], owned);
  EXPECT_EQ(Entry(*got, "bob")["fieldsV1"], owned);
  // Alice stops applying it: Bob still owns it, so it stays.
  absl::StatusOr<json> after = Apply(&*got, Config(R"({"paused":false})"), Opts("alice"));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["spec"]["replicas"], 3);
}

TEST(ServerSideApplyTest, DifferentValueConflicts) {
  json live = *Apply(nullptr, Config(kWebSpec), Opts("other-manager"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":5})"), Opts("me"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 409);
  EXPECT_EQ(kube::Reason(got.status()), "Conflict");
  EXPECT_EQ(got.status().message(),
            "Apply failed with 1 conflict: conflict with \"other-manager\": .spec.replicas");
  kube::StatusDetails details = kube::Details(got.status());
  ASSERT_EQ(details.causes.size(), 1u);
  EXPECT_EQ(details.causes[0].reason, "FieldManagerConflict");
  EXPECT_EQ(details.causes[0].message, "conflict with \"other-manager\"");
  EXPECT_EQ(details.causes[0].field, ".spec.replicas");
}

TEST(ServerSideApplyTest, AllConflictsAreReported) {
  json live = *Apply(nullptr, Config(kWebSpec), Opts("other-manager"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":5,"template":{"spec":{
      "containers":[{"name":"web","image":"nginx:2"}]}}})"),
                                   Opts("me"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "Apply failed with 2 conflicts: conflicts with \"other-manager\":\n"
            "- .spec.replicas\n"
            "- .spec.template.spec.containers[name=\"web\"].image");
  kube::StatusDetails details = kube::Details(got.status());
  ASSERT_EQ(details.causes.size(), 2u);
  EXPECT_EQ(details.causes[1].field, ".spec.template.spec.containers[name=\"web\"].image");
}

TEST(ServerSideApplyTest, ForceTakesOwnership) {
  json live = *Apply(nullptr, Config(kWebSpec), Opts("other-manager"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":5})"), Opts("me", true));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["replicas"], 5);
  EXPECT_EQ(Entry(*got, "me")["fieldsV1"], json::parse(R"({"f:spec":{"f:replicas":{}}})"));
  EXPECT_EQ(Entry(*got, "other-manager")["fieldsV1"]["f:spec"].count("f:replicas"), 0u);
  EXPECT_EQ(Entry(*got, "other-manager")["fieldsV1"]["f:spec"].count("f:template"), 1u);
  // The previous owner re-applying its old value now conflicts with "me".
  absl::StatusOr<json> back = Apply(&*got, Config(kWebSpec), Opts("other-manager"));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(kube::Details(back.status()).causes[0].message, "conflict with \"me\"");
}

TEST(ServerSideApplyTest, ItemsOfAssociativeListsAreOwnedSeparately) {
  json live = *Apply(nullptr, Config(kWebSpec), Opts("alice"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"template":{"spec":{"containers":[
      {"name":"log","image":"fluent"}]}}})"),
                                   Opts("bob"));
  ASSERT_TRUE(got.ok()) << got.status();
  const json& containers = (*got)["spec"]["template"]["spec"]["containers"];
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(containers[0]["name"], "web");
  EXPECT_EQ(containers[1]["name"], "log");
}

TEST(ServerSideApplyTest, ListOrderFollowsTheConfiguration) {
  json live = *Apply(nullptr, Config(R"({"template":{"spec":{"containers":[
      {"name":"a"},{"name":"b"},{"name":"c"}]}}})"),
                     Opts("alice"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"template":{"spec":{"containers":[
      {"name":"c"},{"name":"a"}]}}})"),
                                   Opts("bob"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["template"]["spec"]["containers"],
            json::parse(R"([{"name":"b"},{"name":"c"},{"name":"a"}])"));
}

TEST(ServerSideApplyTest, UpdateManagerConflictsAfterRecordUpdate) {
  // Created with kubectl create, then kubectl scale changed replicas.
  json created = Config(kWebSpec);
  RecordUpdate(&created, nullptr, "kubectl-create", "apps/v1", kT0, "");
  json scaled = created;
  scaled["spec"]["replicas"] = 7;
  RecordUpdate(&scaled, &created, "kubectl-scale", "apps/v1", kT0, "");
  absl::StatusOr<json> got = Apply(&scaled, Config(R"({"replicas":3})"), Opts("ssa"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1: "
            ".spec.replicas");
  // Same value as live: no conflict, shared with kubectl-scale.
  absl::StatusOr<json> same = Apply(&scaled, Config(R"({"replicas":7})"), Opts("ssa"));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_FALSE(Entry(*same, "kubectl-scale", "Update").is_null());
}

// `kubectl apply` (client-side: a last-applied-configuration annotation and an Update entry of
// "kubectl-client-side-apply"), then `kubectl apply --server-side` with a changed field.
json ClientSideApplied(const json& config) {
  json live = config;
  live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
      config.dump();
  RecordUpdate(&live, nullptr, "kubectl-client-side-apply", "apps/v1", kT0, "");
  return live;
}

TEST(ServerSideApplyTest, KubectlTakesOverWhatItAppliedClientSide) {
  const json live = ClientSideApplied(Config(kWebSpec));
  json config = Config(kWebSpec);
  config["spec"]["replicas"] = 5;
  absl::StatusOr<json> got = Apply(&live, config, Opts("kubectl"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["replicas"], 5);
  // The field moved to kubectl's Apply entry.
  const json csa = Entry(*got, "kubectl-client-side-apply", "Update");
  ASSERT_FALSE(csa.is_null());
  EXPECT_FALSE(csa["fieldsV1"]["f:spec"].contains("f:replicas"));
  EXPECT_TRUE(Entry(*got, "kubectl", "Apply")["fieldsV1"]["f:spec"].contains("f:replicas"));
  // Another manager gets the conflict, as before.
  absl::StatusOr<json> other = Apply(&live, config, Opts("ssa"));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().message(),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using "
            "apps/v1: .spec.replicas");
}

TEST(ServerSideApplyTest, KubectlDoesNotTakeWhatChangedSinceItsClientSideApply) {
  // kubectl scale changed replicas after the client-side apply: not kubectl's to take.
  const json applied = ClientSideApplied(Config(kWebSpec));
  json scaled = applied;
  scaled["spec"]["replicas"] = 7;
  RecordUpdate(&scaled, &applied, "kubectl-scale", "apps/v1", kT0, "");
  json config = Config(kWebSpec);
  config["spec"]["replicas"] = 5;
  config["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2";
  absl::StatusOr<json> got = Apply(&scaled, config, Opts("kubectl"));
  ASSERT_FALSE(got.ok());
  // Only the changed field conflicts; the image (still as applied) would have been taken.
  EXPECT_EQ(got.status().message(),
            "Apply failed with 1 conflict: conflict with \"kubectl-scale\" using apps/v1: "
            ".spec.replicas");
  // No annotation (or one that is not JSON): no take-over.
  json bare = scaled;
  bare["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{";
  config["spec"]["replicas"] = 7;
  absl::StatusOr<json> refused = Apply(&bare, config, Opts("kubectl"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status().message()).find("kubectl-client-side-apply"),
            std::string::npos);
}

TEST(ServerSideApplyTest, StatusSubresourceEntry) {
  json live = *Apply(nullptr, Config(R"({"replicas":3})"), Opts("alice"));
  ApplyOptions opts = Opts("controller");
  opts.subresource = "status";
  json config = Config(R"({"replicas":99})");  // ignored on the status subresource
  config["status"] = json::parse(R"({"readyReplicas":3})");
  absl::StatusOr<json> got = Apply(&live, config, opts);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["replicas"], 3);
  EXPECT_EQ((*got)["status"]["readyReplicas"], 3);
  json entry = Entry(*got, "controller");
  EXPECT_EQ(entry["subresource"], "status");
  EXPECT_EQ(entry["fieldsV1"], json::parse(R"({"f:status":{"f:readyReplicas":{}}})"));
  // A status conflict names the subresource.
  ApplyOptions other = Opts("other");
  other.subresource = "status";
  json config2 = Config("{}");
  config2["status"] = json::parse(R"({"readyReplicas":1})");
  absl::StatusOr<json> conflict = Apply(&*got, config2, other);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(kube::Details(conflict.status()).causes[0].message,
            "conflict with \"controller\" with subresource \"status\"");
}

TEST(ServerSideApplyTest, IgnoreStatusOnMainResource) {
  ApplyOptions opts = Opts("alice");
  opts.ignore_status = true;
  json config = Config(R"({"replicas":1})");
  config["status"] = json::parse(R"({"readyReplicas":3})");
  absl::StatusOr<json> got = Apply(nullptr, config, opts);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->contains("status"));
}

TEST(ServerSideApplyTest, CustomResourceListsAreAtomic) {
  const json cr = json::parse(R"({"apiVersion":"x.dev/v1","kind":"Widget",
      "metadata":{"name":"w"},"spec":{"items":[{"name":"a"},{"name":"b"}],"size":1}})");
  ApplyOptions opts = Opts("alice");
  opts.api_version = "x.dev/v1";
  opts.kind = "Widget";
  opts.name = "w";
  absl::StatusOr<json> live = ServerSideApply(nullptr, cr, opts, nullptr);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(Entry(*live, "alice")["fieldsV1"],
            json::parse(R"({"f:spec":{"f:items":{},"f:size":{}}})"));
  json change = cr;
  change["spec"] = json::parse(R"({"items":[{"name":"a"}]})");
  opts.manager = "bob";
  absl::StatusOr<json> got = ServerSideApply(&*live, change, opts, nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::Details(got.status()).causes[0].field, ".spec.items");
  opts.force = true;
  got = ServerSideApply(&*live, change, opts, nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["spec"]["items"], json::parse(R"([{"name":"a"}])"));
  EXPECT_EQ((*got)["spec"]["size"], 1);
}

// Issue 13 item 6: kube-apiserver 1.20 refuses a Service apply whose ports omit `protocol`
// (a list-map key without a default) with 500; the embedded server accepted it.
TEST(ServerSideApplyTest, ServicePortWithoutProtocolIsRefusedLikeKube120Issue13) {
  ApplyOptions opts = Opts("me");
  opts.api_version = "v1";
  opts.kind = "Service";
  json config = json::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"web","namespace":"default"},
      "spec":{"ports":[{"name":"a","port":80,"protocol":"TCP"},{"name":"b","port":81}]}})");
  const MergeStrategy* services = BuiltinMergeStrategy("", "Service");
  absl::StatusOr<json> refused = ServerSideApply(nullptr, config, opts, services);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(kube::HttpCode(refused.status()), 500);
  EXPECT_EQ(refused.status().message(),
            "Internal error occurred: failed to create typed patch object: .spec.ports: element 1: "
            "associative list with keys has an element that omits key field \"protocol\"");
  config["spec"]["ports"][1]["protocol"] = "UDP";
  absl::StatusOr<json> applied = ServerSideApply(nullptr, config, opts, services);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*applied)["spec"]["ports"].size(), 2u);
  // Only Services' ports: a Deployment's container ports are not checked.
  EXPECT_TRUE(Apply(nullptr, Config(kWebSpec), Opts("me")).ok());
}

TEST(ServerSideApplyTest, NullInConfigurationRemovesField) {
  json live = *Apply(nullptr, Config(R"({"replicas":3,"paused":true})"), Opts("alice"));
  absl::StatusOr<json> got = Apply(&live, Config(R"({"replicas":3,"paused":null})"), Opts("alice"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE((*got)["spec"].contains("paused"));
}

struct BadApplyCase {
  std::string name;
  std::string manager;
  std::string config;
  int want_code;
  std::string want_message;
};

class ServerSideApplyBadInputTest : public testing::TestWithParam<BadApplyCase> {};

TEST_P(ServerSideApplyBadInputTest, Refused) {
  const BadApplyCase& c = GetParam();
  ApplyOptions opts = Opts(c.manager);
  json config = json::parse(c.config);
  absl::StatusOr<json> got = Apply(nullptr, config, opts);
  ASSERT_FALSE(got.ok()) << got->dump();
  EXPECT_EQ(kube::HttpCode(got.status()), c.want_code) << got.status();
  if (!c.want_message.empty()) {
    EXPECT_EQ(got.status().message(), c.want_message);
  }
}

INSTANTIATE_TEST_SUITE_P(
    BadInput, ServerSideApplyBadInputTest,
    testing::ValuesIn(std::vector<BadApplyCase>{
        {"MissingManager", "", R"({"apiVersion":"apps/v1","kind":"Deployment"})", 422,
         "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required "
         "for apply patch"},
        {"ManagerTooLong", std::string(129, 'm'), R"({"apiVersion":"apps/v1","kind":"Deployment"})",
         422, ""},
        {"ManagerNotPrintable", "a\nb", R"({"apiVersion":"apps/v1","kind":"Deployment"})", 422, ""},
        {"NotAnObject", "m", "[1,2]", 400, ""},
        {"KindMismatch", "m",
         R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"web"}})", 400,
         "invalid object type: apps/v1, Kind=StatefulSet"},
        {"VersionMismatch", "m",
         R"({"apiVersion":"v1","kind":"Deployment","metadata":{"name":"web"}})", 400,
         "invalid object type: /v1, Kind=Deployment"},
        {"ManagedFieldsInConfig", "m",
         R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web",
             "managedFields":[]}})",
         400, "metadata.managedFields must be nil"},
        {"NameMismatch", "m",
         R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"other"}})", 400,
         "the name of the object (other) does not match the name on the URL (web)"},
        {"MissingName", "m", R"({"apiVersion":"apps/v1","kind":"Deployment"})", 400,
         "the name of the object () does not match the name on the URL (web)"},
        {"NamespaceMismatch", "m",
         R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web",
             "namespace":"prod"}})",
         400,
         "the namespace of the object (prod) does not match the namespace on the URL (default)"},
        {"ContainerWithoutName", "m",
         R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
             "spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}})",
         400, ""},
        {"DuplicateContainers", "m",
         R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
             "spec":{"template":{"spec":{"containers":[{"name":"a"},{"name":"a"}]}}}})",
         400, ""},
    }),
    [](const testing::TestParamInfo<BadApplyCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ctrlhost::apiserver
