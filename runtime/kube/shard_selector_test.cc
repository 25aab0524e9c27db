#include "runtime/kube/shard_selector.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::kube {
namespace {

using ::testing::HasSubstr;

TEST(Fnv1a64Test, KnownValues) {
  // The reference values of the FNV-1a 64-bit hash.
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(ShardSelectorTest, ParsesOneRangeAndOredRanges) {
  auto one = ShardSelector::Parse(
      "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->field(), ShardSelector::Field::kUid);
  ASSERT_EQ(one->ranges().size(), 1u);
  EXPECT_EQ(one->ranges()[0].start, 0u);
  EXPECT_EQ(one->ranges()[0].end, absl::uint128(0x8000000000000000ull));

  auto two = ShardSelector::Parse(
      " shardRange( object.metadata.namespace ,'0x0','0x10')||shardRange(object.metadata."
      "namespace, '0xFF00000000000000', '0x10000000000000000') ");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->field(), ShardSelector::Field::kNamespace);
  ASSERT_EQ(two->ranges().size(), 2u);
  EXPECT_EQ(two->ranges()[1].start, 0xff00000000000000ull);
  EXPECT_EQ(two->ranges()[1].end, absl::uint128(1) << 64);
}

TEST(ShardSelectorTest, TwoHalvesPartitionEveryValue) {
  auto low = ShardSelector::Parse("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')");
  auto high = ShardSelector::Parse(
      "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')");
  ASSERT_TRUE(low.ok() && high.ok());
  int in_low = 0;
  // Random UUIDs, as the server makes them. (FNV-1a's top bit barely moves when only the last
  // characters differ: uids that count up 0..999 fall 900 to one side.)
  std::mt19937_64 random(42);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t a = random();
    const uint64_t b = random();
    const std::string uid = absl::StrFormat("%08x-%04x-4%03x-8%03x-%012x", a >> 32, a & 0xffff,
                                            (a >> 16) & 0xfff, b >> 52, b & 0xffffffffffffull);
    EXPECT_NE(low->Matches(uid), high->Matches(uid)) << uid;
    in_low += low->Matches(uid);
    EXPECT_EQ(low->Matches(uid), Fnv1a64(uid) < 0x8000000000000000ull);
  }
  EXPECT_GT(in_low, 400);  // a hash, so about half
  EXPECT_LT(in_low, 600);
}

TEST(ShardSelectorTest, FormatWritesWhatParseReads) {
  using Range = ShardSelector::Range;
  const absl::uint128 kTop = absl::uint128(1) << 64;
  EXPECT_EQ(ShardSelector::Format(ShardSelector::Field::kUid, {}), "");
  EXPECT_EQ(ShardSelector::Format(ShardSelector::Field::kUid, {{0, absl::uint128(1) << 63}}),
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')");
  EXPECT_EQ(ShardSelector::Format(ShardSelector::Field::kNamespace,
                                  {{0xab, 0x100}, {0xfedcba9876543210ull, kTop}}),
            "shardRange(object.metadata.namespace, '0xab', '0x100') || "
            "shardRange(object.metadata.namespace, '0xfedcba9876543210', '0x10000000000000000')");

  std::mt19937_64 random(7);
  for (ShardSelector::Field field :
       {ShardSelector::Field::kUid, ShardSelector::Field::kNamespace}) {
    std::vector<Range> ranges = {{0, 1}, {0xffffffffffffffffull, kTop}, {0, kTop}};
    for (int i = 0; i < 20; ++i) {
      const uint64_t a = random();
      const uint64_t b = random();
      ranges.push_back({std::min(a, b), absl::uint128(std::max(a, b)) + 1});
    }
    const std::string text = ShardSelector::Format(field, ranges);
    auto parsed = ShardSelector::Parse(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->field(), field);
    ASSERT_EQ(parsed->ranges().size(), ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      EXPECT_EQ(parsed->ranges()[i].start, ranges[i].start) << text;
      EXPECT_EQ(parsed->ranges()[i].end, ranges[i].end) << text;
    }
  }
}

// kMaxRanges ranges parse, one more does not. With full 16-digit bounds kMaxRanges ranges do
// not fit in kMaxBytes (79 bytes a range), so a client must check its text with Parse before
// sending it (runtime/watch's reflector falls back to filtering itself).
TEST(ShardSelectorTest, FormattedSelectorsUpToMaxRangesParse) {
  std::vector<ShardSelector::Range> ranges;
  for (uint64_t i = 0; i <= ShardSelector::kMaxRanges; ++i) {
    ranges.push_back({i * 0x100, absl::uint128(i * 0x100 + 0x80)});
  }
  std::vector<ShardSelector::Range> max(ranges.begin(), ranges.end() - 1);
  ASSERT_EQ(max.size(), ShardSelector::kMaxRanges);
  auto ok = ShardSelector::Parse(ShardSelector::Format(ShardSelector::Field::kUid, max));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->ranges().size(), ShardSelector::kMaxRanges);

  auto too_many = ShardSelector::Parse(ShardSelector::Format(ShardSelector::Field::kUid, ranges));
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many.status().message(), HasSubstr("more than 64 ranges"));

  std::vector<ShardSelector::Range> wide;
  for (uint64_t i = 0; i < ShardSelector::kMaxRanges; ++i) {
    wide.push_back({0x8000000000000000ull + i * 0x100, absl::uint128(1) << 64});
  }
  const std::string text = ShardSelector::Format(ShardSelector::Field::kUid, wide);
  EXPECT_GT(text.size(), ShardSelector::kMaxBytes);
  EXPECT_FALSE(ShardSelector::Parse(text).ok());
}

TEST(ShardSelectorTest, BadSelectorsSayWhatAndWhere) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"", "empty"},
      {"   ", "empty"},
      {"shardRange(object.metadata.name, '0x0', '0x1')",
       "expected object.metadata.uid or object.metadata.namespace"},
      {"shardRange(object.metadata.uid, '0x0', '0x1') || "
       "shardRange(object.metadata.namespace, '0x1', '0x2')",
       "every range must hash the same field"},
      {"shardRange(object.metadata.uid, '0x8', '0x8')", "start must be below its end"},
      {"shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",
       "above 0x10000000000000000"},
      {"shardRange(object.metadata.uid, '0x0', '0x100000000000000000')", "longer than 17"},
      {"shardRange(object.metadata.uid, 0x0, '0x1')", "expected a quoted hex bound"},
      {"shardRange(object.metadata.uid, '0x', '0x1')", "without digits"},
      {"shardRange(object.metadata.uid, '0x0', '0x1'", "expected )"},
      {"shardRange(object.metadata.uid, '0x0', '0x1') && x", "unexpected text"},
      {"labels(app)", "expected shardRange"},
      {std::string(ShardSelector::kMaxBytes + 1, ' '), "longer than 4096 bytes"},
  };
  for (const Case& c : cases) {
    auto s = ShardSelector::Parse(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(c.message)) << c.text.substr(0, 80);
  }
  std::string many;
  for (size_t i = 0; i <= ShardSelector::kMaxRanges; ++i) {
    if (i > 0) many += "||";
    absl::StrAppend(&many, "shardRange(object.metadata.uid,'0x", i, "','0x", i + 1, "')");
  }
  auto s = ShardSelector::Parse(many);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("more than 64 ranges"));
}

}  // namespace
}  // namespace ctrlhost::kube
