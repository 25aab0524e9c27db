// The operator file's parts of safe upgrades: spec.record (which controllers' reconciles are
// recorded, and where) and spec.plugins[].shadow.
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
using ::testing::HasSubstr;

constexpr char kDocument[] = R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
spec:
  plugins:
    - name: a
      exec: {command: a}
)";

std::string Error(absl::string_view record) {
  absl::StatusOr<std::vector<OperatorSpec>> ops =
      ParseOperators(absl::StrCat(kDocument, record), "op.yaml");
  if (ops.ok()) return "";
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument) << ops.status();
  return std::string(ops.status().message());
}

TEST(RecordTest, IsReadWithItsDefaultsAndChangesAreSeen) {
  absl::StatusOr<std::vector<OperatorSpec>> ops =
      ParseOperators(absl::StrCat(kDocument,
                                  "  record: {dir: rec, controllers: [webapp, other], maxBytes: "
                                  "2097152, secretData: include, cpu: normal}\n"),
                     "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*ops)[0].record.has_value());
  const RecordSpec& r = *(*ops)[0].record;
  EXPECT_EQ(r.dir, "rec");
  EXPECT_THAT(r.controllers, ElementsAre("webapp", "other"));
  EXPECT_EQ(r.max_bytes, int64_t{2097152});
  EXPECT_TRUE(r.secret_data);
  EXPECT_TRUE(r.normal_cpu);
  EXPECT_TRUE(r.Records("webapp"));
  EXPECT_FALSE(r.Records("third"));

  ops = ParseOperators(absl::StrCat(kDocument, "  record: {dir: rec}\n"), "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const RecordSpec& d = *(*ops)[0].record;
  EXPECT_TRUE(d.controllers.empty());
  EXPECT_TRUE(d.Records("anything"));
  EXPECT_FALSE(d.max_bytes.has_value());
  EXPECT_FALSE(d.secret_data);
  EXPECT_FALSE(d.normal_cpu);

  std::vector<OperatorSpec> changed = *ops;
  changed[0].record->secret_data = true;
  OperatorSetDiff diff = Diff(*ops, changed);
  ASSERT_EQ(diff.changed.size(), 1u);
  EXPECT_TRUE(diff.changed[0].record_changed);
  EXPECT_FALSE(diff.changed[0].controllers_changed);
  changed[0].record.reset();
  EXPECT_TRUE(Diff(*ops, changed).changed[0].record_changed);
  changed = *ops;
  changed[0].record->normal_cpu = true;
  EXPECT_TRUE(Diff(*ops, changed).changed[0].record_changed);
  EXPECT_TRUE(Diff(*ops, *ops).empty());
}

TEST(RecordTest, BadValuesAreNamed) {
  EXPECT_THAT(Error("  record: {controllers: [a]}\n"),
              HasSubstr("spec.record.dir: required: the directory the recordings are written to"));
  EXPECT_THAT(Error("  record: {dir: \"\"}\n"), HasSubstr("spec.record.dir: required"));
  EXPECT_THAT(Error("  record: {dir: r, secretData: yes}\n"),
              HasSubstr("spec.record.secretData: invalid value \"yes\""));
  EXPECT_THAT(Error("  record: {dir: r, cpu: low}\n"),
              HasSubstr("spec.record.cpu: invalid value \"low\": \"idle\" (the default"));
  EXPECT_THAT(Error("  record: {dir: r, controllers: [a, a]}\n"),
              HasSubstr("controller \"a\" is listed twice"));
  EXPECT_THAT(Error("  record: {dir: r, maxBytes: 1000}\n"), HasSubstr("spec.record.maxBytes"));
  EXPECT_THAT(Error("  record: {dir: r, extra: 1}\n"), HasSubstr("spec.record.extra"));
  EXPECT_THAT(Error("  record: rec\n"), HasSubstr("spec.record"));
}

constexpr char kShadowed[] = R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
spec:
  plugins:
    - name: a
      exec: {command: /bin/a}
)";

// spec.plugins[].shadow lives beside spec.record in the same issue (safe upgrades).
TEST(ShadowTest, IsReadAndAChangeIsAShadowChangeNotASwap) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(
      absl::StrCat(kShadowed,
                   "      shadow:\n        exec: {command: /bin/b, env: {X: \"1\"}}\n"
                   "        percent: 25\n        maxInFlight: 8\n"),
      "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const PluginSpec& plugin = (*ops)[0].plugins[0];
  ASSERT_TRUE(plugin.shadow.has_value());
  ASSERT_NE(std::get_if<ExecSpec>(&plugin.shadow->source), nullptr);
  EXPECT_EQ(std::get<ExecSpec>(plugin.shadow->source).command, "/bin/b");
  EXPECT_EQ(plugin.shadow->percent, 25);
  EXPECT_EQ(plugin.shadow->max_in_flight, 8);
  EXPECT_FALSE(plugin.shadow->normal_cpu);  // idle unless the file says otherwise

  std::vector<OperatorSpec> changed = *ops;
  changed[0].plugins[0].shadow->normal_cpu = true;
  EXPECT_THAT(Diff(*ops, changed).changed[0].shadow_changed_plugins, ElementsAre("a"));
  changed[0].plugins[0].shadow->normal_cpu = false;
  changed[0].plugins[0].shadow->percent = 50;
  OperatorSetDiff diff = Diff(*ops, changed);
  ASSERT_EQ(diff.changed.size(), 1u);
  EXPECT_THAT(diff.changed[0].shadow_changed_plugins, ElementsAre("a"));
  EXPECT_TRUE(diff.changed[0].changed_plugins.empty());
  changed[0].plugins[0].shadow.reset();
  EXPECT_THAT(Diff(*ops, changed).changed[0].shadow_changed_plugins, ElementsAre("a"));
  changed[0].plugins[0].shadow = ops->at(0).plugins[0].shadow;
  EXPECT_TRUE(Diff(*ops, changed).empty());
  // The plugin's own source changing is a swap, and its shadow is left alone.
  std::get<ExecSpec>(changed[0].plugins[0].source).command = "/bin/c";
  diff = Diff(*ops, changed);
  EXPECT_THAT(diff.changed[0].changed_plugins, ElementsAre("a"));
  EXPECT_TRUE(diff.changed[0].shadow_changed_plugins.empty());
}

TEST(ShadowTest, BadValuesAreNamed) {
  auto error = [](absl::string_view shadow) {
    absl::StatusOr<std::vector<OperatorSpec>> ops =
        ParseOperators(absl::StrCat(kShadowed, shadow), "op.yaml");
    return ops.ok() ? std::string() : std::string(ops.status().message());
  };
  EXPECT_THAT(error("      shadow: {percent: 10}\n"),
              HasSubstr("spec.plugins[0].shadow: exactly one of exec or endpoint is required"));
  EXPECT_THAT(error("      shadow: {exec: {command: b}, endpoint: {address: \"unix:///s\"}}\n"),
              HasSubstr("exec and endpoint are mutually exclusive"));
  EXPECT_THAT(error("      shadow: {exec: {command: b}, percent: 0}\n"),
              HasSubstr("spec.plugins[0].shadow.percent"));
  EXPECT_THAT(error("      shadow: {exec: {command: b}, percent: 101}\n"),
              HasSubstr("spec.plugins[0].shadow.percent"));
  EXPECT_THAT(error("      shadow: {exec: {command: b}, maxInFlight: 0}\n"),
              HasSubstr("spec.plugins[0].shadow.maxInFlight"));
  EXPECT_THAT(error("      shadow: {endpoint: {address: \"example.com:80\"}}\n"),
              HasSubstr("plaintext is only allowed"));
  EXPECT_THAT(error("      shadow: {exec: {command: b}, name: x}\n"),
              HasSubstr("spec.plugins[0].shadow.name"));
  EXPECT_THAT(error("      shadow: {exec: {command: b}, cpu: low}\n"),
              HasSubstr("spec.plugins[0].shadow.cpu: invalid value \"low\": \"idle\""));
  EXPECT_THAT(error("      shadow: {endpoint: {address: \"127.0.0.1:9\"}, cpu: normal}\n"),
              HasSubstr("spec.plugins[0].shadow.cpu: applies to an exec'd shadow"));
}

TEST(ShadowTest, CpuNormalIsRead) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(
      absl::StrCat(kShadowed, "      shadow: {exec: {command: /bin/b}, cpu: normal}\n"), "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*ops)[0].plugins[0].shadow.has_value());
  EXPECT_TRUE((*ops)[0].plugins[0].shadow->normal_cpu);
  ops = ParseOperators(
      absl::StrCat(kShadowed, "      shadow: {exec: {command: /bin/b}, cpu: idle}\n"), "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_FALSE((*ops)[0].plugins[0].shadow->normal_cpu);
}

}  // namespace
}  // namespace ctrlhost::config
