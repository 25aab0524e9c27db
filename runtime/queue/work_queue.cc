#include "runtime/queue/work_queue.h"

#include <time.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::queue {
namespace {

// A blocked Get re-checks at least this often (real clock), so an infinite deadline never
// reaches the condition variable (libstdc++ mishandles time_point::max()).
constexpr absl::Duration kMaxWait = absl::Minutes(1);

constexpr int64_t kNoAging = std::numeric_limits<int64_t>::max();

int Index(Priority priority) { return static_cast<int>(priority); }

}  // namespace

const char* PriorityName(Priority priority) { return priority == Priority::kLow ? "low" : "high"; }

int64_t WorkQueue::NowNanos() const {
  if (real_clock_) {
    // The same wall clock as Clock::Real(), read directly: absl::Now() in Debian's Abseil costs
    // ~70 ns, clock_gettime ~19 ns, and the hot path reads the time three times per key.
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  return absl::ToUnixNanos(clock_->Now());
}

int64_t WorkQueue::CoarseNanos() const {
  if (real_clock_) {
    // The kernel's last tick, without reading the TSC: ~5 ns against ~20 ns for the precise
    // clock. Good enough for "how long has this key been running".
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
  }
  return absl::ToUnixNanos(clock_->Now());
}

absl::Time WorkQueue::Now() const {
  return real_clock_ ? absl::FromUnixNanos(NowNanos()) : clock_->Now();
}

WorkQueue::WorkQueue(std::string name, Options options, common::Clock* clock)
    : name_(std::move(name)),
      options_(options),
      sample_every_(std::max<uint32_t>(1, options.duration_sample_every)),
      clock_(clock),
      real_clock_(clock == common::Clock::Real()),
      max_wait_ns_(options.max_wait == absl::InfiniteDuration()
                       ? kNoAging
                       : std::max<int64_t>(0, absl::ToInt64Nanoseconds(options.max_wait))),
      bucket_(options.qps, options.burst, clock->Now()) {
  // Workers and event handlers take mu_ in tight loops for a few dozen nanoseconds each.
  mu_.MakeAdaptive();
}

WorkQueue::~WorkQueue() = default;

// ---------------------------------------------------------------------------------------------
// Slots, interning and lists.

size_t WorkQueue::KeyHash(absl::string_view key) {
  // The hash index_ uses (absl's default for string_view), computed by callers before they
  // take mu_: hashing is a good part of Add, and other threads need not wait for it.
  return absl::Hash<absl::string_view>{}(key);
}

uint32_t WorkQueue::Find(absl::string_view key, size_t hash) const {
  auto it = index_.find(key, hash);
  return it == index_.end() ? kNone : it->second;
}

uint32_t WorkQueue::Intern(absl::string_view key, size_t hash) {
  auto it = index_.find(key, hash);
  if (it != index_.end()) {
    const uint32_t slot = it->second;
    Slot& s = slots_[slot];
    if (s.idle) {
      s.idle = false;
      --idle_count_;
    }
    return slot;
  }
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
    slots_.back().key = std::make_unique<std::string>();
    slots_.back().generation = generation_floor_;
  }
  Slot& s = slots_[slot];
  s.key->assign(key.data(), key.size());
  s.in_use = true;
  s.failures = 0;
  index_.emplace(absl::string_view(*s.key), slot);
  return slot;
}

void WorkQueue::MaybeIdle(uint32_t slot) {
  Slot& s = slots_[slot];
  if (s.idle || s.queued || s.processing || s.dirty || s.heap_pos != kNone || s.failures != 0) {
    return;
  }
  s.idle = true;
  if (++idle_count_ > options_.max_idle_keys) EvictIdle();
  // Everything interned is idle (a burst is over) and the tables are four times what is left:
  // build them again at their size, so that the burst's peak is not kept for good.
  const size_t in_use = slots_.size() - free_.size();
  if (idle_count_ == in_use && slots_.size() >= kCompactMinSlots && in_use * 4 <= slots_.size() &&
      !shut_down_) {
    Compact();
  }
}

