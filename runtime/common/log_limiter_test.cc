#include "runtime/common/log_limiter.h"

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

TEST(LogLimiterTest, BurstThenRateAndTheCountOfDroppedLines) {
  FakeClock clock;
  LogLimiter limiter({.per_second = 2, .burst = 3, .clock = &clock});
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(limiter.Allow(&suppressed));
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.Allow(&suppressed));
  EXPECT_EQ(limiter.pending_suppressed(), 1000u);
  clock.Advance(absl::Milliseconds(500));  // one token
  ASSERT_TRUE(limiter.Allow(&suppressed));
  EXPECT_EQ(suppressed, 1000u);
  EXPECT_FALSE(limiter.Allow(&suppressed));
  clock.Advance(absl::Hours(1));  // refills to the burst, no more
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Allow(nullptr));
  EXPECT_FALSE(limiter.Allow(nullptr));
}

TEST(LogLimiterTest, ClockGoingBackDoesNotRefill) {
  FakeClock clock;
  LogLimiter limiter({.per_second = 1, .burst = 1, .clock = &clock});
  EXPECT_TRUE(limiter.Allow(nullptr));
  clock.Advance(absl::Seconds(-10));
  EXPECT_FALSE(limiter.Allow(nullptr));
}

}  // namespace
}  // namespace ctrlhost::common
