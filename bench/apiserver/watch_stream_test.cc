#include "bench/apiserver/watch_stream.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ctrlhost::bench {
namespace {

std::string Event(const char* type, const char* name, int64_t rv) {
  return absl::StrCat(R"({"type":")", type,
                      R"(","object":{"apiVersion":"v1","kind":"Widget","metadata":{"name":")", name,
                      R"(","resourceVersion":")", rv, R"("},"spec":{"x":"\n"}}})", "\n");
}

TEST(ParseWatchLineTest, ExtractsTypeNameAndRevision) {
  std::string line = Event("MODIFIED", "a", 42);
  line.pop_back();
  auto parsed = ParseWatchLine(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, "MODIFIED");
  EXPECT_EQ(parsed->name, "a");
  EXPECT_EQ(parsed->resource_version, 42);
}

TEST(ParseWatchLineTest, ErrorEventNeedsNoMetadata) {
  auto parsed = ParseWatchLine(R"({"type":"ERROR","object":{"kind":"Status","code":410}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, "ERROR");
}

TEST(ParseWatchLineTest, RejectsBadLines) {
  for (const char* bad : {"", "not json", "[]", R"({"object":{}})", R"({"type":"ADDED"})",
                          R"({"type":"ADDED","object":{}})",
                          R"({"type":"ADDED","object":{"metadata":{"resourceVersion":7}}})",
                          R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"x"}}})",
                          R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"-3"}}})",
                          R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"1")"}) {
    EXPECT_FALSE(ParseWatchLine(bad).ok()) << bad;
  }
}

TEST(ParseResourceVersionTest, ReadsObjectBody) {
  auto rv = ParseResourceVersion(R"({"kind":"Widget","metadata":{"resourceVersion":"9"}})");
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(*rv, 9);
  EXPECT_FALSE(ParseResourceVersion(R"({"kind":"Status","code":409})").ok());
  EXPECT_FALSE(ParseResourceVersion("{").ok());
}

TEST(WatchStreamParserTest, ReassemblesLinesSplitAcrossChunks) {
  const std::string stream =
      Event("ADDED", "a", 1) + Event("MODIFIED", "a", 2) + Event("DELETED", "a", 3);
  // Every split point, including inside escapes and right at newlines.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    WatchStreamParser parser;
    std::vector<int64_t> rvs;
    auto on_line = [&](const WatchLine& line) { rvs.push_back(line.resource_version); };
    ASSERT_TRUE(parser.Feed(absl::string_view(stream).substr(0, cut), on_line));
    ASSERT_TRUE(parser.Feed(absl::string_view(stream).substr(cut), on_line));
    EXPECT_EQ(rvs, (std::vector<int64_t>{1, 2, 3})) << "cut at " << cut;
    EXPECT_EQ(parser.pending_bytes(), 0u);
  }
}

TEST(WatchStreamParserTest, StopsAtMalformedLine) {
  WatchStreamParser parser;
  int lines = 0;
  auto on_line = [&](const WatchLine&) { ++lines; };
  EXPECT_FALSE(parser.Feed(Event("ADDED", "a", 1) + "garbage\n" + Event("ADDED", "b", 2), on_line));
  EXPECT_EQ(lines, 1);
  EXPECT_FALSE(parser.status().ok());
  EXPECT_FALSE(parser.Feed(Event("ADDED", "c", 3), on_line));
  EXPECT_EQ(lines, 1);
}

TEST(DeliveryCheckerTest, AcceptsExactlyTheWrites) {
  DeliveryChecker checker;
  for (int64_t rv : {3, 5, 8}) checker.Add(rv);
  EXPECT_TRUE(checker.Verify({3, 5, 8}).ok());
  EXPECT_EQ(checker.count(), 3);
  EXPECT_EQ(checker.last(), 8);
}

TEST(DeliveryCheckerTest, ReportsMissingDuplicateReorderedAndUnknown) {
  DeliveryChecker missing;
  for (int64_t rv : {3, 8}) missing.Add(rv);
  EXPECT_FALSE(missing.Verify({3, 5, 8}).ok());

  DeliveryChecker duplicate;
  for (int64_t rv : {3, 5, 5, 8}) duplicate.Add(rv);
  EXPECT_FALSE(duplicate.Verify({3, 5, 8}).ok());

  DeliveryChecker reordered;
  for (int64_t rv : {3, 8, 5}) reordered.Add(rv);
  EXPECT_FALSE(reordered.Verify({3, 5, 8}).ok());

  DeliveryChecker unknown;
  for (int64_t rv : {3, 4, 5, 8}) unknown.Add(rv);
  EXPECT_FALSE(unknown.Verify({3, 5, 8}).ok());
}

}  // namespace
}  // namespace ctrlhost::bench
