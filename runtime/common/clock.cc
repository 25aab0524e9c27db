#include "runtime/common/clock.h"

#include "absl/time/clock.h"

namespace ctrlhost::common {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool WaitWithDeadline(Mutex* mu, CondVar* cv, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (absl::Now() >= deadline) return true;
    cv->WaitWithDeadline(mu, deadline);
    return absl::Now() >= deadline;
  }
};

// How often a waiter on a FakeClock re-reads the fake time. Advance() cannot signal condition
// variables it does not know about, so waiters poll this often (real time) instead.
constexpr absl::Duration kFakeClockPoll = absl::Milliseconds(2);

}  // namespace

Clock* Clock::Real() {
  static Clock* const clock = new RealClock();
  return clock;
}

void Clock::SleepUntil(absl::Time deadline) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(&mu);
  while (!WaitWithDeadline(&mu, &cv, deadline)) {
  }
}

FakeClock::FakeClock(absl::Time start) : now_(start) {}

absl::Time FakeClock::Now() const {
  MutexLock lock(&mu_);
  return now_;
}

bool FakeClock::WaitWithDeadline(Mutex* mu, CondVar* cv, absl::Time deadline) {
  if (Now() >= deadline) return true;
  cv->WaitWithTimeout(mu, kFakeClockPoll);
  return Now() >= deadline;
}

void FakeClock::Advance(absl::Duration d) {
  MutexLock lock(&mu_);
  now_ += d;
}

void FakeClock::SetTime(absl::Time t) {
  MutexLock lock(&mu_);
  now_ = t;
}

}  // namespace ctrlhost::common
