#include "runtime/controller/apply/host_status.h"

#include <map>
#include <string>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

// type -> "True"/"False" + reason, for compact assertions.
std::map<std::string, std::string> Summary(const std::vector<pluginpb::Condition>& conditions) {
  std::map<std::string, std::string> out;
  for (const pluginpb::Condition& c : conditions) {
    out[c.type()] = std::string(c.status() == pluginpb::CONDITION_STATUS_TRUE ? "True" : "False") +
                    "/" + c.reason();
  }
  return out;
}

json Deployment(int replicas, int available, int generation = 1, int observed = 1) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", "web"}, {"generation", generation}}},
          {"spec", {{"replicas", replicas}}},
          {"status", {{"availableReplicas", available}, {"observedGeneration", observed}}}};
}

TEST(ChildReadinessTest, DeploymentNeedsEveryReplicaAvailableAtTheCurrentGeneration) {
  EXPECT_TRUE(ChildReadinessOf(Deployment(2, 2)).ready);
  ChildReadiness partial = ChildReadinessOf(Deployment(3, 1));
  EXPECT_FALSE(partial.ready);
  EXPECT_EQ(partial.reason, "1 of 3 replicas available");
  EXPECT_EQ(partial.kind, "Deployment");
  EXPECT_EQ(partial.name, "web");
  EXPECT_FALSE(ChildReadinessOf(Deployment(2, 2, /*generation=*/3, /*observed=*/2)).ready);
}

TEST(ChildReadinessTest, DeploymentDefaultsToOneReplicaAndZeroAvailable) {
  json d = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"metadata", {{"name", "a"}}}};
  EXPECT_FALSE(ChildReadinessOf(d).ready);  // replicas 1, none available
  d["status"] = {{"availableReplicas", 1}};
  EXPECT_TRUE(ChildReadinessOf(d).ready);
  d["spec"] = {{"replicas", 0}};
  EXPECT_FALSE(ChildReadinessOf(d).ready);  // 1 available != 0 wanted: still scaling down
}

TEST(ChildReadinessTest, MalformedCountsAreNotReadyAndDoNotThrow) {
  json d = Deployment(1, 1);
  d["status"]["availableReplicas"] = "one";
  ChildReadiness r = ChildReadinessOf(d);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.reason, "malformed replica counts");
  EXPECT_TRUE(ChildReadinessOf(json("not an object")).ready);  // exists, nothing to read
}

TEST(ChildReadinessTest, GenericReadyConditionElseExistence) {
  json obj = {{"apiVersion", "example.com/v1"}, {"kind", "Db"}, {"metadata", {{"name", "d"}}}};
  EXPECT_TRUE(ChildReadinessOf(obj).ready);
  obj["status"]["conditions"] =
      json::array({{{"type", "Other"}, {"status", "False"}},
                   {{"type", "Ready"}, {"status", "False"}, {"message", "disk full"}}});
  ChildReadiness r = ChildReadinessOf(obj);
  EXPECT_FALSE(r.ready);
  EXPECT_EQ(r.reason, "disk full");
  obj["status"]["conditions"][1]["status"] = "True";
  EXPECT_TRUE(ChildReadinessOf(obj).ready);
}

TEST(HostConditionsTest, ConvergedWithoutChildren) {
  EXPECT_EQ(Summary(ComputeHostConditions({}, {})),
            (std::map<std::string, std::string>{{"Available", "True/AsExpected"},
                                                {"Progressing", "False/AsExpected"},
                                                {"Degraded", "False/AsExpected"},
                                                {"Ready", "True/AsExpected"},
                                                {"Reconciling", "False/AsExpected"},
                                                {"Stalled", "False/AsExpected"}}));
}

TEST(HostConditionsTest, ChildNotReadyIsProgressingNotDegraded) {
  HostStatusInput in;
  in.children.push_back(ChildReadinessOf(Deployment(3, 1)));
  in.children.push_back(ChildReadinessOf(Deployment(1, 1)));
  std::vector<pluginpb::Condition> out = ComputeHostConditions(in, {});
  EXPECT_EQ(Summary(out),
            (std::map<std::string, std::string>{{"Available", "False/ChildrenNotReady"},
                                                {"Progressing", "True/ChildrenNotReady"},
                                                {"Degraded", "False/AsExpected"},
                                                {"Ready", "False/ChildrenNotReady"},
                                                {"Reconciling", "True/ChildrenNotReady"},
                                                {"Stalled", "False/AsExpected"}}));
  EXPECT_EQ(out[0].message(), "waiting for Deployment web: 1 of 3 replicas available");
}

