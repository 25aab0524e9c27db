#include "runtime/kube/shard_selector.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ctrlhost::kube {
namespace {

constexpr absl::string_view kGrammar =
    "want shardRange(object.metadata.uid, '0x<hex>', '0x<hex>') or with object.metadata.namespace, "
    "ranges joined by ||";

// A cursor over the selector's text that reports errors with the offset.
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  void SkipSpace() {
    while (at_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[at_]))) {
      ++at_;
    }
  }
  bool Done() {
    SkipSpace();
    return at_ == text_.size();
  }
  bool Take(absl::string_view token) {
    SkipSpace();
    if (text_.substr(at_, token.size()) != token) return false;
    at_ += token.size();
    return true;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid shard selector at offset ", at_, ": ", what, " (", kGrammar, ")"));
  }
  // A single-quoted 0x-prefixed hex number of at most 2^64.
  absl::StatusOr<absl::uint128> Hex() {
    SkipSpace();
    if (!Take("'0x") && !Take("'0X")) return Error("expected a quoted hex bound like '0x0'");
    absl::uint128 value = 0;
    size_t digits = 0;
    while (at_ < text_.size() && absl::ascii_isxdigit(static_cast<unsigned char>(text_[at_]))) {
      const char c = absl::ascii_tolower(static_cast<unsigned char>(text_[at_]));
      value = value * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
      ++at_;
      if (++digits > 17) return Error("hex bound longer than 17 digits");
    }
    if (digits == 0) return Error("hex bound without digits");
    if (!Take("'")) return Error("expected ' after the hex bound");
    if (value > (absl::uint128(1) << 64)) return Error("hex bound above 0x10000000000000000");
    return value;
  }

 private:
  absl::string_view text_;
  size_t at_ = 0;
};

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

absl::StatusOr<ShardSelector> ShardSelector::Parse(absl::string_view text) {
  if (text.size() > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("invalid shard selector: longer than ",
                                                   kMaxBytes, " bytes (", text.size(), ")"));
  }
  ShardSelector s;
  s.text_ = std::string(text);
  Scanner in(text);
  if (in.Done()) return in.Error("empty");
  bool first = true;
  do {
    if (s.ranges_.size() == kMaxRanges) {
      return in.Error(absl::StrCat("more than ", kMaxRanges, " ranges"));
    }
    if (!in.Take("shardRange")) return in.Error("expected shardRange");
    if (!in.Take("(")) return in.Error("expected (");
    Field field;
    if (in.Take("object.metadata.uid")) {
      field = Field::kUid;
    } else if (in.Take("object.metadata.namespace")) {
      field = Field::kNamespace;
    } else {
      return in.Error("expected object.metadata.uid or object.metadata.namespace");
    }
    if (!first && field != s.field_) return in.Error("every range must hash the same field");
    s.field_ = field;
    first = false;
    if (!in.Take(",")) return in.Error("expected ,");
    absl::StatusOr<absl::uint128> start = in.Hex();
    if (!start.ok()) return start.status();
    if (!in.Take(",")) return in.Error("expected ,");
    absl::StatusOr<absl::uint128> end = in.Hex();
    if (!end.ok()) return end.status();
    if (!in.Take(")")) return in.Error("expected )");
    if (*start >= *end) return in.Error("a range's start must be below its end");
    s.ranges_.push_back(Range{absl::Uint128Low64(*start), *end});
  } while (in.Take("||"));
  if (!in.Done()) return in.Error("unexpected text after the last range");
  return s;
}

std::string ShardSelector::Format(Field field, const std::vector<Range>& ranges) {
  const absl::string_view name =
      field == Field::kUid ? "object.metadata.uid" : "object.metadata.namespace";
  std::string out;
  for (const Range& r : ranges) {
    if (!out.empty()) out += " || ";
    // absl::Hex takes 64 bits; the end may be 2^64 exactly (or, from a careless caller, above).
    const std::string end =
        absl::Uint128High64(r.end) == 0
            ? absl::StrCat(absl::Hex(absl::Uint128Low64(r.end)))
            : absl::StrCat(absl::Hex(absl::Uint128High64(r.end)),
                           absl::Hex(absl::Uint128Low64(r.end), absl::kZeroPad16));
    absl::StrAppend(&out, "shardRange(", name, ", '0x", absl::Hex(r.start), "', '0x", end, "')");
  }
  return out;
}

bool ShardSelector::Matches(absl::string_view value) const {
  const uint64_t h = Fnv1a64(value);
  for (const Range& r : ranges_) {
    if (h >= r.start && absl::uint128(h) < r.end) return true;
  }
  return false;
}

}  // namespace ctrlhost::kube
