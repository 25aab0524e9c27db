#include "runtime/config/internal/yaml_reader.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/utf8.h"

namespace ctrlhost::config::internal {
namespace {

// How many problems one parse reports before it stops listing them.
constexpr size_t kMaxErrors = 50;

bool IsPlain(const YAML::Node& node) { return node.Tag() == "?"; }

bool AllDigits(absl::string_view s, absl::string_view digits) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return digits.find(c) != absl::string_view::npos; });
}

// YAML 1.2 core schema typing of a plain scalar that is not null.
enum class PlainType { kBool, kInt, kFloat, kString };

PlainType TypeOfPlain(absl::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return PlainType::kBool;
  }
  absl::string_view unsigned_part = s;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) unsigned_part.remove_prefix(1);
  if (AllDigits(unsigned_part, "0123456789")) return PlainType::kInt;
  if (absl::StartsWith(s, "0o") && AllDigits(s.substr(2), "01234567")) return PlainType::kInt;
  if (absl::StartsWith(s, "0x") && AllDigits(s.substr(2), "0123456789abcdefABCDEF")) {
    return PlainType::kInt;
  }
  if (unsigned_part == ".inf" || unsigned_part == ".Inf" || unsigned_part == ".INF" ||
      s == ".nan" || s == ".NaN" || s == ".NAN") {
    return PlainType::kFloat;
  }
  // [0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)? or \.[0-9]+(...)
  absl::string_view rest = unsigned_part;
  size_t i = 0;
  size_t mantissa_digits = 0;
  while (i < rest.size() && absl::ascii_isdigit(rest[i])) ++i, ++mantissa_digits;
  if (i < rest.size() && rest[i] == '.') {
    ++i;
    while (i < rest.size() && absl::ascii_isdigit(rest[i])) ++i, ++mantissa_digits;
  }
  if (mantissa_digits == 0) return PlainType::kString;
  if (i < rest.size() && (rest[i] == 'e' || rest[i] == 'E')) {
    ++i;
    if (i < rest.size() && (rest[i] == '-' || rest[i] == '+')) ++i;
    size_t exponent_digits = 0;
    while (i < rest.size() && absl::ascii_isdigit(rest[i])) ++i, ++exponent_digits;
    if (exponent_digits == 0) return PlainType::kString;
  }
  return i == rest.size() ? PlainType::kFloat : PlainType::kString;
}

