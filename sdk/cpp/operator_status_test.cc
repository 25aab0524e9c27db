#include "sdk/cpp/operator_status.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::sdk {
namespace {

// type -> "True/False Reason"
std::map<std::string, std::string> Conditions(const Result& result) {
  std::map<std::string, std::string> out;
  for (const Result::Condition& c : result.conditions()) {
    out[c.type] =
        std::string(c.status == ConditionStatus::kTrue ? "True" : "False") + " " + c.reason;
  }
  return out;
}

Result RunStatus(const std::string& status_yaml, OperatorStatusInput input, bool deleting = false) {
  std::string yaml =
      "apiVersion: example.com/v1\nkind: App\nmetadata: {name: a, namespace: n, generation: 3" +
      std::string(deleting ? ", deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: [x]" : "") +
      "}\n" + status_yaml;
  absl::StatusOr<Request> req = Request::FromCall(testing::RequestBuilder::FromYaml(yaml)->Call());
  EXPECT_TRUE(req.ok()) << req.status();
  Result result;
  SetOperatorStatus(*req, input, &result);
  return result;
}

TEST(OperatorStatusTest, DeployingThenDeployed) {
  Result deploying = RunStatus("", {.operator_version = "1.0.0", .message = "waiting for web"});
  EXPECT_EQ((*deploying.status())["phase"], "Deploying");
  EXPECT_EQ((*deploying.status())["targetVersion"], "1.0.0");
  EXPECT_EQ((*deploying.status())["observedGeneration"], 3);
  EXPECT_FALSE(deploying.status()->contains("observedVersion"));
  EXPECT_EQ(Conditions(deploying),
            (std::map<std::string, std::string>{{"Available", "False Deploying"},
                                                {"Progressing", "True Deploying"},
                                                {"Degraded", "False AsExpected"},
                                                {"Ready", "False Deploying"},
                                                {"Reconciling", "True Deploying"},
                                                {"Stalled", "False AsExpected"}}));
  Result deployed = RunStatus("", {.operator_version = "1.0.0", .children_ready = true});
  EXPECT_EQ((*deployed.status())["phase"], "Deployed");
  EXPECT_EQ((*deployed.status())["observedVersion"], "1.0.0");
  EXPECT_EQ(Conditions(deployed)["Available"], "True AsExpected");
  EXPECT_EQ(Conditions(deployed)["Reconciling"], "False AsExpected");
}

TEST(OperatorStatusTest, UpgradeKeepsAvailableAndIsNeverDegraded) {
  const std::string was_deployed =
      "status: {observedVersion: 1.0.0, conditions: [{type: Available, status: 'True'}]}";
  Result upgrading = RunStatus(was_deployed, {.operator_version = "1.1.0", .message = "web 1/2"});
  EXPECT_EQ((*upgrading.status())["phase"], "Upgrading");
  EXPECT_FALSE(upgrading.status()->contains("observedVersion"));
  EXPECT_EQ(Conditions(upgrading)["Available"], "True PreviousVersionAvailable");
  EXPECT_EQ(Conditions(upgrading)["Progressing"], "True Upgrading");
  EXPECT_EQ(Conditions(upgrading)["Degraded"], "False AsExpected");
  const Result::Condition& progressing = upgrading.conditions()[1];
  EXPECT_EQ(progressing.message, "upgrading from 1.0.0 to 1.1.0: web 1/2");
  Result done = RunStatus(was_deployed, {.operator_version = "1.1.0", .children_ready = true});
  EXPECT_EQ((*done.status())["phase"], "Deployed");
  EXPECT_EQ((*done.status())["observedVersion"], "1.1.0");
}

TEST(OperatorStatusTest, PersistentFailureAndDeletion) {
  Result failed = RunStatus("", {.operator_version = "1.0.0",
                                 .failure = "image pull refused",
                                 .failure_reason = "ImagePull"});
  EXPECT_EQ((*failed.status())["phase"], "Error");
  EXPECT_EQ(Conditions(failed)["Degraded"], "True ImagePull");
  EXPECT_EQ(Conditions(failed)["Stalled"], "True ImagePull");
  EXPECT_EQ(Conditions(failed)["Available"], "False NotReady");
  Result deleting = RunStatus("", {.operator_version = "1.0.0", .children_ready = true},
                              /*deleting=*/true);
  EXPECT_EQ((*deleting.status())["phase"], "Deleting");
  EXPECT_EQ(Conditions(deleting)["Available"], "False Deleting");
}

}  // namespace
}  // namespace ctrlhost::sdk
