#include "sdk/cpp/worker_pool.h"

#include <atomic>

#include "gtest/gtest.h"

namespace ctrlhost::sdk {
namespace {

TEST(WorkerPoolTest, RunsEveryTaskAndStopDrainsTheQueue) {
  std::atomic<int> ran{0};
  WorkerPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Submit([&] { ran.fetch_add(1); }));
  pool.Stop();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_FALSE(pool.Submit([] {}));
  pool.Stop();  // Idempotent.
}

TEST(WorkerPoolTest, RunsTasksConcurrently) {
  // Two tasks that each wait for the other can only finish when both run at once.
  WorkerPool pool(2);
  common::Mutex mu;
  common::CondVar cv;
  int arrived = 0;
  bool both = false;
  auto task = [&] {
    common::MutexLock lock(&mu);
    ++arrived;
    cv.SignalAll();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (arrived < 2 && !cv.WaitWithDeadline(&mu, deadline)) {
    }
    if (arrived == 2) both = true;
  };
  pool.Submit(task);
  pool.Submit(task);
  pool.Stop();
  EXPECT_TRUE(both);
}

TEST(WorkerPoolTest, AtLeastOneThread) { EXPECT_EQ(WorkerPool(0).size(), 1); }

}  // namespace
}  // namespace ctrlhost::sdk
