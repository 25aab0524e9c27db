// FairLimiter: the host's API request budget (a token bucket: `qps` per second, `burst` at
// once) shared by weight between operators, and within an operator between its controllers.
//
// Requests name their tenant (operator, controller; see api_tenant.h). While tokens are left
// nobody waits. When requests wait, each new token goes to the tenant that is furthest behind
// its weighted share: start-time fair queuing at two levels, operators first, then the
// operator's controllers. A tenant that waits alone gets every token (idle shares are passed
// on), and one that was idle gets no credit for the time it was idle, so it cannot burst past
// the others when it comes back. Requests of one tenant are granted in arrival order.
//
// An operator that uses less than its share does not wait behind one that wants more, as in a
// hierarchical token bucket: each operator has a reserve that fills at its assured rate (qps
// times its weight over the sum of the weights of every operator known here) up to its part of
// the burst (at least 1 token). A request finds a token in the shared bucket, or else, while
// other operators wait too, in its operator's reserve (alone, an operator has exactly the
// shared bucket). Every grant is taken from the shared bucket, which a reserve may overdraw
// by at most `burst`: over time the host stays within qps, and an operator making 10 requests
// a second on a 50 QPS budget that another operator saturates is served at once (its reserve
// fills at 25 a second), while the busy one gets everything else.
//
//   FairLimiter limiter(50, 100, common::Clock::Real());
//   limiter.SetOperatorWeight("billing", 3);                    // 3x the default share
//   RETURN_IF_ERROR(limiter.Acquire({"billing", "invoices"}, deadline));
//
// Thread-safe: mu_ guards every field below it. Waiters wait on a condition variable of their
// own: the waiter that fair queuing would serve next waits for the next token, the others until
// they are served (a grant signals them) or their deadline passes.
#ifndef CTRLHOST_RUNTIME_KUBE_FAIR_LIMITER_H_
#define CTRLHOST_RUNTIME_KUBE_FAIR_LIMITER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/api_tenant.h"

namespace ctrlhost::kube {

class FairLimiter {
 public:
  // qps <= 0: no limit (every Acquire returns at once; the figures still count). `clock` is
  // borrowed and must outlive the limiter.
  FairLimiter(double qps, int burst, common::Clock* clock);
  FairLimiter(const FairLimiter&) = delete;
  FairLimiter& operator=(const FairLimiter&) = delete;

  // Weights (> 0; default 1), taking effect for the next token. An operator's share of the
  // budget is its weight over the sum of the weights of the operators that wait; a controller's
  // share of its operator's, likewise. InvalidArgument for a weight that is not positive and
  // finite.
  absl::Status SetOperatorWeight(absl::string_view operator_name, double weight);
  absl::Status SetControllerWeight(absl::string_view operator_name, absl::string_view controller,
                                   double weight);
  // Forgets an operator's weights and figures (it was removed from the host).
  void RemoveOperator(absl::string_view operator_name);

  // Takes one token for `tenant`, waiting (on the clock) for its fair turn. DeadlineExceeded,
  // and no token taken, when the turn has not come by `deadline`.
  absl::Status Acquire(const ApiTenant& tenant, absl::Time deadline);

  // What each tenant used and waited for, in name order (operators "" is the host itself).
  struct TenantFigures {
    std::string operator_name;
    std::string controller;
    double operator_weight = 1;
    double controller_weight = 1;
    uint64_t granted_total = 0;
    uint64_t waited_total = 0;  // requests that had to wait for a token
    absl::Duration wait_time;   // summed over those requests
    size_t waiting = 0;         // waiting now
  };
  std::vector<TenantFigures> Figures() const;

  double qps() const { return qps_; }
  int burst() const { return static_cast<int>(burst_); }

 private:
  struct Waiter {
    common::CondVar cv;
    bool granted = false;
  };
  // Start-time fair queuing tags: a tenant that starts waiting gets start = max(virtual time,
  // its last finish); each grant moves its finish to start + 1/weight, and its next start (if
  // it still waits) to that finish. The waiting tenant with the smallest start + 1/weight goes
  // next; the virtual time is the start of the last grant.
  struct Controller {
    double weight = 1;
    double start = 0;   // valid while `queue` is not empty
    double finish = 0;  // of its last grant (controller level)
    std::deque<Waiter*> queue;
    uint64_t granted_total = 0;
    uint64_t waited_total = 0;
    absl::Duration wait_time;
  };
  struct Operator {
    double weight = 1;
    double reserve = 0;  // tokens of its own: fills at its assured rate (class comment)
    absl::Time reserve_last = absl::InfinitePast();
    double start = 0;    // valid while waiting > 0
    double finish = 0;   // of its last grant (operator level)
    double vtime = 0;    // virtual time among its controllers
    size_t waiting = 0;  // waiters over all its controllers
    std::map<std::string, Controller, std::less<>> controllers;
  };
  // The pick of fair queuing: whose head waiter gets the next token.
  struct Pick {
    Operator* op = nullptr;
    Controller* controller = nullptr;
  };

  void Refill(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Controller& TenantLocked(const ApiTenant& tenant, Operator** op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The tenant that waits and is furthest behind its share; op == nullptr when nobody waits.
  Pick Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The controller of `op` (which waits) whose head waiter goes next within the operator.
  static Controller* NextController(Operator& op);
  // Fills `op`'s reserve up to `now`; true when it holds a token and the shared bucket may be
  // overdrawn by one more.
  bool ReserveReady(Operator& op, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long until ReserveReady(op) can be true (InfiniteDuration for an unlimited limiter).
  absl::Duration UntilReserve(const Operator& op) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SumWeights() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges one token to the tenant of `pick`, whose start tags are set (its finish tags and
  // the virtual times move on).
  void Charge(const Pick& pick) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Enqueue(Operator& op, Controller& controller, Waiter* waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Grants tokens to waiters (reserves first, then the shared bucket in fair order). If that
  // changed who waits, or `wake_heads` (a waiter left, an operator started waiting), wakes the
  // head waiter of each operator so that it sets its timer for its next token.
  void Dispatch(absl::Time now, bool wake_heads) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the token for the head waiter of `pick` (granted, woken).
  void Grant(const Pick& pick) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(Operator& op, Controller& controller, Waiter* waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const double qps_;
  const double burst_;
  common::Clock* const clock_;

  mutable common::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
  double vtime_ ABSL_GUARDED_BY(mu_) = 0;       // virtual time among operators
  double weight_sum_ ABSL_GUARDED_BY(mu_) = 0;  // over operators_ (the reserves' rates)
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Operator, std::less<>> operators_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_FAIR_LIMITER_H_
