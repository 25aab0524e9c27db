#include "runtime/controller/apply/compare.h"

#include <string>

#include "absl/status/status.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/testing/test_controllers.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::CachedObject;
using testing::ContextFor;
using ::testing::HasSubstr;

constexpr char kWebApp[] = R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
    "metadata":{"name":"web","namespace":"team","uid":"u-web","generation":3,
                "resourceVersion":"10"},"status":{}})";

class CompareTest : public ::testing::Test {
 protected:
  json OutcomeOf(const pluginpb::ReconcileResponse& response) {
    return Outcome(context_, DispatchResult(response));
  }

  ControllerInfo webapp_ = testing::WebAppController();
  ReconcileContext context_ = ContextFor(&webapp_, CachedObject(kWebApp));
};

pluginpb::ReconcileResponse WithConfigMap(const std::string& data) {
  pluginpb::ReconcileResponse r;
  r.add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-config"},
      "data":)" + data + "}");
  return r;
}

TEST_F(CompareTest, OutcomeIsWhatTheHostWouldWriteAfterNormalization) {
  pluginpb::ReconcileResponse r = WithConfigMap(R"({"port":"80"})");
  r.set_status(R"({"phase":"Ready"})");
  pluginpb::Event* e = r.add_events();
  e->set_type(pluginpb::EVENT_TYPE_NORMAL);
  e->set_reason("Created");
  e->set_message("made web-config");
  r.mutable_requeue_after()->set_seconds(30);
  const json outcome = OutcomeOf(r);
  const json& child = outcome["applies"]["ConfigMap team/web-config"];
  // The host's normalization: the namespace and the controller owner reference are added.
  EXPECT_EQ(child["metadata"]["namespace"], "team");
  EXPECT_EQ(child["metadata"]["ownerReferences"][0]["uid"], "u-web");
  EXPECT_EQ(outcome["status"], json::parse(R"({"phase":"Ready"})"));
  EXPECT_EQ(outcome["events"][0]["reason"], "Created");
  EXPECT_EQ(outcome["requeueAfter"], "30s");
  EXPECT_FALSE(outcome.contains("error"));
  EXPECT_FALSE(outcome.contains("finalized"));
}

TEST_F(CompareTest, SpellingAndOrderOfJsonDoNotCount) {
  pluginpb::ReconcileResponse a = WithConfigMap(R"({"a":"1","b":"2"})");
  a.add_desired_objects(R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"web"},"spec":{"replicas":2}})");
  pluginpb::ReconcileResponse b;
  // The same objects, in the other order, keys reordered, 2 spelled 2.0, other whitespace.
  b.add_desired_objects(R"({"spec":{"replicas":2.0},"kind":"Deployment","apiVersion":"apps/v1",
      "metadata":{"name":"web"}})");
  b.add_desired_objects(
      R"({"data":{"b":"2","a":"1"},"metadata":{"name":"web-config"},"kind":"ConfigMap","apiVersion":"v1"})");
  const OutcomeDiff diff = CompareOutcomes(OutcomeOf(a), OutcomeOf(b));
  EXPECT_TRUE(diff.same) << diff.patch.dump();
  EXPECT_EQ(diff.patch, json::array());
  EXPECT_EQ(diff.summary, "");
}

TEST_F(CompareTest, AChangedFieldIsAPatchToIt) {
  const OutcomeDiff diff = CompareOutcomes(OutcomeOf(WithConfigMap(R"({"port":"80"})")),
                                           OutcomeOf(WithConfigMap(R"({"port":"8080"})")));
  EXPECT_FALSE(diff.same);
  EXPECT_EQ(diff.summary, "applies");
  EXPECT_EQ(diff.patch, json::parse(R"([{"op":"replace",
      "path":"/applies/ConfigMap team~1web-config/data/port","value":"8080"}])"));
}

TEST_F(CompareTest, EventOrderAndTheErrorKindCountButNotTheErrorMessage) {
  auto with_events = [](std::initializer_list<const char*> reasons) {
    pluginpb::ReconcileResponse r;
    for (const char* reason : reasons) {
      pluginpb::Event* e = r.add_events();
      e->set_type(pluginpb::EVENT_TYPE_NORMAL);
      e->set_reason(reason);
    }
    return r;
  };
  EXPECT_FALSE(
      CompareOutcomes(OutcomeOf(with_events({"A", "B"})), OutcomeOf(with_events({"B", "A"}))).same);

  auto failing = [](pluginpb::ErrorKind kind, const char* message) {
    pluginpb::ReconcileResponse r;
    r.mutable_error()->set_kind(kind);
    r.mutable_error()->set_reason("QuotaExceeded");
    r.mutable_error()->set_message(message);
    return r;
  };
  EXPECT_TRUE(CompareOutcomes(OutcomeOf(failing(pluginpb::ERROR_KIND_RETRYABLE, "at 10:00:01")),
                              OutcomeOf(failing(pluginpb::ERROR_KIND_RETRYABLE, "at 10:00:02")))
                  .same);
  const OutcomeDiff diff = CompareOutcomes(OutcomeOf(failing(pluginpb::ERROR_KIND_RETRYABLE, "x")),
                                           OutcomeOf(failing(pluginpb::ERROR_KIND_TERMINAL, "x")));
  EXPECT_FALSE(diff.same);
  EXPECT_EQ(diff.summary, "error");
}

TEST_F(CompareTest, ARefusedAnswerAndAFailedCallAreOutcomesToo) {
  pluginpb::ReconcileResponse bad;
  bad.add_desired_objects(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}})");
  const json refused = OutcomeOf(bad);
  EXPECT_THAT(refused["invalid"].get<std::string>(), HasSubstr("not owned"));

  const json failed = Outcome(context_, DispatchResult(absl::DeadlineExceededError("late")));
  EXPECT_EQ(failed, json::parse(R"({"failed":"DEADLINE_EXCEEDED"})"));

  const OutcomeDiff diff = CompareOutcomes(OutcomeOf(pluginpb::ReconcileResponse()), refused);
  EXPECT_FALSE(diff.same);
  EXPECT_EQ(diff.summary, "invalid");
}

TEST_F(CompareTest, CapabilitiesOfTheConnectionDoNotCount) {
  // The serving and the shadow connection may have different capabilities; both answers are
  // judged as answers, not as what one connection may carry.
  pluginpb::ReconcileResponse r = WithConfigMap(R"({"a":"1"})");
  ReconcileContext none = context_;
  none.capabilities = Capabilities{};
  EXPECT_EQ(Outcome(none, DispatchResult(r)), OutcomeOf(r));
}

TEST_F(CompareTest, SummaryNamesEveryMemberThatDiffers) {
  pluginpb::ReconcileResponse a = WithConfigMap(R"({"a":"1"})");
  pluginpb::ReconcileResponse b = WithConfigMap(R"({"a":"2"})");
  b.set_status(R"({"phase":"Ready"})");
  b.set_finalized(false);
  const OutcomeDiff diff = CompareOutcomes(OutcomeOf(a), OutcomeOf(b));
  EXPECT_EQ(diff.summary, "applies, status");
  // Applying the patch to the first gives the second.
  EXPECT_EQ(OutcomeOf(a).patch(diff.patch), OutcomeOf(b));
}

}  // namespace
}  // namespace ctrlhost::controller::apply
