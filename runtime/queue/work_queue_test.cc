#include "runtime/queue/work_queue.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"

namespace ctrlhost::queue {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

WorkQueue::Options NoBucket() {
  WorkQueue::Options options;
  options.qps = 0;
  return options;
}

std::string Take(WorkQueue& q) {
  std::optional<WorkQueue::Item> item = q.TryGet();
  if (!item) return "<none>";
  std::string key(item->key);
  EXPECT_TRUE(q.Done(*item).ok());
  return key;
}

TEST(WorkQueueTest, DedupsWaitingKeysAndKeepsFifoOrder) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  EXPECT_TRUE(q.Add("ns/a"));
  EXPECT_TRUE(q.Add("ns/b"));
  EXPECT_TRUE(q.Add("ns/a"));
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(Take(q), "ns/a");
  EXPECT_EQ(Take(q), "ns/b");
  EXPECT_EQ(Take(q), "<none>");
  const QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.adds_total, 2u);
  EXPECT_EQ(m.deduped_total, 1u);
  EXPECT_EQ(m.gets_total, 2u);
}

TEST(WorkQueueTest, KeyBeingProcessedIsNotHandedOutAgainUntilDone) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  std::optional<WorkQueue::Item> first = q.TryGet();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->key, "ns/a");
  // Re-added twice while processing: not handed out now, queued once after Done.
  q.Add("ns/a");
  q.Add("ns/a");
  q.Add("ns/b");
  EXPECT_EQ(Take(q), "ns/b");
  EXPECT_EQ(q.TryGet(), std::nullopt);
  EXPECT_EQ(q.Len(), 0u);
  ASSERT_TRUE(q.Done(*first).ok());
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(Take(q), "ns/a");
  EXPECT_EQ(Take(q), "<none>");
}

TEST(WorkQueueTest, DoneRejectsStaleAndForeignItems) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  std::optional<WorkQueue::Item> item = q.TryGet();
  ASSERT_TRUE(item);
  EXPECT_TRUE(q.Done(*item).ok());
  EXPECT_EQ(q.Done(*item).code(), absl::StatusCode::kFailedPrecondition);
  // A stale item from an earlier run cannot end the current run of the same key.
  q.Add("ns/a");
  std::optional<WorkQueue::Item> second = q.TryGet();
  ASSERT_TRUE(second);
  EXPECT_EQ(q.Done(*item).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(q.Done(*second).ok());
  WorkQueue::Item foreign{"x", 12345, 1};
  EXPECT_EQ(q.Done(foreign).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(WorkQueueTest, DelayedAddsKeepTheEarliestDeadline) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.AddAfter("ns/a", absl::Seconds(10));
  q.AddAfter("ns/a", absl::Seconds(2));
  q.AddAfter("ns/a", absl::Seconds(5));  // later than 2 s: ignored
  q.AddAfter("ns/b", absl::Seconds(1));
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(q.Metrics().delayed, 2u);
  EXPECT_EQ(q.NextDeadline(), clock.Now() + absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(Take(q), "ns/b");
  EXPECT_EQ(Take(q), "<none>");
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(Take(q), "ns/a");
  // Nothing left at 5 s or 10 s: the later deadlines were merged into the earliest.
  clock.Advance(absl::Seconds(20));
  EXPECT_EQ(Take(q), "<none>");
  EXPECT_EQ(q.NextDeadline(), absl::InfiniteFuture());
}

TEST(WorkQueueTest, DelayedAddOfAReadyKeyIsIgnoredAndZeroDelayIsAnAdd) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  q.AddAfter("ns/a", absl::Seconds(1));
  EXPECT_EQ(q.Metrics().delayed, 0u);
  q.AddAfter("ns/b", absl::ZeroDuration());
  q.AddAfter("ns/c", absl::Seconds(-3));
  EXPECT_EQ(q.Len(), 3u);
}

TEST(WorkQueueTest, DelayedAddWhileProcessingRequeuesAfterDone) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  std::optional<WorkQueue::Item> item = q.TryGet();
  ASSERT_TRUE(item);
  q.AddAfter("ns/a", absl::Seconds(1));  // e.g. requeue_after from the reconcile
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(q.TryGet(), std::nullopt);  // due, but still processing
  ASSERT_TRUE(q.Done(*item).ok());
  EXPECT_EQ(Take(q), "ns/a");
}

