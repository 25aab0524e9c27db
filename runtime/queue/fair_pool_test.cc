#include "runtime/queue/fair_pool.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"

namespace ctrlhost::queue {
namespace {

WorkQueue::Options NoBucket() {
  WorkQueue::Options options;
  options.qps = 0;
  return options;
}

TEST(FairPoolTest, RoundRobinAcrossQueuesWithReadyKeys) {
  common::FakeClock clock;
  WorkQueue deep("deep", NoBucket(), &clock);
  WorkQueue small("small", NoBucket(), &clock);
  WorkQueue tiny("tiny", NoBucket(), &clock);
  for (int i = 0; i < 1000; ++i) deep.Add(absl::StrCat("ns/d", i));
  for (int i = 0; i < 3; ++i) small.Add(absl::StrCat("ns/s", i));
  tiny.Add("ns/t0");
  FairPool pool(&clock);
  ASSERT_TRUE(pool.AddQueue(&deep).ok());
  ASSERT_TRUE(pool.AddQueue(&small).ok());
  ASSERT_TRUE(pool.AddQueue(&tiny).ok());
  std::vector<std::string> order;
  for (int i = 0; i < 8; ++i) {
    std::optional<FairPool::Work> work = pool.TryGet();
    ASSERT_TRUE(work);
    order.push_back(work->queue->name());
    ASSERT_TRUE(work->queue->Done(work->item).ok());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"deep", "small", "tiny", "deep", "small", "deep",
                                             "small", "deep"}));
  ASSERT_TRUE(pool.RemoveQueue(&deep).ok());
  ASSERT_TRUE(pool.RemoveQueue(&small).ok());
  ASSERT_TRUE(pool.RemoveQueue(&tiny).ok());
}

TEST(FairPoolTest, ShallowQueueIsNotStarvedByADeepOneUnderConcurrentWorkers) {
  WorkQueue deep("deep", NoBucket(), common::Clock::Real());
  WorkQueue shallow("shallow", NoBucket(), common::Clock::Real());
  for (int i = 0; i < 2000; ++i) deep.Add(absl::StrCat("ns/d", i));
  FairPool pool(common::Clock::Real());
  ASSERT_TRUE(pool.AddQueue(&deep).ok());
  ASSERT_TRUE(pool.AddQueue(&shallow).ok());
  // The shallow queue receives 20 keys while the deep backlog is being worked off; each must be
  // handed out before more than a handful of deep keys go by.
  common::Mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      while (std::optional<FairPool::Work> work = pool.Get()) {
        {
          common::MutexLock lock(&mu);
          order.push_back(work->queue->name());
        }
        EXPECT_TRUE(work->queue->Done(work->item).ok());
      }
    });
  }
  int added = 0;
  for (int i = 0; i < 20; ++i) {
    shallow.Add(absl::StrCat("ns/s", i));
    ++added;
  }
  // Wait (bounded) until every shallow key was handed out.
  for (int i = 0; i < 10000; ++i) {
    {
      common::MutexLock lock(&mu);
      if (std::count(order.begin(), order.end(), "shallow") == added) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  pool.ShutDown();
  for (std::thread& t : workers) t.join();
  // Count the deep keys handed out between the first shallow add's pickup and the last one.
  common::MutexLock lock(&mu);
  ASSERT_EQ(std::count(order.begin(), order.end(), "shallow"), added);
  const auto first = std::find(order.begin(), order.end(), "shallow");
  const auto last = std::find(order.rbegin(), order.rend(), "shallow").base();
  const long deep_between = std::count(first, last, "deep");
  // Strict alternation would give 19; allow slack for keys added while workers raced.
  EXPECT_LE(deep_between, 2 * added + 6) << "deep keys between shallow ones: " << deep_between;
  ASSERT_TRUE(pool.RemoveQueue(&deep).ok());
  ASSERT_TRUE(pool.RemoveQueue(&shallow).ok());
}

TEST(FairPoolTest, GetWakesForAddsAndDelayedKeys) {
  common::FakeClock clock;
  WorkQueue a("a", NoBucket(), &clock);
  WorkQueue b("b", NoBucket(), &clock);
  FairPool pool(&clock);
  ASSERT_TRUE(pool.AddQueue(&a).ok());
  ASSERT_TRUE(pool.AddQueue(&b).ok());
  std::vector<std::string> got;
  std::thread worker([&] {
    for (int i = 0; i < 2; ++i) {
      std::optional<FairPool::Work> work = pool.Get();
      ASSERT_TRUE(work);
      got.push_back(std::string(work->item.key));
      EXPECT_TRUE(work->queue->Done(work->item).ok());
    }
  });
  b.Add("ns/now");
  b.AddAfter("ns/later", absl::Seconds(30));
  // The worker takes ns/now, then blocks until the fake clock reaches the delayed deadline.
  for (int i = 0; i < 10000 && b.Metrics().gets_total < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  clock.Advance(absl::Seconds(30));
  worker.join();
  EXPECT_EQ(got, (std::vector<std::string>{"ns/now", "ns/later"}));
}

TEST(FairPoolTest, ErrorsAndShutdown) {
  common::FakeClock clock;
  WorkQueue a("a", NoBucket(), &clock);
  WorkQueue b("b", NoBucket(), &clock);
  FairPool pool(&clock);
  ASSERT_TRUE(pool.AddQueue(&a).ok());
  EXPECT_EQ(pool.AddQueue(&a).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(pool.RemoveQueue(&b).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool.TryGet(), std::nullopt);
  std::thread worker([&] { EXPECT_EQ(pool.Get(), std::nullopt); });
  pool.ShutDown();
  worker.join();
  EXPECT_EQ(pool.AddQueue(&b).code(), absl::StatusCode::kFailedPrecondition);
  a.Add("ns/x");
  EXPECT_EQ(pool.TryGet(), std::nullopt);
  // The pool's destructor detaches `a`.
}

}  // namespace
}  // namespace ctrlhost::queue
