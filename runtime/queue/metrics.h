// Plain metrics of a work queue: counters and fixed-bucket duration histograms, snapshotted by
// WorkQueue::Metrics() for the host to export (Prometheus lives in runtime/observe/, not here).
//
//   QueueMetrics m = queue.Metrics();
//   exporter.Gauge("workqueue_depth", m.depth);
//   for (int i = 0; i < DurationHistogram::kBuckets; ++i) ... m.queue_latency.counts[i] ...
#ifndef CTRLHOST_RUNTIME_QUEUE_METRICS_H_
#define CTRLHOST_RUNTIME_QUEUE_METRICS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace ctrlhost::queue {

// A histogram of durations with fixed decade buckets (10 us ... 1000 s, then +Inf), the range
// client-go's workqueue metrics cover. Observe() does not allocate. Thread-compatible.
struct DurationHistogram {
  static constexpr int kBuckets = 10;
  // Upper bound (inclusive) of bucket i; the last bucket is +Inf.
  static absl::Duration UpperBound(int i);

  void Observe(absl::Duration d) { ObserveNanos(absl::ToInt64Nanoseconds(d)); }
  // Counts `ns` `weight` times (a sampled observation standing for `weight` of them). Negative
  // durations (a clock stepping back) count as zero.
  void ObserveNanos(int64_t ns, uint32_t weight = 1);
  absl::Duration sum() const { return absl::Nanoseconds(sum_nanos); }

  std::array<uint64_t, kBuckets> counts{};  // not cumulative: counts[i] is bucket i alone
  uint64_t count = 0;
  int64_t sum_nanos = 0;  // integer: this is on the queue's hot path
};

// A consistent snapshot of one queue's metrics (taken under the queue's mutex).
struct QueueMetrics {
  size_t depth = 0;  // keys ready to be handed out
  // depth by priority (index: queue::Priority, 0 low, 1 high; they add up to depth).
  std::array<size_t, 2> depth_by_priority{};
  // How long the oldest ready key of each priority has waited (zero when none; coarse clock).
  std::array<absl::Duration, 2> oldest_waiting{};
  std::array<std::string, 2> oldest_key;               // which key that is (empty when none)
  absl::Duration max_wait = absl::InfiniteDuration();  // the queue's aging bound
  // Low keys handed out ahead of waiting high keys because they had waited max_wait (aging).
  uint64_t aged_total = 0;
  // Keys handed out after waiting longer than max_wait (any priority): a queue that cannot keep
  // up, or high keys beyond the workers' capacity.
  uint64_t waited_past_max_total = 0;
  size_t delayed = 0;              // keys waiting for an AddAfter / AddRateLimited deadline
  size_t processing = 0;           // keys handed out and not yet Done
  size_t keys = 0;                 // interned keys, including idle ones kept for reuse
  size_t slots = 0;                // the slot table's size (interned keys and free slots)
  uint64_t compactions_total = 0;  // times the tables were built again at their size
  uint64_t adds_total = 0;         // Add calls that queued a key or marked it for re-queue
  uint64_t deduped_total = 0;      // Add calls for a key already waiting (no effect)
  uint64_t retries_total = 0;      // AddRateLimited calls
  uint64_t gets_total = 0;         // keys handed out
  // Sampled (WorkQueue::Options::duration_sample_every): at least one key in N is timed, and
  // each timed key counts for the ready keys since the previous timed one, so count and sum
  // estimate every key's (exact when N is 1; keys made ready after the last timed one are
  // counted with the next).
  DurationHistogram queue_latency;  // from queued to handed out
  // queue_latency by the priority the key was handed out at (index: queue::Priority).
  std::array<DurationHistogram, 2> queue_latency_by_priority;
  DurationHistogram work_duration;     // from handed out to Done
  uint32_t duration_sample_every = 1;  // the N above (a bound, see above)
  // How long the oldest key still processing has been processing (zero when none), and the
  // sum over all keys still processing: a stuck worker shows up here before it finishes. Every
  // key counts (not sampled); with the real clock start times are coarse (a few ms).
  absl::Duration longest_running = absl::ZeroDuration();
  absl::Duration unfinished_work = absl::ZeroDuration();
};

}  // namespace ctrlhost::queue

#endif  // CTRLHOST_RUNTIME_QUEUE_METRICS_H_