TEST(WorkQueueTest, BlockingGetWakesForADelayedKey) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.AddAfter("ns/a", absl::Minutes(5));
  std::string got;
  std::thread worker([&] {
    std::optional<WorkQueue::Item> item = q.Get();
    if (item) {
      got = std::string(item->key);
      EXPECT_TRUE(q.Done(*item).ok());
    }
  });
  clock.Advance(absl::Minutes(5));
  worker.join();
  EXPECT_EQ(got, "ns/a");
}

TEST(WorkQueueTest, RateLimitedBackoffSequenceCapAndForget) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.max_delay = absl::Milliseconds(40);
  WorkQueue q("test", options, &clock);
  const std::vector<absl::Duration> expected = {absl::Milliseconds(5), absl::Milliseconds(10),
                                                absl::Milliseconds(20), absl::Milliseconds(40),
                                                absl::Milliseconds(40)};
  for (size_t i = 0; i < expected.size(); ++i) {
    const absl::Time before = clock.Now();
    q.AddRateLimited("ns/a");
    EXPECT_EQ(q.NextDeadline() - before, expected[i]) << i;
    EXPECT_EQ(q.NumRequeues("ns/a"), i + 1);
    clock.Advance(expected[i] - absl::Nanoseconds(1));
    EXPECT_EQ(Take(q), "<none>") << i;
    clock.Advance(absl::Nanoseconds(1));
    EXPECT_EQ(Take(q), "ns/a") << i;
  }
  EXPECT_EQ(q.Metrics().retries_total, expected.size());
  q.Forget("ns/a");
  EXPECT_EQ(q.NumRequeues("ns/a"), 0u);
  const absl::Time before = clock.Now();
  q.AddRateLimited("ns/a");
  EXPECT_EQ(q.NextDeadline() - before, absl::Milliseconds(5));
  // Backoff is per key.
  EXPECT_EQ(q.NumRequeues("ns/other"), 0u);
  q.Forget("ns/unknown");  // no effect, no crash
}

TEST(WorkQueueTest, RateLimitedWithACapStillCountsTheFailure) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  for (int i = 0; i < 20; ++i) {
    const absl::Time before = clock.Now();
    q.AddRateLimited("ns/a", absl::Seconds(10));
    EXPECT_LE(q.NextDeadline() - before, absl::Seconds(10)) << i;
    clock.Advance(q.NextDeadline() - before);
    EXPECT_EQ(Take(q), "ns/a");
  }
  EXPECT_EQ(q.NumRequeues("ns/a"), 20u);
  // Without the cap the same key continues from its count: 5 ms * 2^20 > 1000 s.
  const absl::Time before = clock.Now();
  q.AddRateLimited("ns/a");
  EXPECT_EQ(q.NextDeadline() - before, absl::Seconds(1000));
}

TEST(WorkQueueTest, RateLimitedAtLeastWaitsForTheHintCappedAndCountsTheFailure) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.max_delay = absl::Seconds(100);
  WorkQueue q("test", options, &clock);
  // The hint wins over a shorter backoff (5 ms for the first failure).
  absl::Time before = clock.Now();
  q.AddRateLimited("ns/a", absl::InfiniteDuration(), absl::Seconds(30));
  EXPECT_EQ(q.NextDeadline() - before, absl::Seconds(30));
  EXPECT_EQ(q.NumRequeues("ns/a"), 1u);
  clock.Advance(absl::Seconds(30) - absl::Nanoseconds(1));
  EXPECT_EQ(Take(q), "<none>");
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(Take(q), "ns/a");
  // A hint past the maximum backoff is capped at it.
  before = clock.Now();
  q.AddRateLimited("ns/b", absl::InfiniteDuration(), absl::Hours(5));
  EXPECT_EQ(q.NextDeadline() - before, absl::Seconds(100));
  clock.Advance(absl::Seconds(100));
  EXPECT_EQ(Take(q), "ns/b");
  // A key that keeps failing backs off past a short hint: 5 ms * 2^n reaches 100 s.
  for (int i = 0; i < 20; ++i) {
    before = clock.Now();
    q.AddRateLimited("ns/c", absl::InfiniteDuration(), absl::Seconds(1));
    clock.Advance(q.NextDeadline() - before);
    EXPECT_EQ(Take(q), "ns/c");
  }
  before = clock.Now();
  q.AddRateLimited("ns/c", absl::InfiniteDuration(), absl::Seconds(1));
  EXPECT_EQ(q.NextDeadline() - before, absl::Seconds(100));
  // An earlier Add (an event for the key) still runs it at once.
  q.Add("ns/c");
  EXPECT_EQ(Take(q), "ns/c");
}

