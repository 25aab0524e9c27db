// A rate-limited work queue of keys (namespace/name strings) for one controller.
//
// Guarantees:
// - Dedup: a key waiting to be handed out is queued once, however often it is added.
// - Exclusivity: a key handed out by Get() is never handed out again until Done(); if it was
//   added meanwhile it is queued again by Done() (level-based: one more reconcile sees the
//   latest state).
// - Delayed adds keep the earliest deadline: AddAfter(k, 10s) then AddAfter(k, 1s) runs k after
//   1 s, once. A key that is already ready (or marked for re-queue after Done) ignores a later
//   delayed add: it runs sooner anyway.
// - AddRateLimited waits max(per-key exponential backoff, overall token bucket), see
//   rate_limit.h; Forget resets the key's backoff, NumRequeues reads it.
// - ShutDown drains (Get keeps handing out what is queued, then returns nullopt) or abandons
//   (Get returns nullopt at once); keys that will never be handed out are returned by ShutDown,
//   so nothing is lost silently.
// - Steady state does not allocate: keys are interned in slots that are reused (an idle key
//   keeps its slot until more than `max_idle_keys` keys are idle), the ready queue is a
//   list per priority threaded through the slots and the delayed set an indexed heap, all
//   grow-only.
// - Priorities with aging: a key is queued at high or low priority (Add(key, Priority::kLow)
//   for catching up: the initial list, a resync, a plugin start). High keys are handed out
//   first, each priority in FIFO order; a low key added again at high priority moves up. Once
//   the oldest low key has waited `max_wait`, low and high keys are handed out alternately
//   until no low key is that old, so a steady stream of high keys cannot starve the low ones
//   and a backlog of aged low keys still leaves every other hand-out to the high ones.
// - Time comes from a common::Clock, so backoff and delays are tested with a FakeClock.
//
//   WorkQueue queue("configmaps", WorkQueue::Options{}, common::Clock::Real());
//   queue.Add("default/app");
//   while (std::optional<WorkQueue::Item> item = queue.Get()) {   // blocks
//     absl::Status s = Reconcile(item->key);   // item->key is valid until Done
//     if (s.ok()) queue.Forget(item->key); else queue.AddRateLimited(item->key);
//     queue.Done(*item).IgnoreError();
//   }
#ifndef CTRLHOST_RUNTIME_QUEUE_WORK_QUEUE_H_
#define CTRLHOST_RUNTIME_QUEUE_WORK_QUEUE_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/queue/metrics.h"
#include "runtime/queue/rate_limit.h"

namespace ctrlhost::queue {

// Told when a queue may have a key ready, e.g. by FairPool to wake its workers. Called without
// the queue's mutex held; must not block for long.
class ReadyListener {
 public:
  virtual ~ReadyListener() = default;
  virtual void OnReady() = 0;
};

// How urgent a queued key is. The numbers order them (kHigh > kLow) and index arrays.
enum class Priority : uint8_t {
  kLow = 0,   // catching up: initial list, resync, relist, plugin (re)start, shard hand-over
  kHigh = 1,  // a change after the caches synced, a requeue, a retry, a background task
};
inline constexpr int kPriorities = 2;
// "low" or "high" (the `priority` label of the queue metrics).
const char* PriorityName(Priority priority);

enum class ShutdownMode {
  kDrain,    // Get hands out what is queued (and re-queued by Done), then returns nullopt
  kAbandon,  // Get returns nullopt at once
};

// Thread-safe: every method may be called from any thread. All state is guarded by mu_.
class WorkQueue {
 public:
  struct Options {
    absl::Duration base_delay = absl::Milliseconds(5);  // first AddRateLimited backoff
    absl::Duration max_delay = absl::Seconds(1000);     // backoff cap
    double qps = 10;                                    // token bucket rate; <= 0 disables it
    int burst = 100;                                    // token bucket size
    // Idle keys (nothing queued, not processing, no backoff) kept interned for reuse: a key
    // that comes back while interned costs no allocation. A host runs a queue per controller,
    // and an interned key costs ~200 bytes, so this stays small.
    size_t max_idle_keys = 512;
    // Record the queue_latency / work_duration histograms, longest_running and
    // unfinished_work. When false those metrics stay zero and the hot path reads the clock only
    // for delayed keys.
    bool record_durations = true;
    // With record_durations, which ready keys are timed for the two histograms (three precise
    // clock reads each): the first key after a tick of the coarse clock (1-4 ms), and at least
    // one in this many (0 or 1: every key). A timed key counts for every ready key since the
    // previous timed one, so count and sum estimate all keys, and a queue that sees a few keys
    // per tick times each. Every handed-out key still gets a start time from the coarse clock
    // (CLOCK_REALTIME_COARSE, ~3 ns) so longest_running and unfinished_work cover every key.
    // A precise read costs ~20 ns here; three per key were most of Add+Get+Done once
    // (bench/README.md, `queue`).
    uint32_t duration_sample_every = 64;
    // The aging bound: once the oldest low-priority key has waited this long, low and high keys
    // are handed out alternately until none has. InfiniteDuration: strict priority, no aging.
    absl::Duration max_wait = absl::Minutes(5);
  };

