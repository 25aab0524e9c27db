// LogLimiter: a token bucket for one kind of log line that untrusted input can trigger (a
// plugin's garbage answers, say), so that input cannot flood the host's log. Lines over the
// rate are dropped and counted; the next line let through carries the count.
//
//   common::LogLimiter limiter_{{.per_second = 1, .burst = 10, .clock = clock}};
//   uint64_t suppressed = 0;
//   if (limiter_.Allow(&suppressed)) {
//     common::LogWarning("response dropped", {{"plugin", name}, {"suppressed", suppressed}});
//   }
//
// Thread-safe.
#ifndef CTRLHOST_RUNTIME_COMMON_LOG_LIMITER_H_
#define CTRLHOST_RUNTIME_COMMON_LOG_LIMITER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::common {

struct LogLimiterOptions {
  double per_second = 1;   // sustained lines
  double burst = 10;       // lines at once (the bucket starts full)
  Clock* clock = nullptr;  // borrowed, outlives the limiter; null: Clock::Real()
};

class LogLimiter {
 public:
  explicit LogLimiter(LogLimiterOptions options = {});
  LogLimiter(const LogLimiter&) = delete;
  LogLimiter& operator=(const LogLimiter&) = delete;

  // True when one more line may be logged now; `*suppressed` (may be null) then receives the
  // number of lines dropped since the last one let through.
  bool Allow(uint64_t* suppressed);

  // Lines dropped and not yet reported by a later Allow.
  uint64_t pending_suppressed() const;

 private:
  // Constant after construction.
  const LogLimiterOptions options_;
  Clock* const clock_;

  mutable Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_LOG_LIMITER_H_
