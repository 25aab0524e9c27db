// Rate limiting for the work queue: per-item exponential backoff and an overall token bucket.
//
// A key that fails is retried after max(per-item backoff, token-bucket delay), the combination
// client-go's default controller rate limiter uses: the per-item part spaces out the retries of
// one broken object (5 ms, 10 ms, 20 ms, ... capped at 1000 s), the bucket caps the retry rate of
// the whole controller (10 qps with a burst of 100) so that many failing keys cannot flood the
// API server.
//
//   TokenBucket bucket(/*qps=*/10, /*burst=*/100, clock->Now());
//   absl::Duration wait = std::max(ExponentialBackoff(absl::Milliseconds(5),
//                                                     absl::Seconds(1000), failures),
//                                  bucket.Reserve(clock->Now()));
#ifndef CTRLHOST_RUNTIME_QUEUE_RATE_LIMIT_H_
#define CTRLHOST_RUNTIME_QUEUE_RATE_LIMIT_H_

#include <cstdint>

#include "absl/time/time.h"

namespace ctrlhost::queue {

// base * 2^failures, capped at `max` (no overflow for any `failures`). Returns zero when
// base <= 0, and `max` when base > max.
absl::Duration ExponentialBackoff(absl::Duration base, absl::Duration max, uint32_t failures);

// A token bucket that hands out reservations, like Go's rate.Limiter.Reserve: a reservation
// always succeeds and says how long the caller must wait before acting; tokens may go negative
// so that later reservations queue behind earlier ones. Thread-compatible: the caller
// serialises access (WorkQueue calls it under its mutex).
class TokenBucket {
 public:
  // `qps` <= 0 disables the bucket (every reservation is immediate). `burst` < 1 counts as 1.
  // The bucket starts full at `now`.
  TokenBucket(double qps, int burst, absl::Time now);

  // Takes one token and returns how long to wait for it (zero when one was available).
  absl::Duration Reserve(absl::Time now);

  // Tokens available at `now` (negative when reservations are queued). Does not consume.
  double Tokens(absl::Time now) const;

 private:
  void Refill(absl::Time now);

  const double qps_;
  const double burst_;
  double tokens_;
  absl::Time last_;
};

}  // namespace ctrlhost::queue

#endif  // CTRLHOST_RUNTIME_QUEUE_RATE_LIMIT_H_
