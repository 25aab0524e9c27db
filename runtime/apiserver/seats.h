// RequestSeats: how many requests the API server serves at once, by priority level and kind of
// request, in the spirit of kube-apiserver's API Priority and Fairness (much simplified: fixed
// levels, no queues, no per-flow fairness).
//
// Levels:
// - kSystem: the in-process host's own client (ApiServer::system_token()). Seats of its own,
//   not counted against users: a flood of user requests never starves the host's informers,
//   leader election or writes.
// - kUser: every other client (the kubeconfig's token).
// Kinds: a read (GET, HEAD) of one object or a discovery document (kRead); a read whose answer
// grows with the data, a collection LIST or an OpenAPI document (kList); a write (kWrite).
// Reads and lists share `reads` seats, of which lists may take at most `list_reads`: the rest
// stays for single-object GETs and discovery, so clients that hold LISTs (for example by
// asking for large ones and reading nothing) cannot shut every GET out. Writes have `writes`.
// Watches and health probes take no seat: the caller does not ask for one.
//
//   RequestSeats seats(RequestSeats::UserLimits(400, 200), RequestSeats::UserLimits(400, 200));
//   std::shared_ptr<void> seat = seats.Admit(RequestSeats::kUser, RequestSeats::kList);
//   if (seat == nullptr) { /* 429 TooManyRequests, Retry-After: 1 */ }
//   // the seat is released when the last copy of `seat` is destroyed (the response is written)
//
// Thread-safe. A seat may be released on any thread, after the RequestSeats is gone too.
#ifndef CTRLHOST_RUNTIME_APISERVER_SEATS_H_
#define CTRLHOST_RUNTIME_APISERVER_SEATS_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver {

// One level's seats; 0 is no limit.
struct SeatLimits {
  int reads = 0;       // reads and lists together
  int list_reads = 0;  // lists at most (within `reads`); 0: only `reads` bounds them
  int writes = 0;
};

class RequestSeats {
 public:
  enum Level { kUser, kSystem };
  enum Kind { kRead, kList, kWrite };

  // A level with `max_reads` and `max_writes` (--max-requests-inflight,
  // --max-mutating-requests-inflight) whose lists may take 3/4 of the reads (at least one seat
  // is left to other reads when max_reads > 1). 0: no limit.
  static SeatLimits UserLimits(int max_reads, int max_writes);

  RequestSeats(SeatLimits user, SeatLimits system);
  RequestSeats(const RequestSeats&) = delete;
  RequestSeats& operator=(const RequestSeats&) = delete;

  // A seat, held until the returned pointer (and its copies) are destroyed; null when the
  // level has none left for this kind.
  std::shared_ptr<void> Admit(Level level, Kind kind);

  struct InUse {
    int reads = 0;  // lists included
    int lists = 0;
    int writes = 0;
  };
  InUse in_use(Level level) const;
  const SeatLimits& limits(Level level) const { return level == kSystem ? system_ : user_; }

 private:
  struct Counters {
    common::Mutex mu;
    InUse in_use ABSL_GUARDED_BY(mu);
  };

  // Constant after construction.
  const SeatLimits user_;
  const SeatLimits system_;
  // Shared with the seats handed out, which may outlive this object.
  const std::shared_ptr<Counters> user_counters_;
  const std::shared_ptr<Counters> system_counters_;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_SEATS_H_
