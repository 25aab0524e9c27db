#include "bench/swap/record.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ctrlhost::bench::swap {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<Record> At(std::vector<int64_t> times) {
  std::vector<Record> records;
  uint32_t i = 0;
  for (int64_t t : times) records.push_back(Record{t, i++ % 3, 7});
  return records;
}

TEST(RecordTest, ThreadsAppendWholeRecords) {
  const std::string path = TempPath("append.log");
  unlink(path.c_str());
  RecordWriter writer;
  ASSERT_TRUE(writer.Open(path).ok());
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&writer, t] {
      for (uint32_t i = 0; i < 500; ++i) ASSERT_TRUE(writer.Append(t * 1000 + i).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::vector<Record>> records = ReadRecords(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2000u);
  std::vector<int> seen(4000, 0);
  for (const Record& r : *records) {
    ASSERT_LT(r.index, 4000u);
    ++seen[r.index];
    EXPECT_EQ(r.pid, static_cast<uint32_t>(getpid()));
    EXPECT_GT(r.mono_ns, 0);
  }
  for (uint32_t t = 0; t < 4; ++t) {
    for (uint32_t i = 0; i < 500; ++i) EXPECT_EQ(seen[t * 1000 + i], 1);
  }
}

TEST(RecordTest, ReadIgnoresTrailingPartialRecordAndReportsMissingFile) {
  const std::string path = TempPath("partial.log");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    Record r{42, 3, 9};
    out.write(reinterpret_cast<const char*>(&r), sizeof(r));
    out.write("abc", 3);
  }
  absl::StatusOr<std::vector<Record>> records = ReadRecords(path);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ((*records)[0].mono_ns, 42);
  EXPECT_EQ((*records)[0].index, 3u);
  EXPECT_EQ(ReadRecords(TempPath("nope.log")).status().code(), absl::StatusCode::kNotFound);
  RecordWriter closed;
  EXPECT_EQ(closed.Append(1).code(), absl::StatusCode::kFailedPrecondition);
  RecordWriter bad;
  EXPECT_FALSE(bad.Open(TempPath("no/such/dir/x.log")).ok());
}

TEST(RecordTest, ParseIndex) {
  uint32_t i = 0;
  EXPECT_TRUE(ParseIndex("t-0", &i));
  EXPECT_EQ(i, 0u);
  EXPECT_TRUE(ParseIndex("t-1999", &i));
  EXPECT_EQ(i, 1999u);
  EXPECT_FALSE(ParseIndex("t-", &i));
  EXPECT_FALSE(ParseIndex("x-1", &i));
  EXPECT_FALSE(ParseIndex("t--1", &i));
  EXPECT_FALSE(ParseIndex("t-1a", &i));
  EXPECT_FALSE(ParseIndex("t-99999999999", &i));  // beyond 32 bits
}

TEST(RecordTest, LongestGapCoversIntervalsOverlappingTheWindow) {
  std::vector<Record> r = At({10, 20, 30, 80, 85, 200});
  SortByTime(r);
  Gap g = LongestGap(r, 25, 84);  // 30 -> 80 lies inside; 80 -> 85 overlaps the end
  EXPECT_EQ(g.length_ns, 50);
  EXPECT_EQ(g.from_ns, 30);
  EXPECT_EQ(g.to_ns, 80);
  g = LongestGap(r, 86, 90);  // no record inside: 85 -> 200 spans it
  EXPECT_EQ(g.length_ns, 115);
  g = LongestGap(r, 0, 15);  // from the window's begin to the first record, then 10 -> 20
  EXPECT_EQ(g.length_ns, 10);
  g = LongestGap(r, 250, 300);  // after the last record: to the window's end
  EXPECT_EQ(g.length_ns, 100);
  EXPECT_EQ(g.from_ns, 200);
  EXPECT_EQ(LongestGap(r, 90, 80).length_ns, 0);
  EXPECT_EQ(LongestGap({}, 0, 5).length_ns, 5);
}

TEST(RecordTest, CountsMissingAndFullRate) {
  std::vector<Record> r = At({0, 10, 20, 30, 40, 50, 60, 70, 500, 510, 520, 530});
  SortByTime(r);
  EXPECT_EQ(CountIn(r, 10, 40), 3);
  EXPECT_EQ(CountIn(r, 40, 10), 0);
  EXPECT_EQ(MissingIn(r, 3, 0, 100), 0);
  EXPECT_EQ(MissingIn(r, 3, 500, 501), 2);
  EXPECT_EQ(MissingIn(r, 4, 0, 1000), 1);  // object 3 never ran
  // 1e8 per second = 1 per 10 ns: 100-ns buckets need 9 at 90%.
  EXPECT_EQ(FullRateAt(r, 0, 1e8, 0.9, 100), -1);
  EXPECT_EQ(FullRateAt(r, 0, 1e8, 0.05, 100), 100);
  EXPECT_EQ(FullRateAt(r, 100, 2e7, 0.9, 100), 600);  // 500..530: 2 per 100 ns needed
}

TEST(RecordTest, PidsAcrossASwap) {
  std::vector<Record> r = {{10, 0, 1}, {20, 1, 1}, {30, 0, 2}, {40, 1, 1}, {50, 1, 2}};
  EXPECT_EQ(PidBefore(r, 25), 1u);
  EXPECT_EQ(PidBefore(r, 5), 0u);
  EXPECT_EQ(FirstFromOtherPid(r, 15, 1), 30);
  EXPECT_EQ(FirstFromOtherPid(r, 15, 3), 20);
  EXPECT_EQ(FirstFromOtherPid(r, 60, 1), -1);
}

TEST(RecordTest, SplitMarkers) {
  std::vector<Record> r = {{10, kMarkerMain, 5}, {20, 1, 4}, {30, kMarkerRun, 5}, {40, 2, 5}};
  std::vector<Record> markers = SplitMarkers(r);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].index, 1u);
  EXPECT_EQ(r[1].index, 2u);
  ASSERT_EQ(markers.size(), 2u);
  EXPECT_EQ(MarkerOf(markers, 5, kMarkerMain), 10);
  EXPECT_EQ(MarkerOf(markers, 5, kMarkerRun), 30);
  EXPECT_EQ(MarkerOf(markers, 4, kMarkerRun), -1);
}

}  // namespace
}  // namespace ctrlhost::bench::swap
