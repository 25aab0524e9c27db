#include "runtime/admin/work_pool.h"

#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::admin {
namespace {

// A latch tasks block on until the test opens it, and counters of what ran.
// Thread-safe: mu_ guards everything.
class Gate {
 public:
  void Enter() {
    common::MutexLock lock(&mu_);
    ++entered_;
    changed_.SignalAll();
    while (!open_) changed_.Wait(&mu_);
  }
  void Open() {
    common::MutexLock lock(&mu_);
    open_ = true;
    changed_.SignalAll();
  }
  // Waits (bounded) until `n` tasks entered; false on timeout.
  bool AwaitEntered(int n) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (entered_ < n) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) return entered_ >= n;
    }
    return true;
  }

 private:
  common::Mutex mu_;
  common::CondVar changed_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(WorkPoolTest, RunsEveryAcceptedTask) {
  common::Mutex mu;
  int calls = 0;
  {
    WorkPool pool("test", 2, 100);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(pool.TrySchedule([&](bool run) {
                        common::MutexLock lock(&mu);
                        ++calls;
                      })
                      .ok());
    }
    // Destruction stops the pool: tasks not yet started are called with run = false; every
    // task is called exactly once either way.
  }
  common::MutexLock lock(&mu);
  EXPECT_EQ(calls, 50);
}

TEST(WorkPoolTest, RefusesWhenBusyAndQueueFull) {
  Gate gate;
  WorkPool pool("swaps", 1, 0);
  ASSERT_TRUE(pool.TrySchedule([&](bool run) { gate.Enter(); }).ok());
  ASSERT_TRUE(gate.AwaitEntered(1));
  absl::Status refused = pool.TrySchedule([](bool) {});
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "swaps: all 1 workers are busy and 0 requests wait already; retry when one finishes");
  gate.Open();
  pool.Stop();
}

TEST(WorkPoolTest, StopDiscardsQueuedTasksAndRefusesNewOnes) {
  Gate gate;
  WorkPool pool("q", 1, 2);
  common::Mutex mu;
  std::vector<bool> outcomes;
  ASSERT_TRUE(pool.TrySchedule([&](bool run) { gate.Enter(); }).ok());
  ASSERT_TRUE(gate.AwaitEntered(1));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.TrySchedule([&](bool run) {
                      common::MutexLock lock(&mu);
                      outcomes.push_back(run);
                    })
                    .ok());
  }
  EXPECT_EQ(pool.TrySchedule([](bool) {}).code(), absl::StatusCode::kResourceExhausted);
  std::thread stopper([&] { pool.Stop(); });
  // Once Stop() has begun, new tasks are refused as Unavailable (not ResourceExhausted).
  bool stopping = false;
  for (int i = 0; i < 100000 && !stopping; ++i) {
    stopping = pool.TrySchedule([](bool) {}).code() == absl::StatusCode::kUnavailable;
    if (!stopping) std::this_thread::yield();
  }
  EXPECT_TRUE(stopping);
  // Stop() waits for the running task; the queued ones are discarded (run = false).
  gate.Open();
  stopper.join();
  {
    common::MutexLock lock(&mu);
    EXPECT_EQ(outcomes, (std::vector<bool>{false, false}));
  }
  absl::Status after = pool.TrySchedule([](bool) {});
  EXPECT_EQ(after, absl::UnavailableError("the admin server is stopping"));
  pool.Stop();  // idempotent
}

}  // namespace
}  // namespace ctrlhost::admin