  // A key handed out by Get. `key` is valid until Done(item).
  struct Item {
    absl::string_view key;
    uint32_t slot = 0;
    uint32_t generation = 0;
    bool overdue = false;  // it waited longer than options.max_wait (counted in the metrics)
  };

  // `clock` is borrowed and must outlive the queue.
  WorkQueue(std::string name, Options options, common::Clock* clock);
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;
  // The queue must not be attached to a listener any more (SetReadyListener(nullptr)).
  ~WorkQueue();

  const std::string& name() const { return name_; }

  // Queues `key` unless it is waiting already; a key waiting at low priority added at high
  // priority moves to the high keys (keeping its waiting time). Returns false (and does
  // nothing) after ShutDown.
  bool Add(absl::string_view key, Priority priority = Priority::kHigh);
  // Queues `key` after `delay` (now if delay <= 0); the earliest pending deadline wins, and the
  // highest priority of the pending adds is the one it is queued at.
  bool AddAfter(absl::string_view key, absl::Duration delay, Priority priority = Priority::kHigh);
  // AddAfter with max(backoff for this key's failures, token bucket delay); counts a failure.
  // Retries are high priority: the key was handed out already, it is not catching up.
  bool AddRateLimited(absl::string_view key);
  // The same with the key's backoff capped at `max_backoff` (the failure still counts): for
  // failures another party fixes, such as a 403 that waits for an RBAC rule, whose fix should
  // not wait out a long backoff.
  bool AddRateLimited(absl::string_view key, absl::Duration max_backoff);
  // The same, waiting at least `at_least` (capped at options.max_delay): for a failure that
  // says when to retry (a plugin's Error.retry_after). The key's backoff and the token bucket
  // still apply when longer, and the failure counts, so a key that keeps failing still backs
  // off past a short hint.
  bool AddRateLimited(absl::string_view key, absl::Duration max_backoff, absl::Duration at_least);
  // Resets the key's failure count (call after a successful reconcile).
  void Forget(absl::string_view key);
  // Failures counted by AddRateLimited since the last Forget.
  uint32_t NumRequeues(absl::string_view key) const;

  // Blocks until a key is ready or the queue is shut down (nullopt). Wakes for delayed keys as
  // their deadline passes on the clock.
  std::optional<Item> Get();
  // As Get, but never blocks: nullopt when nothing is ready now.
  std::optional<Item> TryGet();
  // Ends the processing of `item`, re-queueing its key if it was added meanwhile.
  // FailedPrecondition if `item` is not being processed (Done twice, or a foreign item).
  absl::Status Done(const Item& item);
  // Done(done) then Get() under one lock acquisition, for worker loops: saves a lock pair per
  // key. The status of the Done part goes to `*status` (if not null); a failed Done changes
  // nothing and the Get part still runs. Blocks as Get when nothing is ready.
  //
  //   std::optional<WorkQueue::Item> item = queue.Get();
  //   while (item) {
  //     Reconcile(item->key);
  //     item = queue.DoneAndGet(*item);
  //   }
  std::optional<Item> DoneAndGet(const Item& done, absl::Status* status = nullptr);
  // As DoneAndGet, but never blocks: nullopt when nothing is ready now.
  std::optional<Item> DoneAndTryGet(const Item& done, absl::Status* status = nullptr);

  // Stops accepting keys. Returns the keys that will never be handed out: with kAbandon every
  // queued, delayed or re-queue-pending key; with kDrain the delayed keys not yet due (ready
  // keys are still handed out). Idempotent: a second call returns what the mode abandons now.
  std::vector<std::string> ShutDown(ShutdownMode mode);
  bool ShuttingDown() const;

