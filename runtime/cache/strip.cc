#include "runtime/cache/strip.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"

namespace ctrlhost::cache {
namespace {

constexpr absl::string_view kLastApplied = "kubectl.kubernetes.io/last-applied-configuration";

// Bytes that matter while skipping over a container: quotes start strings, brackets nest.
struct SpecialBytes {
  bool table[256] = {};
  constexpr SpecialBytes() {
    table[static_cast<unsigned char>('"')] = true;
    table[static_cast<unsigned char>('{')] = true;
    table[static_cast<unsigned char>('}')] = true;
    table[static_cast<unsigned char>('[')] = true;
    table[static_cast<unsigned char>(']')] = true;
  }
};
constexpr SpecialBytes kSpecial;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether the raw (still escaped) JSON string contents `raw` decode to the ASCII `want`.
bool RawKeyEquals(absl::string_view raw, absl::string_view want) {
  // Escapes only make the raw form longer; most keys differ in size and cost one comparison.
  if (raw.size() < want.size()) return false;
  if (raw.size() == want.size() && raw == want) return true;
  if (std::memchr(raw.data(), '\\', raw.size()) == nullptr) return false;
  size_t j = 0;
  for (size_t i = 0; i < raw.size();) {
    uint32_t c = static_cast<unsigned char>(raw[i]);
    if (c != '\\') {
      ++i;
    } else {
      if (i + 1 >= raw.size()) return false;
      const char e = raw[i + 1];
      i += 2;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          c = static_cast<unsigned char>(e);
          break;
        case 'b':
          c = '\b';
          break;
        case 'f':
          c = '\f';
          break;
        case 'n':
          c = '\n';
          break;
        case 'r':
          c = '\r';
          break;
        case 't':
          c = '\t';
          break;
        case 'u': {
          if (i + 4 > raw.size()) return false;
          c = 0;
          for (size_t k = 0; k < 4; ++k) {
            const int h = HexValue(raw[i + k]);
            if (h < 0) return false;
            c = c * 16 + static_cast<uint32_t>(h);
          }
          i += 4;
          break;
        }
        default:
          return false;
      }
    }
    // `want` is ASCII: any other code point (or UTF-8 byte) cannot match.
    if (c >= 0x80 || j >= want.size() || static_cast<unsigned char>(want[j]) != c) return false;
    ++j;
  }
  return j == want.size();
}

// A forward reader over the input. Every read is bounds-checked; a false return means the
// input is not what the scanner can follow.
class Scanner {
 public:
  explicit Scanner(absl::string_view s)
      : begin_(s.data()), p_(s.data()), end_(s.data() + s.size()) {}

  size_t pos() const { return static_cast<size_t>(p_ - begin_); }

  void SkipSpace() {
    while (p_ < end_ && IsSpace(*p_)) ++p_;
  }

