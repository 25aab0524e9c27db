// The fence between a host and the cluster's objects: whether this host may dispatch reconciles
// and write, and until when.
//
// Leader election (leader_elector.h) opens the fence when this host acquires the Lease, with a
// time `valid_until` = the start of the last successful renewal + renewDeadline, and moves it on
// at every renewal. From `valid_until` on, or once `Trip` was called (leadership lost or given
// up), every write of the host's API client is refused before it is sent (`WriteDeadline`,
// installed as kube::RestClientOptions::write_fence) and every write still being sent has its
// deadline cut at `valid_until`. Since a standby may take the Lease only after it has seen it
// unchanged for leaseDuration, and renewDeadline < leaseDuration, the old leader's writes stop
// at least leaseDuration - renewDeadline before a new leader can start: never two writers (up
// to the clock-rate drift between the hosts, which client-go assumes small too).
//
// `FencedDispatcher` wraps a plugin's dispatcher: while the fence is closed it refuses
// reconciles (UNAVAILABLE), and `Trip` answers every reconcile in flight at once with
// UNAVAILABLE, so the runners' workers return without waiting for the plugin; whatever the
// plugin answers later is dropped.
//
//   Fence fence(clock);                       // closed
//   fence.Open(now + renew_deadline);         // acquired
//   fence.Extend(now + renew_deadline);       // renewed
//   fence.Trip("lost the Lease");             // permanent
//
// A Lease handed over to balance the hosts (operator_balance.h) closes its fence with `Close`
// instead: in-flight reconciles are cancelled as at Trip, but the next Open (this host acquires
// the Lease again) opens it again.
//
// Per-operator Leases (host.h): each such operator has a Fence of its own. Its plugins' reconciles
// go through a FencedDispatcher on it, and its controllers' writes through a `FencedApplier`:
// the applier refuses to start applying while the fence is closed, and installs the fence as
// the calling thread's `ScopedWriteFence` for the duration of the apply, which the host's API
// client consults (`CurrentWriteDeadline`, from its write_fence) before each write and to cut
// the deadline of each write: the same two rules as the host-wide fence, per operator.
//
// Thread-safety: thread-safe; mu_ guards everything. Callbacks of tripped requests run after
// mu_ is released.
#ifndef CTRLHOST_RUNTIME_MANAGER_FENCE_H_
#define CTRLHOST_RUNTIME_MANAGER_FENCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::manager {

class Fence {
 public:
  explicit Fence(common::Clock* clock);
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;

  // Opens the fence (or moves it on) until `valid_until`, also after Close. No effect once
  // tripped.
  void Open(absl::Time valid_until);
  void Extend(absl::Time valid_until) { Open(valid_until); }
  // Closes the fence for good and cancels every reconcile in flight through a FencedDispatcher.
  void Trip(absl::string_view reason);
  // Closes the fence until the next Open, cancelling what is in flight as Trip does; writes are
  // refused with "not the leader: <reason>" meanwhile.
  void Close(absl::string_view reason);

  // The time until which writes may go on, or UNAVAILABLE naming why not (standby, expired,
  // tripped). For kube::RestClientOptions::write_fence.
  absl::StatusOr<absl::Time> WriteDeadline() const;
  // True while WriteDeadline() is OK.
  bool open() const { return WriteDeadline().ok(); }
  // Tripped (for good; a Close does not count).
  bool tripped() const;

  // For FencedDispatcher: registers a reconcile in flight, taking `*done` (Trip calls it), or
  // leaves `*done` alone and returns why the fence is closed.
  struct Registration {
    uint64_t id = 0;
    absl::Status refused;
  };
  Registration Register(controller::ReconcileCallback* done);
  // Takes back the callback of `id` (null when Trip has called it already).
  controller::ReconcileCallback Unregister(uint64_t id);

 private:
  absl::Status ClosedLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  common::Clock* const clock_;

  mutable common::Mutex mu_;
  bool opened_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time valid_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string tripped_ ABSL_GUARDED_BY(mu_);  // the reason; "" while not tripped
  std::string closed_ ABSL_GUARDED_BY(mu_);   // Close's reason until the next Open
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, controller::ReconcileCallback> in_flight_ ABSL_GUARDED_BY(mu_);
};

// Installs `fence` as the calling thread's write fence until destroyed (nests: the previous one
// comes back). Used by FencedApplier around the applier's calls, which write on the calling
// thread. Not shared across threads (it is the thread's own state): who sets it, for how long
// and who reads it is written at its declaration in fence.cc.
class ScopedWriteFence {
 public:
  explicit ScopedWriteFence(const Fence* fence);
  ~ScopedWriteFence();
  ScopedWriteFence(const ScopedWriteFence&) = delete;
  ScopedWriteFence& operator=(const ScopedWriteFence&) = delete;
  // The calling thread's fence (null outside any scope).
  static const Fence* Current();

 private:
  const Fence* const previous_;
};

// The write deadline of the calling thread's ScopedWriteFence: InfiniteFuture outside a scope,
// else its fence's WriteDeadline() (UNAVAILABLE once it is closed).
absl::StatusOr<absl::Time> CurrentWriteDeadline();

// A ResponseApplier that writes only through an open fence: every call is refused while the
// fence is closed (UNAVAILABLE, retried with backoff by the runner; nothing written), and runs
// inside a ScopedWriteFence otherwise, so that the API client refuses or cuts each write at the
// fence. Thread-safe (the target's calls are; the fence is).
class FencedApplier : public controller::ResponseApplier {
 public:
  // Both borrowed; they must outlive this object.
  FencedApplier(controller::ResponseApplier* target, const Fence* fence)
      : target_(target), fence_(fence) {}

  controller::ApplyOutcome Apply(const controller::ReconcileContext& context,
                                 const pluginpb::ReconcileResponse& response) override;
  absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(
      const controller::ReconcileContext& context) override;
  void RecordTerminal(const controller::ReconcileContext& context,
                      const absl::Status& status) override;

 private:
  controller::ResponseApplier* const target_;
  const Fence* const fence_;
};

// A Dispatcher that dispatches only through an open fence. Thread-safe.
class FencedDispatcher : public controller::Dispatcher {
 public:
  // Both borrowed; they must outlive this object and every callback it calls.
  FencedDispatcher(controller::Dispatcher* target, Fence* fence) : target_(target), fence_(fence) {}

  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override;

 private:
  controller::Dispatcher* const target_;
  Fence* const fence_;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_FENCE_H_