  // Keys ready to be handed out now.
  size_t Len() const;
  // The options' max_wait (the aging bound), for reports.
  absl::Duration max_wait() const { return options_.max_wait; }
  // The earliest deadline of a delayed key, InfiniteFuture when there is none.
  absl::Time NextDeadline() const;
  QueueMetrics Metrics() const;

  // At most one listener; told (without mu_ held) whenever a key may have become ready.
  // Setting nullptr waits until no call to the previous listener is in progress, so the
  // listener may be destroyed afterwards.
  void SetReadyListener(ReadyListener* listener);

 private:
  static constexpr uint32_t kNone = 0xffffffffu;

  // One cache line: Add, Get and Done each touch one slot (and a neighbour's links), so a slot
  // that straddles two lines costs a second miss per step once the keys outgrow L1.
  struct alignas(64) Slot {
    Slot()
        : in_use(false),
          idle(false),
          queued(false),
          processing(false),
          dirty(false),
          sampled(false) {}
    // On the heap, so that index_'s views into it survive slots_ growing; keeps its capacity
    // when the slot is reused.
    std::unique_ptr<std::string> key;
    // Unix nanoseconds (integer arithmetic: absl::Time's is 128-bit and out of line here).
    // Queued: when the key last became ready (coarse), for aging and the oldest waiting key.
    // Processing: when it was handed out (coarse unless `sampled`), for longest_running. A slot
    // is never queued and processing at once (a key added while processing is `dirty`).
    int64_t stamp_ns = 0;
    int64_t queued_at_ns = 0;   // precise, when it became ready; set only if `sampled`
    int64_t deadline_ns = 0;    // delayed: when it becomes ready
    uint32_t heap_pos = kNone;  // position in heap_, kNone when not delayed
    // Links of the ready list of `priority` while queued (kNone at the ends).
    uint32_t prev = kNone;
    uint32_t next = kNone;
    uint32_t failures = 0;
    uint32_t generation = 0;     // bumped by each Get, so a stale Item cannot Done a later run
    uint32_t sample_weight = 0;  // sampled: how many ready keys this timed run stands for
    bool in_use : 1;
    bool idle : 1;        // in use, but nothing queued, processing, delayed or backing off
    bool queued : 1;      // on a ready list
    bool processing : 1;  // handed out, not Done
    bool dirty : 1;       // added while processing: queue again on Done
    bool sampled : 1;     // this run is timed for the histograms
    // Queued: the ready list it is on; dirty: the priority Done queues it at.
    Priority priority = Priority::kHigh;
    Priority delayed_priority = Priority::kHigh;  // delayed: the priority it becomes ready at
  };
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");

  // A FIFO list of ready slots threaded through Slot::prev/next: O(1) push, pop and unlink
  // (a low key moving up), no allocation.
  struct ReadyList {
    uint32_t head = kNone;
    uint32_t tail = kNone;
    size_t size = 0;
  };

