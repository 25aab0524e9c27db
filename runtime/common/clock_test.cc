#include "runtime/common/clock.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.SetTime(absl::FromUnixSeconds(7));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(7));
}

TEST(FakeClockTest, WaiterWakesWhenTimeIsAdvancedPastItsDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Hours(1);
  std::atomic<bool> done{false};
  std::thread sleeper([&] {
    clock.SleepUntil(deadline);
    done = true;
  });
  // An hour of fake time has not passed: the sleeper is still asleep after real time goes by.
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(done.load());
  clock.Advance(absl::Hours(1));
  sleeper.join();
  EXPECT_TRUE(done.load());
}

TEST(RealClockTest, WaitWithDeadlineInThePastReturnsAtOnce) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  EXPECT_TRUE(Clock::Real()->WaitWithDeadline(&mu, &cv, absl::Now() - absl::Seconds(1)));
}

}  // namespace
}  // namespace ctrlhost::common
