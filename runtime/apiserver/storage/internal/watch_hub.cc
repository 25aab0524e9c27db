#include "runtime/apiserver/storage/internal/watch_hub.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::internal {
namespace {

// Ring entries a watcher examines per hold of the hub's lock while finding none of its own.
constexpr size_t kMaxScanPerLock = 4096;

}  // namespace

absl::Status TooLargeResourceVersionError(int64_t requested, int64_t current) {
  kube::StatusDetails details;
  details.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  details.retry_after_seconds = 1;
  return kube::ApiError(
      504, "Timeout",
      absl::StrCat("Too large resource version: ", requested, ", current: ", current), details);
}

void WatchHub::Publish(std::vector<WatchEvent> events, int64_t revision) {
  {
    common::MutexLock lock(&mu_);
    for (WatchEvent& event : events) {
      ring_bytes_ += event.object->value.size();
      ring_.push_back(std::move(event));
    }
    while (ring_.size() > capacity_ ||
           (capacity_bytes_ > 0 && ring_bytes_ > capacity_bytes_ && ring_.size() > 1)) {
      base_rev_ = ring_.front().object->mod_revision;
      ring_bytes_ -= ring_.front().object->value.size();
      ring_.pop_front();
      ++first_seq_;
    }
    published_rev_ = std::max(published_rev_, revision);
  }
  cv_.SignalAll();
}

void WatchHub::Shutdown() {
  {
    common::MutexLock lock(&mu_);
    closed_ = true;
  }
  cv_.SignalAll();
}

void WatchHub::Stop(std::atomic<bool>* stopped) {
  {
    common::MutexLock lock(&mu_);
    stopped->store(true);
  }
  cv_.SignalAll();
}

uint64_t WatchHub::SeqAfter(int64_t revision) const {
  auto it = std::upper_bound(
      ring_.begin(), ring_.end(), revision,
      [](int64_t rev, const WatchEvent& event) { return rev < event.object->mod_revision; });
  return first_seq_ + static_cast<uint64_t>(it - ring_.begin());
}

absl::Status WatchHub::Register(int64_t from, int64_t compacted, WatchCursor* cursor) {
  common::MutexLock lock(&mu_);
  if (closed_) return absl::CancelledError("storage is closed");
  if (from > published_rev_) return TooLargeResourceVersionError(from, published_rev_);
  // Compaction is the history horizon even while the ring still holds older events: a watch
  // from before it gets 410 whether or not memory could serve it, as with etcd's compaction,
  // so clients see one consistent rule.
  if (from < compacted) {
    return kube::GoneError(absl::StrCat("too old resource version: ", from, " (", compacted, ")"));
  }
  cursor->progress = from;
  if (from >= base_rev_) {
    cursor->in_ring = true;
    cursor->next_seq = SeqAfter(from);
  } else {
    cursor->in_ring = false;
  }
  ++watchers_;
  return absl::OkStatus();
}

void WatchHub::Unregister() {
  common::MutexLock lock(&mu_);
  --watchers_;
}

int64_t WatchHub::watchers() const {
  common::MutexLock lock(&mu_);
  return watchers_;
}

int64_t WatchHub::ring_bytes() const {
  common::MutexLock lock(&mu_);
  return static_cast<int64_t>(ring_bytes_);
}

int64_t WatchHub::PublishedRevision(const std::atomic<bool>* stopped) const {
  common::MutexLock lock(&mu_);
  if (closed_ || stopped->load()) return -1;
  return published_rev_;
}

bool WatchHub::TryJoin(WatchCursor* cursor) {
  common::MutexLock lock(&mu_);
  if (cursor->progress < base_rev_) return false;
  cursor->in_ring = true;
  cursor->next_seq = SeqAfter(cursor->progress);
  return true;
}

WatchHub::ReadResult WatchHub::ReadRing(WatchCursor* cursor, absl::string_view prefix,
                                        size_t max_events, absl::Time deadline,
                                        const std::atomic<bool>* stopped,
                                        std::vector<WatchEvent>* out) {
  common::MutexLock lock(&mu_);
  for (;;) {
    if (closed_ || stopped->load()) return ReadResult::kClosed;
    if (cursor->next_seq < first_seq_) {
      cursor->in_ring = false;
      return ReadResult::kFellBehind;
    }
    const uint64_t end_seq = first_seq_ + ring_.size();
    size_t examined = 0;
    while (cursor->next_seq < end_seq && out->size() < max_events && examined < kMaxScanPerLock) {
      const WatchEvent& event = ring_[cursor->next_seq - first_seq_];
      ++cursor->next_seq;
      ++examined;
      cursor->progress = event.object->mod_revision;
      if (absl::StartsWith(event.object->key, prefix)) out->push_back(event);
    }
    // Caught up: revisions published without an event of ours are covered too.
    if (cursor->next_seq == end_seq) cursor->progress = published_rev_;
    if (!out->empty()) return ReadResult::kEvents;
    if (cursor->next_seq < end_seq) {
      // A long run of other prefixes' events: let the publisher (who holds the store's state
      // lock while it waits for ours) in before scanning on.
      mu_.Unlock();
      std::this_thread::yield();
      mu_.Lock();
      continue;
    }
    if (clock_->WaitWithDeadline(&mu_, &cv_, deadline)) {
      // One last look, so a deadline in the past still returns what is already there.
      if (cursor->next_seq < first_seq_ + ring_.size() || closed_ || stopped->load()) continue;
      return ReadResult::kTimeout;
    }
    // Woken by a publish. Give the CPU away once before reading: on an idle machine this
    // returns at once; on a busy one the writers run first and this watcher collects several
    // commits' events in one read (one write to its client) instead of one each. Measured with
    // 100 watchers on 2 cores (bench/apiserver): 2x the write rate, watch delay p99 2 -> 12 ms.
    mu_.Unlock();
    std::this_thread::yield();
    mu_.Lock();
  }
}

}  // namespace ctrlhost::apiserver::internal
