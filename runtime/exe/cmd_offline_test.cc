// `ctrlhost test` against real plugin processes: the webapp reference plugin and the
// configurable test plugin (runtime/plugin/testing/test_plugin_main).
#include "runtime/exe/cmd_offline.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/yaml_json.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Runfile(const std::string& relative) {
  char cwd[4096];
  return absl::StrCat(getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".", "/", relative);
}

const std::string& Webapp() {
  static const std::string* path = new std::string(Runfile("plugins/webapp/webapp"));
  return *path;
}
const std::string& TestPlugin() {
  static const std::string* path =
      new std::string(Runfile("runtime/plugin/testing/test_plugin_main"));
  return *path;
}
const std::string& Sample() {
  static const std::string* path = new std::string(Runfile("plugins/webapp/testdata/webapp.yaml"));
  return *path;
}

// The plugin processes inherit this environment, set before main() so that no thread reads it
// while it changes. Under --config=tsan the webapp binary is instrumented but not linked with
// the suppressions this test links (races inside Debian's uninstrumented gRPC and Abseil): they
// get the same list through TSAN_OPTIONS, which TSan reads at process start only (so this test
// is unaffected; other builds ignore it). The webapp plugin keeps finalizer records in
// WEBAPP_RECORD_DIR.
const bool kChildEnvironment = [] {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = tmp != nullptr ? tmp : "/tmp";
  const std::string suppressions = (dir / "cmd_offline_tsan.supp").string();
  std::ofstream(suppressions) << "called_from_lib:libgrpc.so\ncalled_from_lib:libgrpc++.so\n"
                              << "called_from_lib:libgpr.so\nrace:libabsl_*.so*\n";
  setenv("TSAN_OPTIONS", ("halt_on_error=1 suppressions=" + suppressions).c_str(), 1);
  setenv("WEBAPP_RECORD_DIR", (dir / "webapp-records").c_str(), 1);
  return true;
}();

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

class TestCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }

  std::string Write(const std::string& relative, const std::string& text) {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  Result Run(std::vector<std::string> args) {
    std::ostringstream out, err;
    args.push_back("--log-level=error");
    Result r;
    r.code = RunTestCommand(args, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  fs::path root_;
};

// The objects of `desired_objects` by kind.
nlohmann::json DesiredByKind(const nlohmann::json& response) {
  nlohmann::json byKind = nlohmann::json::object();
  for (const nlohmann::json& o : response.at("desired_objects")) byKind[o.at("kind")] = o;
  return byKind;
}

TEST_F(TestCommandTest, WebappSampleYieldsChildrenAndStatusAsYaml) {
  Result r = Run({"--plugin", Webapp(), "--object", Sample()});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  absl::StatusOr<nlohmann::json> json = common::YamlToJson(r.out);
  ASSERT_TRUE(json.ok()) << json.status() << "\n" << r.out;
  nlohmann::json byKind = DesiredByKind(*json);
  ASSERT_TRUE(byKind.contains("Deployment")) << r.out;
  ASSERT_TRUE(byKind.contains("Service")) << r.out;
  ASSERT_TRUE(byKind.contains("ConfigMap")) << r.out;
  EXPECT_EQ(byKind["Deployment"]["metadata"]["name"], "shop");
  EXPECT_EQ(byKind["Deployment"]["spec"]["replicas"], 2);
  EXPECT_EQ(byKind["Service"]["apiVersion"], "v1");
  EXPECT_EQ(byKind["ConfigMap"]["data"]["GREETING"], "hello");
  // Objects, not base64.
  ASSERT_TRUE((*json)["status"].is_object()) << r.out;
  EXPECT_EQ((*json)["status"]["readyReplicas"], 0);
  EXPECT_EQ((*json)["status"]["observedGeneration"], 3);
  ASSERT_TRUE((*json)["conditions"].is_array()) << r.out;
}

TEST_F(TestCommandTest, ChildrenFixtureGivesReadyReplicas) {
  Write("children/deployment.yaml", R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: default
spec:
  replicas: 2
status:
  readyReplicas: 2
---
# Not owned by the webapp controller: skipped.
apiVersion: v1
kind: Secret
metadata:
  name: other
  namespace: default
)");
  Result r = Run({"--plugin", Webapp(), "--object", Sample(), "--children",
                  (root_ / "children").string(), "-o", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json json = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(json.is_object()) << r.out;
  EXPECT_EQ(json["status"]["readyReplicas"], 2) << r.out;
  bool ready = false;
  for (const nlohmann::json& c : json["conditions"]) {
    if (c["type"] == "Ready")
      ready = c["status"] == "CONDITION_STATUS_TRUE" || c["status"] == "True";
  }
  EXPECT_TRUE(ready) << r.out;
}

TEST_F(TestCommandTest, CheckAcceptsAValidResponse) {
  Result r = Run({"--plugin", Webapp(), "--object", Sample(), "--check"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
}

TEST_F(TestCommandTest, CheckRefusesChildrenWithoutANamespace) {
  // Without a namespace the primary reads as cluster-scoped, so the namespaced children the
  // plugin desires have nowhere to go: the applier would refuse the response.
  const std::string object = Write("webapp.json", R"({"apiVersion": "apps.ctrlhost.dev/v1alpha1",
    "kind": "WebApp", "metadata": {"name": "shop"},
    "spec": {"image": "nginx:1.25", "replicas": 1, "port": 8080}})");
  Result r = Run({"--plugin", Webapp(), "--object", object, "--check"});
  EXPECT_EQ(r.code, kExitInvalidResponse) << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: the host would refuse this response: desired_objects["));
  EXPECT_THAT(r.out, HasSubstr("desired_objects:")) << "the response is still printed";
}

// First contact (a Go plugin's author): a condition on a ConfigMap, which has no status, passed
// --check while the host's applier now refuses it (as a real cluster would drop it).
TEST_F(TestCommandTest, RegressionCheckRefusesStatusOnAKindWithoutAStatusSubresource) {
  const std::string seen = Write("seen.yaml",
                                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: greet, "
                                 "namespace: default, labels: {hello: \"true\"}}\n");
  Result r =
      Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", seen, "--check"});
  EXPECT_EQ(r.code, kExitInvalidResponse) << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: the host would refuse this response: status: kind v1 "
                               "ConfigMap has no status subresource, so it has no status to "
                               "write; record the outcome with an event instead"));
  // A child and an event instead: accepted.
  const std::string desire =
      Write("desire.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desire-greet-copy, "
            "namespace: default, uid: u-1, labels: {hello: \"true\"}}\n");
  r = Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", desire, "--check"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  // The same status on a custom kind (status subresource assumed) passes.
  EXPECT_EQ(
      Run({"--plugin", TestPlugin(), "--object", Sample(), "--controller", "echo", "--check"}).code,
      kExitOk);
}

// First contact (a Go plugin's author): `ctrlhost test` reconciled a primary outside the
// controller's label selector, which the host never does.
TEST_F(TestCommandTest, RegressionAPrimaryOutsideTheLabelSelectorIsRefused) {
  const std::string unlabelled =
      Write("cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desire-copy, namespace: "
            "default, labels: {hello: \"no\"}}\n");
  Result r = Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", unlabelled});
  EXPECT_EQ(r.code, kExitFailure) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("error: the object's labels {hello=no} do not match controller "
                               "hello's label selector \"hello=true\": the host would never "
                               "reconcile it"));
}

// First contact (a Go plugin's author): a child fixture without an owner reference was handed
// to the plugin as is (the host's children always carry the controller reference), and one
// the primary does not control was a child too, while the host refuses to apply over it
// (NotControlled). Fixtures without ownerReferences now get the reference; others are not
// children, and --check refuses desiring them with the host's message.
TEST_F(TestCommandTest, RegressionChildrenAreJudgedAsTheHostJudgesThem) {
  const std::string primary =
      Write("cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: desire-copy, namespace: "
            "default, uid: u-primary, labels: {hello: \"true\"}}\n");
  const std::string children = (root_ / "children").string();
  Write("children/mine.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, namespace: default}\n");
  Result r = Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", primary,
                  "--children", children, "-o", "json", "--check"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["events"][0]["message"], "mine:u-primary") << r.out;

  // The ConfigMap the plugin desires exists, made by hand: not a child, and not adopted.
  Write("children/copy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: copy, namespace: default, "
        "ownerReferences: []}\n");
  r = Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", primary,
           "--children", children, "-o", "json", "--check"});
  EXPECT_EQ(r.code, kExitInvalidResponse) << r.err;
  json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["events"][0]["message"], "mine:u-primary") << r.out;  // copy was not passed
  EXPECT_THAT(r.err, HasSubstr("error: the host would refuse this response: desired_objects[0]: "
                               "ConfigMap configmaps default/copy exists and has no controller; "
                               "ConfigMap default/desire-copy does not adopt it (the protocol "
                               "has no adoption): delete it (ConfigMap default/desire-copy is "
                               "reconciled again when it is gone) or rename the child"));

  // Controlled by another object: the same, naming its uid.
  Write("children/copy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: copy, namespace: default, "
        "ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: other, uid: u-other, "
        "controller: true}]}\n");
  r = Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", primary,
           "--children", children, "--check"});
  EXPECT_EQ(r.code, kExitInvalidResponse) << r.err;
  EXPECT_THAT(r.err, HasSubstr("exists and is controlled by another object (uid u-other)"));

  // Controlled by the primary: a child, and applying over it is fine.
  Write("children/copy.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: copy, namespace: default, "
        "ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: desire-copy, uid: u-primary, "
        "controller: true}]}\n");
  r = Run({"--plugin", TestPlugin(), "--arg=--describe=configmap", "--object", primary,
           "--children", children, "-o", "json", "--check"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["events"][0]["message"], "copy:u-primary,mine:u-primary") << r.out;
}

