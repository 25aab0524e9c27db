// The in-memory window of recent events that every Watch reads from.
//
// The writer publishes each committed batch once, in revision order, into a shared ring
// (O(1) per event however many watchers exist) and wakes the waiting watchers. Each watcher
// keeps its own cursor (a sequence number into the ring) and filters by its prefix. When the
// ring is full (in events or in bytes) the oldest events are evicted; a watcher whose cursor was
// evicted continues from SQLite history (see watch.cc) and rejoins the ring once it has caught up.
//
// Invariant: every event with revision > base_rev_ is in the ring; published_rev_ is the
// highest revision published. Revisions without an event (a failed commit's) are skipped.
//
// Thread-safety: thread-safe; all mutable state is guarded by mu_. Lock order: the store's
// state lock, then mu_ (the writer publishes under both, so a revision that a reader saw in
// the store is always already in the hub).
#ifndef CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_WATCH_HUB_H_
#define CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_WATCH_HUB_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver::internal {

// Where one watcher is. Owned and used by the watcher's consumer thread only.
struct WatchCursor {
  bool in_ring = false;
  uint64_t next_seq = 0;  // in the ring: the next event to look at
  int64_t progress = 0;   // every matching event <= progress has been returned
};

class WatchHub {
 public:
  // At most `capacity` events and, beyond the newest one, `capacity_bytes` bytes of object
  // values (0: no byte bound).
  WatchHub(size_t capacity, size_t capacity_bytes, int64_t revision, common::Clock* clock)
      : capacity_(capacity < 1 ? 1 : capacity),
        capacity_bytes_(capacity_bytes),
        clock_(clock),
        base_rev_(revision),
        published_rev_(revision) {}
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Appends one committed batch (events in revision order, all above the last published
  // revision) and wakes every watcher. `revision` is the batch's last revision.
  void Publish(std::vector<WatchEvent> events, int64_t revision);
  // Wakes every watcher for good: reads return kCancelled from now on.
  void Shutdown();

  // Registers a watcher for events after `from`; sets where it starts. kube::GoneError when
  // neither the ring nor history (above `compacted`) holds from+1; the 504 "Too large resource
  // version" when `from` is above the published revision; kCancelled after Shutdown.
  absl::Status Register(int64_t from, int64_t compacted, WatchCursor* cursor);
  void Unregister();

  enum class ReadResult { kEvents, kTimeout, kFellBehind, kClosed };
  // In the ring: waits until matching events exist, `deadline` passes, `*stopped` or shutdown;
  // appends up to `max_events` to `out` and advances the cursor. kFellBehind when the cursor
  // was evicted (the caller continues from history at cursor->progress).
  ReadResult ReadRing(WatchCursor* cursor, absl::string_view prefix, size_t max_events,
                      absl::Time deadline, const std::atomic<bool>* stopped,
                      std::vector<WatchEvent>* out);
  // The highest revision history can serve (everything published is committed), or -1 after
  // Shutdown() or `*stopped`.
  int64_t PublishedRevision(const std::atomic<bool>* stopped) const;
  // Moves a history cursor into the ring when the ring holds everything after its progress.
  bool TryJoin(WatchCursor* cursor);

  // Sets `*stopped` and wakes the waiters (one of which is its watcher).
  void Stop(std::atomic<bool>* stopped);

  int64_t watchers() const;
  // Bytes of object values the ring holds.
  int64_t ring_bytes() const;

 private:
  uint64_t SeqAfter(int64_t revision) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const size_t capacity_;
  const size_t capacity_bytes_;
  common::Clock* const clock_;

  // State below is guarded by mu_.
  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::deque<WatchEvent> ring_ ABSL_GUARDED_BY(mu_);
  size_t ring_bytes_ ABSL_GUARDED_BY(mu_) = 0;   // sum of the ring's object value sizes
  uint64_t first_seq_ ABSL_GUARDED_BY(mu_) = 0;  // sequence number of ring_.front()
  int64_t base_rev_ ABSL_GUARDED_BY(mu_);
  int64_t published_rev_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t watchers_ ABSL_GUARDED_BY(mu_) = 0;
};

// The 504 a kube-apiserver answers for a resourceVersion above its current one.
absl::Status TooLargeResourceVersionError(int64_t requested, int64_t current);

}  // namespace ctrlhost::apiserver::internal

#endif  // CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_WATCH_HUB_H_
