#include "runtime/manager/shard_assignment.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ctrlhost::manager {
namespace {

std::vector<std::string> Members(int n) {
  std::vector<std::string> members;
  for (int i = 0; i < n; ++i) members.push_back(absl::StrCat("host-", i));
  return members;
}

uint64_t HashOfBucket(int bucket) {
  return (static_cast<uint64_t>(bucket) << (64 - kShardBucketBits)) | 12345;
}

TEST(ShardAssignmentTest, NobodyOwnsAnythingWithoutMembers) {
  ShardAssignment none;
  EXPECT_EQ(none.OwnerOf(0), "");
  EXPECT_TRUE(none.RangesOf("host-0").empty());
  EXPECT_EQ(ShardAssignment(std::vector<std::string>{}).OwnerOf(~0ull), "");
}

TEST(ShardAssignmentTest, OneMemberOwnsTheWholeSpaceAsOneRange) {
  ShardAssignment one({"a"});
  EXPECT_EQ(one.OwnerOf(0), "a");
  EXPECT_EQ(one.OwnerOf(~0ull), "a");
  EXPECT_EQ(one.BucketsOf("a"), kShardBuckets);
  const std::vector<watch::HashRange> ranges = one.RangesOf("a");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].start, 0u);
  EXPECT_EQ(ranges[0].end, absl::uint128(1) << 64);
  EXPECT_TRUE(one.RangesOf("b").empty());
}

// Shares are exactly even, every bucket has one owner, and the ranges stay few.
TEST(ShardAssignmentTest, SharesAreEvenAndRangesFew) {
  for (int n = 1; n <= 16; ++n) {
    const std::vector<std::string> members = Members(n);
    ShardAssignment a(members);
    int total = 0;
    for (const std::string& m : members) {
      const int buckets = a.BucketsOf(m);
      EXPECT_GE(buckets, kShardBuckets / n) << n;
      EXPECT_LE(buckets, kShardBuckets / n + 1) << n;
      total += buckets;
      EXPECT_LE(a.RangesOf(m).size(), static_cast<size_t>(2 * n)) << n << " " << m;
      if (n <= 4) {
        EXPECT_LE(a.RangesOf(m).size(), static_cast<size_t>(n)) << n << " " << m;
      }
      // The ranges are what OwnerOf says.
      for (const watch::HashRange& r : a.RangesOf(m)) {
        EXPECT_EQ(a.OwnerOf(r.start), m);
        EXPECT_EQ(a.OwnerOf(static_cast<uint64_t>(r.end - 1)), m);
      }
    }
    EXPECT_EQ(total, kShardBuckets);
  }
}

// A member joining takes only its own share (the minimum that can move), and the newest member
// leaving gives back exactly that.
TEST(ShardAssignmentTest, AJoinMovesOnlyTheJoinersShare) {
  for (int n = 1; n <= 12; ++n) {
    ShardAssignment before(Members(n));
    ShardAssignment after(Members(n + 1));
    const std::string joiner = absl::StrCat("host-", n);
    int moved = 0;
    for (int b = 0; b < kShardBuckets; ++b) {
      const std::string& was = before.OwnerOf(HashOfBucket(b));
      const std::string& is = after.OwnerOf(HashOfBucket(b));
      if (was != is) {
        ++moved;
        EXPECT_EQ(is, joiner);  // nothing moves between the earlier members
      }
    }
    EXPECT_EQ(moved, after.BucketsOf(joiner));
    EXPECT_LE(moved, kShardBuckets / (n + 1) + 1);
  }
}

// Any member may leave: the rest still cover the space evenly (more than the leaver's share
// may move when it was not the newest: safe, not minimal).
TEST(ShardAssignmentTest, AnyMemberMayLeave) {
  std::vector<std::string> members = Members(5);
  members.erase(members.begin() + 1);
  ShardAssignment a(members);
  int total = 0;
  for (const std::string& m : members) {
    EXPECT_GE(a.BucketsOf(m), kShardBuckets / 4);
    EXPECT_LE(a.BucketsOf(m), kShardBuckets / 4 + 1);
    total += a.BucketsOf(m);
  }
  EXPECT_EQ(total, kShardBuckets);
  EXPECT_EQ(a.BucketsOf("host-1"), 0);
}

// The assignment depends on the join order only: the same list gives the same owners on every
// host, a different order different ones.
TEST(ShardAssignmentTest, SameOrderSameOwners) {
  ShardAssignment x({"b", "a", "c"});
  ShardAssignment y({"b", "a", "c"});
  ShardAssignment z({"a", "b", "c"});
  bool differs = false;
  for (int b = 0; b < kShardBuckets; ++b) {
    EXPECT_EQ(x.OwnerOf(HashOfBucket(b)), y.OwnerOf(HashOfBucket(b)));
    differs |= x.OwnerOf(HashOfBucket(b)) != z.OwnerOf(HashOfBucket(b));
  }
  EXPECT_TRUE(differs);
}

// More members than buckets (a hostile or broken ring): the ones past the last bucket own
// nothing, and nothing breaks.
TEST(ShardAssignmentTest, MoreMembersThanBuckets) {
  ShardAssignment a(Members(kShardBuckets + 10));
  EXPECT_EQ(a.BucketsOf("host-0"), 1);
  EXPECT_EQ(a.BucketsOf(absl::StrCat("host-", kShardBuckets - 1)), 1);
  EXPECT_EQ(a.BucketsOf(absl::StrCat("host-", kShardBuckets + 5)), 0);
  EXPECT_FALSE(a.OwnerOf(HashOfBucket(kShardBuckets - 1)).empty());
}

}  // namespace
}  // namespace ctrlhost::manager
