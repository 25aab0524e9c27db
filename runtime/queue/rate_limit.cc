#include "runtime/queue/rate_limit.h"

#include <algorithm>

namespace ctrlhost::queue {

absl::Duration ExponentialBackoff(absl::Duration base, absl::Duration max, uint32_t failures) {
  if (base <= absl::ZeroDuration()) return absl::ZeroDuration();
  if (base >= max) return max;
  // 2^62 * any positive duration exceeds absl's range, so anything past it is `max`.
  if (failures >= 62) return max;
  // absl::Duration multiplication saturates at InfiniteDuration instead of overflowing.
  const absl::Duration d = base * (int64_t{1} << failures);
  return std::min(d, max);
}

TokenBucket::TokenBucket(double qps, int burst, absl::Time now)
    : qps_(qps), burst_(std::max(burst, 1)), tokens_(burst_), last_(now) {}

void TokenBucket::Refill(absl::Time now) {
  if (now <= last_) return;  // a clock that steps back refills nothing
  tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * qps_);
  last_ = now;
}

absl::Duration TokenBucket::Reserve(absl::Time now) {
  if (qps_ <= 0) return absl::ZeroDuration();
  Refill(now);
  tokens_ -= 1;
  if (tokens_ >= 0) return absl::ZeroDuration();
  return absl::Seconds(-tokens_ / qps_);
}

double TokenBucket::Tokens(absl::Time now) const {
  if (qps_ <= 0) return burst_;
  if (now <= last_) return tokens_;
  return std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * qps_);
}

}  // namespace ctrlhost::queue
