#include "bench/report.h"

#include <limits>
#include <sstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::bench {
namespace {

Reporter MakeReporter(std::vector<std::string> args) {
  static std::vector<std::string> storage;
  storage = std::move(args);
  storage.insert(storage.begin(), "bench");
  static std::vector<char*> argv;
  argv.clear();
  for (std::string& arg : storage) argv.push_back(arg.data());
  return Reporter("storage", static_cast<int>(argv.size()), argv.data());
}

Figure Throughput() {
  Figure figure;
  figure.metric = "create throughput";
  figure.value = 5000;
  figure.unit = "ops/s";
  figure.baseline = 20000;
  figure.target = ">= 4000/s";
  figure.met = true;
  return figure;
}

TEST(FigureTest, RatioIsValueOverBaselineUnlessGiven) {
  Figure figure = Throughput();
  EXPECT_DOUBLE_EQ(*figure.EffectiveRatio(), 0.25);
  figure.ratio = 4;
  EXPECT_DOUBLE_EQ(*figure.EffectiveRatio(), 4);
  figure.ratio.reset();
  figure.baseline = 0;  // no division by zero
  EXPECT_FALSE(figure.EffectiveRatio().has_value());
  figure.baseline.reset();
  EXPECT_FALSE(figure.EffectiveRatio().has_value());
}

TEST(ReporterTest, JsonFlagIsConsumedOtherArgsKept) {
  Reporter reporter = MakeReporter({"--objects=100", "--json"});
  EXPECT_TRUE(reporter.json());
  EXPECT_EQ(reporter.args(), std::vector<std::string>{"--objects=100"});
  EXPECT_FALSE(MakeReporter({}).json());
}

TEST(ReporterTest, JsonLineHasEveryField) {
  Reporter reporter = MakeReporter({"--json"});
  nlohmann::json line = nlohmann::json::parse(reporter.FormatJson(Throughput()));
  EXPECT_EQ(line["bench"], "storage");
  EXPECT_EQ(line["metric"], "create throughput");
  EXPECT_EQ(line["value"], 5000);
  EXPECT_EQ(line["unit"], "ops/s");
  EXPECT_EQ(line["baseline"], 20000);
  EXPECT_DOUBLE_EQ(line["ratio"].get<double>(), 0.25);
  EXPECT_EQ(line["target"], ">= 4000/s");
  EXPECT_EQ(line["met"], true);
}

TEST(ReporterTest, JsonOmitsAbsentFieldsAndNullsNonFinite) {
  Reporter reporter = MakeReporter({"--json"});
  Figure figure;
  figure.metric = "m";
  figure.value = std::numeric_limits<double>::infinity();
  figure.unit = "x";
  nlohmann::json line = nlohmann::json::parse(reporter.FormatJson(figure));
  EXPECT_TRUE(line["value"].is_null());
  EXPECT_FALSE(line.contains("baseline"));
  EXPECT_FALSE(line.contains("ratio"));
  EXPECT_FALSE(line.contains("target"));
  EXPECT_FALSE(line.contains("met"));
}

TEST(ReporterTest, PrintJsonWritesOneLinePerFigure) {
  Reporter reporter = MakeReporter({"--json"});
  reporter.Add(Throughput());
  reporter.Add(Throughput());
  std::ostringstream out;
  reporter.Print(out);
  std::istringstream lines(out.str());
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_NO_THROW(nlohmann::json::parse(line)) << line;
  }
  EXPECT_EQ(count, 2);
}

TEST(ReporterTest, TableHasHeaderAndAlignedRows) {
  Reporter reporter = MakeReporter({});
  reporter.Add(Throughput());
  Figure plain;
  plain.metric = "memory";
  plain.value = 0.5;
  plain.unit = "MiB";
  reporter.Add(plain);
  std::ostringstream out;
  reporter.Print(out);
  EXPECT_EQ(out.str(),
            "# storage\n"
            "METRIC             VALUE  UNIT   BASELINE  RATIO  TARGET     MET\n"
            "create throughput   5000  ops/s     20000  0.25x  >= 4000/s  yes\n"
            "memory               0.5  MiB           -      -  -          -\n");
}

TEST(ReporterTest, FinishFailsWhenATargetIsMissed) {
  Reporter reporter = MakeReporter({"--json"});
  reporter.Add(Throughput());
  EXPECT_EQ(reporter.Finish(), 0);
  Figure missed = Throughput();
  missed.met = false;
  reporter.Add(missed);
  EXPECT_EQ(reporter.Finish(), 1);
}

TEST(PercentileTest, NearestRank) {
  std::vector<absl::Duration> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(absl::Milliseconds(i));
  EXPECT_EQ(Percentile(samples, 50), absl::Milliseconds(50));
  EXPECT_EQ(Percentile(samples, 99), absl::Milliseconds(99));
  EXPECT_EQ(Percentile(samples, 100), absl::Milliseconds(100));
  EXPECT_EQ(Percentile(samples, 0), absl::Milliseconds(1));
  EXPECT_EQ(Percentile(samples, 250), absl::Milliseconds(100));  // clamped
  EXPECT_EQ(Percentile({absl::Seconds(3)}, 99.9), absl::Seconds(3));
  EXPECT_EQ(Percentile({}, 50), absl::ZeroDuration());
}

TEST(StopwatchTest, ElapsedIsMonotonic) {
  Stopwatch watch;
  absl::Duration first = watch.Elapsed();
  absl::Duration second = watch.Elapsed();
  EXPECT_GE(first, absl::ZeroDuration());
  EXPECT_GE(second, first);
  watch.Restart();
  EXPECT_GE(watch.Seconds(), 0.0);
}

}  // namespace
}  // namespace ctrlhost::bench