TEST(WorkQueueTest, DefaultBackoffReachesThousandSeconds) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  absl::Duration last;
  for (int i = 0; i < 30; ++i) {
    const absl::Time before = clock.Now();
    q.AddRateLimited("ns/a");
    last = q.NextDeadline() - before;
    clock.Advance(last);
    EXPECT_EQ(Take(q), "ns/a");
  }
  EXPECT_EQ(last, absl::Seconds(1000));
}

TEST(WorkQueueTest, TokenBucketDelaysRetriesOfManyKeys) {
  common::FakeClock clock;
  WorkQueue::Options options;
  options.qps = 10;
  options.burst = 3;
  WorkQueue q("test", options, &clock);
  for (int i = 0; i < 5; ++i) q.AddRateLimited(absl::StrCat("ns/k", i));
  // Three keys ride the burst with their 5 ms backoff; the 4th and 5th wait 100 and 200 ms.
  clock.Advance(absl::Milliseconds(5));
  EXPECT_EQ(q.Len(), 3u);
  clock.Advance(absl::Milliseconds(95));
  EXPECT_EQ(q.Len(), 4u);
  clock.Advance(absl::Milliseconds(100));
  EXPECT_EQ(q.Len(), 5u);
}

TEST(WorkQueueTest, ShutDownDrainHandsOutQueuedKeysThenStops) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  q.Add("ns/b");
  q.AddAfter("ns/later", absl::Hours(1));
  std::optional<WorkQueue::Item> processing = q.TryGet();  // ns/a
  ASSERT_TRUE(processing);
  q.Add("ns/a");  // re-queue pending
  EXPECT_THAT(q.ShutDown(ShutdownMode::kDrain), ElementsAre("ns/later"));
  EXPECT_TRUE(q.ShuttingDown());
  EXPECT_FALSE(q.Add("ns/c"));
  EXPECT_FALSE(q.AddAfter("ns/c", absl::Seconds(1)));
  EXPECT_FALSE(q.AddRateLimited("ns/c"));
  std::optional<WorkQueue::Item> b = q.Get();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "ns/b");
  ASSERT_TRUE(q.Done(*b).ok());
  // ns/a is still to come (re-queued by Done): a blocked Get waits for it.
  std::string got;
  std::thread worker([&] {
    while (std::optional<WorkQueue::Item> item = q.Get()) {
      got += std::string(item->key) + ";";
      EXPECT_TRUE(q.Done(*item).ok());
    }
  });
  ASSERT_TRUE(q.Done(*processing).ok());
  worker.join();
  EXPECT_EQ(got, "ns/a;");
  EXPECT_EQ(q.Get(), std::nullopt);
}

TEST(WorkQueueTest, ShutDownAbandonReportsEverythingNotHandedOut) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  q.Add("ns/b");
  q.AddAfter("ns/later", absl::Hours(1));
  std::optional<WorkQueue::Item> processing = q.TryGet();  // ns/a
  ASSERT_TRUE(processing);
  q.Add("ns/a");
  EXPECT_THAT(q.ShutDown(ShutdownMode::kAbandon), UnorderedElementsAre("ns/a", "ns/b", "ns/later"));
  EXPECT_EQ(q.Get(), std::nullopt);
  EXPECT_EQ(q.Len(), 0u);
  ASSERT_TRUE(q.Done(*processing).ok());
  EXPECT_EQ(q.Get(), std::nullopt);
  EXPECT_TRUE(q.ShutDown(ShutdownMode::kAbandon).empty());
}