absl::string_view TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      if (!IsPlain(node)) return "a string";
      switch (TypeOfPlain(node.Scalar())) {
        case PlainType::kBool:
          return "a boolean";
        case PlainType::kInt:
          return "an integer";
        case PlainType::kFloat:
          return "a number";
        case PlainType::kString:
          return "a string";
      }
      return "a string";
    default:
      return "null";
  }
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const size_t substitute =
          diagonal + (absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

bool IsAbsent(const YAML::Node& node) { return !node.IsDefined() || node.IsNull(); }

std::optional<std::string> DidYouMean(absl::string_view name,
                                      const std::vector<absl::string_view>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  // Case-insensitive distance: "workingdir" is one step from nothing but still a typo of
  // "workingDir". Short names allow one edit, longer ones two.
  const size_t limit = name.size() <= 4 ? 1 : 2;
  for (absl::string_view candidate : candidates) {
    const size_t d = EditDistance(name, candidate);
    if (d <= limit && d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best;
}

std::string Index(absl::string_view path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

std::string Join(absl::string_view path, absl::string_view field) {
  if (path.empty()) return std::string(field);
  return absl::StrCat(path, ".", field);
}

SourceLocation YamlReader::Location(const YAML::Node& node) const {
  SourceLocation at;
  at.file = file_;
  if (node.IsDefined()) {
    const YAML::Mark mark = node.Mark();
    if (!mark.is_null()) {
      at.line = mark.line + 1;
      at.column = mark.column + 1;
    }
  }
  return at;
}

void YamlReader::Error(const SourceLocation& at, absl::string_view path,
                       absl::string_view message) {
  // Paths and messages quote the document's own keys and values: a quoted "a\nb" would
  // otherwise forge a line of the error list, "\e[2J" clear the terminal showing it.
  errors_.push_back(Problem{
      at, common::EscapeUnprintable(absl::StrCat(at.ToString(), ": ", path.empty() ? "" : path,
                                                 path.empty() ? "" : ": ", message))});
}

std::vector<std::string> YamlReader::errors() const {
  std::vector<Problem> sorted = errors_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.at.line, a.at.column) < std::tie(b.at.line, b.at.column);
  });
  std::vector<std::string> out;
  for (const Problem& p : sorted) {
    if (out.size() == kMaxErrors) {
      out.push_back(absl::StrCat(file_, ": too many errors; stopped listing them"));
      break;
    }
    out.push_back(p.text);
  }
  return out;
}

std::vector<Field> YamlReader::Fields(const YAML::Node& node, absl::string_view path,
                                      const std::vector<absl::string_view>& known) {
  std::vector<Field> out;
  if (!node.IsMap()) {
    Error(node, path, absl::StrCat("must be a mapping, not ", TypeName(node)));
    return out;
  }
  absl::flat_hash_map<std::string, int> line_of;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) {
      Error(key, path, "field names must be strings");
      continue;
    }
    const std::string name = key.Scalar();
    const std::string field_path = Join(path, name);
    if (auto [it, inserted] = line_of.emplace(name, Location(key).line); !inserted) {
      Error(key, field_path, absl::StrCat("duplicate field (first on line ", it->second, ")"));
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string message = "unknown field";
      if (std::optional<std::string> close = DidYouMean(name, known)) {
        absl::StrAppend(&message, " (did you mean \"", *close, "\"?)");
      }
      Error(key, field_path, message);
      continue;
    }
    out.push_back(Field{name, key, entry.second});
  }
  return out;
}

std::optional<std::string> YamlReader::String(const YAML::Node& node, absl::string_view path) {
  if (IsAbsent(node)) return std::nullopt;
  if (!node.IsScalar()) {
    Error(node, path, absl::StrCat("must be a string, not ", TypeName(node)));
    return std::nullopt;
  }
  if (IsPlain(node) && TypeOfPlain(node.Scalar()) != PlainType::kString) {
    Error(node, path,
          absl::StrCat("must be a string, not ", TypeName(node), " (quote it: \"", node.Scalar(),
                       "\")"));
    return std::nullopt;
  }
  return node.Scalar();
}

namespace {

// A plain scalar TypeOfPlain classified kInt (decimal, 0x hex or 0o octal) as an int64_t; false
// when it does not fit.
bool ParseInt(const std::string& s, int64_t* value) {
  const bool hex = absl::StartsWith(s, "0x");
  if (hex || absl::StartsWith(s, "0o")) {
    uint64_t u = 0;
    for (char c : s.substr(2)) {
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                               : c - 'A' + 10;
      const uint64_t base = hex ? 16 : 8;
      if (u > (static_cast<uint64_t>(INT64_MAX) - digit) / base) return false;
      u = u * base + digit;
    }
    *value = static_cast<int64_t>(u);
    return true;
  }
  return absl::SimpleAtoi(s, value);
}

}  // namespace

std::optional<int64_t> YamlReader::Int(const YAML::Node& node, absl::string_view path, int64_t min,
                                       int64_t max) {
  if (IsAbsent(node)) return std::nullopt;
  int64_t value = 0;
  if (!node.IsScalar() || !IsPlain(node) || TypeOfPlain(node.Scalar()) != PlainType::kInt) {
    Error(node, path, absl::StrCat("must be an integer, not ", TypeName(node)));
    return std::nullopt;
  }
  if (!ParseInt(node.Scalar(), &value)) {  // a YAML integer, but past 64 bits
    Error(node, path, absl::StrCat("out of range: must be between ", min, " and ", max));
    return std::nullopt;
  }
  if (value < min || value > max) {
    Error(node, path, absl::StrCat("must be between ", min, " and ", max));
    return std::nullopt;
  }
  return value;
}

