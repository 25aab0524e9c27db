#include "runtime/common/logging.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/utf8.h"

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

// Regression (attack run, item 2): a plugin's error text in a log line. C0 controls were already
// JSON-escaped in quoted values, but DEL, C1 controls (U+009B is a terminal's CSI), the line
// separators and bidi overrides went out raw in both formats, and a message was never escaped.
// Every one is a visible escape now; the line stays one line; JSON stays valid and round-trips.
TEST(LoggingTest, RegressionPluginTextCannotForgeLinesOrSendTerminalEscapes) {
  const std::string plugin_text =
      "db down\n2027-01-15T08:00:00.000000Z INFO all good\x1b[2J\x7f\xc2\x9b"
      "31m\xe2\x80\xa8\xe2\x80\xae"
      "evil\xff caf\xc3\xa9";
  for (LogFormat format : {LogFormat::kText, LogFormat::kJson}) {
    const std::string line =
        FormatLogLine(kWhen, LogLevel::kWarning, "reconcile failed\x1b[0m\nforged",
                      {{"error", plugin_text}}, format);
    for (unsigned char c : line) {
      EXPECT_FALSE(c < 0x20 || c == 0x7f) << static_cast<int>(c) << " in " << line;
    }
    for (const char* hidden : {"\xc2\x9b", "\xe2\x80\xa8", "\xe2\x80\xae", "\xff"}) {
      EXPECT_EQ(line.find(hidden), std::string::npos) << line;
    }
    EXPECT_NE(line.find("\\n2027-01-15"), std::string::npos) << line;
    EXPECT_NE(line.find("caf\xc3\xa9"), std::string::npos) << line;  // printable text as is
    if (format == LogFormat::kText) {
      EXPECT_NE(line.find("\\u001b[2J\\u007f\\u009b31m\\u2028\\u202eevil"), std::string::npos)
          << line;
      EXPECT_NE(line.find("WARN reconcile failed\\x1b[0m\\nforged error="), std::string::npos)
          << line;
    } else {
      nlohmann::json j = nlohmann::json::parse(line);
      EXPECT_EQ(j["error"], common::ValidUtf8(plugin_text));  // the same text, escaped in JSON
      EXPECT_NE(line.find("\\u007f\\u009b31m\\u2028\\u202eevil"), std::string::npos) << line;
    }
  }
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
