// WorkQueue priorities and aging, on a FakeClock (the rest of the queue: work_queue_test.cc).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/queue/work_queue.h"

namespace ctrlhost::queue {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr Priority kLow = Priority::kLow;
constexpr Priority kHigh = Priority::kHigh;

WorkQueue::Options Aging(absl::Duration max_wait) {
  WorkQueue::Options options;
  options.qps = 0;
  options.max_wait = max_wait;
  options.duration_sample_every = 1;
  return options;
}

std::string Take(WorkQueue& q) {
  std::optional<WorkQueue::Item> item = q.TryGet();
  if (!item) return "<none>";
  std::string key(item->key);
  EXPECT_TRUE(q.Done(*item).ok());
  return key;
}

std::vector<std::string> TakeAll(WorkQueue& q) {
  std::vector<std::string> keys;
  for (std::string key = Take(q); key != "<none>"; key = Take(q)) keys.push_back(key);
  return keys;
}

TEST(WorkQueuePriorityTest, HighKeysGoFirstAndEachPriorityIsFifo) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.Add("low/1", kLow);
  q.Add("high/1");
  q.Add("low/2", kLow);
  q.Add("high/2", kHigh);
  const QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.depth, 4u);
  EXPECT_EQ(m.depth_by_priority[0], 2u);
  EXPECT_EQ(m.depth_by_priority[1], 2u);
  EXPECT_EQ(q.Len(), 4u);
  EXPECT_THAT(TakeAll(q), ElementsAre("high/1", "high/2", "low/1", "low/2"));
}

TEST(WorkQueuePriorityTest, ALowKeyAddedAtHighMovesUpKeepingItsWait) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.Add("a", kLow);
  q.Add("b", kLow);
  q.Add("c", kLow);
  clock.Advance(absl::Seconds(7));
  q.Add("x", kHigh);
  q.Add("b", kHigh);  // moves up, behind x
  q.Add("c", kLow);   // a lower add changes nothing
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.depth_by_priority[0], 2u);
  EXPECT_EQ(m.depth_by_priority[1], 2u);
  EXPECT_EQ(m.deduped_total, 2u);
  // b waits since it was first added: the oldest high key.
  EXPECT_EQ(m.oldest_waiting[1], absl::Seconds(7));
  EXPECT_EQ(m.oldest_waiting[0], absl::Seconds(7));
  EXPECT_THAT(TakeAll(q), ElementsAre("x", "b", "a", "c"));
  m = q.Metrics();
  EXPECT_EQ(m.oldest_waiting[0], absl::ZeroDuration());
  EXPECT_EQ(m.oldest_waiting[1], absl::ZeroDuration());
}

TEST(WorkQueuePriorityTest, AKeyAddedWhileProcessingIsQueuedAtTheHighestPriorityOfItsAdds) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.Add("a", kLow);
  std::optional<WorkQueue::Item> item = q.TryGet();
  ASSERT_TRUE(item);
  q.Add("a", kLow);
  q.Add("a", kHigh);
  q.Add("a", kLow);
  q.Add("z", kLow);
  ASSERT_TRUE(q.Done(*item).ok());
  EXPECT_EQ(q.Metrics().depth_by_priority[1], 1u);
  EXPECT_THAT(TakeAll(q), ElementsAre("a", "z"));
}

TEST(WorkQueuePriorityTest, ADelayedKeyBecomesReadyAtTheHighestPriorityOfItsAdds) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.AddAfter("d", absl::Seconds(10), kLow);
  q.AddAfter("d", absl::Seconds(20), kHigh);  // later deadline, higher priority
  q.AddAfter("e", absl::Seconds(5), kLow);
  q.Add("l", kLow);
  clock.Advance(absl::Seconds(10));
  // d is due after 10 s (the earliest deadline) at high priority; e is low, behind l.
  EXPECT_THAT(TakeAll(q), ElementsAre("d", "l", "e"));
}

