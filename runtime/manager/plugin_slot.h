// PluginSlot: the stable dispatcher behind a plugin name, whatever instance serves it now.
//
// The runners of a plugin's controllers dispatch to the slot, never to an instance, so the
// instance can change under them (hot swap) without the runners, queues or caches noticing:
//
//   Swap(source)   start generation N+1 next to N (its own socket, its own supervisor), wait
//                  until it passed its handshake (Describe + health) or failed; on failure stop
//                  it and keep N serving (a broken release never takes a controller down); on
//                  success route every new request to N+1 at once, let N's requests in flight
//                  finish within the drain timeout, then stop N (whatever it still holds fails
//                  UNAVAILABLE and is requeued by the runner: nothing is lost).
//   StartCanary    as Swap, but N+1 only gets the keys whose hash falls below `percent`
//                  (stable: a key always goes to the same side); Promote makes it the serving
//                  instance (the old one drains), Abort stops it.
//   StartShadow    starts an instance of another release beside the serving one that gets a
//                  copy of the calls (all, or the keys whose hash falls below `percent`) and
//                  whose answers go to a ShadowComparator with the answer of the instance that
//                  served the call; nothing it answers is applied. The serving path never waits
//                  for it: it only queues a copy, which a thread of the shadow's own sends; a
//                  call the shadow is still busy with (the same key) or one over its in-flight
//                  bound is not given to it (counted as dropped). A shadow gets no
//                  notices (no background tasks: their enqueues would act). StopShadow drains it.
//
// Per-key exclusivity holds across a cut-over because the runner never sends a key again before
// its previous request is answered or failed; the slot only decides where the next one goes.
//
// Thread-safety: thread-safe. `mu_` guards the instances and counters; it is never held while
// dispatching, starting or stopping a supervisor. A shadow's own `mu` guards the keys it is
// working on and whether it is stopping; it is never held while dispatching either. A round's
// `mu` may be held while taking its shadow's `mu` (never the other way round). Swap,
// StartCanary, Promote and Abort are serialised by `swap_mu_` (one swap at a time per plugin).
#ifndef CTRLHOST_RUNTIME_MANAGER_PLUGIN_SLOT_H_
#define CTRLHOST_RUNTIME_MANAGER_PLUGIN_SLOT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"
#include "runtime/manager/shadow_comparator.h"
#include "runtime/plugin/supervisor.h"

namespace ctrlhost::manager {

// Why a swap was refused (admin.proto's SwapFailureReason).
enum class SwapFailure { kNone, kStartFailed, kHandshakeFailed, kTimeout, kIncompatible };

struct SwapResult {
  absl::Status status;  // OK when the new instance serves
  SwapFailure failure = SwapFailure::kNone;
  uint64_t serving_generation = 0;
  uint64_t drained_generation = 0;  // the instance that was replaced (0: none)
  absl::Time ready_at = absl::InfinitePast();
  absl::Duration cut_over = absl::ZeroDuration();  // swap request -> new instance serving
  std::shared_ptr<const pluginpb::DescribeResponse> describe;  // of the new instance
};

// A snapshot for the admin API and the dump.
struct SlotStatus {
  plugin::PluginStatus serving;
  uint64_t serving_generation = 0;
  std::string serving_socket;
  bool has_canary = false;
  plugin::PluginStatus canary;
  uint64_t canary_generation = 0;
  uint32_t canary_percent = 0;
  uint64_t swaps = 0;           // successful cut-overs
  uint64_t failed_swaps = 0;    // swaps and canaries whose new instance was refused or failed
  std::string last_swap_error;  // "" when the last swap succeeded (or none was tried)
  bool has_shadow = false;
  plugin::PluginStatus shadow;
  uint64_t shadow_generation = 0;
  uint32_t shadow_percent = 0;
  bool shadow_idle_cpu = false;  // an exec'd shadow runs under SCHED_IDLE
};

struct ShadowOptions {
  uint32_t percent = 100;     // 1..100: the share of keys (by PluginSlot::Bucket) it gets
  size_t max_in_flight = 64;  // calls at the shadow at once; more are dropped and counted
  // An exec'd shadow runs under SCHED_IDLE (ProcessSpec::idle_cpu): it only gets CPU time the
  // host and the serving plugins leave, and falls behind (its calls dropped and counted) on a
  // busy machine instead of slowing them. A remote shadow's CPU is not the host's to set.
  bool idle_cpu = true;
};

class PluginSlot : public controller::Dispatcher {
 public:
  // `make_options(generation)` builds the supervisor options of one instance of `source`;
  // the slot fills in the generation and the state callback. Called again for every swap with
  // the new source's options.
  using OptionsFactory = std::function<plugin::SupervisorOptions(uint64_t generation)>;
  // Called (without locks, on the thread that changed it) whenever an instance's state changes.
  using Listener = std::function<void()>;

  // Starts generation 1. Errors: the supervisor's (invalid options).
  static absl::StatusOr<std::unique_ptr<PluginSlot>> Start(OptionsFactory options,
                                                           Listener listener, common::Clock* clock);
  ~PluginSlot() override;  // Stop()
  PluginSlot(const PluginSlot&) = delete;
  PluginSlot& operator=(const PluginSlot&) = delete;

  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override;

  // Sends a notice on the serving instance's stream (plugin::Supervisor::SendNotice).
  absl::Status SendNotice(pluginpb::ReconcileRequest notice);

