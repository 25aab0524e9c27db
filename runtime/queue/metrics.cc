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
  int i = 0;
  absl::Duration bound = absl::Microseconds(10);
  while (i < kBuckets - 1 && d > bound) {
    ++i;
    bound *= 10;
  }
  ++counts[i];
}

}  // namespace ctrlhost::queue