TEST(WorkQueuePriorityTest, RetriesAreHighPriority) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.Add("l", kLow);
  q.AddRateLimited("r");
  clock.Advance(absl::Seconds(1));
  EXPECT_THAT(TakeAll(q), ElementsAre("r", "l"));
}

// The starvation case: high keys arrive faster than they are handed out. Without aging the low
// keys never run; with it the first low key runs once it has waited max_wait, then low and
// high keys alternate until no low key is that old.
struct StarvationRun {
  std::vector<absl::Duration> low_waits;  // each low key's wait, in hand-out order
  int high_taken = 0;
  int steps_with_low = 0;
  std::string pattern;  // 'L' or 'H' per hand-out once the first low key ran
};

StarvationRun RunStarvation(absl::Duration max_wait, int low_keys, int steps) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(max_wait), &clock);
  const absl::Time start = clock.Now();
  for (int i = 0; i < low_keys; ++i) q.Add(absl::StrCat("low/", i), kLow);
  StarvationRun run;
  int high = 0;
  for (int step = 0; step < steps; ++step) {
    // Two new high keys per second, one hand-out per second.
    q.Add(absl::StrCat("high/", high++));
    q.Add(absl::StrCat("high/", high++));
    clock.Advance(absl::Seconds(1));
    const std::string key = Take(q);
    if (key.rfind("low/", 0) == 0) {
      run.low_waits.push_back(clock.Now() - start);
      run.pattern += 'L';
    } else {
      ++run.high_taken;
      if (!run.low_waits.empty()) run.pattern += 'H';
    }
  }
  return run;
}

TEST(WorkQueuePriorityTest, WithoutAgingLowKeysStarveUnderHighLoad) {
  const StarvationRun run = RunStarvation(absl::InfiniteDuration(), 10, 600);
  EXPECT_TRUE(run.low_waits.empty());
  EXPECT_EQ(run.high_taken, 600);
}

TEST(WorkQueuePriorityTest, AgingHandsOutTheOldestLowKeyAtTheBoundWhateverTheHighLoad) {
  const absl::Duration max_wait = absl::Seconds(60);
  const StarvationRun run = RunStarvation(max_wait, 10, 600);
  ASSERT_EQ(run.low_waits.size(), 10u);
  // The first low key runs at the first hand-out after it waited max_wait.
  EXPECT_GE(run.low_waits[0], max_wait);
  EXPECT_LE(run.low_waits[0], max_wait + absl::Seconds(1));
  // Then low and high alternate: every other hand-out still goes to a high key, and the k-th
  // low key waits at most max_wait + 2k hand-outs.
  EXPECT_EQ(run.pattern.substr(0, 20), "LHLHLHLHLHLHLHLHLHLH");
  for (size_t k = 0; k < run.low_waits.size(); ++k) {
    EXPECT_LE(run.low_waits[k], max_wait + absl::Seconds(1 + 2 * static_cast<int64_t>(k)))
        << "low key " << k;
  }
  EXPECT_EQ(run.high_taken, 590);
}

TEST(WorkQueuePriorityTest, AgingCountsInTheMetrics) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Seconds(30)), &clock);
  q.Add("l", kLow);
  q.Add("h1");
  q.Add("h2");
  clock.Advance(absl::Seconds(31));
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.oldest_waiting[0], absl::Seconds(31));
  EXPECT_EQ(m.oldest_waiting[1], absl::Seconds(31));
  EXPECT_EQ(m.max_wait, absl::Seconds(30));
  EXPECT_THAT(TakeAll(q), ElementsAre("l", "h1", "h2"));
  m = q.Metrics();
  EXPECT_EQ(m.aged_total, 1u);
  EXPECT_EQ(m.waited_past_max_total, 3u);
  EXPECT_EQ(m.queue_latency_by_priority[0].count, 1u);
  EXPECT_EQ(m.queue_latency_by_priority[1].count, 2u);
  EXPECT_EQ(m.queue_latency.count, 3u);
  EXPECT_EQ(m.queue_latency_by_priority[0].sum(), absl::Seconds(31));
}

