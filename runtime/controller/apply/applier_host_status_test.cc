// The applier against the embedded API server for a controller that opted in to the
// host-computed standard status (ControllerInfo::host_status; host_status.h).
#include <string>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/apply/testing/applier_fixture.h"
#include "runtime/controller/apply/testing/test_controllers.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::ApplierTest;
using testing::ConfigMapJson;

std::string DeploymentJson(int replicas) {
  return json{{"apiVersion", "apps/v1"},
              {"kind", "Deployment"},
              {"metadata", {{"name", "web"}}},
              {"spec",
               {{"replicas", replicas},
                {"selector", {{"matchLabels", {{"app", "web"}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", "web"}}}}},
                  {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "i"}}})}}}}}}}}
      .dump();
}

class HostStatusTest : public ApplierTest {
 protected:
  void SetUp() override {
    ApplierTest::SetUp();
    webapp_.host_status = true;
  }
  std::string StatusOf(const json& live, const std::string& type) {
    json c = Condition(live, type);
    return c.is_null() ? "<none>" : c["status"].get<std::string>() + "/" + c.value("reason", "");
  }
};

TEST_F(HostStatusTest, ConvergedWithAReadyChildAndNoWriteWhenUnchanged) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse response;  // the plugin sets no status at all
  response.add_desired_objects(ConfigMapJson("web-config"));
  ApplyOutcome outcome = applier_.Apply(CachedContext("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  // The status follows from the cache, which did not hold the ConfigMap yet: reconcile again
  // with the cache filled, as the watch event of the child would.
  outcome = applier_.Apply(CachedContext("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  json live = Live("web");
  EXPECT_EQ(StatusOf(live, "Available"), "True/AsExpected");
  EXPECT_EQ(StatusOf(live, "Progressing"), "False/AsExpected");
  EXPECT_EQ(StatusOf(live, "Degraded"), "False/AsExpected");
  EXPECT_EQ(StatusOf(live, "Ready"), "True/AsExpected");
  EXPECT_EQ(StatusOf(live, "Reconciling"), "False/AsExpected");
  EXPECT_EQ(StatusOf(live, "Stalled"), "False/AsExpected");
  EXPECT_EQ(live["status"]["observedGeneration"], live["metadata"]["generation"]);
  const std::string rv = live["metadata"]["resourceVersion"];

  clock_.Advance(absl::Minutes(1));
  outcome = applier_.Apply(CachedContext("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 0u);
  EXPECT_EQ(Live("web")["metadata"]["resourceVersion"], rv);
}

TEST_F(HostStatusTest, DeploymentNotAvailableIsProgressing) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(DeploymentJson(2));  // no deployment controller: 0 available
  ASSERT_EQ(applier_.Apply(CachedContext("web"), response).kind, OutcomeKind::kDone);
  ASSERT_EQ(applier_.Apply(CachedContext("web"), response).kind, OutcomeKind::kDone);
  json live = Live("web");
  EXPECT_EQ(StatusOf(live, "Available"), "False/ChildrenNotReady");
  EXPECT_EQ(StatusOf(live, "Progressing"), "True/ChildrenNotReady");
  EXPECT_EQ(StatusOf(live, "Reconciling"), "True/ChildrenNotReady");
  EXPECT_EQ(Condition(live, "Available")["message"],
            "waiting for Deployment web: generation 1 not yet observed");  // no controller
}

TEST_F(HostStatusTest, TerminalErrorIsDegradedAndThePluginsOwnTypesWin) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse terminal;
  terminal.mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
  terminal.mutable_error()->set_message("spec.image is not allowed");
  pluginpb::Condition mine;
  mine.set_type("Available");
  mine.set_status(pluginpb::CONDITION_STATUS_FALSE);
  mine.set_reason("PluginSays");
  *terminal.add_conditions() = mine;
  EXPECT_EQ(applier_.Apply(CachedContext("web"), terminal).kind, OutcomeKind::kTerminal);
  json live = Live("web");
  EXPECT_EQ(StatusOf(live, "Degraded"), "True/TerminalError");
  EXPECT_EQ(StatusOf(live, "Stalled"), "True/TerminalError");
  EXPECT_EQ(StatusOf(live, "Available"), "False/PluginSays");
  EXPECT_EQ(Condition(live, "Degraded")["message"], "spec.image is not allowed");
}

TEST_F(HostStatusTest, TransientErrorIsNotDegraded) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse retryable;
  retryable.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  retryable.mutable_error()->set_message("database unreachable");
  EXPECT_EQ(applier_.Apply(CachedContext("web"), retryable).kind, OutcomeKind::kRetry);
  json live = Live("web");
  EXPECT_EQ(StatusOf(live, "Degraded"), "False/AsExpected");
  EXPECT_EQ(StatusOf(live, "Progressing"), "True/Retrying");
  ReconcileContext persistent = CachedContext("web");
  persistent.attempt = 4;  // the fifth in a row
  EXPECT_EQ(applier_.Apply(persistent, retryable).kind, OutcomeKind::kRetry);
  live = Live("web");
  EXPECT_EQ(StatusOf(live, "Degraded"), "True/PersistentError");
}

TEST_F(HostStatusTest, OffByDefault) {
  webapp_.host_status = false;
  CreateWebApp("web");
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("web-config"));
  ASSERT_EQ(applier_.Apply(CachedContext("web"), response).kind, OutcomeKind::kDone);
  EXPECT_EQ(StatusOf(Live("web"), "Available"), "<none>");
}

}  // namespace
}  // namespace ctrlhost::controller::apply
