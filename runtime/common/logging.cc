#include "runtime/common/logging.h"

#include <atomic>
#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "nlohmann/json.hpp"
#include "runtime/common/mutex.h"

namespace ctrlhost::common {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

struct Output {
  Mutex mu;
  std::function<void(absl::string_view)> sink ABSL_GUARDED_BY(mu);
};

Output& GetOutput() {
  static Output* const output = new Output();
  return *output;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "INFO";
}

bool NeedsQuoting(absl::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      return true;
    }
  }
  return false;
}

void AppendValue(std::string* out, absl::string_view v) {
  if (!NeedsQuoting(v)) {
    out->append(v.data(), v.size());
    return;
  }
  // JSON string escaping is a well-defined quoting that log tools understand.
  out->append(nlohmann::json(std::string(v))
                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
void SetLogFormat(LogFormat format) { g_format.store(static_cast<int>(format)); }

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "debug") {
    *level = LogLevel::kDebug;
  } else if (t == "info") {
    *level = LogLevel::kInfo;
  } else if (t == "warning" || t == "warn") {
    *level = LogLevel::kWarning;
  } else if (t == "error") {
    *level = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

void SetLogSink(std::function<void(absl::string_view line)> sink) {
  Output& out = GetOutput();
  MutexLock lock(&out.mu);
  out.sink = std::move(sink);
}

std::string FormatLogLine(absl::Time when, LogLevel level, absl::string_view message,
                          std::initializer_list<LogField> fields, LogFormat format) {
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", when, absl::UTCTimeZone());
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json j;
    j["ts"] = ts;
    j["level"] = LevelName(level);
    j["msg"] = std::string(message);
    for (const LogField& f : fields) j[f.key()] = f.value();
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = absl::StrCat(ts, " ", LevelName(level), " ", message);
  for (const LogField& f : fields) {
    line.push_back(' ');
    line.append(f.key());
    line.push_back('=');
    AppendValue(&line, f.value());
  }
  return line;
}

void Log(LogLevel level, absl::string_view message, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  const std::string line =
      FormatLogLine(absl::Now(), level, message, fields, static_cast<LogFormat>(g_format.load()));
  Output& out = GetOutput();
  MutexLock lock(&out.mu);
  if (out.sink) {
    out.sink(line);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fputc('\n', stderr);
}

}  // namespace ctrlhost::common
