#include "runtime/common/heap_trim.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>

#include "absl/time/clock.h"

namespace ctrlhost::common {

HeapTrimmer::HeapTrimmer(Options options) : options_(options), low_(FreeBytes()) {}

size_t HeapTrimmer::FreeBytes() { return mallinfo2().fordblks; }

bool FixMmapThreshold() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return false;
  return mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1;
}

size_t HeapTrimmer::Tick() {
  const size_t free_bytes = FreeBytes();
  low_ = std::min(low_, free_bytes);
  if (free_bytes - low_ < options_.threshold) return 0;
  const absl::Time now = absl::Now();
  if (now - last_trim_ < options_.min_interval) return 0;
  malloc_trim(0);
  last_trim_ = now;
  ++trims_;
  // The free chunks stay free (their pages are given back, not the chunks): the next trim waits
  // for memory to be used and freed again beyond what is free now.
  low_ = FreeBytes();
  return free_bytes;
}

}  // namespace ctrlhost::common