TEST(WorkQueueTest, ShutDownWakesBlockedGetters) {
  WorkQueue q("test", NoBucket(), common::Clock::Real());
  std::atomic<int> returned{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] {
      EXPECT_EQ(q.Get(), std::nullopt);
      ++returned;
    });
  }
  q.ShutDown(ShutdownMode::kDrain);
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(returned.load(), 4);
}

TEST(WorkQueueTest, IdleKeysAreEvictedAndSlotsReused) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.max_idle_keys = 2;
  WorkQueue q("test", options, &clock);
  for (int i = 0; i < 100; ++i) {
    q.Add(absl::StrCat("ns/key-with-a-long-name-", i));
    EXPECT_EQ(Take(q), absl::StrCat("ns/key-with-a-long-name-", i));
  }
  // More than max_idle_keys idle keys trigger a sweep down to max_idle_keys / 2.
  EXPECT_LE(q.Metrics().keys, 2u);
  EXPECT_GE(q.Metrics().keys, 1u);
  // A key with backoff state is not idle, so it is never evicted.
  q.AddRateLimited("ns/failing");
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(Take(q), "ns/failing");
  for (int i = 0; i < 10; ++i) {
    q.Add(absl::StrCat("ns/x", i));
    Take(q);
  }
  EXPECT_EQ(q.NumRequeues("ns/failing"), 1u);
}

// A burst (a controller's initial list) grows the tables to the burst's size; once it is over
// they are built again at the size of the idle keys kept, and the queue works on as before.
TEST(WorkQueueTest, TheTablesShrinkBackAfterABurst) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.max_idle_keys = 64;
  WorkQueue q("test", options, &clock);
  constexpr int kBurst = 5000;
  for (int i = 0; i < kBurst; ++i) q.Add(absl::StrCat("ns/object-", i));
  EXPECT_EQ(q.Metrics().slots, static_cast<size_t>(kBurst));
  // A run still in progress holds the tables (its Item names a slot).
  std::optional<WorkQueue::Item> held = q.TryGet();
  ASSERT_TRUE(held.has_value());
  std::vector<WorkQueue::Item> items;
  while (std::optional<WorkQueue::Item> item = q.TryGet()) items.push_back(*item);
  ASSERT_EQ(items.size(), static_cast<size_t>(kBurst - 1));
  for (const WorkQueue::Item& item : items) ASSERT_TRUE(q.Done(item).ok());
  EXPECT_EQ(q.Metrics().compactions_total, 0u);
  EXPECT_EQ(q.Metrics().slots, static_cast<size_t>(kBurst));
  const WorkQueue::Item stale = items.front();  // a small slot number, made again later
  ASSERT_TRUE(q.Done(*held).ok());
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.compactions_total, 1u);
  EXPECT_LE(m.slots, 64u);
  EXPECT_EQ(m.slots, m.keys);
  EXPECT_EQ(m.depth, 0u);
  // An Item of the old tables is refused, whatever slot number it names.
  EXPECT_EQ(q.Done(stale).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(q.Done(*held).code(), absl::StatusCode::kFailedPrecondition);
  // Nor by a slot made later with that number, however often it is handed out.
  for (int i = 0; i < kBurst; ++i) {
    q.Add(absl::StrCat("ns/later-", i % 200));
    std::optional<WorkQueue::Item> item = q.TryGet();
    ASSERT_TRUE(item.has_value());
    ASSERT_NE(q.Done(stale).code(), absl::StatusCode::kOk) << i;
    ASSERT_TRUE(q.Done(*item).ok());
  }
  // Every guarantee holds on the new tables: dedup, exclusivity, re-queue after Done, backoff.
  q.Add("ns/object-1");
  q.Add("ns/object-1");
  q.Add("ns/new");
  std::optional<WorkQueue::Item> one = q.TryGet();
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->key, "ns/object-1");
  q.Add("ns/object-1");  // while processing: queued again by Done
  EXPECT_EQ(Take(q), "ns/new");
  EXPECT_FALSE(q.TryGet().has_value());
  ASSERT_TRUE(q.Done(*one).ok());
  EXPECT_EQ(Take(q), "ns/object-1");
  q.AddRateLimited("ns/object-2");
  EXPECT_EQ(q.NumRequeues("ns/object-2"), 1u);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(Take(q), "ns/object-2");
}