  // clock_->Now(), faster for the real clock.
  absl::Time Now() const;
  int64_t NowNanos() const;
  // A cheap timestamp for longest_running: CLOCK_REALTIME_COARSE for the real clock (a few ms
  // behind at most), the clock itself otherwise.
  int64_t CoarseNanos() const;
  // Puts a key that became ready on its list, deciding whether this run is timed. `now_ns` is
  // the precise time if the caller has it, else 0 (read here only if the run is sampled).
  // The key's priority is Slot::priority.
  // `coarse_ns` is CoarseNanos() if the caller read it (before taking mu_, to keep the
  // critical section short), else 0 (read here). The same holds for the functions below.
  void PushReady(uint32_t slot, int64_t now_ns, int64_t coarse_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Promotes due delayed keys; returns the time in Unix nanoseconds when Get needs it
  // (durations recorded, or delayed keys), else 0.
  int64_t PromoteAndNow() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // index_'s hash of `key`; needs no lock.
  static size_t KeyHash(absl::string_view key);
  // The key's slot (made if new); `hash` is KeyHash(key).
  uint32_t Intern(absl::string_view key, size_t hash) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The key's slot, kNone if it has none; `hash` is KeyHash(key).
  uint32_t Find(absl::string_view key, size_t hash) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Marks the slot idle if nothing refers to it, evicting idle keys when there are too many.
  void MaybeIdle(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees idle slots until at most max_idle_keys / 2 are idle.
  void EvictIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds the slots, the index and the free list again at the size of the keys still interned
  // (every one idle): after a burst of 10,000 keys they would otherwise keep the burst's size.
  // Slot numbers change, so only when nothing is queued, processing or delayed.
  void Compact() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tables smaller than this are not compacted.
  static constexpr size_t kCompactMinSlots = 1024;
  // Marks the key wanted now: queued, or dirty when processing. Returns true if that made a
  // key ready (the caller then signals).
  bool AddLocked(uint32_t slot, int64_t now_ns, Priority priority, int64_t coarse_ns = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AddAfterLocked(uint32_t slot, absl::Duration delay, absl::Time now, Priority priority)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ListPush(Priority priority, uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ListUnlink(Priority priority, uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The list the next hand-out comes from (one is not empty): high unless aging says low.
  Priority NextPriority(int64_t coarse_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t ReadyCount() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return ready_[0].size + ready_[1].size;
  }
  // Moves delayed keys whose deadline is <= now to the ready lists.
  void PromoteDue(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeapSwap(uint32_t i, uint32_t j) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeapUp(uint32_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeapDown(uint32_t i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HeapRemoveTop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<Item> TakeLocked(int64_t now_ns, int64_t coarse_ns = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the processing of `item`; sets *made_ready if its key was re-queued. The caller
  // prepares the wake-up.
  absl::Status DoneLocked(const Item& item, bool* made_ready, int64_t coarse_ns = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What to do once mu_ is released after a key became ready.
  struct Wakeup {
    bool signal = false;  // wake one Get waiter
    bool all = false;     // wake every Get waiter
    ReadyListener* listener = nullptr;
  };
  Wakeup PrepareWakeup(bool made_ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(Wakeup wakeup) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::string name_;
  const Options options_;
  const uint32_t sample_every_;  // options_.duration_sample_every, at least 1
  common::Clock* const clock_;
  const bool real_clock_;
  const int64_t max_wait_ns_;  // options_.max_wait; INT64_MAX for no aging

  mutable common::Mutex mu_;
  common::CondVar cv_;           // signalled when a key becomes ready and on shutdown
  common::CondVar listener_cv_;  // signalled when a listener call ends

  // State below is protected by mu_.
  // Indexed by slot number. A vector: a deque's indexing made Add+Get+Done ~7 ns slower
  // (bench/README.md, `queue`). Slot::key is on the heap, so index_'s views stay put as it grows.
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<absl::string_view, uint32_t> index_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  size_t idle_count_ ABSL_GUARDED_BY(mu_) = 0;
  size_t evict_hand_ ABSL_GUARDED_BY(mu_) = 0;  // where the next eviction sweep starts
  // A slot made after a Compact starts at this generation: above every Item of the old tables.
  uint32_t generation_floor_ ABSL_GUARDED_BY(mu_) = 0;
  size_t processing_count_ ABSL_GUARDED_BY(mu_) = 0;
  // Ready keys per priority (index: Priority).
  ReadyList ready_[kPriorities] ABSL_GUARDED_BY(mu_);
  // While the oldest low key is past max_wait: whether the next hand-out is a low key.
  bool aged_turn_low_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<uint32_t> heap_ ABSL_GUARDED_BY(mu_);  // min-heap of slots by deadline
  size_t dirty_count_ ABSL_GUARDED_BY(mu_) = 0;
  // Keys that became ready since the last timed one, and when (coarse) that one did: the next
  // key is timed once sample_every_ keys have passed or a clock tick has, so a slow queue
  // times every key and a busy one pays for few precise reads.
  uint32_t unsampled_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_sampled_ns_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<int64_t>::min();
  TokenBucket bucket_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  ShutdownMode shutdown_mode_ ABSL_GUARDED_BY(mu_) = ShutdownMode::kDrain;
  ReadyListener* listener_ ABSL_GUARDED_BY(mu_) = nullptr;
  int listener_calls_ ABSL_GUARDED_BY(mu_) = 0;  // calls to listener_ in progress
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;         // threads blocked in Get
  QueueMetrics counters_ ABSL_GUARDED_BY(mu_);   // counters and histograms only
};

}  // namespace ctrlhost::queue

#endif  // CTRLHOST_RUNTIME_QUEUE_WORK_QUEUE_H_
