#include "runtime/queue/metrics.h"

namespace ctrlhost::queue {

absl::Duration DurationHistogram::UpperBound(int i) {
  if (i >= kBuckets - 1) return absl::InfiniteDuration();
  absl::Duration bound = absl::Microseconds(10);
  for (int k = 0; k < i; ++k) bound *= 10;
  return bound;
}

void DurationHistogram::Observe(absl::Duration d) {
  ++count;
  sum += d;
  // Integer nanoseconds: absl::Duration arithmetic is 128-bit and this is on the hot path.
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  int i = 0;
  int64_t bound = 10'000;
  while (i < kBuckets - 1 && ns > bound) {
    ++i;
    bound *= 10;
  }
  ++counts[i];
}

}  // namespace ctrlhost::queue