TEST(WorkQueueTest, MetricsTrackLatencyDurationAndLongestRunning) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.duration_sample_every = 1;  // every key timed: exact histograms
  WorkQueue q("test", options, &clock);
  q.Add("ns/a");
  q.Add("ns/b");
  clock.Advance(absl::Milliseconds(3));
  std::optional<WorkQueue::Item> a = q.TryGet();
  clock.Advance(absl::Seconds(2));
  std::optional<WorkQueue::Item> b = q.TryGet();
  ASSERT_TRUE(a && b);
  clock.Advance(absl::Seconds(1));
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.processing, 2u);
  EXPECT_EQ(m.longest_running, absl::Seconds(3));
  EXPECT_EQ(m.unfinished_work, absl::Seconds(4));
  EXPECT_EQ(m.queue_latency.count, 2u);
  EXPECT_EQ(m.queue_latency.sum(), absl::Milliseconds(3) + absl::Milliseconds(2003));
  EXPECT_EQ(m.queue_latency.counts[3], 1u);  // 3 ms: (1 ms, 10 ms]
  EXPECT_EQ(m.queue_latency.counts[6], 1u);  // 2.003 s: (1 s, 10 s]
  ASSERT_TRUE(q.Done(*a).ok());
  ASSERT_TRUE(q.Done(*b).ok());
  m = q.Metrics();
  EXPECT_EQ(m.work_duration.count, 2u);
  EXPECT_EQ(m.work_duration.sum(), absl::Seconds(4));
  EXPECT_EQ(m.longest_running, absl::ZeroDuration());
  EXPECT_EQ(m.depth, 0u);
}

// At least one key in N is timed, counted for every ready key since the previous timed one;
// longest_running still covers every key.
TEST(WorkQueueTest, SampledDurationsScaleAndLongestRunningCoversUnsampledKeys) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.duration_sample_every = 4;
  WorkQueue q("test", options, &clock);
  // One clock reading: k0 is timed (the first key of a tick) and stands for itself; k4 is the
  // fourth key after it and stands for k1..k4; k5..k7 wait for the next timed key.
  for (int i = 0; i < 8; ++i) q.Add(absl::StrCat("ns/k", i));
  clock.Advance(absl::Milliseconds(5));
  std::vector<WorkQueue::Item> items;
  for (int i = 0; i < 8; ++i) {
    std::optional<WorkQueue::Item> item = q.TryGet();
    ASSERT_TRUE(item);
    items.push_back(*item);
    clock.Advance(absl::Seconds(1));  // k0 started 8 s before Metrics, k7 1 s
  }
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.duration_sample_every, 4u);
  EXPECT_EQ(m.queue_latency.count, 5u);
  // k0 waited 5 ms (once), k4 5 ms + 4 s (four times).
  EXPECT_EQ(m.queue_latency.sum(), absl::Milliseconds(5) + 4 * absl::Milliseconds(4005));
  EXPECT_EQ(m.queue_latency.counts[3], 1u);
  EXPECT_EQ(m.queue_latency.counts[6], 4u);
  EXPECT_EQ(m.longest_running, absl::Seconds(8));
  EXPECT_EQ(m.unfinished_work, absl::Seconds(8 + 7 + 6 + 5 + 4 + 3 + 2 + 1));
  for (const WorkQueue::Item& item : items) ASSERT_TRUE(q.Done(item).ok());
  m = q.Metrics();
  EXPECT_EQ(m.work_duration.count, 5u);
  EXPECT_EQ(m.work_duration.sum(), absl::Seconds(8) + 4 * absl::Seconds(4));
  EXPECT_EQ(m.longest_running, absl::ZeroDuration());
  EXPECT_EQ(m.gets_total, 8u);
  // A re-queue by Done takes part in the sampling like any other ready key. The clock moved
  // since k4, so the next ready key is timed and stands for k5..k7 and itself.
  q.Add("ns/k0");
  std::optional<WorkQueue::Item> a = q.TryGet();
  ASSERT_TRUE(a);
  q.Add("ns/k0");
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(q.Done(*a).ok());  // re-queued, at a later clock reading: timed, stands for itself
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(Take(q), "ns/k0");
  m = q.Metrics();
  EXPECT_EQ(m.queue_latency.count, 10u);
  EXPECT_EQ(m.queue_latency.sum(),
            absl::Milliseconds(5) + 4 * absl::Milliseconds(4005) + absl::Seconds(1));
  EXPECT_EQ(m.work_duration.count, 10u);
  EXPECT_EQ(m.work_duration.sum(), absl::Seconds(8) + 4 * absl::Seconds(4) + 4 * absl::Seconds(2));
}

