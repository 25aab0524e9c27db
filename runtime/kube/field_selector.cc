// FieldSelector, declared in selector.h, after apimachinery's pkg/fields/selector.go.
#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/selector.h"

namespace ctrlhost::kube {

std::string EscapeFieldValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\' || c == ',' || c == '=') out += '\\';
    out += c;
  }
  return out;
}

absl::StatusOr<std::string> UnescapeFieldValue(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  bool in_slash = false;
  for (char c : value) {
    if (in_slash) {
      if (c != '\\' && c != ',' && c != '=') {
        return BadRequestError(absl::StrCat("invalid field selector: invalid escape sequence: \\",
                                            absl::string_view(&c, 1)));
      }
      out += c;
      in_slash = false;
      continue;
    }
    if (c == '\\') {
      in_slash = true;
    } else if (c == ',' || c == '=') {
      return BadRequestError(absl::StrCat("invalid field selector: unescaped character in value: '",
                                          absl::string_view(&c, 1), "'"));
    } else {
      out += c;
    }
  }
  if (in_slash) return BadRequestError("invalid field selector: invalid escape sequence: \\");
  return out;
}

absl::StatusOr<FieldSelector> FieldSelector::Parse(absl::string_view text) {
  // Split on commas that are not escaped; the escapes stay for UnescapeFieldValue.
  std::vector<std::string> parts;
  size_t start = 0;
  bool in_slash = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (in_slash) {
      in_slash = false;
    } else if (text[i] == '\\') {
      in_slash = true;
    } else if (text[i] == ',') {
      parts.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.emplace_back(text.substr(start));

  FieldSelector selector;
  for (const std::string& raw : parts) {
    absl::string_view part = absl::StripAsciiWhitespace(raw);
    if (part.empty()) continue;
    // The field has no escapes: the first operator splits. "!=" and "==" win over "=".
    size_t op_pos = absl::string_view::npos;
    size_t op_len = 0;
    bool equals = true;
    for (size_t i = 0; i < part.size(); ++i) {
      absl::string_view rest = part.substr(i);
      if (rest.substr(0, 2) == "!=") {
        op_pos = i, op_len = 2, equals = false;
      } else if (rest.substr(0, 2) == "==") {
        op_pos = i, op_len = 2;
      } else if (rest[0] == '=') {
        op_pos = i, op_len = 1;
      } else {
        continue;
      }
      break;
    }
    absl::string_view field =
        op_pos == absl::string_view::npos ? "" : absl::StripAsciiWhitespace(part.substr(0, op_pos));
    // A field ending in "!" (from "a! =b") would print as "a!=b", a different selector.
    if (field.empty() || field.back() == '!') {
      return BadRequestError(
          absl::StrCat("invalid selector: '", text, "'; can't understand '", part, "'"));
    }
    absl::StatusOr<std::string> value =
        UnescapeFieldValue(absl::StripAsciiWhitespace(part.substr(op_pos + op_len)));
    if (!value.ok()) return value.status();
    selector.terms_.push_back({std::string(field), equals, *std::move(value)});
  }
  // Canonical order, so that equal selectors compare equal and print the same.
  auto text_of = [](const Term& t) {
    return absl::StrCat(t.field, t.equals ? "=" : "!=", EscapeFieldValue(t.value));
  };
  std::sort(selector.terms_.begin(), selector.terms_.end(),
            [&](const Term& a, const Term& b) { return text_of(a) < text_of(b); });
  return selector;
}

bool FieldSelector::Matches(const Fields& fields) const {
  for (const Term& term : terms_) {
    auto it = fields.find(term.field);
    absl::string_view actual = it == fields.end() ? absl::string_view() : it->second;
    if ((actual == term.value) != term.equals) return false;
  }
  return true;
}

std::string FieldSelector::ToString() const {
  std::vector<std::string> parts;
  parts.reserve(terms_.size());
  for (const Term& t : terms_) {
    parts.push_back(absl::StrCat(t.field, t.equals ? "=" : "!=", EscapeFieldValue(t.value)));
  }
  return absl::StrJoin(parts, ",");
}

std::optional<std::string> FieldSelector::RequiresExactMatch(absl::string_view field) const {
  for (const Term& t : terms_) {
    if (t.equals && t.field == field) return t.value;
  }
  return std::nullopt;
}

absl::Status FieldSelector::ValidateFields(
    const absl::flat_hash_set<std::string>& supported) const {
  for (const Term& t : terms_) {
    if (!supported.contains(t.field)) {
      return BadRequestError(absl::StrCat("field label not supported: ", t.field));
    }
  }
  return absl::OkStatus();
}

}  // namespace ctrlhost::kube
