// The controllers of one plugin: what its `Describe` declares, merged with the operator file's
// overrides, wired to shared caches, a runner each, and the plugin as their dispatcher.
//
// For every declared controller that is not disabled, the group resolves the primary, owned and
// watched kinds through discovery, acquires one shared reflector per watch from the registry
// (another controller asking for the same watch shares it), creates a `controller::Runner`,
// subscribes the runner's event adapters to those reflectors, and starts it. A controller whose
// kinds are not served yet (its CRD is created after the host started) stays *pending*:
// `RetryPending()` (called periodically by the manager) starts it once discovery knows them, so
// a CRD applied after start needs no restart.
//
// Example:
//   ControllerGroup group("shop", "webapp", deps);
//   group.Start(describe, operator_spec.controllers, plugin_spec);
//   ... group.RetryPending(); group.Synced(); ...
//   std::vector<std::string> unrun = group.Stop(absl::Seconds(10));
//
// Thread-safety: thread-safe. `mu_` guards the controller list and each controller's state;
// it is not held while a runner shuts down or a reflector stops (both join threads), nor while
// discovery is called.
#ifndef CTRLHOST_RUNTIME_MANAGER_CONTROLLER_GROUP_H_
#define CTRLHOST_RUNTIME_MANAGER_CONTROLLER_GROUP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/config/operator_spec.h"
#include "runtime/controller/key_gate.h"
#include "runtime/controller/reconcile.h"
#include "runtime/controller/record/recorder.h"
#include "runtime/controller/runner.h"
#include "runtime/controller/schedule.h"
#include "runtime/kube/discovery.h"
#include "runtime/kube/fair_limiter.h"
#include "runtime/manager/background_tasks.h"
#include "runtime/manager/shard_labeler.h"
#include "runtime/observe/metrics.h"
#include "runtime/watch/registry.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::manager {

// Borrowed collaborators; all must outlive the group.
// Recording the controllers' reconciles (the operator file's spec.record, or ctrlhost run
// --record): controller C's files go to `dir`/C.
struct RecordSettings {
  std::string dir;
  std::vector<std::string> controllers;  // empty: all
  uint64_t max_bytes = uint64_t{256} << 20;
  bool secret_data = false;
  bool idle_cpu = true;  // the recorder's writer (RecorderOptions::idle_cpu)
};

struct ControllerGroupDeps {
  kube::Discovery* discovery = nullptr;
  watch::ReflectorRegistry* registry = nullptr;
  controller::ResponseApplier* applier = nullptr;
  controller::Dispatcher* dispatcher = nullptr;  // the plugin (its supervisor)
  common::Clock* clock = nullptr;                // nullptr: Clock::Real()
  // False on a warm standby (leader election): the controllers are wired to their caches and
  // their queues fill, but their runners dispatch nothing until StartDispatching().
  bool dispatching = true;
  // The shard ring (shard_ring.h): controllers with `sharding: {enabled: true}` reconcile only
  // the keys it gives this host. Null: such controllers stay pending with an error.
  controller::KeyGate* shard_gate = nullptr;
  // This host's part of the hash space (set by the ring): a sharded controller's primary and
  // owned kinds are cached for it only (watch/shard_scope.h). Null: they cache everything.
  std::shared_ptr<watch::ShardScope> shard_scope;
  // Labels the sharded primary kinds' objects for servers without a shard selector (null
  // without a ring). Borrowed.
  ShardLabeler* shard_labeler = nullptr;
  // The host's API budget: each controller's requests are charged to it as (operator,
  // controller), with the override's scheduling.apiWeight. Null: not charged by name.
  kube::FairLimiter* api_budget = nullptr;
  // Routed controllers (the operator file's spec.routes): the controller of that name
  // dispatches to this one (a RouteDispatcher over the target plugins) instead of `dispatcher`.
  absl::flat_hash_map<std::string, std::shared_ptr<controller::Dispatcher>> routed;
  // Controllers this plugin declares that another plugin of its routes runs: not started here.
  absl::flat_hash_set<std::string> run_elsewhere;
  // Set: the chosen controllers' reconciles are recorded (a controller whose directory cannot be
  // written stays pending, saying why).
  std::optional<RecordSettings> record;
};

