#include "runtime/manager/shard_assignment.h"

#include <algorithm>
#include <utility>

namespace ctrlhost::manager {

namespace {

// The fair share of the member at `index` among `n`: the first (kShardBuckets % n) get one
// more bucket.
int FairShare(size_t index, size_t n) {
  const int base = kShardBuckets / static_cast<int>(n);
  return base + (static_cast<int>(index) < kShardBuckets % static_cast<int>(n) ? 1 : 0);
}

}  // namespace

ShardAssignment::ShardAssignment(std::vector<std::string> members) : members_(std::move(members)) {
  if (members_.empty()) return;
  owner_.assign(kShardBuckets, 0);
  std::vector<int> count = {kShardBuckets};
  const size_t joining = std::min<size_t>(members_.size(), kShardBuckets);
  for (size_t n = 1; n < joining; ++n) {
    // Member n joins: every earlier member gives up what it holds above its new fair share,
    // taken from its highest buckets, so its ranges only shorten and the joiner's are few.
    std::vector<int> give(n);
    for (size_t i = 0; i < n; ++i) give[i] = std::max(0, count[i] - FairShare(i, n + 1));
    int taken = 0;
    for (int b = kShardBuckets - 1; b >= 0; --b) {
      const uint16_t from = owner_[b];
      if (give[from] == 0) continue;
      --give[from];
      --count[from];
      owner_[b] = static_cast<uint16_t>(n);
      ++taken;
    }
    count.push_back(taken);
  }
}

int ShardAssignment::IndexOf(absl::string_view member) const {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] == member) return static_cast<int>(i);
  }
  return -1;
}

const std::string& ShardAssignment::OwnerOf(uint64_t hash) const {
  static const std::string* const kNobody = new std::string();
  if (owner_.empty()) return *kNobody;
  return members_[owner_[ShardBucket(hash)]];
}

int ShardAssignment::BucketsOf(absl::string_view member) const {
  const int index = IndexOf(member);
  if (index < 0 || owner_.empty()) return 0;
  return static_cast<int>(std::count(owner_.begin(), owner_.end(), index));
}

std::vector<watch::HashRange> ShardAssignment::RangesOf(absl::string_view member) const {
  std::vector<watch::HashRange> ranges;
  const int index = IndexOf(member);
  if (index < 0 || owner_.empty()) return ranges;
  constexpr int kShift = 64 - kShardBucketBits;
  for (int b = 0; b < kShardBuckets;) {
    if (owner_[b] != index) {
      ++b;
      continue;
    }
    int end = b;
    while (end < kShardBuckets && owner_[end] == index) ++end;
    ranges.push_back({static_cast<uint64_t>(b) << kShift, absl::uint128(end) << kShift});
    b = end;
  }
  return ranges;
}

}  // namespace ctrlhost::manager
