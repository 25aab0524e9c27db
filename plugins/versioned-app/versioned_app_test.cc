// The VersionedApp controller through the SDK's in-process harness: routing, the chain and its
// hold precondition, the Deployment's stage callbacks, the standard status, the hold file.
#include "plugins/versioned-app/versioned_app.h"

#include <cstdlib>
#include <fstream>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::versioned_app {
namespace {

using sdk::testing::Outcome;
using sdk::testing::RequestBuilder;

constexpr char kSample[] = "plugins/versioned-app/samples/versionedapp.yaml";

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

class VersionedAppTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hold_file_ = TempPath("hold");
    WriteFile(hold_file_, "");
    auto controller = MakeController(hold_file_).Build();
    ASSERT_TRUE(controller.ok()) << controller.status();
    controller_ = *controller;
    auto req = RequestBuilder::FromFile(kSample);
    ASSERT_TRUE(req.ok()) << req.status();
    req_ = std::make_unique<RequestBuilder>(*req);
    req_->Controller("versioned-app");
  }
  Outcome Reconcile() { return sdk::testing::Reconcile(*controller_, req_->Call()); }
  void SetVersion(const std::string& version) {
    nlohmann::json primary = req_->primary();
    primary["spec"]["version"] = version;
    req_->Primary(primary);
  }
  // Reconciles until the answer no longer changes the children (at most 5 rounds).
  Outcome Converge() {
    Outcome out = Reconcile();
    for (int i = 0; i < 5 && out.ok(); ++i) {
      req_->ChildrenFrom(out);
      out = Reconcile();
    }
    return out;
  }

  std::string hold_file_;
  std::shared_ptr<const sdk::Controller> controller_;
  std::unique_ptr<RequestBuilder> req_;
};

TEST_F(VersionedAppTest, SpecDeclaresOwnsAndTheTask) {
  const pluginpb::ControllerSpec& spec = controller_->spec();
  EXPECT_EQ(spec.primary().group(), "ref.ctrlhost.dev");
  EXPECT_EQ(spec.primary().kind(), "VersionedApp");
  EXPECT_EQ(spec.owns_size(), 4);
  ASSERT_EQ(spec.background_tasks_size(), 1);
  EXPECT_EQ(spec.background_tasks(0).name(), "hold-file");
}