// A plain snapshot of one controller, for the admin API and /debug/dump.
struct ControllerStatus {
  std::string name;
  std::string primary;  // "apps.ctrlhost.dev/v1alpha1 WebApp"
  std::string state;    // "pending" (kinds not served yet), "running", "stopped"
  std::string pending_reason;
  bool synced = false;  // every reflector it reads has listed once
  std::vector<std::string> watches;
  // The reflectors it reads, in the order of `watches` (failing_since, last error: readiness).
  std::vector<watch::ReflectorMetrics> watch_metrics;
  controller::RunnerMetrics metrics;  // zero while pending
  bool sharded = false;
  size_t keys_owned = 0;  // sharded: primaries in the cache this host owns now
  // Recorded (RecordSettings): where, and how much was written or dropped.
  std::optional<controller::record::Recorder::Figures> recording;
};

class ControllerGroup {
 public:
  ControllerGroup(std::string operator_name, std::string plugin, ControllerGroupDeps deps);
  ~ControllerGroup();  // Stop(10 s) when still running
  ControllerGroup(const ControllerGroup&) = delete;
  ControllerGroup& operator=(const ControllerGroup&) = delete;

  // Starts the controllers `describe` declares (overridden by `overrides`, the operator's
  // spec.controllers, and by `plugin` for the request timeout). InvalidArgument when an
  // override names a controller the plugin does not declare (the plugin's answer is taken
  // anyway; the error is for the caller to report). Controllers whose kinds are unknown are
  // left pending, not failed. Call once.
  absl::Status Start(const pluginpb::DescribeResponse& describe,
                     const std::vector<config::ControllerSpec>& overrides,
                     const config::PluginSpec& plugin);

  // Starts the pending controllers whose kinds discovery now serves. Returns how many started.
  int RetryPending();

  // Queues every primary key of every running controller with `reason` (e.g. after the plugin
  // restarted: REASON_PLUGIN_STARTED), spread over `spread`.
  void EnqueueAll(pluginpb::Reason reason, absl::Duration spread);
  // Sharding: queues, in every running sharded controller, the keys for which `filter` is true
  // (those this host owns under a new view and did not own before), keys parked as terminal
  // included: they are retried once, as a new owner would (Runner::EnqueueAcquired). Returns
  // how many.
  size_t EnqueueSharded(pluginpb::Reason reason,
                        const std::function<bool(const cache::Object& primary)>& filter);

  // Starts the runners of a group created with `dispatching = false` (this host now leads),
  // those started later included, and queues every primary key with REASON_PLUGIN_STARTED: the
  // first reconciles after a takeover cover every object, like after a plugin restart.
  // Idempotent.
  void StartDispatching();
  // The reverse (per-operator Leases: the operator is handed over to another host), in two
  // steps so that the caller can drain several groups before it closes the operator's fence:
  // DrainForStandby stops every started runner handing out keys and waits up to `timeout` for
  // its reconciles in flight; RewireAsStandby (once the fence is closed, which cancels what is
  // left) joins them and puts runners that do not dispatch in their place, over the same caches
  // (nothing lists again; their queues fill from them). StartDispatching works again after it.
  // Idempotent; StopDispatching is both steps.
  struct Drained;
  struct DrainedDeleter {
    void operator()(Drained* drained) const;
  };
  using DrainedPtr = std::unique_ptr<Drained, DrainedDeleter>;
  DrainedPtr DrainForStandby(absl::Duration timeout);
  void RewireAsStandby(DrainedPtr drained);
  void StopDispatching(absl::Duration timeout);
  bool dispatching() const;