void WorkQueue::Compact() {
  std::vector<std::unique_ptr<std::string>> kept;
  kept.reserve(idle_count_);
  uint32_t max_generation = generation_floor_;
  for (Slot& s : slots_) {
    max_generation = std::max(max_generation, s.generation);
    if (s.in_use) kept.push_back(std::move(s.key));
  }
  std::vector<Slot>().swap(slots_);
  std::vector<uint32_t>().swap(free_);
  std::vector<uint32_t>().swap(heap_);  // empty: nothing is delayed
  index_ = absl::flat_hash_map<absl::string_view, uint32_t>();
  slots_.reserve(kept.size());
  index_.reserve(kept.size());
  for (std::unique_ptr<std::string>& key : kept) {
    const uint32_t slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
    Slot& s = slots_.back();
    s.key = std::move(key);
    s.in_use = true;
    s.idle = true;
    // Above every generation an Item of the old tables carried, so that a stale Item can never
    // match a new slot (nor one made later: generation_floor_).
    s.generation = max_generation + 1;
    index_.emplace(absl::string_view(*s.key), slot);
  }
  generation_floor_ = max_generation + 1;
  evict_hand_ = 0;
  ++counters_.compactions_total;
}

void WorkQueue::EvictIdle() {
  // A clock sweep, not an LRU list: the hot path only flips a flag, and eviction (rare, amortized
  // over max_idle_keys / 2 idle transitions) visits each slot at most once per pass.
  const size_t target = options_.max_idle_keys / 2;
  const size_t n = slots_.size();
  for (size_t visited = 0; visited < n && idle_count_ > target; ++visited) {
    const uint32_t victim = static_cast<uint32_t>(evict_hand_);
    evict_hand_ = (evict_hand_ + 1) % n;
    Slot& v = slots_[victim];
    if (!v.in_use || !v.idle) continue;
    index_.erase(absl::string_view(*v.key));
    v.in_use = false;
    v.idle = false;
    --idle_count_;
    free_.push_back(victim);
  }
}

// ---------------------------------------------------------------------------------------------
// Ready lists and delayed heap.

void WorkQueue::ListPush(Priority priority, uint32_t slot) {
  ReadyList& list = ready_[Index(priority)];
  Slot& s = slots_[slot];
  s.prev = list.tail;
  s.next = kNone;
  if (list.tail == kNone) {
    list.head = slot;
  } else {
    slots_[list.tail].next = slot;
  }
  list.tail = slot;
  ++list.size;
}

void WorkQueue::ListUnlink(Priority priority, uint32_t slot) {
  ReadyList& list = ready_[Index(priority)];
  Slot& s = slots_[slot];
  if (s.prev == kNone) {
    list.head = s.next;
  } else {
    slots_[s.prev].next = s.next;
  }
  if (s.next == kNone) {
    list.tail = s.prev;
  } else {
    slots_[s.next].prev = s.prev;
  }
  s.prev = kNone;
  s.next = kNone;
  --list.size;
}

void WorkQueue::HeapSwap(uint32_t i, uint32_t j) {
  std::swap(heap_[i], heap_[j]);
  slots_[heap_[i]].heap_pos = i;
  slots_[heap_[j]].heap_pos = j;
}

void WorkQueue::HeapUp(uint32_t i) {
  while (i > 0) {
    const uint32_t parent = (i - 1) / 2;
    if (slots_[heap_[parent]].deadline_ns <= slots_[heap_[i]].deadline_ns) break;
    HeapSwap(i, parent);
    i = parent;
  }
}

void WorkQueue::HeapDown(uint32_t i) {
  const uint32_t n = static_cast<uint32_t>(heap_.size());
  while (true) {
    uint32_t smallest = i;
    const uint32_t left = 2 * i + 1;
    const uint32_t right = left + 1;
    if (left < n && slots_[heap_[left]].deadline_ns < slots_[heap_[smallest]].deadline_ns) {
      smallest = left;
    }
    if (right < n && slots_[heap_[right]].deadline_ns < slots_[heap_[smallest]].deadline_ns) {
      smallest = right;
    }
    if (smallest == i) return;
    HeapSwap(i, smallest);
    i = smallest;
  }
}

void WorkQueue::HeapRemoveTop() {
  slots_[heap_[0]].heap_pos = kNone;
  const uint32_t last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) {
    heap_[0] = last;
    slots_[last].heap_pos = 0;
    HeapDown(0);
  }
}

void WorkQueue::PromoteDue(absl::Time now) {
  const int64_t now_ns = absl::ToUnixNanos(now);
  while (!heap_.empty() && slots_[heap_[0]].deadline_ns <= now_ns) {
    const uint32_t slot = heap_[0];
    HeapRemoveTop();
    AddLocked(slot, now_ns, slots_[slot].delayed_priority);
  }
}