TEST(WorkQueuePriorityTest, AKeyWithinTheBoundIsNotCountedAsWaitingTooLong) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Seconds(30)), &clock);
  q.Add("l", kLow);
  q.Add("h");
  clock.Advance(absl::Seconds(29));
  EXPECT_THAT(TakeAll(q), ElementsAre("h", "l"));
  const QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.aged_total, 0u);
  EXPECT_EQ(m.waited_past_max_total, 0u);
}

TEST(WorkQueuePriorityTest, ShutDownAbandonReportsKeysOfBothPriorities) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.Add("l", kLow);
  q.Add("h", kHigh);
  q.Add("m", kLow);
  q.Add("m", kHigh);
  EXPECT_THAT(q.ShutDown(ShutdownMode::kAbandon), UnorderedElementsAre("l", "h", "m"));
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(Take(q), "<none>");
}

TEST(WorkQueuePriorityTest, ShutDownDrainHandsOutBothPrioritiesInOrder) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::Minutes(5)), &clock);
  q.Add("l", kLow);
  q.Add("h", kHigh);
  EXPECT_TRUE(q.ShutDown(ShutdownMode::kDrain).empty());
  EXPECT_THAT(TakeAll(q), ElementsAre("h", "l"));
  EXPECT_FALSE(q.Get().has_value());
}

TEST(WorkQueuePriorityTest, EvictedSlotsAreReusedWithFreshPriorities) {
  common::FakeClock clock;
  WorkQueue::Options options = Aging(absl::Minutes(5));
  options.max_idle_keys = 4;
  WorkQueue q("test", options, &clock);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 10; ++i) q.Add(absl::StrCat("k", round, "/", i), i % 2 ? kHigh : kLow);
    const std::vector<std::string> keys = TakeAll(q);
    ASSERT_EQ(keys.size(), 10u);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(keys[i], absl::StrCat("k", round, "/", 2 * i + 1));
    for (int i = 0; i < 5; ++i) EXPECT_EQ(keys[5 + i], absl::StrCat("k", round, "/", 2 * i));
  }
  EXPECT_LE(q.Metrics().keys, 10u);
}

// A key moving up leaves a stale entry in the low ring; thousands of them (compacted as they
// pile up) change neither the order nor the counts.
TEST(WorkQueuePriorityTest, KeysMovingUpOverAndOverKeepOrderAndCounts) {
  common::FakeClock clock;
  WorkQueue q("test", Aging(absl::InfiniteDuration()), &clock);
  for (int round = 0; round < 2000; ++round) {
    for (int i = 0; i < 10; ++i) q.Add(absl::StrCat("k", i), kLow);
    q.Add("k7", kHigh);
    q.Add("k3", kHigh);
    ASSERT_EQ(q.Len(), 10u);
    const QueueMetrics m = q.Metrics();
    ASSERT_EQ(m.depth_by_priority[0], 8u);
    ASSERT_EQ(m.depth_by_priority[1], 2u);
    ASSERT_THAT(TakeAll(q), ElementsAre("k7", "k3", "k0", "k1", "k2", "k4", "k5", "k6", "k8", "k9"))
        << "round " << round;
  }
  // Queued low again and left there while others move up: still handed out in order.
  for (int i = 0; i < 10; ++i) q.Add(absl::StrCat("k", i), kLow);
  for (int round = 0; round < 500; ++round) {
    q.Add("x", kLow);
    q.Add("x", kHigh);
    EXPECT_EQ(Take(q), "x");
  }
  EXPECT_EQ(q.Len(), 10u);
  EXPECT_THAT(TakeAll(q), ElementsAre("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"));
}

TEST(WorkQueuePriorityTest, PriorityNames) {
  EXPECT_STREQ(PriorityName(kLow), "low");
  EXPECT_STREQ(PriorityName(kHigh), "high");
}

}  // namespace
}  // namespace ctrlhost::queue