// A queue that sees a key per clock reading times every key, whatever N: slow controllers get
// exact histograms, and only busy queues are sampled.
TEST(WorkQueueTest, EveryKeyOfASlowQueueIsTimed) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.duration_sample_every = 1000;
  WorkQueue q("test", options, &clock);
  for (int i = 0; i < 5; ++i) {
    q.Add(absl::StrCat("ns/k", i));
    clock.Advance(absl::Milliseconds(20));
    std::optional<WorkQueue::Item> item = q.TryGet();
    ASSERT_TRUE(item);
    clock.Advance(absl::Milliseconds(30));
    ASSERT_TRUE(q.Done(*item).ok());
  }
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.queue_latency.count, 5u);
  EXPECT_EQ(m.queue_latency.sum(), 5 * absl::Milliseconds(20));
  EXPECT_EQ(m.work_duration.count, 5u);
  EXPECT_EQ(m.work_duration.sum(), 5 * absl::Milliseconds(30));
}

TEST(WorkQueueTest, DoneAndTryGetEndsOneRunAndStartsTheNext) {
  common::FakeClock clock;
  WorkQueue q("test", NoBucket(), &clock);
  q.Add("ns/a");
  q.Add("ns/b");
  std::optional<WorkQueue::Item> a = q.TryGet();
  ASSERT_TRUE(a);
  q.Add("ns/a");  // re-queued behind b by the Done part
  absl::Status status = absl::UnknownError("unset");
  std::optional<WorkQueue::Item> b = q.DoneAndTryGet(*a, &status);
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "ns/b");
  std::optional<WorkQueue::Item> a2 = q.DoneAndTryGet(*b, &status);
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2->key, "ns/a");
  // Re-added while processing and alone in the queue: handed straight back, after the Done.
  q.Add("ns/a");
  std::optional<WorkQueue::Item> a3 = q.DoneAndTryGet(*a2, &status);
  ASSERT_TRUE(a3);
  EXPECT_EQ(a3->key, "ns/a");
  EXPECT_NE(a3->generation, a2->generation);
  // A stale item: the Done part fails and changes nothing; the Get part still runs.
  q.Add("ns/c");
  std::optional<WorkQueue::Item> c = q.DoneAndTryGet(*a2, &status);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->key, "ns/c");
  EXPECT_EQ(q.Metrics().processing, 2u);  // a3 and c
  EXPECT_FALSE(q.DoneAndTryGet(*a3, &status));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_FALSE(q.DoneAndTryGet(*c));
  const QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.processing, 0u);
  EXPECT_EQ(m.gets_total, 5u);
}