TEST_F(TestCommandTest, FinalizingRequestIsAnsweredFinalized) {
  Result r = Run({"--plugin", Webapp(), "--object", Sample(), "--finalizing", "--check"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  absl::StatusOr<nlohmann::json> json = common::YamlToJson(r.out);
  ASSERT_TRUE(json.ok()) << r.out;
  EXPECT_EQ((*json)["finalized"], true) << r.out;
}

TEST_F(TestCommandTest, TestPluginWithControllerFlag) {
  const std::string object = Write("echo.yaml", R"(apiVersion: example.com/v1
kind: Echo
metadata:
  name: hello
  namespace: ns
)");
  Result r =
      Run({"--plugin", TestPlugin(), "--object", object, "--controller", "other", "-o", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  nlohmann::json json = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(json["status"], nlohmann::json({{"seen", "hello"}})) << r.out;
}

TEST_F(TestCommandTest, AmbiguousControllerListsThem) {
  const std::string object =
      Write("echo.yaml", "apiVersion: example.com/v1\nkind: Echo\nmetadata: {name: x}\n");
  Result r = Run({"--plugin", TestPlugin(), "--object", object});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("several controllers of the plugin reconcile example.com/v1 Echo: "
                               "echo, other; choose one with --controller"));
  EXPECT_EQ(r.out, "");
}

TEST_F(TestCommandTest, NoMatchingControllerListsThem) {
  Result r = Run({"--plugin", TestPlugin(), "--object", Sample()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("no controller of the plugin reconciles apps.ctrlhost.dev/v1alpha1 "
                               "WebApp; its controllers: echo (example.com/v1 Echo), other "
                               "(example.com/v1 Echo)"));
  r = Run({"--plugin", TestPlugin(), "--object", Sample(), "--controller", "nope"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("the plugin has no controller named \"nope\""));
}

TEST_F(TestCommandTest, MissingPluginBinary) {
  Result r = Run({"--plugin", (root_ / "no-such-plugin").string(), "--object", Sample()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("error: plugin "));
  EXPECT_THAT(r.err, HasSubstr("no-such-plugin"));
}

TEST_F(TestCommandTest, PluginExitingAtStart) {
  Result r = Run({"--plugin", TestPlugin(), "--arg=--exit-at-start=7", "--object", Sample()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("did not become ready"));
  EXPECT_THAT(r.err, HasSubstr("exited with code 7"));
}

TEST_F(TestCommandTest, PluginNeverListening) {
  Result r = Run(
      {"--plugin", "/bin/sleep", "--arg", "60", "--ready-timeout", "300ms", "--object", Sample()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("error: plugin /bin/sleep did not become ready: plugin did not "
                               "listen on "));
}

TEST_F(TestCommandTest, PluginFailingTheHandshake) {
  Result r = Run({"--plugin", TestPlugin(), "--arg=--describe=bad-version", "--object", Sample()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("did not become ready"));
}

TEST_F(TestCommandTest, PluginCrashingInReconcile) {
  const std::string object =
      Write("echo.yaml", "apiVersion: example.com/v1\nkind: Echo\nmetadata: {name: x}\n");
  Result r = Run({"--plugin", TestPlugin(), "--arg=--crash-after=1", "--object", object,
                  "--controller", "echo"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("failed the reconcile of Echo x (controller echo)"));
  EXPECT_THAT(r.err, HasSubstr("exited with code 42"));
}

TEST_F(TestCommandTest, PluginMissingTheDeadline) {
  const std::string object =
      Write("hang.yaml", "apiVersion: example.com/v1\nkind: Echo\nmetadata: {name: hang}\n");
  Result r = Run(
      {"--plugin", TestPlugin(), "--object", object, "--controller", "echo", "--timeout", "300ms"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("failed the reconcile of Echo hang"));
  EXPECT_THAT(r.err, HasSubstr("deadline"));
}

TEST_F(TestCommandTest, MalformedYamlNamesFileAndLine) {
  const std::string object =
      Write("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n");
  Result r = Run({"--plugin", Webapp(), "--object", object});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("error: ", object, ": yaml: line ")));
  EXPECT_EQ(r.out, "");
}

TEST_F(TestCommandTest, BadChildFixtureNamesTheDocument) {
  Write("children/a.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n- 1\n");
  Result r = Run(
      {"--plugin", Webapp(), "--object", Sample(), "--children", (root_ / "children").string()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("children/a.yaml (document 2): expected a Kubernetes object, got "
                               "a array"));
}

TEST_F(TestCommandTest, FixtureErrors) {
  Result r = Run({"--plugin", Webapp(), "--object", (root_ / "missing.yaml").string()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("missing.yaml: no such file"));

  const std::string two = Write("two.yaml",
                                "apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n"
                                "apiVersion: v1\nkind: B\nmetadata: {name: b}\n");
  r = Run({"--plugin", Webapp(), "--object", two});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("expected exactly one object, found 2 documents"));

  const std::string no_kind = Write("nokind.yaml", "apiVersion: v1\nmetadata: {name: a}\n");
  r = Run({"--plugin", Webapp(), "--object", no_kind});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("nokind.yaml: kind is missing"));

  const std::string no_name = Write("noname.yaml", "apiVersion: v1\nkind: A\nmetadata: {}\n");
  r = Run({"--plugin", Webapp(), "--object", no_name});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("noname.yaml: "));

  r = Run({"--plugin", Webapp(), "--object", Sample(), "--children", (root_ / "nodir").string()});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, HasSubstr("nodir: no such directory"));
}

TEST_F(TestCommandTest, UsageErrors) {
  Result r = Run({"--plugin", Webapp(), "--object", Sample(), "--objekt", "x"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("unknown flag --objekt for \"ctrlhost test\" (did you mean "
                               "--object?)"));
  r = Run({"--object", Sample()});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("missing required flag --plugin"));
  r = Run({"--plugin", Webapp(), "--object", Sample(), "-o", "xml"});
  EXPECT_EQ(r.code, kExitUsage);
  r = Run({"--plugin", Webapp(), "--object", Sample(), "--attempt", "0"});
  EXPECT_EQ(r.code, kExitUsage);
  r = Run({"--plugin", Webapp(), "--object", Sample(), "--env", "NOEQUALS"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("expected KEY=VALUE"));
}

TEST(ResponseToJsonTest, BytesFieldsAreObjects) {
  pluginpb::ReconcileResponse response;
  response.set_request_id(4);
  response.add_desired_objects(R"({"kind":"ConfigMap"})");
  response.add_desired_objects("not json \xff");
  response.set_status(R"({"phase":"Ready"})");
  pluginpb::Patch* patch = response.add_patches();
  patch->set_target(pluginpb::PATCH_TARGET_PRIMARY);
  patch->set_type(pluginpb::PATCH_TYPE_JSON_PATCH);
  patch->set_patch(R"([{"op":"remove","path":"/spec/x"}])");
  absl::StatusOr<nlohmann::json> json = ResponseToJson(response);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["desired_objects"][0], nlohmann::json({{"kind", "ConfigMap"}}));
  EXPECT_TRUE((*json)["desired_objects"][1].is_string());
  EXPECT_EQ((*json)["status"]["phase"], "Ready");
  EXPECT_EQ((*json)["patches"][0]["patch"][0]["op"], "remove");
  EXPECT_EQ((*json)["patches"][0]["target"], "PATCH_TARGET_PRIMARY");
  EXPECT_EQ((*json)["request_id"], "4");
  // Nesting deeper than the renderers can take stays text.
  pluginpb::ReconcileResponse deep;
  deep.set_status(std::string(100000, '[') + std::string(100000, ']'));
  absl::StatusOr<nlohmann::json> deep_json = ResponseToJson(deep);
  ASSERT_TRUE(deep_json.ok());
  EXPECT_TRUE((*deep_json)["status"].is_string());
  // Renderable both ways.
  EXPECT_THAT(common::JsonToYaml(*json), HasSubstr("phase: Ready"));
}

}  // namespace
}  // namespace ctrlhost::exe
