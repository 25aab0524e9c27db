#include "runtime/common/log_limiter.h"

#include <algorithm>

namespace ctrlhost::common {

LogLimiter::LogLimiter(LogLimiterOptions options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      tokens_(std::max(1.0, options.burst)) {}

bool LogLimiter::Allow(uint64_t* suppressed) {
  const absl::Time now = clock_->Now();
  MutexLock lock(&mu_);
  if (last_ != absl::InfinitePast() && now > last_) {
    tokens_ = std::min(std::max(1.0, options_.burst),
                       tokens_ + absl::ToDoubleSeconds(now - last_) * options_.per_second);
  }
  if (now > last_) last_ = now;
  if (tokens_ < 1) {
    ++suppressed_;
    return false;
  }
  tokens_ -= 1;
  if (suppressed != nullptr) *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

uint64_t LogLimiter::pending_suppressed() const {
  MutexLock lock(&mu_);
  return suppressed_;
}

}  // namespace ctrlhost::common
