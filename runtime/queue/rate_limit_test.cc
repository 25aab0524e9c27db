#include "runtime/queue/rate_limit.h"

#include "gtest/gtest.h"

namespace ctrlhost::queue {
namespace {

TEST(ExponentialBackoffTest, DoublesFromBaseAndCaps) {
  const absl::Duration base = absl::Milliseconds(5);
  const absl::Duration max = absl::Seconds(1000);
  EXPECT_EQ(ExponentialBackoff(base, max, 0), absl::Milliseconds(5));
  EXPECT_EQ(ExponentialBackoff(base, max, 1), absl::Milliseconds(10));
  EXPECT_EQ(ExponentialBackoff(base, max, 2), absl::Milliseconds(20));
  EXPECT_EQ(ExponentialBackoff(base, max, 10), absl::Milliseconds(5120));
  // 5 ms * 2^17 = 655 s; 2^18 = 1310 s is past the cap.
  EXPECT_EQ(ExponentialBackoff(base, max, 17), absl::Milliseconds(5 * 131072));
  EXPECT_EQ(ExponentialBackoff(base, max, 18), max);
  EXPECT_EQ(ExponentialBackoff(base, max, 61), max);
  EXPECT_EQ(ExponentialBackoff(base, max, 62), max);
  EXPECT_EQ(ExponentialBackoff(base, max, 0xffffffffu), max);
}

TEST(ExponentialBackoffTest, DegenerateSettings) {
  EXPECT_EQ(ExponentialBackoff(absl::ZeroDuration(), absl::Seconds(1), 5), absl::ZeroDuration());
  EXPECT_EQ(ExponentialBackoff(absl::Seconds(10), absl::Seconds(1), 0), absl::Seconds(1));
}

TEST(TokenBucketTest, BurstThenRate) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  TokenBucket bucket(/*qps=*/10, /*burst=*/100, t0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(bucket.Reserve(t0), absl::ZeroDuration()) << i;
  // The bucket is empty: reservations queue behind each other at 1/qps.
  EXPECT_EQ(bucket.Reserve(t0), absl::Milliseconds(100));
  EXPECT_EQ(bucket.Reserve(t0), absl::Milliseconds(200));
  // 1 s later ten tokens came back: two repay the queued reservations, eight are left.
  const absl::Time t1 = t0 + absl::Seconds(1);
  EXPECT_NEAR(bucket.Tokens(t1), 8.0, 1e-9);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bucket.Reserve(t1), absl::ZeroDuration()) << i;
  EXPECT_EQ(bucket.Reserve(t1), absl::Milliseconds(100));
}

TEST(TokenBucketTest, RefillCapsAtBurst) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  TokenBucket bucket(10, 5, t0);
  EXPECT_NEAR(bucket.Tokens(t0 + absl::Hours(1)), 5.0, 1e-9);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bucket.Reserve(t0 + absl::Hours(1)), absl::ZeroDuration());
  EXPECT_GT(bucket.Reserve(t0 + absl::Hours(1)), absl::ZeroDuration());
}

TEST(TokenBucketTest, DisabledAndClockSteppingBack) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  TokenBucket disabled(0, 1, t0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(disabled.Reserve(t0), absl::ZeroDuration());
  TokenBucket bucket(1, 1, t0);
  EXPECT_EQ(bucket.Reserve(t0), absl::ZeroDuration());
  // Time going backwards neither refills nor breaks the bucket.
  EXPECT_EQ(bucket.Reserve(t0 - absl::Seconds(10)), absl::Seconds(1));
}

}  // namespace
}  // namespace ctrlhost::queue