// ---------------------------------------------------------------------------------------------
// Adding.

bool WorkQueue::AddLocked(uint32_t slot, int64_t now_ns, Priority priority, int64_t coarse_ns) {
  Slot& s = slots_[slot];
  if (s.queued) {
    ++counters_.deduped_total;
    if (priority > s.priority) {
      // Moves up, keeping its ready time (so it counts as waiting since then).
      ListUnlink(s.priority, slot);
      s.priority = priority;
      ListPush(priority, slot);
    }
    return false;
  }
  if (s.dirty) {
    ++counters_.deduped_total;
    s.priority = std::max(s.priority, priority);
    return false;
  }
  ++counters_.adds_total;
  s.priority = priority;
  if (s.processing) {
    s.dirty = true;
    ++dirty_count_;
    return false;
  }
  PushReady(slot, now_ns, coarse_ns);
  return true;
}

void WorkQueue::PushReady(uint32_t slot, int64_t now_ns, int64_t coarse_ns) {
  Slot& s = slots_[slot];
  s.queued = true;
  if (coarse_ns == 0) coarse_ns = CoarseNanos();
  s.stamp_ns = coarse_ns;
  s.sampled = false;
  if (!options_.record_durations) {
    ListPush(s.priority, slot);
    return;
  }
  ++unsampled_;
  // Timed: the first key after sample_every_ - 1 untimed ones or after a tick of the coarse
  // clock (CLOCK_REALTIME_COARSE moves once per kernel tick, 1-4 ms), standing for every key
  // since the last timed one. So a queue of a few keys per tick times all of them, and a busy
  // one pays three precise reads per sample_every_ keys.
  if (unsampled_ >= sample_every_ || coarse_ns != last_sampled_ns_) {
    s.sampled = true;
    s.sample_weight = unsampled_;
    unsampled_ = 0;
    last_sampled_ns_ = coarse_ns;
    s.queued_at_ns = now_ns != 0 ? now_ns : NowNanos();
  }
  ListPush(s.priority, slot);
}

bool WorkQueue::AddAfterLocked(uint32_t slot, absl::Duration delay, absl::Time now,
                               Priority priority) {
  if (delay <= absl::ZeroDuration()) return AddLocked(slot, absl::ToUnixNanos(now), priority);
  Slot& s = slots_[slot];
  // Ready, or due again right after Done: sooner than any delay.
  if (s.queued || s.dirty) return false;
  const int64_t deadline_ns = absl::ToUnixNanos(now + delay);
  if (s.heap_pos != kNone) {
    s.delayed_priority = std::max(s.delayed_priority, priority);
    if (deadline_ns < s.deadline_ns) {
      s.deadline_ns = deadline_ns;
      HeapUp(s.heap_pos);
    }
    return false;
  }
  s.delayed_priority = priority;
  s.deadline_ns = deadline_ns;
  s.heap_pos = static_cast<uint32_t>(heap_.size());
  heap_.push_back(slot);
  HeapUp(s.heap_pos);
  // A new earliest deadline: waiters must shorten their wait.
  return s.heap_pos == 0;
}

WorkQueue::Wakeup WorkQueue::PrepareWakeup(bool made_ready) {
  Wakeup w;
  if (!made_ready) return w;
  w.signal = waiters_ > 0;
  w.listener = listener_;
  if (w.listener != nullptr) ++listener_calls_;
  return w;
}

void WorkQueue::Deliver(Wakeup wakeup) {
  if (wakeup.all) {
    cv_.SignalAll();
  } else if (wakeup.signal) {
    cv_.Signal();
  }
  if (wakeup.listener != nullptr) {
    wakeup.listener->OnReady();
    common::MutexLock lock(&mu_);
    if (--listener_calls_ == 0) listener_cv_.SignalAll();
  }
}

bool WorkQueue::Add(absl::string_view key, Priority priority) {
  // Hashed and stamped before the lock: other threads need not wait for either. (Two adds racing
  // for the lock may queue in the other order than their stamps: a few microseconds, within the
  // coarse clock's own resolution.)
  const size_t hash = KeyHash(key);
  const int64_t coarse_ns = CoarseNanos();
  Wakeup wakeup;
  {
    common::MutexLock lock(&mu_);
    if (shut_down_) return false;
    const uint32_t slot = Intern(key, hash);
    // The precise clock is read only if this key's run is sampled (PushReady).
    const bool made_ready = AddLocked(slot, 0, priority, coarse_ns);
    MaybeIdle(slot);
    wakeup = PrepareWakeup(made_ready);
  }
  Deliver(wakeup);
  return true;
}

