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

TEST(FairPoolTest, ShallowQueueIsNotStarvedByADeepOne) {
  WorkQueue deep("deep", NoBucket(), common::Clock::Real());
  WorkQueue shallow("shallow", NoBucket(), common::Clock::Real());
  // The deep queue was filled first: a single shared FIFO would hand out all 2000 deep keys
  // before the first shallow one.
  for (int i = 0; i < 2000; ++i) deep.Add(absl::StrCat("ns/d", i));
  constexpr int kShallow = 20;
  for (int i = 0; i < kShallow; ++i) shallow.Add(absl::StrCat("ns/s", i));
  FairPool pool(common::Clock::Real());
  ASSERT_TRUE(pool.AddQueue(&deep).ok());
  ASSERT_TRUE(pool.AddQueue(&shallow).ok());
  // The hand-out order, observed from one thread so that it is exactly the pool's order.
  std::vector<std::string> order;
  while (std::optional<FairPool::Work> work = pool.TryGet()) {
    order.push_back(work->queue->name());
    ASSERT_TRUE(work->queue->Done(work->item).ok());
  }
  ASSERT_EQ(order.size(), 2000u + kShallow);
  // Round-robin hands out deep, shallow, deep, shallow, ...: the last shallow key is among the
  // first 2 * kShallow hand-outs.
  const auto last = std::find(order.rbegin(), order.rend(), "shallow").base();
  EXPECT_LE(last - order.begin(), 2 * kShallow);
  ASSERT_TRUE(pool.RemoveQueue(&deep).ok());
  ASSERT_TRUE(pool.RemoveQueue(&shallow).ok());
}

TEST(FairPoolTest, ConcurrentWorkersProcessEveryKeyOnce) {
  WorkQueue deep("deep", NoBucket(), common::Clock::Real());
  WorkQueue shallow("shallow", NoBucket(), common::Clock::Real());
  for (int i = 0; i < 2000; ++i) deep.Add(absl::StrCat("ns/d", i));
  constexpr int kShallow = 20;
  for (int i = 0; i < kShallow; ++i) shallow.Add(absl::StrCat("ns/s", i));
  FairPool pool(common::Clock::Real());
  ASSERT_TRUE(pool.AddQueue(&deep).ok());
  ASSERT_TRUE(pool.AddQueue(&shallow).ok());
  common::Mutex mu;
  std::vector<std::string> keys;
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      while (std::optional<FairPool::Work> work = pool.Get()) {
        {
          common::MutexLock lock(&mu);
          keys.push_back(std::string(work->item.key));
          if (keys.size() == 2000 + kShallow) pool.ShutDown();
        }
        EXPECT_TRUE(work->queue->Done(work->item).ok());
      }
    });
  }
  for (std::thread& t : workers) t.join();
  common::MutexLock lock(&mu);
  ASSERT_EQ(keys.size(), 2000u + kShallow);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end())
      << "a key was handed out twice";
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
