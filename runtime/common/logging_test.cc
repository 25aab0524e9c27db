#include "runtime/common/logging.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::common {
namespace {

const absl::Time kWhen = absl::FromUnixMicros(1'800'000'000'123'456);

TEST(LoggingTest, TextLineHasTimeLevelMessageAndFields) {
  EXPECT_EQ(FormatLogLine(kWhen, LogLevel::kInfo, "watch started",
                          {{"gvk", "apps/v1/Deployment"}, {"rv", 42}}, LogFormat::kText),
            "2027-01-15T08:00:00.123456Z INFO watch started gvk=apps/v1/Deployment rv=42");
}

TEST(LoggingTest, ValuesThatNeedItAreQuoted) {
  const std::string line =
      FormatLogLine(kWhen, LogLevel::kError, "m",
                    {{"err", absl::NotFoundError("no such \"x\"")}, {"empty", ""}, {"ok", true}},
                    LogFormat::kText);
  EXPECT_NE(line.find(R"(err="NOT_FOUND: no such \"x\"")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"(empty="")"), std::string::npos) << line;
  EXPECT_NE(line.find("ok=true"), std::string::npos) << line;
}

TEST(LoggingTest, JsonLineParses) {
  const std::string line = FormatLogLine(kWhen, LogLevel::kWarning, "slow",
                                         {{"took", absl::Milliseconds(1500)}}, LogFormat::kJson);
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["level"], "WARN");
  EXPECT_EQ(j["msg"], "slow");
  EXPECT_EQ(j["took"], "1.5s");
}

TEST(LoggingTest, SinkReceivesLinesAtOrAboveLevel) {
  std::vector<std::string> lines;
  SetLogSink([&](absl::string_view l) { lines.emplace_back(l); });
  SetLogLevel(LogLevel::kWarning);
  LogInfo("dropped");
  LogWarning("kept", {{"k", "v"}});
  SetLogLevel(LogLevel::kInfo);
  SetLogSink(nullptr);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("WARN kept k=v"), std::string::npos);
}

TEST(LoggingTest, ParseLogLevel) {
  LogLevel l;
  EXPECT_TRUE(ParseLogLevel("DEBUG", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_TRUE(ParseLogLevel("warn", &l));
  EXPECT_EQ(l, LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud", &l));
}

}  // namespace
}  // namespace ctrlhost::common
