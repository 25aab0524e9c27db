#include "runtime/controller/apply/conditions.h"

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

pluginpb::Condition Make(const std::string& type, pluginpb::ConditionStatus status,
                         const std::string& reason, const std::string& message = "") {
  pluginpb::Condition c;
  c.set_type(type);
  c.set_status(status);
  c.set_reason(reason);
  c.set_message(message);
  return c;
}

const absl::Time kThen = absl::FromUnixSeconds(1'800'000'000);

TEST(ConditionsTest, FormatTime) { EXPECT_EQ(Rfc3339Time(kThen), "2027-01-15T08:00:00Z"); }

TEST(ConditionsTest, NewTypesAreAppendedOthersKept) {
  const json existing = json::parse(R"([{"type":"Other","status":"True","reason":"X"},
                                        "not a condition"])");
  json merged = MergeConditions(
      existing, {Make("Ready", pluginpb::CONDITION_STATUS_FALSE, "Waiting")}, 7, kThen);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0], existing[0]);
  EXPECT_EQ(merged[1], existing[1]);
  EXPECT_EQ(merged[2], json::parse(R"({"type":"Ready","status":"False","reason":"Waiting",
      "message":"","lastTransitionTime":"2027-01-15T08:00:00Z","observedGeneration":7})"));
}

TEST(ConditionsTest, TransitionTimeKeptWhenStatusUnchangedAndMovedWhenChanged) {
  const json existing = json::parse(R"([
      {"type":"Ready","status":"True","reason":"Up","lastTransitionTime":"2020-01-01T00:00:00Z",
       "observedGeneration":1},
      {"type":"Degraded","status":"False","reason":"Fine",
       "lastTransitionTime":"2020-01-01T00:00:00Z"}])");
  json merged = MergeConditions(existing,
                                {Make("Ready", pluginpb::CONDITION_STATUS_TRUE, "StillUp", "msg"),
                                 Make("Degraded", pluginpb::CONDITION_STATUS_TRUE, "Broken")},
                                2, kThen);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
  EXPECT_EQ(merged[0]["reason"], "StillUp");
  EXPECT_EQ(merged[0]["message"], "msg");
  EXPECT_EQ(merged[0]["observedGeneration"], 2);
  EXPECT_EQ(merged[1]["status"], "True");
  EXPECT_EQ(merged[1]["lastTransitionTime"], "2027-01-15T08:00:00Z");
}

TEST(ConditionsTest, NonArrayExistingIsEmpty) {
  json merged = MergeConditions(json("garbage"),
                                {Make("Ready", pluginpb::CONDITION_STATUS_UNKNOWN, "R")}, 0, kThen);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0]["status"], "Unknown");
  EXPECT_EQ(FindCondition(merged, "Ready"), &merged[0]);
  EXPECT_EQ(FindCondition(merged, "Nope"), nullptr);
  EXPECT_EQ(FindCondition(json(), "Ready"), nullptr);
}

}  // namespace
}  // namespace ctrlhost::controller::apply
