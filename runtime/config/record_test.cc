// spec.record of the operator file: which controllers' reconciles are recorded, and where.
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
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(
      absl::StrCat(kDocument, "  record: {dir: rec, controllers: [webapp, other], maxBytes: "
                              "2097152, secretData: include}\n"),
      "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*ops)[0].record.has_value());
  const RecordSpec& r = *(*ops)[0].record;
  EXPECT_EQ(r.dir, "rec");
  EXPECT_THAT(r.controllers, ElementsAre("webapp", "other"));
  EXPECT_EQ(r.max_bytes, int64_t{2097152});
  EXPECT_TRUE(r.secret_data);
  EXPECT_TRUE(r.Records("webapp"));
  EXPECT_FALSE(r.Records("third"));

  ops = ParseOperators(absl::StrCat(kDocument, "  record: {dir: rec}\n"), "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const RecordSpec& d = *(*ops)[0].record;
  EXPECT_TRUE(d.controllers.empty());
  EXPECT_TRUE(d.Records("anything"));
  EXPECT_FALSE(d.max_bytes.has_value());
  EXPECT_FALSE(d.secret_data);

  std::vector<OperatorSpec> changed = *ops;
  changed[0].record->secret_data = true;
  OperatorSetDiff diff = Diff(*ops, changed);
  ASSERT_EQ(diff.changed.size(), 1u);
  EXPECT_TRUE(diff.changed[0].record_changed);
  EXPECT_FALSE(diff.changed[0].controllers_changed);
  changed[0].record.reset();
  EXPECT_TRUE(Diff(*ops, changed).changed[0].record_changed);
  EXPECT_TRUE(Diff(*ops, *ops).empty());
}

TEST(RecordTest, BadValuesAreNamed) {
  EXPECT_THAT(Error("  record: {controllers: [a]}\n"),
              HasSubstr("spec.record.dir: required: the directory the recordings are written to"));
  EXPECT_THAT(Error("  record: {dir: \"\"}\n"), HasSubstr("spec.record.dir: required"));
  EXPECT_THAT(Error("  record: {dir: r, secretData: yes}\n"),
              HasSubstr("spec.record.secretData: invalid value \"yes\""));
  EXPECT_THAT(Error("  record: {dir: r, controllers: [a, a]}\n"),
              HasSubstr("controller \"a\" is listed twice"));
  EXPECT_THAT(Error("  record: {dir: r, maxBytes: 1000}\n"), HasSubstr("spec.record.maxBytes"));
  EXPECT_THAT(Error("  record: {dir: r, extra: 1}\n"), HasSubstr("spec.record.extra"));
  EXPECT_THAT(Error("  record: rec\n"), HasSubstr("spec.record"));
}

}  // namespace
}  // namespace ctrlhost::config