bool WorkQueue::AddAfter(absl::string_view key, absl::Duration delay, Priority priority) {
  const size_t hash = KeyHash(key);
  Wakeup wakeup;
  {
    common::MutexLock lock(&mu_);
    if (shut_down_) return false;
    const uint32_t slot = Intern(key, hash);
    const bool made_ready = AddAfterLocked(slot, delay, Now(), priority);
    MaybeIdle(slot);
    wakeup = PrepareWakeup(made_ready);
  }
  Deliver(wakeup);
  return true;
}

bool WorkQueue::AddRateLimited(absl::string_view key) {
  return AddRateLimited(key, absl::InfiniteDuration());
}

bool WorkQueue::AddRateLimited(absl::string_view key, absl::Duration max_backoff) {
  return AddRateLimited(key, max_backoff, absl::ZeroDuration());
}

bool WorkQueue::AddRateLimited(absl::string_view key, absl::Duration max_backoff,
                               absl::Duration at_least) {
  const size_t hash = KeyHash(key);
  Wakeup wakeup;
  {
    common::MutexLock lock(&mu_);
    if (shut_down_) return false;
    const uint32_t slot = Intern(key, hash);
    Slot& s = slots_[slot];
    const absl::Time now = Now();
    const absl::Duration backoff = std::min(
        ExponentialBackoff(options_.base_delay, options_.max_delay, s.failures), max_backoff);
    if (s.failures < 0xffffffffu) ++s.failures;
    const absl::Duration delay =
        std::max({backoff, bucket_.Reserve(now), std::min(at_least, options_.max_delay)});
    ++counters_.retries_total;
    const bool made_ready = AddAfterLocked(slot, delay, now, Priority::kHigh);
    MaybeIdle(slot);
    wakeup = PrepareWakeup(made_ready);
  }
  Deliver(wakeup);
  return true;
}

void WorkQueue::Forget(absl::string_view key) {
  const size_t hash = KeyHash(key);
  common::MutexLock lock(&mu_);
  const uint32_t slot = Find(key, hash);
  if (slot == kNone) return;
  slots_[slot].failures = 0;
  MaybeIdle(slot);
}

uint32_t WorkQueue::NumRequeues(absl::string_view key) const {
  const size_t hash = KeyHash(key);
  common::MutexLock lock(&mu_);
  const uint32_t slot = Find(key, hash);
  return slot == kNone ? 0 : slots_[slot].failures;
}

// ---------------------------------------------------------------------------------------------
// Handing out.

Priority WorkQueue::NextPriority(int64_t coarse_ns) {
  if (ready_[Index(Priority::kLow)].size == 0) return Priority::kHigh;
  if (ready_[Index(Priority::kHigh)].size == 0) return Priority::kLow;
  // The low list is in ready order (a key moving up leaves it), so its head is the oldest.
  const bool aged = max_wait_ns_ != kNoAging &&
                    coarse_ns - slots_[ready_[Index(Priority::kLow)].head].stamp_ns >= max_wait_ns_;
  if (!aged) {
    aged_turn_low_ = true;
    return Priority::kHigh;
  }
  const bool low = aged_turn_low_;
  aged_turn_low_ = !aged_turn_low_;
  if (!low) return Priority::kHigh;
  ++counters_.aged_total;
  return Priority::kLow;
}

std::optional<WorkQueue::Item> WorkQueue::TakeLocked(int64_t now_ns, int64_t coarse_ns) {
  if (shut_down_ && shutdown_mode_ == ShutdownMode::kAbandon) return std::nullopt;
  if (ReadyCount() == 0) return std::nullopt;
  // One coarse read serves aging, the wait check and longest_running.
  if (coarse_ns == 0) coarse_ns = CoarseNanos();
  const Priority priority = NextPriority(coarse_ns);
  const uint32_t slot = ready_[Index(priority)].head;
  ListUnlink(priority, slot);
  Slot& s = slots_[slot];
  s.queued = false;
  s.processing = true;
  ++s.generation;
  ++counters_.gets_total;
  ++processing_count_;
  const bool overdue = max_wait_ns_ != kNoAging && coarse_ns - s.stamp_ns > max_wait_ns_;
  if (overdue) ++counters_.waited_past_max_total;
  if (s.sampled) {
    if (now_ns == 0) now_ns = NowNanos();
    counters_.queue_latency.ObserveNanos(now_ns - s.queued_at_ns, s.sample_weight);
    counters_.queue_latency_by_priority[Index(priority)].ObserveNanos(now_ns - s.queued_at_ns,
                                                                      s.sample_weight);
    s.stamp_ns = now_ns;
  } else {
    s.stamp_ns = coarse_ns;  // for longest_running only
  }
  return Item{absl::string_view(*s.key), slot, s.generation, overdue};
}