TEST(HostConditionsTest, TransientErrorIsRetryingUntilTheThreshold) {
  HostStatusInput in;
  in.result = ReconcileResult::kRetryableError;
  in.error_message = "backend timeout";
  in.consecutive_errors = 4;
  in.degraded_after = 5;
  std::map<std::string, std::string> s = Summary(ComputeHostConditions(in, {}));
  EXPECT_EQ(s["Available"], "True/AsExpected");
  EXPECT_EQ(s["Progressing"], "True/Retrying");
  EXPECT_EQ(s["Degraded"], "False/AsExpected");
  EXPECT_EQ(s["Ready"], "False/Retrying");
  EXPECT_EQ(s["Reconciling"], "True/Retrying");
  EXPECT_EQ(s["Stalled"], "False/AsExpected");

  in.consecutive_errors = 5;
  std::vector<pluginpb::Condition> out = ComputeHostConditions(in, {});
  s = Summary(out);
  EXPECT_EQ(s["Available"], "True/AsExpected");  // the operand still serves
  EXPECT_EQ(s["Progressing"], "False/PersistentError");
  EXPECT_EQ(s["Degraded"], "True/PersistentError");
  EXPECT_EQ(s["Ready"], "False/PersistentError");
  EXPECT_EQ(s["Reconciling"], "False/PersistentError");
  EXPECT_EQ(s["Stalled"], "True/PersistentError");
  EXPECT_EQ(out[2].message(), "5 reconciles failed in a row: backend timeout");
}

TEST(HostConditionsTest, TerminalErrorIsDegradedAtOnce) {
  HostStatusInput in;
  in.result = ReconcileResult::kTerminalError;
  in.error_message = "spec.size must be positive";
  in.consecutive_errors = 1;
  std::vector<pluginpb::Condition> out = ComputeHostConditions(in, {});
  std::map<std::string, std::string> s = Summary(out);
  EXPECT_EQ(s["Degraded"], "True/TerminalError");
  EXPECT_EQ(s["Stalled"], "True/TerminalError");
  EXPECT_EQ(s["Ready"], "False/TerminalError");
  EXPECT_EQ(out[2].message(), "spec.size must be positive");
}

// The plugin's Error.reason replaces the default failure reasons; the message is unchanged.
TEST(HostConditionsTest, TheErrorsReasonIsTheFailureReason) {
  HostStatusInput in;
  in.result = ReconcileResult::kTerminalError;
  in.error_message = "spec.size must be positive";
  in.error_reason = "InvalidSize";
  in.consecutive_errors = 1;
  std::vector<pluginpb::Condition> out = ComputeHostConditions(in, {});
  std::map<std::string, std::string> s = Summary(out);
  EXPECT_EQ(s["Progressing"], "False/InvalidSize");
  EXPECT_EQ(s["Degraded"], "True/InvalidSize");
  EXPECT_EQ(s["Ready"], "False/InvalidSize");
  EXPECT_EQ(s["Reconciling"], "False/InvalidSize");
  EXPECT_EQ(s["Stalled"], "True/InvalidSize");
  EXPECT_EQ(s["Available"], "True/AsExpected");
  EXPECT_EQ(out[2].message(), "spec.size must be positive");

  // A persistent retryable error with a reason; below the threshold it is still "Retrying".
  in.result = ReconcileResult::kRetryableError;
  in.error_message = "backend timeout";
  in.error_reason = "QuotaExceeded";
  in.consecutive_errors = 4;
  in.degraded_after = 5;
  s = Summary(ComputeHostConditions(in, {}));
  EXPECT_EQ(s["Progressing"], "True/Retrying");
  EXPECT_EQ(s["Degraded"], "False/AsExpected");
  in.consecutive_errors = 5;
  out = ComputeHostConditions(in, {});
  s = Summary(out);
  EXPECT_EQ(s["Degraded"], "True/QuotaExceeded");
  EXPECT_EQ(s["Stalled"], "True/QuotaExceeded");
  EXPECT_EQ(out[2].message(), "5 reconciles failed in a row: backend timeout");
}

TEST(HostConditionsTest, ThePluginsOwnTypesAreLeftAlone) {
  pluginpb::Condition mine;
  mine.set_type("Available");
  mine.set_status(pluginpb::CONDITION_STATUS_FALSE);
  pluginpb::Condition other;
  other.set_type("Synced");
  std::vector<pluginpb::Condition> out = ComputeHostConditions({}, {mine, other});
  ASSERT_EQ(out.size(), 5u);
  for (const pluginpb::Condition& c : out) EXPECT_NE(c.type(), "Available");
}

TEST(HostConditionsTest, SameInputSameOutput) {
  HostStatusInput in;
  in.children.push_back(ChildReadinessOf(Deployment(2, 1)));
  std::vector<pluginpb::Condition> a = ComputeHostConditions(in, {});
  std::vector<pluginpb::Condition> b = ComputeHostConditions(in, {});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].SerializeAsString(), b[i].SerializeAsString());
}

}  // namespace
}  // namespace ctrlhost::controller::apply