std::optional<double> YamlReader::Double(const YAML::Node& node, absl::string_view path) {
  if (IsAbsent(node)) return std::nullopt;
  double value = 0;
  const bool numeric = node.IsScalar() && IsPlain(node) &&
                       (TypeOfPlain(node.Scalar()) == PlainType::kInt ||
                        TypeOfPlain(node.Scalar()) == PlainType::kFloat);
  if (!numeric || !absl::SimpleAtod(node.Scalar(), &value)) {
    Error(node, path, absl::StrCat("must be a number, not ", TypeName(node)));
    return std::nullopt;
  }
  return value;
}

std::optional<bool> YamlReader::Bool(const YAML::Node& node, absl::string_view path) {
  if (IsAbsent(node)) return std::nullopt;
  if (!node.IsScalar() || !IsPlain(node) || TypeOfPlain(node.Scalar()) != PlainType::kBool) {
    Error(node, path, absl::StrCat("must be true or false, not ", TypeName(node)));
    return std::nullopt;
  }
  return absl::AsciiStrToLower(node.Scalar()) == "true";
}

std::optional<absl::Duration> YamlReader::Duration(const YAML::Node& node, absl::string_view path,
                                                   bool allow_zero) {
  if (IsAbsent(node)) return std::nullopt;
  absl::Duration value;
  // Any scalar: `0` is a plain integer yet a valid duration. absl::ParseDuration reads Go's
  // syntax ("1h30m", "1.5s", "250ms"); infinities are not durations here.
  if (!node.IsScalar() || !absl::ParseDuration(node.Scalar(), &value) ||
      value == absl::InfiniteDuration() || value == -absl::InfiniteDuration()) {
    Error(node, path, "must be a duration such as \"30s\", \"1m30s\" or \"500ms\"");
    return std::nullopt;
  }
  if (value < absl::ZeroDuration() || (!allow_zero && value == absl::ZeroDuration())) {
    Error(node, path, allow_zero ? "must not be negative" : "must be positive");
    return std::nullopt;
  }
  return value;
}

std::vector<YAML::Node> YamlReader::Sequence(const YAML::Node& node, absl::string_view path) {
  std::vector<YAML::Node> out;
  if (IsAbsent(node)) return out;
  if (!node.IsSequence()) {
    Error(node, path, absl::StrCat("must be a list, not ", TypeName(node)));
    return out;
  }
  for (const YAML::Node& item : node) out.push_back(item);
  return out;
}

std::vector<std::string> YamlReader::StringList(const YAML::Node& node, absl::string_view path) {
  std::vector<std::string> out;
  const std::vector<YAML::Node> items = Sequence(node, path);
  for (size_t i = 0; i < items.size(); ++i) {
    if (IsAbsent(items[i])) {
      Error(items[i], Index(path, i), "must be a string, not null");
      continue;
    }
    if (std::optional<std::string> s = String(items[i], Index(path, i))) out.push_back(*s);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> YamlReader::StringMap(const YAML::Node& node,
                                                                       absl::string_view path) {
  std::vector<std::pair<std::string, std::string>> out;
  if (IsAbsent(node)) return out;
  if (!node.IsMap()) {
    Error(node, path, absl::StrCat("must be a mapping, not ", TypeName(node)));
    return out;
  }
  absl::flat_hash_map<std::string, int> line_of;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      Error(entry.first, path, "keys must be strings");
      continue;
    }
    const std::string key = entry.first.Scalar();
    const std::string key_path = Join(path, key);
    if (auto [it, inserted] = line_of.emplace(key, Location(entry.first).line); !inserted) {
      Error(entry.first, key_path, absl::StrCat("duplicate key (first on line ", it->second, ")"));
      continue;
    }
    // A null value is an empty string here (`KEY:` in an env map), as in Kubernetes maps.
    if (IsAbsent(entry.second)) {
      out.emplace_back(key, "");
    } else if (std::optional<std::string> v = String(entry.second, key_path)) {
      out.emplace_back(key, *v);
    }
  }
  return out;
}

}  // namespace ctrlhost::config::internal