  // The running, dispatching controllers that declare background tasks: whose tasks should
  // run now (see BackgroundTasks).
  std::vector<BackgroundTasks::Wanted> TasksWanted() const;
  // Queues `key` on `controller`'s runner with REASON_BACKGROUND_TASK (a task's TaskEnqueue);
  // false when that controller does not run and dispatch, or the key is outside its namespaces.
  bool EnqueueFromTask(const std::string& controller, const std::string& key);

  // Unsubscribes the runners, shuts them down (waiting up to `timeout` for reconciles in flight)
  // and releases the reflectors. Returns the keys that were queued and never ran. Idempotent.
  std::vector<std::string> Stop(absl::Duration timeout);

  // The Describe the group was started with.
  pluginpb::DescribeResponse describe() const;
  // New references to every watch the running controllers read: held across a replacement of
  // the group (stop old, start new) so the shared watches keep running and do not relist.
  std::vector<watch::ReflectorHandle> RetainWatches() const;

  // True when every controller runs and every reflector it reads has synced.
  bool Synced() const;
  std::vector<ControllerStatus> Status() const;
  // A copy of the running controller `name` as its runner sees it (kinds resolved, overrides
  // applied); nullopt when no controller of that name runs.
  std::optional<controller::ControllerInfo> Info(const std::string& name) const;
  // Controller and queue figures for /metrics.
  void Collect(observe::Figures& figures) const;

 private:
  struct Controller;
  // Resolves kinds, acquires reflectors, builds and starts the runner. kNotFound while a kind
  // is not served (the controller stays pending); other errors are logged and also retried.
  absl::Status StartController(Controller& c);
  // StartController's steps. The runner's options (the plugin's declaration, the operator
  // file's override applied; sets info->host_status) and the primary's label selector;
  // FailedPrecondition for a sharded controller in a host without a shard ring.
  struct RunnerPlan {
    controller::RunnerOptions options;
    std::string selector;
  };
  absl::StatusOr<RunnerPlan> PlanRunner(const Controller& c,
                                        controller::ControllerInfo* info) const;
  // The reflectors of the primary, the owned kinds and the watched kinds, in that order, from the
  // shared registry, with their keys. Handles acquired before an error are released with it.
  struct Watches {
    std::vector<watch::ReflectorHandle> handles;
    std::vector<watch::WatchKey> keys;
  };
  // `sharded`: the primary and owned kinds are restricted to deps_.shard_scope.
  absl::StatusOr<Watches> AcquireWatches(bool sharded, const controller::ControllerInfo& info,
                                         const pluginpb::ControllerSpec& spec,
                                         const std::vector<kube::ResourceMapping>& watched,
                                         const std::string& primary_namespace,
                                         const std::string& selector);
  // StartController's last step, also StopDispatching's: the runner over `acquired` (the
  // primary's, the owned kinds', the watched kinds' watches, in that order), its scheduler and
  // subscriptions; started when the group dispatches. Replaces c's handles.
  absl::Status WireRunner(Controller& c, Watches acquired, controller::RunnerOptions options,
                          controller::SchedulerOptions schedule);
  // RewireAsStandby for one controller: a new runner over its watches.
  absl::Status RewireController(Controller& c);
  void StopController(Controller& c, absl::Duration timeout, std::vector<std::string>* unrun);
  // Creates c.recorder when deps_.record chooses the controller (once; kept across retries).
  absl::Status StartRecorder(Controller& c);
  // deps_.routed's dispatcher for `controller`, else deps_.dispatcher.
  controller::Dispatcher* DispatcherFor(const std::string& controller) const;

  const std::string operator_name_;
  const std::string plugin_;
  const ControllerGroupDeps deps_;
  common::Clock* const clock_;

  // Serialises StartDispatching, StopDispatching and Stop (taken before mu_): a runner being
  // replaced without dispatch is never started or stopped by another thread meanwhile.
  common::Mutex dispatch_mu_;
  mutable common::Mutex mu_;
  std::vector<std::unique_ptr<Controller>> controllers_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool dispatching_ ABSL_GUARDED_BY(mu_);
  pluginpb::DescribeResponse describe_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_CONTROLLER_GROUP_H_
