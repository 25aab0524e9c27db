#include "runtime/apiserver/seats.h"

#include <algorithm>
#include <utility>

namespace ctrlhost::apiserver {

SeatLimits RequestSeats::UserLimits(int max_reads, int max_writes) {
  SeatLimits limits;
  limits.reads = std::max(max_reads, 0);
  limits.writes = std::max(max_writes, 0);
  // A quarter (at least one seat) stays for reads that are not lists; with a single read seat
  // there is nothing to split.
  if (limits.reads > 1) limits.list_reads = limits.reads - std::max(1, limits.reads / 4);
  return limits;
}

RequestSeats::RequestSeats(SeatLimits user, SeatLimits system)
    : user_(user),
      system_(system),
      user_counters_(std::make_shared<Counters>()),
      system_counters_(std::make_shared<Counters>()) {}

std::shared_ptr<void> RequestSeats::Admit(Level level, Kind kind) {
  const SeatLimits& limits = this->limits(level);
  std::shared_ptr<Counters> counters = level == kSystem ? system_counters_ : user_counters_;
  {
    common::MutexLock lock(&counters->mu);
    InUse& in_use = counters->in_use;
    if (kind == kWrite) {
      if (limits.writes > 0 && in_use.writes >= limits.writes) return nullptr;
      ++in_use.writes;
    } else {
      if (limits.reads > 0 && in_use.reads >= limits.reads) return nullptr;
      if (kind == kList && limits.list_reads > 0 && in_use.lists >= limits.list_reads) {
        return nullptr;
      }
      ++in_use.reads;
      if (kind == kList) ++in_use.lists;
    }
  }
  // Any non-null pointer: only the deleter matters.
  return std::shared_ptr<void>(counters.get(), [counters, kind](void*) {
    common::MutexLock lock(&counters->mu);
    InUse& in_use = counters->in_use;
    if (kind == kWrite) {
      --in_use.writes;
    } else {
      --in_use.reads;
      if (kind == kList) --in_use.lists;
    }
  });
}

RequestSeats::InUse RequestSeats::in_use(Level level) const {
  const std::shared_ptr<Counters>& counters = level == kSystem ? system_counters_ : user_counters_;
  common::MutexLock lock(&counters->mu);
  return counters->in_use;
}

}  // namespace ctrlhost::apiserver