TEST(WorkQueueTest, DoneAndGetBlocksUntilAKeyIsReadyOrShutDown) {
  WorkQueue q("test", NoBucket(), common::Clock::Real());
  q.Add("ns/a");
  std::optional<WorkQueue::Item> a = q.Get();
  ASSERT_TRUE(a);
  std::atomic<int> handed_out{0};
  std::thread worker([&] {
    std::optional<WorkQueue::Item> item = q.DoneAndGet(*a);  // blocks: nothing ready
    while (item) {
      ++handed_out;
      item = q.DoneAndGet(*item);
    }
  });
  q.Add("ns/b");
  // Wait (bounded) until the worker has taken b, then end the queue: the worker's blocked
  // DoneAndGet returns nullopt.
  for (int i = 0; i < 10000 && q.Metrics().gets_total < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(q.ShutDown(ShutdownMode::kDrain).empty());
  worker.join();
  EXPECT_EQ(handed_out.load(), 1);
  EXPECT_EQ(q.Metrics().processing, 0u);
}

TEST(WorkQueueTest, WithoutDurationsBehaviourIsTheSameAndTimingMetricsStayZero) {
  common::FakeClock clock;
  WorkQueue::Options options = NoBucket();
  options.record_durations = false;
  WorkQueue q("test", options, &clock);
  q.Add("ns/a");
  q.AddAfter("ns/b", absl::Seconds(1));
  clock.Advance(absl::Seconds(2));
  std::optional<WorkQueue::Item> a = q.TryGet();
  ASSERT_TRUE(a);
  q.Add("ns/a");
  EXPECT_EQ(Take(q), "ns/b");
  clock.Advance(absl::Seconds(5));
  QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.longest_running, absl::ZeroDuration());
  EXPECT_EQ(m.processing, 1u);
  ASSERT_TRUE(q.Done(*a).ok());
  EXPECT_EQ(Take(q), "ns/a");
  m = q.Metrics();
  EXPECT_EQ(m.queue_latency.count, 0u);
  EXPECT_EQ(m.work_duration.count, 0u);
  EXPECT_EQ(m.gets_total, 3u);
}

// Many producers add overlapping keys while many consumers process them: every key added is
// processed at least once after its last add, and never by two consumers at once.
TEST(WorkQueueTest, ManyProducersAndConsumers) {
  WorkQueue q("test", NoBucket(), common::Clock::Real());
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;
  constexpr int kKeys = 50;
  constexpr int kAddsPerProducer = 2000;
  common::Mutex mu;
  absl::flat_hash_set<std::string> in_flight;
  absl::flat_hash_map<std::string, int> processed;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    // Half the consumers use the fused DoneAndGet.
    consumers.emplace_back([&, fused = c % 2 == 1] {
      std::optional<WorkQueue::Item> item = q.Get();
      while (item) {
        const std::string key(item->key);
        {
          common::MutexLock lock(&mu);
          if (!in_flight.insert(key).second) overlap = true;
        }
        std::this_thread::yield();
        {
          common::MutexLock lock(&mu);
          in_flight.erase(key);
          ++processed[key];
        }
        if (fused) {
          absl::Status status;
          item = q.DoneAndGet(*item, &status);
          EXPECT_TRUE(status.ok()) << status;
        } else {
          EXPECT_TRUE(q.Done(*item).ok());
          item = q.Get();
        }
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) {
        q.Add(absl::StrCat("ns/k", (i * 7 + p) % kKeys));
        if (i % 100 == 0) q.AddAfter(absl::StrCat("ns/k", i % kKeys), absl::Milliseconds(1));
      }
    });
  }
  for (std::thread& t : producers) t.join();
  // A drain abandons delayed keys; wait (bounded) until the consumers have promoted them all.
  for (int i = 0; i < 10000 && q.NextDeadline() != absl::InfiniteFuture(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(q.ShutDown(ShutdownMode::kDrain).empty());
  for (std::thread& t : consumers) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(processed.size(), static_cast<size_t>(kKeys));
  const QueueMetrics m = q.Metrics();
  EXPECT_EQ(m.depth, 0u);
  EXPECT_EQ(m.processing, 0u);
}

}  // namespace
}  // namespace ctrlhost::queue
