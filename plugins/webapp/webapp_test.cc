// The WebApp controller through the SDK's in-process harness, from the sample fixture.
#include "plugins/webapp/webapp.h"

#include <cstdlib>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::webapp {
namespace {

using sdk::testing::Outcome;
using sdk::testing::RequestBuilder;

constexpr char kSample[] = "plugins/webapp/testdata/webapp.yaml";

class WebAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    records_ = std::make_unique<RecordStore>(std::string(tmp ? tmp : "/tmp") + "/records");
    auto controller = MakeController(records_.get()).Build();
    ASSERT_TRUE(controller.ok()) << controller.status();
    controller_ = *controller;
    auto req = RequestBuilder::FromFile(kSample);
    ASSERT_TRUE(req.ok()) << req.status();
    req_ = std::make_unique<RequestBuilder>(*req);
    req_->Controller("webapp");
  }
  Outcome Reconcile() { return sdk::testing::Reconcile(*controller_, req_->Call()); }

  std::unique_ptr<RecordStore> records_;
  std::shared_ptr<const sdk::Controller> controller_;
  std::unique_ptr<RequestBuilder> req_;
};

TEST_F(WebAppTest, SpecDeclaresOwnsAndFinalizer) {
  const pluginpb::ControllerSpec& spec = controller_->spec();
  EXPECT_EQ(spec.primary().group(), "apps.ctrlhost.dev");
  EXPECT_EQ(spec.primary().kind(), "WebApp");
  ASSERT_EQ(spec.owns_size(), 3);
  EXPECT_EQ(spec.finalizer(), "apps.ctrlhost.dev/external-record");
  EXPECT_TRUE(spec.request_contents().children());
}

TEST_F(WebAppTest, CreatesChildrenAndReportsProgress) {
  Outcome out = Reconcile();
  ASSERT_TRUE(out.ok()) << out.error_message();
  ASSERT_EQ(out.desired.size(), 3u);
  const nlohmann::json* cm = out.Desired("ConfigMap", "shop-config");
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ((*cm)["data"]["GREETING"], "hello");
  EXPECT_EQ((*cm)["metadata"]["namespace"], "default");
  const nlohmann::json* dep = out.Desired("Deployment", "shop");
  ASSERT_NE(dep, nullptr);
  EXPECT_EQ((*dep)["spec"]["replicas"], 2);
  const nlohmann::json& container = (*dep)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "nginx:1.25");
  EXPECT_EQ(container["ports"][0]["containerPort"], 8080);
  EXPECT_EQ(container["env"][0]["name"], "LOG_LEVEL");
  EXPECT_EQ(container["envFrom"][0]["configMapRef"]["name"], "shop-config");
  EXPECT_EQ((*dep)["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"], "shop");
  const nlohmann::json* svc = out.Desired("Service", "shop");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ((*svc)["spec"]["ports"][0]["port"], 8080);
  // Kube 1.20 server-side apply refuses a Service port without its list-map key (protocol).
  EXPECT_EQ((*svc)["spec"]["ports"][0]["protocol"], "TCP");

  EXPECT_EQ(out.status["observedGeneration"], 3);
  EXPECT_EQ(out.status["readyReplicas"], 0);
  EXPECT_EQ(out.status["url"], "http://shop.default.svc:8080");
  EXPECT_EQ(out.Condition("Ready")->status(), pluginpb::CONDITION_STATUS_FALSE);
  EXPECT_EQ(out.Condition("Progressing")->status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(out.Condition("Progressing")->reason(), "RollingOut");

  // The external record exists.
  std::optional<nlohmann::json> record = records_->Read("default", "shop");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ((*record)["image"], "nginx:1.25");
  EXPECT_EQ((*record)["uid"], "0b6c2d9e-4a51-4f0e-9a7e-5b1f3c2d1a00");
}