int64_t WorkQueue::PromoteAndNow() {
  if (!heap_.empty()) {
    const absl::Time now = Now();
    PromoteDue(now);
    return absl::ToUnixNanos(now);
  }
  return 0;  // TakeLocked reads the clock itself if the key's run is sampled
}

std::optional<WorkQueue::Item> WorkQueue::TryGet() {
  const int64_t coarse_ns = CoarseNanos();  // before the lock, as in Add
  common::MutexLock lock(&mu_);
  return TakeLocked(PromoteAndNow(), coarse_ns);
}

std::optional<WorkQueue::Item> WorkQueue::Get() {
  int64_t coarse_ns = CoarseNanos();  // before the lock for the first try; read again after a wait
  common::MutexLock lock(&mu_);
  while (true) {
    if (std::optional<Item> item = TakeLocked(PromoteAndNow(), coarse_ns)) return item;
    coarse_ns = 0;
    const absl::Time now = Now();
    if (shut_down_) {
      // Drain: keys re-queued by Done are still to come; otherwise nothing will.
      if (shutdown_mode_ == ShutdownMode::kAbandon || dirty_count_ == 0) return std::nullopt;
    }
    absl::Time deadline = now + kMaxWait;
    if (!heap_.empty()) {
      deadline = std::min(deadline, absl::FromUnixNanos(slots_[heap_[0]].deadline_ns));
    }
    ++waiters_;
    clock_->WaitWithDeadline(&mu_, &cv_, deadline);
    --waiters_;
  }
}

absl::Status WorkQueue::DoneLocked(const Item& item, bool* made_ready, int64_t coarse_ns) {
  if (item.slot >= slots_.size() || !slots_[item.slot].processing ||
      slots_[item.slot].generation != item.generation) {
    return absl::FailedPreconditionError(
        absl::StrCat("work queue ", name_, ": Done for a key that is not being processed"));
  }
  Slot& s = slots_[item.slot];
  s.processing = false;
  --processing_count_;
  int64_t now_ns = 0;
  if (s.sampled) {
    now_ns = NowNanos();
    counters_.work_duration.ObserveNanos(now_ns - s.stamp_ns, s.sample_weight);
    s.sampled = false;
  }
  if (s.dirty) {
    s.dirty = false;
    --dirty_count_;
    PushReady(item.slot, now_ns, coarse_ns);
    *made_ready = true;
  }
  MaybeIdle(item.slot);
  return absl::OkStatus();
}

absl::Status WorkQueue::Done(const Item& item) {
  Wakeup wakeup;
  {
    common::MutexLock lock(&mu_);
    bool made_ready = false;
    absl::Status status = DoneLocked(item, &made_ready);
    if (!status.ok()) return status;
    wakeup = PrepareWakeup(made_ready);
    // A draining queue's last re-queue-pending Done ends every waiter's Get.
    if (shut_down_ && dirty_count_ == 0 && waiters_ > 0) wakeup.all = true;
  }
  Deliver(wakeup);
  return absl::OkStatus();
}

std::optional<WorkQueue::Item> WorkQueue::DoneAndTryGet(const Item& done, absl::Status* status) {
  // One coarse read, before the lock, for both halves.
  const int64_t coarse_ns = CoarseNanos();
  Wakeup wakeup;
  std::optional<Item> next;
  {
    common::MutexLock lock(&mu_);
    bool made_ready = false;
    absl::Status done_status = DoneLocked(done, &made_ready, coarse_ns);
    next = TakeLocked(PromoteAndNow(), coarse_ns);
    // A key re-queued by this Done and taken right back (nothing else is ready) needs no
    // wake-up; otherwise wake as Done would.
    wakeup = PrepareWakeup(made_ready && ReadyCount() > 0);
    if (shut_down_ && dirty_count_ == 0 && waiters_ > 0) wakeup.all = true;
    if (status != nullptr) *status = std::move(done_status);
  }
  Deliver(wakeup);
  return next;
}

