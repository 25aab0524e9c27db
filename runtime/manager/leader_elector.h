// Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.
//
// Every host of a group runs a LeaderElector on the same Lease. The one that holds it leads
// (dispatches reconciles and writes); the others are warm standbys (caches synced, plugins
// started, nothing dispatched). An attempt (TryAcquireOrRenew) reads the Lease and
//   - creates it when it does not exist (this host leads);
//   - renews it when this host holds it (renewTime = now);
//   - takes it over when it has no holder (released) or when its record has not changed for
//     leaseDurationSeconds as observed on this host's clock (the holder stopped renewing):
//     holderIdentity = us, acquireTime = now, leaseTransitions + 1;
// every write is an update with the read resourceVersion, so of two hosts racing for the Lease
// exactly one wins (the other gets 409 Conflict). Expiry is measured from when *this* host saw
// the record change, never by comparing renewTime with the local clock: the hosts' clocks need
// not agree, only run at about the same rate.
//
// The loop (Start): a standby tries every retryPeriod (+ up to 20 % jitter), and at once when
// its watch on the Lease sees it released (empty holderIdentity): a graceful hand-over takes
// one watch event and one update instead of up to 1.2 x retryPeriod. The leader renews every
// retryPeriod. A leader that has not renewed successfully for renewDeadline (counted from
// the start of its last successful renewal) stops leading: `on_stopped_leading` runs and the
// loop ends; a new LeaderElector (a restarted host) is needed to lead again. Callbacks give
// `valid_until` = start of the last successful write + renewDeadline: the fence (fence.h) lets
// writes through until then. Stop(release=true) gives the Lease up (empty holderIdentity,
// leaseDurationSeconds 1), so that a standby takes over at its next attempt.
//
// Balancing (per-operator Leases, operator_balance.h): `may_acquire`, when set, is asked before
// every attempt to take a Lease this host does not hold (create it, take it free or expired);
// false leaves this attempt a standby's. Renewals never ask. HandOver() gives a held Lease up
// *and stays a candidate*: on the loop's thread `on_stopped_leading(kLeaseHandedOver)` runs
// first (the Lease is still held, so nobody else leads yet: the caller stops writing and
// drains), then the Lease is released as at Stop and the loop stands by again, so this elector
// may lead again later. AttemptNow() makes a standby try at once (e.g. when may_acquire's
// answer may have changed).
//
// Defaults are client-go's: leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s; the
// constraints are client-go's too (leaseDuration > renewDeadline > 1.2 x retryPeriod).
//
//   LeaderElectionOptions options{.lease_namespace = "ops", .lease_name = "ctrlhost",
//                                 .identity = DefaultIdentity()};
//   ASSIGN_OR_RETURN(auto elector, LeaderElector::Create(&client, options, callbacks));
//   elector->Start();
//   ...
//   elector->Stop(/*release=*/true);
//
// Thread-safety: thread-safe. One background thread (Loop) makes the attempts, another
// (WatchLoop) watches the Lease for a release; mu_ guards the observed record, the status and
// the wake-up flags. Callbacks run on the loop's thread (or Stop's caller for
// on_stopped_leading at release), without mu_ held; may_acquire too.
#ifndef CTRLHOST_RUNTIME_MANAGER_LEADER_ELECTOR_H_
#define CTRLHOST_RUNTIME_MANAGER_LEADER_ELECTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/client.h"

