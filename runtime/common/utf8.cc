#include "runtime/common/utf8.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace ctrlhost::common {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length of the well-formed sequence at `text[at]`, or 0 with `*bad` set to the length of
// the maximal ill-formed subpart (at least 1) to replace.
size_t SequenceAt(absl::string_view text, size_t at, size_t* bad) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char c = byte(at);
  if (c < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // overlong
    if (c == 0xED) high = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;   // overlong
    if (c == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    if (at + i >= text.size()) {
      *bad = i;
      return 0;
    }
    const unsigned char next = byte(at + i);
    const bool ok = i == 1 ? (next >= low && next <= high) : IsContinuation(next);
    if (!ok) {
      *bad = i;
      return 0;
    }
  }
  return length;
}

}  // namespace

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  // Back up over at most 3 continuation bytes to the lead byte of the character cut at
  // `max_bytes`; that character is dropped whole.
  size_t end = max_bytes;
  for (int steps = 0; steps < 3 && end > 0; ++steps) {
    if (!IsContinuation(static_cast<unsigned char>(text[end]))) break;
    --end;
  }
  if (end < max_bytes && IsContinuation(static_cast<unsigned char>(text[end]))) {
    // Four or more continuation bytes in a row: not a character to keep whole anyway.
    end = max_bytes;
  }
  return text.substr(0, end);
}

bool IsValidUtf8(absl::string_view text) {
  for (size_t at = 0; at < text.size();) {
    size_t bad = 0;
    const size_t length = SequenceAt(text, at, &bad);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

std::string ValidUtf8(absl::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t at = 0; at < text.size();) {
    size_t bad = 0;
    const size_t length = SequenceAt(text, at, &bad);
    if (length == 0) {
      out.append(kReplacement);
      at += bad;
    } else {
      out.append(text.data() + at, length);
      at += length;
    }
  }
  return out;
}

std::string EscapeUnprintable(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const auto c = static_cast<unsigned char>(text[at]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
      ++at;
      continue;
    }
    if (c < 0x80) {
      if (c == '\n') {
        out.append("\\n");
      } else if (c == '\r') {
        out.append("\\r");
      } else if (c == '\t') {
        out.append("\\t");
      } else {
        absl::StrAppendFormat(&out, "\\x%02x", c);
      }
      ++at;
      continue;
    }
    size_t bad = 0;
    const size_t length = SequenceAt(text, at, &bad);
    if (length == 0) {
      for (size_t i = 0; i < bad; ++i) {
        absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(text[at + i]));
      }
      at += bad;
      continue;
    }
    uint32_t code_point = c & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < length; ++i) {
      code_point = (code_point << 6) | (static_cast<unsigned char>(text[at + i]) & 0x3F);
    }
    const bool hidden = (code_point >= 0x80 && code_point <= 0x9F) || code_point == 0x2028 ||
                        code_point == 0x2029 || (code_point >= 0x202A && code_point <= 0x202E) ||
                        (code_point >= 0x2066 && code_point <= 0x2069);
    if (hidden) {
      absl::StrAppendFormat(&out, "\\u%04x", code_point);
    } else {
      out.append(text.data() + at, length);
    }
    at += length;
  }
  return out;
}

}  // namespace ctrlhost::common