TEST_F(VersionedAppTest, V1CreatesInChainOrderAndBecomesDeployed) {
  Outcome first = Reconcile();
  ASSERT_TRUE(first.ok()) << first.error_message();
  // The chain creates the Deployment only once the ConfigMap exists.
  ASSERT_EQ(first.desired.size(), 1u);
  EXPECT_NE(first.Desired("ConfigMap", "shop-config"), nullptr);
  EXPECT_EQ(first.status["phase"], "Deploying");
  EXPECT_EQ(first.status["resourceSet"], "v1");
  EXPECT_EQ(first.Condition("Available")->status(), pluginpb::CONDITION_STATUS_FALSE);

  req_->ChildrenFrom(first);
  Outcome second = Reconcile();
  ASSERT_TRUE(second.ok()) << second.error_message();
  const nlohmann::json* dep = second.Desired("Deployment", "shop");
  ASSERT_NE(dep, nullptr);
  EXPECT_TRUE(second.HasEvent("DeploymentCreated"));
  EXPECT_EQ((*dep)["metadata"]["labels"]["app.kubernetes.io/version"], "1.4.0");
  const nlohmann::json& pod = (*dep)["spec"]["template"];
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.example/app:1.4.0");
  EXPECT_EQ(pod["spec"]["containers"][0]["ports"].size(), 1u);
  EXPECT_FALSE(pod["spec"].contains("serviceAccountName"));
  EXPECT_TRUE(pod["metadata"]["annotations"].contains("ctrlhost.dev/config-hash"));
  EXPECT_EQ(second.Desired("ServiceAccount", "shop"), nullptr);

  Outcome done = Converge();
  ASSERT_TRUE(done.ok()) << done.error_message();
  EXPECT_FALSE(done.HasEvent("DeploymentCreated"));  // created once only
  EXPECT_EQ(done.status["phase"], "Deployed");
  EXPECT_EQ(done.status["observedVersion"], "1.4.0");
  EXPECT_EQ(done.status["operatorVersion"], kOperatorVersion);
  EXPECT_EQ(done.status["observedGeneration"], 1);
  EXPECT_EQ(done.Condition("Available")->status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(done.Condition("Degraded")->status(), pluginpb::CONDITION_STATUS_FALSE);
}

TEST_F(VersionedAppTest, V2GoesToItsOwnSetAndUpgradesWithoutDegraded) {
  ASSERT_EQ(Converge().status["phase"], "Deployed");
  // The status the host wrote for that answer.
  nlohmann::json primary = req_->primary();
  primary["status"] = {{"observedVersion", "1.4.0"},
                       {"conditions", {{{"type", "Available"}, {"status", "True"}}}}};
  req_->Primary(primary);
  SetVersion("2.0.0");
  Outcome up = Reconcile();
  ASSERT_TRUE(up.ok()) << up.error_message();
  EXPECT_EQ(up.status["resourceSet"], "v2");
  EXPECT_EQ(up.status["phase"], "Upgrading");
  EXPECT_EQ(up.Condition("Available")->status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(up.Condition("Degraded")->status(), pluginpb::CONDITION_STATUS_FALSE);
  Outcome done = Converge();
  ASSERT_TRUE(done.ok()) << done.error_message();
  EXPECT_EQ(done.status["phase"], "Deployed");
  EXPECT_EQ(done.status["observedVersion"], "2.0.0");
  EXPECT_NE(done.Desired("ServiceAccount", "shop"), nullptr);
  const nlohmann::json* svc = done.Desired("Service", "shop");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ((*svc)["spec"]["ports"].size(), 2u);
  const nlohmann::json* dep = done.Desired("Deployment", "shop");
  ASSERT_NE(dep, nullptr);
  EXPECT_EQ((*dep)["spec"]["template"]["spec"]["serviceAccountName"], "shop");
}

TEST_F(VersionedAppTest, DowngradeIsRefusedByThePreUpdateCallback) {
  SetVersion("2.1.0");
  ASSERT_EQ(Converge().status["phase"], "Deployed");
  SetVersion("1.9.0");
  Outcome out = Reconcile();
  EXPECT_TRUE(out.terminal());
  EXPECT_NE(out.error_message().find("callback refuse-downgrade at pre-update: downgrade from "
                                     "2.1.0 to 1.9.0 refused"),
            std::string::npos)
      << out.error_message();
  EXPECT_EQ(out.Desired("Deployment", "shop"), nullptr);
  EXPECT_TRUE(out.HasEvent("DowngradeRefused"));
  EXPECT_EQ(out.status["phase"], "Error");
  EXPECT_EQ(out.Condition("Degraded")->status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(out.Condition("Degraded")->reason(), "DowngradeRefused");
}

TEST_F(VersionedAppTest, HoldCancelsThePassAfterTheConfigMap) {
  WriteFile(hold_file_, "# maintenance\ndefault/shop\n");
  Outcome out = Converge();
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_NE(out.Desired("ConfigMap", "shop-config"), nullptr);
  EXPECT_EQ(out.Desired("Deployment", "shop"), nullptr);
  EXPECT_EQ(out.Condition("DependentsReady")->reason(), "Cancelled");
  EXPECT_EQ(out.status["phase"], "Deploying");
  WriteFile(hold_file_, "");
  out = Converge();
  EXPECT_NE(out.Desired("Deployment", "shop"), nullptr);
  EXPECT_EQ(out.status["phase"], "Deployed");
}

TEST_F(VersionedAppTest, InvalidVersionsAreTerminal) {
  for (const char* version : {"1.2", "x.1.0", "3.0.0"}) {
    SetVersion(version);
    Outcome out = Reconcile();
    EXPECT_TRUE(out.terminal()) << version;
    EXPECT_TRUE(out.HasEvent("InvalidSpec")) << version;
    EXPECT_EQ(out.status["phase"], "Error") << version;
    EXPECT_TRUE(out.desired.empty()) << version;
  }
}

TEST(HoldFileTest, ReadsKeysAndReportsMalformedLines) {
  const std::string path = TempPath("hold-parse");
  WriteFile(path, "default/a\n  # comment\n\nshop/b \nno-slash\nA/b\na/b/c\n");
  absl::StatusOr<HoldList> list = ReadHoldFile(path);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->keys, (std::set<std::string>{"default/a", "shop/b"}));
  EXPECT_EQ(list->malformed, (std::vector<std::string>{"no-slash", "A/b", "a/b/c"}));
  absl::StatusOr<HoldList> missing = ReadHoldFile(TempPath("no-such-file"));
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->keys.empty());
}

TEST(SemVerTest, ParsesAndOrders) {
  ASSERT_TRUE(ParseSemVer("1.10.0").ok());
  EXPECT_TRUE(*ParseSemVer("1.9.0") < *ParseSemVer("1.10.0"));
  EXPECT_FALSE(*ParseSemVer("2.0.0") < *ParseSemVer("1.99.99"));
  EXPECT_FALSE(ParseSemVer("1.0.-1").ok());
  EXPECT_FALSE(ParseSemVer("1.0.0.0").ok());
  EXPECT_FALSE(ParseSemVer("1..0").ok());
}

}  // namespace
}  // namespace ctrlhost::versioned_app
