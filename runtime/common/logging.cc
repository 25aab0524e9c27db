#include "runtime/common/logging.h"

#include <atomic>
#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/common/mutex.h"
#include "runtime/common/utf8.h"

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

// Whether `v` holds a character EscapeUnprintable would escape (controls, C1, line separators,
// bidi overrides, ill-formed bytes). Plain ASCII is decided without allocating.
bool HasUnprintable(absl::string_view v) {
  bool non_ascii = false;
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
    non_ascii |= u >= 0x80;
  }
  return non_ascii && EscapeUnprintable(v) != v;
}

bool NeedsQuoting(absl::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\') return true;
  }
  return HasUnprintable(v);
}

// Valid JSON text (nlohmann's dump: C0 controls already escaped, ill-formed UTF-8 replaced) with
// DEL, C1 controls (U+0080..U+009F), U+2028/U+2029 and the bidi embeddings, overrides and
// isolates written as \uXXXX escapes too. nlohmann leaves them raw; a terminal showing the log
// would act on them. The meaning of the JSON is unchanged.
std::string EscapeHiddenInJson(std::string text) {
  std::string out;
  size_t copied = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t code_point = 0;
    size_t length = 0;
    if (c == 0x7f) {
      code_point = 0x7f;
      length = 1;
    } else if (c == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) {
        code_point = next;
        length = 2;
      }
    } else if ((c == 0xe2) && i + 2 < text.size()) {
      const auto b1 = static_cast<unsigned char>(text[i + 1]);
      const auto b2 = static_cast<unsigned char>(text[i + 2]);
      if ((b1 == 0x80 && b2 >= 0xa8 && b2 <= 0xae) || (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9)) {
        code_point = 0x2000 | ((b1 & 0x3f) << 6) | (b2 & 0x3f);
        length = 3;
      }
    }
    if (length == 0) continue;
    out.append(text, copied, i - copied);
    absl::StrAppendFormat(&out, "\\u%04x", code_point);
    i += length - 1;
    copied = i + 1;
  }
  if (copied == 0) return text;
  out.append(text, copied, std::string::npos);
  return out;
}

void AppendValue(std::string* out, absl::string_view v) {
  if (!NeedsQuoting(v)) {
    out->append(v.data(), v.size());
    return;
  }
  // JSON string escaping is a well-defined quoting that log tools understand.
  out->append(
      EscapeHiddenInJson(nlohmann::json(std::string(v))
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
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
    return EscapeHiddenInJson(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  // The message is not quoted: one with outside text in it is escaped, so it stays one line.
  std::string line =
      absl::StrCat(ts, " ", LevelName(level), " ",
                   HasUnprintable(message) ? EscapeUnprintable(message) : std::string(message));
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
