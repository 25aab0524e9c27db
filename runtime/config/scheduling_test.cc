// spec.controllers[].scheduling of the operator file: the queue's priorities and aging bound.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/config/load.h"

namespace ctrlhost::config {
namespace {

using ::testing::ElementsAre;

constexpr char kDocument[] = R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
spec:
  plugins:
    - name: a
      exec: {command: a}
  controllers:
)";

std::vector<std::string> Errors(absl::string_view controllers) {
  absl::StatusOr<std::vector<OperatorSpec>> ops =
      ParseOperators(absl::StrCat(kDocument, controllers), "op.yaml");
  if (ops.ok()) return {};
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument) << ops.status();
  return absl::StrSplit(ops.status().message(), '\n');
}

TEST(SchedulingTest, PrioritiesAndMaxWaitAreReadAndUnsetByDefault) {
  absl::StatusOr<std::vector<OperatorSpec>> ops =
      ParseOperators(absl::StrCat(kDocument, R"(    - name: fifo
      scheduling: {priorities: false, maxWait: 90s, apiWeight: 2.5}
    - name: plain
    - name: empty
      scheduling: {}
)"),
                     "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const std::vector<ControllerSpec>& c = (*ops)[0].controllers;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].priorities, false);
  EXPECT_EQ(c[0].max_wait, absl::Seconds(90));
  EXPECT_EQ(c[0].api_weight, 2.5);
  for (int i : {1, 2}) {
    EXPECT_FALSE(c[i].priorities.has_value()) << c[i].name;
    EXPECT_FALSE(c[i].max_wait.has_value()) << c[i].name;
    EXPECT_FALSE(c[i].api_weight.has_value()) << c[i].name;
  }
  EXPECT_FALSE((*ops)[0].api_weight.has_value());
  // A change of either is a change of the controller's overrides (it restarts with them).
  std::vector<OperatorSpec> changed = *ops;
  changed[0].controllers[0].max_wait = absl::Seconds(91);
  EXPECT_TRUE(Diff(*ops, changed).changed.size() == 1);
  EXPECT_TRUE(Diff(*ops, changed).changed[0].controllers_changed);
}

TEST(SchedulingTest, TheOperatorsApiWeightIsReadAndAChangeIsAChange) {
  const std::string with_weight = absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
spec:
  scheduling: {apiWeight: 3}
  plugins:
    - name: a
      exec: {command: a}
)");
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(with_weight, "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ((*ops)[0].api_weight, 3);
  std::vector<OperatorSpec> changed = *ops;
  changed[0].api_weight = 1;
  const OperatorSetDiff diff = Diff(*ops, changed);
  ASSERT_EQ(diff.changed.size(), 1u);
  EXPECT_FALSE(diff.changed[0].controllers_changed);
  absl::StatusOr<std::vector<OperatorSpec>> bad =
      ParseOperators(absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
spec:
  scheduling: {apiWeight: 0, weight: 1}
  plugins:
    - name: a
      exec: {command: a}
)"),
                     "op.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::vector<std::string>(absl::StrSplit(bad.status().message(), '\n')),
              ElementsAre("op.yaml:6:27: spec.scheduling.apiWeight: must be positive and at most "
                          "1000000: a share of the API budget relative to the others",
                          "op.yaml:6:30: spec.scheduling.weight: unknown field"));
}

TEST(SchedulingTest, BadValuesAreErrorsNamingTheField) {
  EXPECT_THAT(
      Errors(R"(    - name: c
      scheduling: {priorities: maybe, maxWait: 0s, weight: 2}
    - name: d
      scheduling: {maxWait: -5m, apiWeight: many}
    - name: e
      scheduling: fast
)"),
      ElementsAre(
          "op.yaml:11:32: spec.controllers[0].scheduling.priorities: must be true or false, "
          "not a string",
          "op.yaml:11:48: spec.controllers[0].scheduling.maxWait: must be positive",
          "op.yaml:11:52: spec.controllers[0].scheduling.weight: unknown field",
          "op.yaml:13:29: spec.controllers[1].scheduling.maxWait: must be positive",
          "op.yaml:13:45: spec.controllers[1].scheduling.apiWeight: must be a number, not a "
          "string",
          "op.yaml:15:19: spec.controllers[2].scheduling: must be a mapping, not a string"));
}

}  // namespace
}  // namespace ctrlhost::config
