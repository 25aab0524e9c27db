// Watch: one consumer's view of the event stream, served from the hub's ring when it can and
// from SQLite history (through the read pool) when the consumer starts before the ring or
// falls out of it. The switch from history to the ring happens only when the ring holds every
// event after the last revision read from history, so nothing is lost or repeated.
#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/apiserver/storage/internal/log_table.h"
#include "runtime/apiserver/storage/internal/watch_hub.h"
#include "runtime/apiserver/storage/internal/watch_state.h"
#include "runtime/apiserver/storage/store.h"

namespace ctrlhost::apiserver {
namespace {

// Most events read from history per Next(), so one call holds a read snapshot briefly.
constexpr size_t kHistoryBatch = 1000;

}  // namespace

Watch::Watch(std::unique_ptr<State> state) : state_(std::move(state)) {}

Watch::~Watch() { state_->hub->Unregister(); }

void Watch::Stop() { state_->hub->Stop(&state_->stopped); }

absl::StatusOr<std::vector<WatchEvent>> Watch::Next(absl::Time deadline, size_t max_events,
                                                    int64_t* progress_revision) {
  State& s = *state_;
  if (max_events == 0) max_events = std::numeric_limits<size_t>::max();
  std::vector<WatchEvent> events;
  for (;;) {
    if (!s.cursor.in_ring) {
      const int64_t upto = s.hub->PublishedRevision(&s.stopped);
      if (upto < 0) return absl::CancelledError("watch stopped");
      if (s.cursor.progress < upto) {
        auto lease = s.pool->Acquire();
        if (!lease.ok()) return lease.status();
        bool complete = false;
        auto history =
            internal::ReadEvents(lease->db(), s.prefix, s.cursor.progress, upto,
                                 std::min(max_events, kHistoryBatch), s.extract_labels, &complete);
        if (!history.ok()) return history.status();
        s.cursor.progress = complete ? upto : history->back().object->mod_revision;
        if (!history->empty()) {
          if (progress_revision != nullptr) *progress_revision = s.cursor.progress;
          s.hub->TryJoin(&s.cursor);
          return std::move(*history);
        }
      }
      // Nothing (more) in history up to `upto`; the ring holds what follows unless it has
      // already evicted part of it, in which case read history again.
      if (!s.hub->TryJoin(&s.cursor)) continue;
    }
    switch (s.hub->ReadRing(&s.cursor, s.prefix, max_events, deadline, &s.stopped, &events)) {
      case internal::WatchHub::ReadResult::kEvents:
      case internal::WatchHub::ReadResult::kTimeout:
        if (progress_revision != nullptr) *progress_revision = s.cursor.progress;
        return events;
      case internal::WatchHub::ReadResult::kClosed:
        return absl::CancelledError("watch stopped");
      case internal::WatchHub::ReadResult::kFellBehind:
        continue;  // from history, at cursor.progress
    }
  }
}

}  // namespace ctrlhost::apiserver
