// ShardSelector: the shard selector of KEP-5866 (server-side sharded list and watch, Kubernetes
// 1.36 alpha): `?shardSelector=shardRange(object.metadata.uid, '0x0', '0x8000000000000000')`
// restricts a LIST or a WATCH to the objects whose 64-bit FNV-1a hash of that field falls in
// [start, end); several ranges of the same field may be joined with `||`. The fields are
// `object.metadata.uid` and `object.metadata.namespace`; bounds are single-quoted hex with a
// `0x` prefix, the end exclusive and at most 0x10000000000000000 (2^64).
//
//   ASSIGN_OR_RETURN(ShardSelector s, ShardSelector::Parse(query_value));
//   if (s.Matches(uid_or_namespace)) ...
//
// Clients write selectors with Format, which Parse reads back to the same ranges:
//
//   std::string text = ShardSelector::Format(ShardSelector::Field::kUid, {{0, 1ull << 63}});
//
// Bounded: at most kMaxBytes of text and kMaxRanges ranges. Immutable after Parse: thread-safe.
#ifndef CTRLHOST_RUNTIME_KUBE_SHARD_SELECTOR_H_
#define CTRLHOST_RUNTIME_KUBE_SHARD_SELECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::kube {

// The 64-bit FNV-1a hash KEP-5866 ranges are over.
uint64_t Fnv1a64(absl::string_view bytes);

class ShardSelector {
 public:
  static constexpr size_t kMaxBytes = 4096;
  static constexpr size_t kMaxRanges = 64;

  enum class Field { kUid, kNamespace };
  struct Range {
    uint64_t start = 0;
    absl::uint128 end = 0;  // exclusive; up to 2^64
  };

  // InvalidArgument naming what is wrong and where (the caller answers 422 for the
  // `shardSelector` field of ListOptions).
  static absl::StatusOr<ShardSelector> Parse(absl::string_view text);
  // The selector text for `ranges` of `field`, in Parse's syntax: lower-case hex bounds with a
  // 0x prefix, ranges joined by " || "; "" for no ranges (which Parse refuses: send none).
  // The caller keeps within kMaxRanges and start < end <= 2^64 if the text is to parse.
  static std::string Format(Field field, const std::vector<Range>& ranges);

  Field field() const { return field_; }
  const std::vector<Range>& ranges() const { return ranges_; }
  // The selector as given, echoed in ListMeta's shardInfo.
  const std::string& text() const { return text_; }
  // Whether an object whose field holds `value` is in one of the ranges.
  bool Matches(absl::string_view value) const;

 private:
  Field field_ = Field::kUid;
  std::vector<Range> ranges_;
  std::string text_;
};

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_SHARD_SELECTOR_H_
