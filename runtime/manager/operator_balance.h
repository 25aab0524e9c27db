// Balancing of per-operator Leases (spec.leaderElection: {perOperator: true}) across the hosts
// that run the same operators: each host leads at most its fair share of them, and hands the
// extra ones over gracefully when another host joins.
//
// Membership. Every such host joins a ShardRing (shard_ring.h) used for its members only (no
// key is gated by it): the ring is named OperatorRingName(operators), so hosts that run another
// set of operators never count as peers, and lives in the namespace of the first operator's
// Lease (by operator name). Its members (ShardRing::Status().view) are the live hosts; before
// the first read this host counts itself alone.
//
// Fair share = ceil(operators / live hosts). Acquisition (MayAcquire, the electors'
// LeaderCallbacks::may_acquire):
//   - a Lease whose holder stopped renewing (expired) is taken at once: that is a failover, and
//     the hand-over below gives any extra back gracefully once the members settle;
//   - a free Lease (released, or not created yet) only while this host leads, or is acquiring,
//     fewer operators than its fair share;
//   - a free Lease nobody took for its leaseDuration is taken regardless: an extra share is
//     better than an operator nobody leads (e.g. a peer that stands in the ring but cannot take
//     it).
// Renewals are never asked about.
//
// Hand-over. Every poll period and at every change of members (BalanceOnce), a host that leads
// more than its fair share hands one operator over: the one with the highest name among those
// it leads, one at a time. Its elector's HandOver() closes the operator's fence and stops its
// dispatch (the host's on_stopped_leading, while the Lease is still held), releases the Lease
// (empty holder: the standbys' watches see it and take it at once, as at a graceful stop), and
// stands by again: the operator stays a warm standby on this host (plugins, caches) and may be
// acquired again later. The hand-over is over once another host holds the Lease; if this host
// takes it back instead (no peer took it within leaseDuration), or nobody holds it after
// 3 x leaseDuration + 10 s, balancing waits until the members change (no ping-pong).
//
//   ASSIGN_OR_RETURN(auto balancer, OperatorBalancer::Create(&client, options, {"a", "b"}));
//   callbacks.may_acquire = [&](const AcquireAttempt& a) { return balancer->MayAcquire("a", a); };
//   ... balancer->Attach("a", elector_a.get()); ...
//   balancer->Join();  elector_a->Start(); ...  balancer->Start();
//   ...
//   balancer->Stop();  // leaves the ring: the peers count one host less at their next read
//
// Thread-safety: thread-safe. One background thread (Loop) runs BalanceOnce; MayAcquire is
// called from the electors' threads, the view-change callback from the ring's. mu_ guards the
// hand-over state and the reservations; it is held while electors' Status() is read (their own
// mutex), never while an elector or the ring is asked to act.
#ifndef CTRLHOST_RUNTIME_MANAGER_OPERATOR_BALANCE_H_
#define CTRLHOST_RUNTIME_MANAGER_OPERATOR_BALANCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/client.h"
#include "runtime/manager/leader_elector.h"
#include "runtime/manager/shard_ring.h"

namespace ctrlhost::manager {

// "ctrlhost-operators-" + 8 hex digits of FNV-1a 32 of the sorted names joined by ",".
std::string OperatorRingName(std::vector<std::string> operators);

// ceil(operators / max(hosts, 1)).
int FairShare(int operators, int hosts);

struct OperatorBalancerOptions {
  // Membership: lease_namespace, identity and timings (the ring's name is set by Create).
  ShardRingOptions ring;
  // How often the share is checked besides at each change of members.
  absl::Duration poll_period = absl::Milliseconds(500);
  common::Clock* clock = nullptr;  // nullptr: Clock::Real()
};

// What /debug/dump and logs show.
struct OperatorBalanceStatus {
  std::string ring;
  std::vector<std::string> members;  // live hosts as last read (this host alone before)
  int operators = 0;
  int hosts = 0;
  int fair_share = 0;
  std::vector<std::string> led;  // the operators this host leads
  std::string handing_over;      // the operator being handed over ("" when none)
  std::string paused;            // why no hand-over starts until the members change ("")
  int64_t hand_overs = 0;        // started by this host
};

class OperatorBalancer {
 public:
  // Source of the live members (empty: not known yet). Create reads the ring's.
  using Members = std::function<std::vector<std::string>()>;

  // `client` is borrowed (the electors' client) and must outlive the balancer. InvalidArgument
  // for ring options that do not validate or an empty operator list.
  static absl::StatusOr<std::unique_ptr<OperatorBalancer>> Create(
      kube::Client* client, OperatorBalancerOptions options, std::vector<std::string> operators);
  // Without a ring (tests): members come from `members`; `identity` is this host's.
  OperatorBalancer(std::vector<std::string> operators, std::string identity, Members members,
                   OperatorBalancerOptions options);
  ~OperatorBalancer();  // Stop()
  OperatorBalancer(const OperatorBalancer&) = delete;
  OperatorBalancer& operator=(const OperatorBalancer&) = delete;

  // The elector of `operator_name` (borrowed; outlives the balancer). Before Start, once each.
  void Attach(const std::string& operator_name, LeaderElector* elector);
  // For the elector of `operator_name`: see the policy above.
  bool MayAcquire(const std::string& operator_name, const AcquireAttempt& attempt);

  // Joins the ring and reads the members once (so the electors start knowing the peers); a
  // failure is logged, and the ring's loop retries.
  void Join();
  // The ring's loop and the balancing loop.
  void Start();
  // Ends the loop, then leaves the ring (its Lease deleted). Idempotent.
  void Stop();

  // One step of the loop (tests drive it directly): ends a finished hand-over, starts the next.
  void BalanceOnce();
  // The members changed: standbys try again at once, and the loop runs now.
  void OnMembersChanged();

  OperatorBalanceStatus Status() const;

 private:
  struct Entry {
    std::string name;
    LeaderElector* elector = nullptr;
    absl::Time reserved_until = absl::InfinitePast();  // MayAcquire said yes; attempting
  };
  void Loop();
  int Hosts(std::vector<std::string>* members) const;
  // Operators led or being acquired, other than `except`.
  int HeldLocked(absl::Time now, const std::string& except) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a hand-over under way when it is over; false while it is still under way.
  bool HandOverOverLocked(absl::Time now, int fair_share, int led)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction (entries' electors set by Attach before Start).
  const OperatorBalancerOptions options_;
  const std::string identity_;
  common::Clock* const clock_;
  std::unique_ptr<ShardRing> ring_;  // null without one (tests)
  Members members_;

  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);  // sorted by name
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> last_members_ ABSL_GUARDED_BY(mu_);
  std::string handing_over_ ABSL_GUARDED_BY(mu_);
  absl::Time hand_over_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string paused_ ABSL_GUARDED_BY(mu_);
  int64_t hand_overs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
  bool started_ = false;  // Start/Stop's own state: called from one thread
  bool stopped_ = false;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_OPERATOR_BALANCE_H_
