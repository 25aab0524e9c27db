#include "runtime/queue/metrics.h"

namespace ctrlhost::queue {

absl::Duration DurationHistogram::UpperBound(int i) {
  if (i >= kBuckets - 1) return absl::InfiniteDuration();
  absl::Duration bound = absl::Microseconds(10);
  for (int k = 0; k < i; ++k) bound *= 10;
  return bound;
}

void DurationHistogram::ObserveNanos(int64_t ns, uint32_t weight) {
  if (ns < 0) ns = 0;
  count += weight;
  sum_nanos += ns * static_cast<int64_t>(weight);
  int i = 0;
  int64_t bound = 10'000;  // 10 us
  while (i < kBuckets - 1 && ns > bound) {
    ++i;
    bound *= 10;
  }
  counts[i] += weight;
}

}  // namespace ctrlhost::queue