namespace ctrlhost::manager {

struct LeaderElectionOptions {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per host process: DefaultIdentity()
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  common::Clock* clock = nullptr;  // nullptr: Clock::Real()
};

// InvalidArgument naming the field when `options` break client-go's rules.
absl::Status ValidateLeaderElection(const LeaderElectionOptions& options);

// $POD_NAME, else the host name, then "_" and 8 random hex digits (a restarted host is a new
// candidate, never mistaken for the holder it replaces).
std::string DefaultIdentity();

// on_stopped_leading's reason at Stop(release=true) and at HandOver(); any other reason is a
// loss (final: the loop has ended).
inline constexpr char kLeaseReleased[] = "released";
inline constexpr char kLeaseHandedOver[] = "handed over to balance the hosts";

// What may_acquire is told about a Lease this host could take now.
struct AcquireAttempt {
  bool exists = false;          // false: the Lease would be created
  std::string previous_holder;  // "" when released (or absent); else its expired holder
  // How long this host has seen it without a live holder (0 when first seen so, or absent).
  absl::Duration vacant_for = absl::ZeroDuration();
};

struct LeaderCallbacks {
  std::function<void(absl::Time valid_until)> on_started_leading;
  std::function<void(absl::Time valid_until)> on_renewed;
  std::function<void(const std::string& reason)> on_stopped_leading;
  // Null: always. Asked before taking a Lease this host does not hold; false: stand by this
  // attempt (the next comes at retryPeriod, at a release seen, or at AttemptNow()).
  std::function<bool(const AcquireAttempt& attempt)> may_acquire;
};

// What /debug/dump and logs show.
struct LeaderStatus {
  std::string lease;  // "namespace/name"
  std::string identity;
  bool leading = false;
  std::string holder;  // as last read, written or watched ("" when released or not read yet)
  int64_t transitions = 0;
  std::string acquire_time;  // the record's, as written
  std::string renew_time;
  absl::Time last_renewal = absl::InfinitePast();  // this host's last successful write
  std::string last_error;                          // of the last failed attempt
  bool acquire_deferred = false;  // the last attempt found it free; may_acquire said no
};

class LeaderElector {
 public:
  // `client` is borrowed and must outlive the elector; give it a client of its own (no QPS
  // limit shared with the controllers, a request timeout near retryPeriod, no write fence).
  static absl::StatusOr<std::unique_ptr<LeaderElector>> Create(kube::Client* client,
                                                               LeaderElectionOptions options,
                                                               LeaderCallbacks callbacks);
  ~LeaderElector();  // Stop(false)
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void Start();
  // Ends the loop; when this host leads and `release` is set, first gives the Lease up and
  // runs on_stopped_leading("released"). Idempotent.
  void Stop(bool release);

  // One attempt (the loop's step; tests drive it directly). True when this host holds the
  // Lease after it.
  bool TryAcquireOrRenew();
  // Gives the Lease up when this host holds it. OK when released or not held.
  absl::Status Release();
  // While leading: hands the Lease over (see above) and stays a candidate. False when not
  // leading, stopping, or a hand-over is already under way.
  bool HandOver();
  // A standby attempts at once (no effect while leading).
  void AttemptNow();

  LeaderStatus Status() const;
  const LeaderElectionOptions& options() const { return options_; }

 private:
  LeaderElector(kube::Client* client, LeaderElectionOptions options, LeaderCallbacks callbacks);
  void Loop();
  // Standby: attempts until this host leads (true, on_started_leading run) or Stop (false).
  bool Campaign(absl::BitGen& gen);
  // Leader: renews until Stop, a loss or a hand-over.
  enum class LeadEnd { kStopping, kLost, kHandOver };
  LeadEnd Lead(std::string* lost_reason);
  // The hand-over's steps after Lead (see HandOver()).
  void GiveUp();
  // Watches the Lease; wakes Loop when it is released.
  void WatchLoop();
  // Waits until `deadline`, Stop, a takeover or a hand-over asked for while leading, or (when
  // `wakeable`) a release seen by the watch or AttemptNow(); false when stopping.
  bool WaitUntil(absl::Time deadline, bool wakeable = false);
  bool MayAcquire(const AcquireAttempt& attempt);

  kube::Client* const client_;
  const LeaderElectionOptions options_;
  const LeaderCallbacks callbacks_;
  common::Clock* const clock_;
  const std::string lease_;  // "namespace/name"

  mutable common::Mutex mu_;
  common::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The watch saw an empty holder, or AttemptNow(): a standby attempts at once.
  bool attempt_now_ ABSL_GUARDED_BY(mu_) = false;
  bool hand_over_ ABSL_GUARDED_BY(mu_) = false;  // HandOver() asked; Lead has not ended yet
  // While leading: the other holder that the watch or an attempt saw in the Lease. The leader
  // steps down at once (its fence closes) rather than at renewDeadline: never two writers.
  std::string taken_by_ ABSL_GUARDED_BY(mu_);
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  std::string logged_holder_ ABSL_GUARDED_BY(mu_);  // the other holder last logged
  std::string observed_spec_ ABSL_GUARDED_BY(mu_);  // the record as last seen (JSON)
  absl::Time observed_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  LeaderStatus status_ ABSL_GUARDED_BY(mu_);
  kube::StreamCanceller canceller_;  // ends the watch at Stop
  std::thread thread_;
  std::thread watcher_;
  bool stopped_ = false;  // Stop's own state: called from one thread
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_LEADER_ELECTOR_H_
