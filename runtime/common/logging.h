// Structured logging: one line per record, a level, a message and key=value fields.
//
//   common::LogInfo("watch started", {{"gvk", gvk}, {"resourceVersion", rv}});
//   // 2026-11-21T23:00:00.123456Z INFO watch started gvk=apps/v1/Deployment resourceVersion=42
//
// Values are formatted with absl::StrCat where possible (numbers, strings), absl::Status and
// absl::Duration have their own forms; values with spaces, quotes, '=' or anything
// common::EscapeUnprintable escapes are quoted as JSON strings, with C0 controls, DEL, C1
// controls, U+2028/U+2029 and bidi overrides as \uXXXX (also in the JSON format), and a message
// carrying such characters is escaped: outside text (a plugin's error, a server's message)
// cannot break a record into two lines or reach a terminal as an escape sequence. Lines
// below the process log level are dropped before they are formatted. Records go to stderr
// unless a sink is installed (tests capture them that way).
//
// Thread-safe: any thread may log; lines never interleave.
#ifndef CTRLHOST_RUNTIME_COMMON_LOGGING_H_
#define CTRLHOST_RUNTIME_COMMON_LOGGING_H_

#include <functional>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ctrlhost::common {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// One key=value pair of a log record. Holds copies: safe to build from temporaries.
class LogField {
 public:
  LogField(absl::string_view key, absl::string_view value) : key_(key), value_(value) {}
  LogField(absl::string_view key, const std::string& value) : key_(key), value_(value) {}
  LogField(absl::string_view key, const char* value) : key_(key), value_(value) {}
  LogField(absl::string_view key, const absl::Status& value)
      : key_(key), value_(value.ToString()) {}
  LogField(absl::string_view key, absl::Duration value)
      : key_(key), value_(absl::FormatDuration(value)) {}
  LogField(absl::string_view key, bool value) : key_(key), value_(value ? "true" : "false") {}
  template <typename T, typename = decltype(absl::StrCat(std::declval<const T&>()))>
  LogField(absl::string_view key, const T& value) : key_(key), value_(absl::StrCat(value)) {}

  const std::string& key() const { return key_; }
  const std::string& value() const { return value_; }

 private:
  std::string key_;
  std::string value_;
};

bool LogEnabled(LogLevel level);
void Log(LogLevel level, absl::string_view message, std::initializer_list<LogField> fields = {});

inline void LogDebug(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kDebug, m, f);
}
inline void LogInfo(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kInfo, m, f);
}
inline void LogWarning(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kWarning, m, f);
}
inline void LogError(absl::string_view m, std::initializer_list<LogField> f = {}) {
  Log(LogLevel::kError, m, f);
}

void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
// Parses "debug", "info", "warning"/"warn", "error".
bool ParseLogLevel(absl::string_view text, LogLevel* level);

// Replaces the output (stderr) with `sink`, which receives each formatted line without the
// trailing newline; nullptr restores stderr. For tests and for capturing plugin output.
void SetLogSink(std::function<void(absl::string_view line)> sink);

// Formats one record the way Log() writes it, at the given time.
std::string FormatLogLine(absl::Time when, LogLevel level, absl::string_view message,
                          std::initializer_list<LogField> fields, LogFormat format);

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_LOGGING_H_
