// An injectable clock, so code that waits can be tested without sleeping.
//
// Production code takes a `Clock*` (borrowed; it must outlive the user) and defaults to
// `Clock::Real()`. Tests pass a FakeClock and move time with Advance(); anything blocked in
// WaitWithDeadline on that clock wakes up and re-checks its condition.
//
//   common::FakeClock clock;
//   Backoff backoff(&clock);            // code under test
//   clock.Advance(absl::Seconds(5));     // its timers fire, no real sleep
#ifndef CTRLHOST_RUNTIME_COMMON_CLOCK_H_
#define CTRLHOST_RUNTIME_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::common {

// Thread-safe: every method may be called from any thread.
class Clock {
 public:
  virtual ~Clock() = default;

  // The process-wide real clock. Never deleted.
  static Clock* Real();

  virtual absl::Time Now() const = 0;

  // Waits on `cv` (with `mu` held) until signalled or until this clock reaches `deadline`.
  // Returns true if the deadline has passed. May wake spuriously: wait in a loop.
  virtual bool WaitWithDeadline(Mutex* mu, CondVar* cv, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;

  // Blocks the calling thread until this clock reaches `deadline`.
  void SleepUntil(absl::Time deadline);
  void SleepFor(absl::Duration d) { SleepUntil(Now() + d); }
};

// A clock that moves only when told. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000));

  absl::Time Now() const override;
  bool WaitWithDeadline(Mutex* mu, CondVar* cv, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Moves time forward; waiters whose deadline passed wake up within a few milliseconds.
  void Advance(absl::Duration d);
  void SetTime(absl::Time t);

 private:
  mutable Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_CLOCK_H_