  // Replaces the serving instance by one built from `options` (see the file comment). Blocks
  // until the new instance serves (or failed), then drains the old one up to `drain_timeout`
  // before returning. `accept(describe)` may refuse the new instance's Describe (kIncompatible)
  // before any request goes to it. FailedPrecondition when a canary is running.
  SwapResult Swap(
      OptionsFactory options, absl::Duration ready_timeout, absl::Duration drain_timeout,
      const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept = nullptr);
  SwapResult StartCanary(
      OptionsFactory options, uint32_t percent, absl::Duration ready_timeout,
      const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept = nullptr);
  SwapResult PromoteCanary(absl::Duration drain_timeout);
  absl::Status AbortCanary(absl::Duration drain_timeout);

  // Starts a shadow instance of `options` (see the file comment) whose answers go to
  // `comparator` (shared: it outlives the shadow's last answer). Blocks until it serves or
  // failed, as Swap. FailedPrecondition when a shadow runs already; InvalidArgument for a
  // percent outside 1..100 or a zero in-flight bound.
  SwapResult StartShadow(
      OptionsFactory options, ShadowOptions shadow, std::shared_ptr<ShadowComparator> comparator,
      absl::Duration ready_timeout,
      const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept = nullptr);
  // Stops the shadow after its calls in flight finished (up to `drain_timeout`); answers that
  // arrive after this call are not compared. FailedPrecondition when none runs.
  absl::Status StopShadow(absl::Duration drain_timeout);
  // The comparator of the running shadow, null when none runs.
  std::shared_ptr<ShadowComparator> shadow_comparator() const;

  // The serving instance's status (its Describe once ready).
  plugin::PluginStatus status() const;
  SlotStatus Snapshot() const;
  // The generation that serves now.
  uint64_t generation() const;

  // Stops every instance. Idempotent.
  void Stop();

  // The bucket (0..99) of a key for canary routing: stable across processes.
  static uint32_t Bucket(absl::string_view key);

 private:
  struct Instance {
    std::unique_ptr<plugin::Supervisor> supervisor;
    uint64_t generation = 0;
    common::Mutex mu;
    common::CondVar idle_cv;
    int64_t in_flight ABSL_GUARDED_BY(mu) = 0;
  };
  PluginSlot(Listener listener, common::Clock* clock);

  // Starts an instance of `options` with the next generation and waits until it is READY
  // (or failed / timed out: then it is stopped and the result says why).
  absl::StatusOr<std::shared_ptr<Instance>> StartInstance(
      const OptionsFactory& options, absl::Duration ready_timeout,
      const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept,
      SwapResult* result);
  // Waits until `instance` has nothing in flight or `timeout` passed, then stops it.
  void Drain(const std::shared_ptr<Instance>& instance, absl::Duration timeout);
  static void Forward(const std::shared_ptr<Instance>& instance, pluginpb::ReconcileCall call,
                      absl::Time deadline, controller::ReconcileCallback done);

  // A running shadow: its instance, where its answers go, and the keys it is working on.
  // One call given to both: where the first of the two answers waits for the other.
  // Thread-safe: `mu` guards the call and the answers.
  struct ShadowRound {
    common::Mutex mu;
    pluginpb::ReconcileCall call ABSL_GUARDED_BY(mu);
    std::optional<controller::DispatchResult> serving ABSL_GUARDED_BY(mu);
    std::optional<controller::DispatchResult> other ABSL_GUARDED_BY(mu);
  };
  // A call waiting for the shadow's sender thread (which copies it from the round).
  struct ShadowSend {
    absl::Time deadline;
    std::shared_ptr<ShadowRound> round;
    std::string key;
  };
  struct Shadow {
    std::shared_ptr<Instance> instance;
    std::shared_ptr<ShadowComparator> comparator;
    ShadowOptions options;
    common::Mutex mu;
    common::CondVar send_cv;  // a copy was queued, or stopping
    // Keys of the calls given to the shadow and not answered yet (queued or sent).
    absl::flat_hash_set<std::string> keys ABSL_GUARDED_BY(mu);
    std::deque<ShadowSend> sends ABSL_GUARDED_BY(mu);  // bounded by keys (max_in_flight)
    bool stopping ABSL_GUARDED_BY(mu) = false;         // answers are not compared
    // Sends the queued copies, so that the serving path only queues one (the dispatch to the
    // shadow, its serialization and write, run here). Joined by StopShadow and Stop.
    std::thread sender;
  };
  static void SendToShadow(const std::shared_ptr<Shadow>& shadow);
  // Hands a completed pair to the comparator (unless the shadow is stopping).
  static void FinishRound(const std::shared_ptr<Shadow>& shadow,
                          const std::shared_ptr<ShadowRound>& round);
  // Marks `shadow` stopping and joins its sender (copies not sent yet are dropped).
  static void StopSender(Shadow* shadow);
  // Dispatches `call` to `target` and queues a copy for `shadow`, and hands both answers to the
  // comparator; `done` gets the target's answer as soon as it comes.
  static void DispatchWithShadow(const std::shared_ptr<Instance>& target,
                                 const std::shared_ptr<Shadow>& shadow, std::string key,
                                 pluginpb::ReconcileCall call, absl::Time deadline,
                                 controller::ReconcileCallback done);

  const Listener listener_;
  common::Clock* const clock_;

  common::Mutex swap_mu_;  // serialises swaps; acquired before mu_

  mutable common::Mutex mu_;
  std::shared_ptr<Instance> serving_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Instance> canary_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Shadow> shadow_ ABSL_GUARDED_BY(mu_);
  uint32_t canary_percent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t swaps_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_swaps_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_swap_error_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_PLUGIN_SLOT_H_