std::optional<WorkQueue::Item> WorkQueue::DoneAndGet(const Item& done, absl::Status* status) {
  if (std::optional<Item> next = DoneAndTryGet(done, status)) return next;
  return Get();  // nothing ready: this worker blocks anyway, a second lock costs nothing
}

// ---------------------------------------------------------------------------------------------
// Shutdown, inspection, listener.

std::vector<std::string> WorkQueue::ShutDown(ShutdownMode mode) {
  std::vector<std::string> abandoned;
  {
    common::MutexLock lock(&mu_);
    // Abandon wins over an earlier drain; a drain after abandon changes nothing.
    if (!shut_down_ || mode == ShutdownMode::kAbandon) shutdown_mode_ = mode;
    shut_down_ = true;
    PromoteDue(Now());
    // Delayed keys are never handed out after shutdown, whatever the mode.
    while (!heap_.empty()) {
      const uint32_t slot = heap_[0];
      HeapRemoveTop();
      abandoned.push_back(*slots_[slot].key);
      MaybeIdle(slot);
    }
    if (shutdown_mode_ == ShutdownMode::kAbandon) {
      for (ReadyList& list : ready_) {
        while (list.size > 0) {
          const uint32_t slot = list.head;
          ListUnlink(slots_[slot].priority, slot);
          slots_[slot].queued = false;
          abandoned.push_back(*slots_[slot].key);
          MaybeIdle(slot);
        }
      }
      for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
        if (slots_[slot].processing && slots_[slot].dirty) {
          slots_[slot].dirty = false;
          abandoned.push_back(*slots_[slot].key);
        }
      }
      dirty_count_ = 0;
    }
  }
  cv_.SignalAll();
  return abandoned;
}

bool WorkQueue::ShuttingDown() const {
  common::MutexLock lock(&mu_);
  return shut_down_;
}

size_t WorkQueue::Len() const {
  common::MutexLock lock(&mu_);
  // Count due delayed keys too, without moving them (Len is const).
  const int64_t now_ns = absl::ToUnixNanos(Now());
  size_t due = 0;
  for (uint32_t slot : heap_) {
    if (slots_[slot].deadline_ns <= now_ns) ++due;
  }
  if (shut_down_ && shutdown_mode_ == ShutdownMode::kAbandon) return 0;
  return ReadyCount() + due;
}

absl::Time WorkQueue::NextDeadline() const {
  common::MutexLock lock(&mu_);
  return heap_.empty() ? absl::InfiniteFuture() : absl::FromUnixNanos(slots_[heap_[0]].deadline_ns);
}

QueueMetrics WorkQueue::Metrics() const {
  common::MutexLock lock(&mu_);
  QueueMetrics m = counters_;
  m.depth = ReadyCount();
  for (int p = 0; p < kPriorities; ++p) m.depth_by_priority[p] = ready_[p].size;
  m.max_wait = options_.max_wait;
  m.delayed = heap_.size();
  m.processing = processing_count_;
  m.keys = index_.size();
  m.slots = slots_.size();
  m.duration_sample_every = sample_every_;
  const int64_t now_ns = NowNanos();
  const int64_t coarse_ns = CoarseNanos();
  // A scan of every slot: Metrics is called rarely, the hot path keeps no processing list.
  for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const Slot& s = slots_[slot];
    if (s.queued) {
      const int p = Index(s.priority);
      const absl::Duration waited = absl::Nanoseconds(std::max<int64_t>(0, coarse_ns - s.stamp_ns));
      if (m.oldest_key[p].empty() || waited > m.oldest_waiting[p]) {
        m.oldest_waiting[p] = waited;
        m.oldest_key[p] = *s.key;
      }
    }
    if (!options_.record_durations || !s.processing) continue;
    const absl::Duration running = absl::Nanoseconds(std::max<int64_t>(0, now_ns - s.stamp_ns));
    m.longest_running = std::max(m.longest_running, running);
    m.unfinished_work += running;
  }
  return m;
}

void WorkQueue::SetReadyListener(ReadyListener* listener) {
  common::MutexLock lock(&mu_);
  listener_ = listener;
  if (listener == nullptr) {
    while (listener_calls_ > 0) listener_cv_.Wait(&mu_);
  }
}

}  // namespace ctrlhost::queue
