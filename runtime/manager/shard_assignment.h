// ShardAssignment: which member of a shard ring owns which part of the 64-bit hash space.
//
// The space is cut into kShardBuckets buckets of equal width (a hash's top kShardBucketBits
// bits), so a member's buckets are a few contiguous ranges that a server can filter by
// (KEP-5866's shardRange over FNV-1a 64 of the object's uid) and a label selector can name
// (`ctrlhost.dev/shard-bucket in (...)`: 256 buckets keep that selector short enough for any
// server's request line, at the price of shares even only to 1/256 of the space, and of at
// most 256 hosts owning something).
//
// The assignment is a function of the members in *join order* (their Leases' creation times):
// the first member owns every bucket; each member that joins takes from every earlier member
// the buckets above that member's new fair share, from the top of its highest range down. So
//   - shares are exactly even (they differ by at most one bucket);
//   - a member that joins moves only the buckets it takes (1/n of them, the minimum), and the
//     newest member leaving moves only its own;
//   - every member ends with a few ranges (at most n for n <= 4, under 2n beyond).
// A member that leaves out of order moves more than its own share (the later joins are
// replayed without it), which is safe, only not minimal. Every host computes the same
// assignment from the same ordered list: no coordinator, nothing stored but the list.
//
//   ShardAssignment a({"host-a", "host-b", "host-c"});
//   if (a.OwnerOf(hash) == me) ...
//   std::vector<watch::HashRange> mine = a.RangesOf(me);
//
// Immutable after construction: thread-safe.
#ifndef CTRLHOST_RUNTIME_MANAGER_SHARD_ASSIGNMENT_H_
#define CTRLHOST_RUNTIME_MANAGER_SHARD_ASSIGNMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::manager {

inline constexpr int kShardBucketBits = 8;
inline constexpr int kShardBuckets = 1 << kShardBucketBits;  // 256

inline int ShardBucket(uint64_t hash) { return static_cast<int>(hash >> (64 - kShardBucketBits)); }

class ShardAssignment {
 public:
  ShardAssignment() = default;  // no members: nobody owns anything
  // `members` in join order, earliest first; names must be distinct. Members past the
  // kShardBuckets-th own nothing.
  explicit ShardAssignment(std::vector<std::string> members);

  const std::vector<std::string>& members() const { return members_; }
  // The owner of `hash` ("" when there are no members).
  const std::string& OwnerOf(uint64_t hash) const;
  bool Owns(absl::string_view member, uint64_t hash) const { return OwnerOf(hash) == member; }
  // How many buckets `member` owns.
  int BucketsOf(absl::string_view member) const;
  // `member`'s buckets as ranges of the hash space, adjacent buckets merged, in order.
  std::vector<watch::HashRange> RangesOf(absl::string_view member) const;

 private:
  int IndexOf(absl::string_view member) const;  // -1 when not a member

  std::vector<std::string> members_;
  std::vector<uint16_t> owner_;  // by bucket: an index into members_; empty without members
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_SHARD_ASSIGNMENT_H_