TEST_F(WebAppTest, ReadyOnceTheDeploymentIsAndStableAcrossRounds) {
  Outcome first = Reconcile();
  req_->ChildrenFrom(first);
  Outcome second = Reconcile();
  // Same request, same answer (level-based).
  EXPECT_EQ(second.desired, first.desired);
  // The Deployment reports its replicas ready.
  nlohmann::json dep = *first.Desired("Deployment", "shop");
  dep["status"]["readyReplicas"] = 2;
  RequestBuilder with_ready = *RequestBuilder::FromFile(kSample);
  with_ready.Child(*first.Desired("ConfigMap", "shop-config"))
      .Child(*first.Desired("Service", "shop"))
      .Child(dep);
  Outcome out = sdk::testing::Reconcile(*controller_, with_ready.Call());
  EXPECT_EQ(out.status["readyReplicas"], 2);
  EXPECT_EQ(out.Condition("Ready")->status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(out.Condition("Ready")->reason(), "AllReplicasReady");
  EXPECT_EQ(out.Condition("Progressing")->status(), pluginpb::CONDITION_STATUS_FALSE);
}

TEST_F(WebAppTest, ConfigChangeRestartsPods) {
  Outcome before = Reconcile();
  nlohmann::json changed = req_->primary();
  changed["spec"]["config"]["GREETING"] = "bonjour";
  req_->Primary(changed);
  Outcome after = Reconcile();
  auto hash = [](const Outcome& o) {
    return (*o.Desired(
        "Deployment",
        "shop"))["spec"]["template"]["metadata"]["annotations"]["apps.ctrlhost.dev/config-hash"];
  };
  EXPECT_NE(hash(before), hash(after));
}

TEST_F(WebAppTest, InvalidSpecIsTerminalWithACondition) {
  for (const char* patch : {R"({"image": ""})", R"({"replicas": -1})", R"({"port": 70000})",
                            R"({"port": "http"})", R"({"env": {"A": 1}})", R"({"config": [1]})"}) {
    SCOPED_TRACE(patch);
    nlohmann::json bad = req_->primary();
    bad["spec"].merge_patch(nlohmann::json::parse(patch));
    RequestBuilder req(bad);
    Outcome out = sdk::testing::Reconcile(*controller_, req.Call());
    EXPECT_TRUE(out.terminal());
    EXPECT_TRUE(out.desired.empty());
    ASSERT_NE(out.Condition("Ready"), nullptr);
    EXPECT_EQ(out.Condition("Ready")->reason(), "InvalidSpec");
    EXPECT_TRUE(out.HasEvent("InvalidSpec"));
  }
  // No spec at all.
  nlohmann::json empty = req_->primary();
  empty.erase("spec");
  EXPECT_TRUE(sdk::testing::Reconcile(*controller_, RequestBuilder(empty).Call()).terminal());
}

TEST_F(WebAppTest, FinalizingRemovesTheRecordThenReleasesTheFinalizer) {
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(records_->Read("default", "shop").has_value());
  req_->Finalizing();
  Outcome out = Reconcile();
  EXPECT_TRUE(out.ok()) << out.error_message();
  EXPECT_TRUE(out.finalized());
  EXPECT_TRUE(out.HasEvent("RecordRemoved"));
  EXPECT_TRUE(out.desired.empty());
  EXPECT_FALSE(records_->Read("default", "shop").has_value());
  // Again (e.g. the answer was lost): still finalized, nothing to remove.
  EXPECT_TRUE(Reconcile().finalized());
  // The deletion notice afterwards needs nothing.
  EXPECT_TRUE(
      sdk::testing::Reconcile(*controller_, RequestBuilder::Gone("default", "shop").Call()).ok());
}

TEST_F(WebAppTest, RecordProblemsAreErrors) {
  RecordStore unwritable("/proc/ctrlhost-no-such-dir");
  auto controller = *MakeController(&unwritable).Build();
  Outcome out = sdk::testing::Reconcile(*controller, req_->Call());
  EXPECT_TRUE(out.retryable());
  EXPECT_EQ(out.desired.size(), 3u);  // Children and status are still applied.
  EXPECT_FALSE(records_->PathFor("default", "../etc").ok());
  EXPECT_FALSE(records_->PathFor("Default", "x").ok());
}

}  // namespace
}  // namespace ctrlhost::webapp