  // Consumes `c` after optional whitespace.
  bool Consume(char c) {
    SkipSpace();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  // The next non-space byte, not consumed; '\0' at the end.
  char Peek() {
    SkipSpace();
    return p_ < end_ ? *p_ : '\0';
  }

  // Reads a string at the current position; `raw` is its contents with escapes undecoded.
  bool ScanString(absl::string_view* raw) {
    if (p_ >= end_ || *p_ != '"') return false;
    const char* start = p_ + 1;
    const char* after = StringEnd(start, end_);
    if (after == nullptr) return false;
    *raw = absl::string_view(start, static_cast<size_t>(after - 1 - start));
    p_ = after;
    return true;
  }

  bool SkipValue() {
    const char c = Peek();
    if (c == '"') {
      absl::string_view ignored;
      return ScanString(&ignored);
    }
    if (c == '{' || c == '[') return SkipContainer();
    // A number or literal: up to the next delimiter.
    const char* start = p_;
    while (p_ < end_ && !IsSpace(*p_) && *p_ != ',' && *p_ != '}' && *p_ != ']') ++p_;
    return p_ > start;
  }

 private:
  // Given the first byte after a string's opening quote, returns the byte after its closing
  // quote, or nullptr when the input ends first. Short strings (managedFields' "f:name" keys)
  // take a plain loop; long ones continue with memchr, checking the backslashes before each
  // quote found. Works on locals: stores through char pointers would make the compiler reload
  // a member pointer on every byte.
  static const char* StringEnd(const char* const start, const char* const end) {
    const char* p = start;
    for (int n = 0; n < 32; ++n) {
      if (p >= end) return nullptr;
      const char c = *p++;
      if (c == '"') return p;
      if (c == '\\') {
        if (p >= end) return nullptr;
        ++p;
      }
    }
    while (true) {
      const void* found = std::memchr(p, '"', static_cast<size_t>(end - p));
      if (found == nullptr) return nullptr;
      const char* quote = static_cast<const char*>(found);
      // The quote ends the string unless an odd number of backslashes precedes it.
      const char* b = quote;
      while (b > start && b[-1] == '\\') --b;
      p = quote + 1;
      if (((quote - b) & 1) == 0) return p;
    }
  }

  // Skips a container by matching brackets; strings are skipped whole so that brackets and
  // quotes inside them do not count.
  bool SkipContainer() {
    const char* p = p_;
    const char* const end = end_;
    size_t depth = 0;
    while (p < end) {
      const unsigned char c = static_cast<unsigned char>(*p++);
      if (!kSpecial.table[c]) continue;
      if (c == '"') {
        p = StringEnd(p, end);
        if (p == nullptr) return false;
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else {
        if (depth == 0) return false;
        if (--depth == 0) {
          p_ = p;
          return true;
        }
      }
    }
    return false;
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
};

// The same reads over simdjson's stage-1 structural indexes of a document it accepted: the
// offsets of every `{}[]:,` and of the first byte of every string and scalar. Skipping a value
// walks its tokens (a string is one token), never its bytes. pos() after a value is the offset
// of the next token, so a cut also takes the whitespace before the following comma or brace.
// Offsets are checked against the input size, so wrong indexes cannot read out of bounds.
class TokenCursor {
 public:
  TokenCursor(absl::string_view json, absl::Span<const uint32_t> tokens)
      : json_(json), tokens_(tokens) {}

  size_t pos() const { return i_ < tokens_.size() ? tokens_[i_] : json_.size(); }
  void SkipSpace() {}

  bool Consume(char c) {
    if (Peek() != c) return false;
    ++i_;
    return true;
  }

  char Peek() const {
    const size_t at = pos();
    return at < json_.size() ? json_[at] : '\0';
  }

  bool ScanString(absl::string_view* raw) {
    if (Peek() != '"') return false;
    const size_t quote = pos();
    ++i_;
    // The closing quote is the last non-space byte before the next token.
    size_t end = std::min(pos(), json_.size());
    while (end > quote + 1 && IsSpace(json_[end - 1])) --end;
    if (end < quote + 2 || json_[end - 1] != '"') return false;
    *raw = json_.substr(quote + 1, end - 1 - (quote + 1));
    return true;
  }

  bool SkipValue() {
    const char c = Peek();
    if (c == '\0') return false;
    ++i_;
    if (c != '{' && c != '[') return true;  // a string or scalar is one token
    size_t depth = 1;
    while (i_ < tokens_.size()) {
      const size_t at = tokens_[i_++];
      if (at >= json_.size()) return false;
      const char t = json_[at];
      if (t == '{' || t == '[') {
        ++depth;
      } else if ((t == '}' || t == ']') && --depth == 0) {
        return true;
      }
    }
    return false;
  }

 private:
  const absl::string_view json_;
  const absl::Span<const uint32_t> tokens_;
  size_t i_ = 0;
};

// Turns "member i is removed / kept" decisions of one object into cuts that also remove the
// right commas. A removed member after a kept one takes the comma before it: [end of the
// previous value, end of its value). A removed member before any kept one takes everything up
// to the next member's key: [its key, next key), or up to its own end when it is the last.
class MemberCuts {
 public:
  explicit MemberCuts(StripCuts* out) : out_(out) {}

  // Called when a member's key starts at `start`, before anything inside it is cut.
  void Begin(size_t start) {
    if (pending_) {
      out_->push_back({pending_start_, start});
      pending_ = false;
    }
  }

  // Called after the member's value; `end` is just past it.
  void End(size_t start, size_t end, bool remove) {
    if (remove) {
      if (kept_any_) {
        out_->push_back({previous_end_, end});
      } else {
        pending_ = true;
        pending_start_ = start;
      }
    } else {
      kept_any_ = true;
    }
    previous_end_ = end;
  }

  void Close() {
    if (pending_) out_->push_back({pending_start_, previous_end_});
    pending_ = false;
  }

 private:
  StripCuts* out_;
  bool kept_any_ = false;
  bool pending_ = false;
  size_t pending_start_ = 0;
  size_t previous_end_ = 0;
};

// Scans the annotations object at the current position. Appends the cuts of last-applied
// members to `cuts`; `*kept` counts the other members, `*removed` the cut ones.
template <typename Cursor>
bool ScanAnnotations(Cursor& s, StripCuts* cuts, size_t* kept, size_t* removed) {
  if (!s.Consume('{')) return false;
  if (s.Consume('}')) return true;
  MemberCuts members(cuts);
  while (true) {
    s.SkipSpace();
    const size_t start = s.pos();
    absl::string_view key;
    if (!s.ScanString(&key) || !s.Consume(':') || !s.SkipValue()) return false;
    const bool remove = RawKeyEquals(key, kLastApplied);
    ++(remove ? *removed : *kept);
    members.Begin(start);
    members.End(start, s.pos(), remove);
    if (s.Consume(',')) continue;
    if (s.Consume('}')) break;
    return false;
  }
  members.Close();
  return true;
}

template <typename Cursor>
bool ScanMetadata(Cursor& s, StripSelection selection, StripCuts* cuts) {
  if (!s.Consume('{')) return false;
  if (s.Consume('}')) return true;
  MemberCuts members(cuts);
  while (true) {
    s.SkipSpace();
    const size_t start = s.pos();
    absl::string_view key;
    if (!s.ScanString(&key) || !s.Consume(':')) return false;
    members.Begin(start);
    const size_t mark = cuts->size();
    bool remove = false;
    if (selection.managed_fields && RawKeyEquals(key, "managedFields")) {
      if (!s.SkipValue()) return false;
      remove = true;
    } else if (selection.last_applied && s.Peek() == '{' && RawKeyEquals(key, "annotations")) {
      size_t kept = 0;
      size_t removed = 0;
      if (!ScanAnnotations(s, cuts, &kept, &removed)) return false;
      remove = removed > 0 && kept == 0;  // nothing left: drop the map
    } else if (!s.SkipValue()) {
      return false;
    }
    if (remove) cuts->resize(mark);  // the whole member goes, with any cut inside it
    members.End(start, s.pos(), remove);
    if (s.Consume(',')) continue;
    if (s.Consume('}')) break;
    return false;
  }
  members.Close();
  return true;
}

absl::Status Unreadable(size_t pos) {
  return absl::InvalidArgumentError("object JSON is malformed near byte " + std::to_string(pos) +
                                    " (stripping metadata)");
}

template <typename Cursor>
absl::Status FindCuts(Cursor& s, StripSelection selection, StripCuts* cuts) {
  cuts->clear();
  if (!selection.managed_fields && !selection.last_applied) return absl::OkStatus();
  if (!s.Consume('{')) return Unreadable(s.pos());
  if (s.Consume('}')) return absl::OkStatus();
  while (true) {
    s.SkipSpace();
    absl::string_view key;
    if (!s.ScanString(&key) || !s.Consume(':')) return Unreadable(s.pos());
    if (s.Peek() == '{' && RawKeyEquals(key, "metadata")) {
      if (!ScanMetadata(s, selection, cuts)) return Unreadable(s.pos());
    } else if (!s.SkipValue()) {
      return Unreadable(s.pos());
    }
    if (s.Consume(',')) continue;
    if (s.Consume('}')) break;
    return Unreadable(s.pos());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FindStripCuts(absl::string_view json, StripSelection selection, StripCuts* cuts) {
  Scanner scanner(json);
  return FindCuts(scanner, selection, cuts);
}

absl::Status FindStripCutsInTokens(absl::string_view json, absl::Span<const uint32_t> tokens,
                                   StripSelection selection, StripCuts* cuts) {
  TokenCursor cursor(json, tokens);
  return FindCuts(cursor, selection, cuts);
}

std::string ApplyStripCuts(absl::string_view json, const StripCuts& cuts) {
  size_t removed = 0;
  for (const ByteRange& c : cuts) removed += c.end - c.begin;
  std::string out;
  out.reserve(json.size() - removed);
  size_t at = 0;
  for (const ByteRange& c : cuts) {
    out.append(json.data() + at, c.begin - at);
    at = c.end;
  }
  out.append(json.data() + at, json.size() - at);
  return out;
}

}  // namespace ctrlhost::cache
