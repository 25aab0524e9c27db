// The manager: the lifecycle of everything the host runs for its operators.
//
// For each Operator document it starts each plugin in a `PluginSlot` (plugin_slot.h: one
// `plugin::Supervisor` per generation, exec'd with a socket in a host-owned 0700 directory, or
// dialled at its endpoint) and builds the plugin's `DispatchChain` once (NewPlugin,
// dispatch_chain.h: the fence of its operator, if any, then a counter, then the slot). Once a
// plugin passed its handshake it starts the controllers the plugin declares (a
// `ControllerGroup` per plugin, wired by DepsFor: shared reflectors from one registry, a runner
// per controller, the plugin's chain as the runners' dispatcher or `DispatchChain::RouteTo`
// several plugins' chains for a routed controller, one applier for all
// or a `FencedApplier` per operator with a Lease of its own, the shard ring as the key gate of
// sharded controllers). A plugin that crashes is restarted by its supervisor; its controllers
// keep their queues and caches, and the requests that were in flight come back as retryable
// errors, so no key is lost. A background thread (Loop) retries controllers whose kinds are not
// served yet (a CRD applied after start), starts the controllers of plugins that became ready,
// re-enqueues every object when a plugin gets a new serving instance, enforces cache caps and
// starts and stops background tasks; each controller's scheduler runs its resyncs and cron
// schedules.
//
// Several hosts (host.h owns the electors and the ring): with a Lease the controllers are wired
// but dispatch nothing until StartDispatching() (a host-wide Lease: `dispatching = false`) or
// StartDispatching(operator) (an operator in `operator_fences`), which the elector's thread
// calls on acquiring; EnqueueSharded() queues the keys this host newly owns after a shard view
// change, on the ring's thread.
//
// Files: manager.cc (lifecycle, the loop, dispatch start), manager_plugins.cc (plugins, their
// chains and controller groups, swaps), manager_apply.cc (Apply), manager_status.cc (readiness,
// figures, report, dump); manager_internal.h holds the per-plugin records they share.
//
// Observability: `Collect` feeds /metrics (controllers, queues, plugins, watches), `Ready`
// backs /readyz (every plugin ready, every controller running and synced, no watch denied by
// RBAC or failing for longer than `watch_stale_after`), `DumpYaml` is
// /debug/dump.
//
// Example:
//   ASSIGN_OR_RETURN(auto manager, Manager::Create(options));
//   RETURN_IF_ERROR(manager->Start(operators));
//   manager->WaitReady(absl::Minutes(1));
//   ...
//   manager->Stop();
//
// Thread-safety: thread-safe. `mu_` guards the operator table; it is never held while a
// supervisor or a controller group starts or stops (they join threads), nor during HTTP calls.
#ifndef CTRLHOST_RUNTIME_MANAGER_MANAGER_H_
#define CTRLHOST_RUNTIME_MANAGER_MANAGER_H_

#include <sys/types.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/heap_trim.h"
#include "runtime/common/mutex.h"
#include "runtime/common/version.h"
#include "runtime/config/operator_spec.h"
#include "runtime/controller/apply/applier.h"
#include "runtime/kube/client.h"
#include "runtime/kube/discovery.h"
#include "runtime/kube/fair_limiter.h"
#include "runtime/manager/background_tasks.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/fence.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/manager/route_dispatcher.h"
#include "runtime/manager/shard_labeler.h"
#include "runtime/manager/watch_readiness.h"
#include "runtime/observe/metrics.h"
#include "runtime/watch/registry.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::manager {

struct ManagerOptions {
  // Borrowed; must outlive the manager.
  kube::Client* client = nullptr;
  kube::Discovery* discovery = nullptr;
  // Hidden from exec'd plugins. Their sockets live elsewhere: in a directory made for this run
  // under $XDG_RUNTIME_DIR (or /tmp), named at random, removed at Stop, one random subdirectory
  // per plugin instance (plugin/supervisor.h); nothing in a plugin's environment leads here.
  std::string data_dir;
  // Exec'd plugins run as this user and group when set (the host must be root or hold
  // CAP_SETUID/CAP_SETGID); unset: the host's user. With plugin_uid_per_plugin, the host's n-th
  // plugin (from 0, in start order, kept across swaps and restarts) runs as uid = gid =
  // plugin_uid + n instead, so plugins cannot reach each other's sockets either. See
  // docs/operations.md.
  std::optional<uid_t> plugin_uid;
  std::optional<gid_t> plugin_gid;
  bool plugin_uid_per_plugin = false;
  // More paths no exec'd plugin may reach (with Landlock, where the kernel has it): kubeconfigs,
  // the admin socket. data_dir and the socket directory are always hidden.
  std::vector<std::string> plugin_hidden_paths;
  bool plugin_landlock = true;
  // What the plugins together may ask of this host, checked when each Describe arrives (a plugin
  // that would go past a limit is refused, FAILED, with the figures): controllers, and worker
  // threads (the sum of the controllers' maxConcurrentReconciles, operator-file overrides
  // included). Per plugin: plugin::DescribeLimits, with spec.plugins[].maxControllers.
  int max_controllers = 1000;
  int max_reconcile_workers = 4096;
  std::string host_version = common::kCtrlhostVersion;
  // How often pending controllers are retried.
  absl::Duration tick = absl::Milliseconds(500);
  // Given to runners to finish in-flight reconciles at Stop.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // Readiness fails when a watch a controller reads has been failing this long (its cache is
  // stale); a watch denied by RBAC (401/403) fails readiness at once. See watch_readiness.h.
  absl::Duration watch_stale_after = kDefaultWatchStaleAfter;
  common::Clock* clock = nullptr;  // nullptr: Clock::Real()
  // False while the API server is known not to answer (the host's discovery retrier says
  // so): pending controllers are not retried meanwhile, since each retry would wait out the
  // client's own retries against a dead server. Null: always retry.
  std::function<bool()> api_reachable;
  // Leader election (host.h): false starts the host as a warm standby: plugins run, caches
  // sync, controllers are wired, and nothing is dispatched until StartDispatching().
  bool dispatching = true;
  // When set, every plugin's reconciles go through it (FencedDispatcher): refused while it is
  // closed, cancelled when it trips. Borrowed; must outlive the manager.
  Fence* fence = nullptr;
  // Per-operator Leases (host.h): the fence of each operator that has a Lease of its own, by
  // operator name. Such an operator's plugins dispatch through its fence, its controllers
  // write through a FencedApplier on it, and its groups dispatch only after
  // StartDispatching(operator) (not with `dispatching`). Borrowed; must outlive the manager.
  std::map<std::string, Fence*> operator_fences;
  // The shard ring's key gate for controllers with sharding enabled (shard_ring.h). Borrowed;
  // must outlive the manager. Null: such controllers stay pending, saying why.
  controller::KeyGate* shard_gate = nullptr;
  // This host's part of the hash space, for the caches of sharded controllers (see
  // ControllerGroupDeps). Null: they cache everything.
  std::shared_ptr<watch::ShardScope> shard_scope;
  // With shard_scope: the client the shard labeler writes with (shard_labeler.h; not the
  // controllers' budget). Borrowed. Null: `client`.
  kube::Client* shard_labeler_client = nullptr;
  // The host's API request budget (the client's limiter): each operator's and controller's
  // spec.scheduling.apiWeight is set on it, and the runners charge their requests to their
  // operator and controller. Borrowed; must outlive the manager. Null: no shares.
  kube::FairLimiter* api_budget = nullptr;
  // ctrlhost run --record: every controller of every operator without a spec.record of its own
  // has its reconciles recorded under record_dir/<controller>/ (runtime/controller/record). "":
  // only operators with spec.record are recorded.
  std::string record_dir;
};

class Manager {
 public:
  static absl::StatusOr<std::unique_ptr<Manager>> Create(ManagerOptions options);
  ~Manager();  // Stop()
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Starts every operator's plugins (their handshakes complete in the background). Returns
  // InvalidArgument for a duplicate operator name; FailedPrecondition after Stop.
  absl::Status Start(const std::vector<config::OperatorSpec>& operators);

  // OK when every plugin is ready and every controller runs with synced caches that are not
  // stale (no watch failing for `watch_stale_after` or denied access); otherwise Unavailable
  // naming what is not, e.g. "controller web: watch v1 ConfigMap stale: failing for 45s: ...".
  absl::Status Ready() const;
  // Like Ready(), but controllers still waiting for their kinds to be served (a CRD not applied
  // yet) do not count: OK with their names in `pending` (may be null); and, when `refused` is
  // not null, neither do refused plugins (FAILED: never restarted without an edit), listed
  // there as "operator OP, plugin NAME: <why>", so that the other operators' start settles.
  // This is what `ctrlhost run` waits for before it prints "ready".
  absl::Status Started(std::vector<std::string>* pending,
                       std::vector<std::string>* refused = nullptr) const;
  // With a shard scope: the labeler of the sharded primary kinds (else null). The host sets it
  // active on the ring's first member and hands it the wrong labels its watches report.
  ShardLabeler* shard_labeler() const { return shard_labeler_.get(); }
  // A standby becomes the leader: every controller group starts dispatching (its first
  // reconciles cover every object: REASON_PLUGIN_STARTED). Idempotent.
  void StartDispatching();
  bool dispatching() const;
  // Per-operator Leases: this host now holds `operator_name`'s Lease: its controller groups
  // start dispatching (every object queued, as above). Idempotent; for operators without a
  // fence in ManagerOptions::operator_fences, StartDispatching() above.
  void StartDispatching(const std::string& operator_name);
  // The reverse, for an operator in ManagerOptions::operator_fences whose Lease this host hands
  // over: its controller groups stop handing out keys, the reconciles in flight finish (their
  // writes too) for up to `shutdown_timeout`, then `drained` runs (the host closes the
  // operator's fence there, cancelling whatever is left) and the groups get runners that do not
  // dispatch, over the same caches (ControllerGroup::DrainForStandby / RewireAsStandby;
  // plugins and caches kept). StartDispatching(operator_name) works again after it.
  // Idempotent (`drained` runs in any case); no effect on other operators.
  void StopDispatching(const std::string& operator_name, const std::function<void()>& drained);
  bool dispatching(const std::string& operator_name) const;
  // Sharding: queues, in every sharded controller, each primary key for which `filter` is true
  // (after a view change of the shard ring: the keys this host newly owns), with
  // REASON_RESYNC. Returns how many.
  size_t EnqueueSharded(const std::function<bool(const cache::Object& primary)>& filter);

  // The plugins that were refused (FAILED: not restarted until a swap or a configuration
  // change), as "operator OP, plugin NAME: <why>", when every plugin of every operator was
  // refused, so that nothing can ever run without an edit; empty when any plugin is not
  // FAILED (starting, ready, backing off) or there is none. `ctrlhost run` fails with these
  // before it would print "ready".
  std::vector<std::string> AllPluginsRefused() const;
  // Warnings, not failures: one per controller whose oldest waiting key has waited longer than
  // its queue's maxWait ("controller web/deployments: key ns/a has waited 412s at low priority
  // (maxWait 300s)"). /readyz?verbose shows them beside the passing "queues" check.
  std::vector<std::string> QueueWarnings() const;

  // Waits (bounded) until Ready() is OK; returns its last answer, or at once FailedPrecondition
  // naming a plugin that was refused (FAILED: Ready() cannot pass before the operators change).
  absl::Status WaitReady(absl::Duration timeout) const;

  // Stops the controllers (runners drain in-flight reconciles up to shutdown_timeout; keys that
  // never ran are logged), then the plugins (SIGTERM, grace, SIGKILL), then the caches.
  // Idempotent.
  void Stop();

  // Hot swap (see plugin_slot.h). `source` replaces the plugin's exec/endpoint source and its
  // timeouts. NotFound for an unknown operator or plugin; FailedPrecondition when
  // `expected_generation` is set and not the serving one. When the new instance's Describe
  // declares other controllers, the plugin's controller group is replaced (stop old, start new)
  // while its watches are held, so the shared caches never relist.
  struct SwapOptions {
    absl::Duration ready_timeout = absl::Seconds(30);
    absl::Duration drain_timeout = absl::Seconds(10);
    uint64_t expected_generation = 0;  // 0: any
  };
  SwapResult SwapPlugin(const std::string& operator_name, const std::string& plugin,
                        const config::PluginSpec& source, const SwapOptions& options);
  SwapResult StartCanary(const std::string& operator_name, const std::string& plugin,
                         const config::PluginSpec& source, uint32_t percent,
                         const SwapOptions& options);
  SwapResult PromoteCanary(const std::string& operator_name, const std::string& plugin,
                           const SwapOptions& options);
  absl::Status AbortCanary(const std::string& operator_name, const std::string& plugin,
                           const SwapOptions& options);
  // A shadow of `source` beside the plugin's serving instance (plugin_slot.h): it must declare
  // the same controllers; its answers are compared (shadow_comparator.h) and never applied.
  SwapResult StartShadow(const std::string& operator_name, const std::string& plugin,
                         const config::PluginSpec& source, ShadowOptions shadow,
                         const SwapOptions& options);
  absl::Status StopShadow(const std::string& operator_name, const std::string& plugin,
                          const SwapOptions& options);
  // Swaps the serving instance to the shadow's source (SwapPlugin) when the shadow's agreement
  // over all its controllers is at least `min_agreement` over at least `min_compared` compared
  // calls, then stops the shadow. FailedPrecondition naming the figures below the bar (nothing
  // changes), or when no shadow runs.
  SwapResult PromoteShadow(const std::string& operator_name, const std::string& plugin,
                           double min_agreement, uint64_t min_compared, const SwapOptions& options);

  // Makes the running set equal `operators` (the whole set, as loaded from the operator files):
  // added operators start, removed ones stop (their controllers drain, their plugins stop; the
  // others are untouched), changed ones get their plugins added/removed/swapped and their
  // controller overrides re-applied (the controllers restart with their watches held). A swap
  // that fails leaves the running instance serving; such failures are logged and appended to
  // `errors`. With `dry_run` nothing changes. Returns what differed. One Apply at a time.
  absl::StatusOr<config::OperatorSetDiff> Apply(const std::vector<config::OperatorSpec>& operators,
                                                bool dry_run, std::vector<std::string>* errors);

  // Snapshots for the admin API.
  struct PluginReport {
    std::string operator_name;
    std::string name;
    config::PluginSpec spec;  // the current source
    SlotStatus slot;
    // While a shadow runs (slot.has_shadow): its source and its comparator's figures.
    config::PluginSpec shadow_spec;
    ShadowComparator::Figures shadow_figures;
    std::vector<ControllerStatus> controllers;  // empty until the plugin was first ready
    std::vector<pluginpb::ControllerSpec> controller_specs;  // as declared
    std::string group_error;
  };
  std::vector<PluginReport> Report() const;
  std::vector<config::OperatorSpec> Operators() const;

  // Figures for /metrics.
  void Collect(observe::Figures& figures) const;
  // A YAML snapshot of operators, plugins, controllers, queues, caches and last errors.
  std::string DumpYaml() const;

 private:
  struct Plugin;
  struct Operator;
  explicit Manager(ManagerOptions options);
  // Supervisor options of `spec`'s instances (any generation).
  // Why `describe` cannot start next to the other plugins' controllers (a controller name one of
  // them already uses, naming both plugins); "" when it can.
  std::string ControllerNameConflict(const Plugin& plugin,
                                     const pluginpb::DescribeResponse& describe) const;
  // `tasks` (borrowed, the plugin's) receives the instances' background-task messages.
  PluginSlot::OptionsFactory OptionsFactoryFor(const std::string& operator_name,
                                               const config::PluginSpec& spec,
                                               BackgroundTasks* tasks) const;
  // Starts and stops every plugin's background tasks to match its running controllers and the
  // serving instance (BackgroundTasks::Sync); called by the loop every tick.
  void SyncBackgroundTasks();
  void Loop();
  // The operator files' shadows (spec.plugins[].shadow): Tick queues a plugin whose file shadow
  // is pending once it serves; this thread applies it (StartShadow waits for the shadow to be
  // ready, which the loop must not).
  void ShadowLoop();
  void ApplyFileShadow(const std::shared_ptr<Plugin>& p);
  void Wake();
  // Ready() when `pending` is null; Started(pending, refused) otherwise.
  absl::Status Check(std::vector<std::string>* pending,
                     std::vector<std::string>* refused = nullptr) const;
  // Starts the controllers of ready plugins, retries pending ones.
  void Tick();
  // A consistent view of one plugin for readers outside mu_.
  struct PluginView {
    std::shared_ptr<Plugin> plugin;
    std::shared_ptr<ControllerGroup> group;  // null until the plugin was first ready
    std::string group_error;
    config::PluginSpec spec;  // the current source (a swap changes it)
    std::vector<config::ControllerSpec> overrides;
    std::string cache_error;  // set once its controllers were stopped over maxCacheBytes
    std::vector<config::RouteSpec> routes;  // the operator's spec.routes
    // The dispatchers of the routed controllers its group runs (for the dump).
    std::vector<std::shared_ptr<RouteDispatcher>> route_dispatchers;
  };
  void QueueFileShadows(const std::vector<PluginView>& views);
  std::vector<PluginView> AllPlugins() const;
  // Stops `view`'s controllers when the caches they read exceed its spec.max_cache_bytes
  // (recording why for /readyz, the dump and the log); true when it did.
  bool EnforceCacheCap(const PluginView& view);
  absl::StatusOr<PluginView> FindPlugin(const std::string& operator_name,
                                        const std::string& plugin) const;
  // After a cut-over to an instance whose Describe is `describe`: records the new source and,
  // when the controllers differ, replaces the plugin's controller group.
  void AfterSwap(const PluginView& view, const config::PluginSpec* source,
                 const pluginpb::DescribeResponse& describe);
  // Stops the plugin's controllers and starts them again from `describe` and the current
  // overrides, holding their watches meanwhile. Without `force`, only when `describe`
  // declares other controllers than the running group.
  void ReplaceGroup(const PluginView& view, const pluginpb::DescribeResponse& describe, bool force);
  absl::StatusOr<std::shared_ptr<Plugin>> NewPlugin(const config::OperatorSpec& op,
                                                    const config::PluginSpec& plugin_spec);
  // The group dependencies of `p`'s controllers (dispatching as the manager is now), with the
  // routed controllers it runs for its operator's spec.routes (a RouteDispatcher each, over the
  // target plugins' dispatchers) and those another plugin runs.
  ControllerGroupDeps DepsFor(Plugin* p);
  // Re-enqueues the objects of the routed controllers that send requests to `p` and run in
  // another plugin's group (after `p` got a new serving instance).
  void EnqueueRoutedTo(const PluginView& view);
  // After `group` was published: starts its dispatch when the manager began meanwhile.
  void CatchUpDispatching(const std::string& operator_name,
                          const std::shared_ptr<ControllerGroup>& group);
  // Whether `operator_name`'s groups dispatch now (its own Lease's state, else dispatching_).
  bool DispatchingLocked(const std::string& operator_name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The fence `operator_name`'s reconciles and writes go through (its own, else the host's;
  // null when none).
  Fence* FenceFor(const std::string& operator_name) const;
  // Drains the plugin's controllers, then stops its instances.
  void StopPlugin(const std::shared_ptr<Plugin>& p);
  // Apply's steps (manager_apply.cc). A change that could not be applied goes to the report.
  using ApplyReport = std::function<void(absl::string_view message)>;
  // Takes the operator out of the running set and stops its plugins.
  void RemoveOperator(const std::string& name);
  // The operator's spec.scheduling.apiWeight on options_.api_budget (1 when unset).
  void SetApiWeight(const config::OperatorSpec& spec);
  // Applies one changed operator: plugins removed, added, swapped, then its overrides and routes.
  void ApplyChange(const config::OperatorChange& change, const config::OperatorSpec& spec,
                   const ApplyReport& report);
  // New controller overrides or routes: every plugin of `op` gets its controllers replaced.
  void ReapplyOverrides(Operator* op, const config::OperatorSpec& spec);

  const ManagerOptions options_;
  common::Clock* const clock_;
  std::string socket_dir_;  // set by Create; removed by Stop
  // With options_.shard_scope. Declared before registry_, so that it outlives the reflectors
  // (whose mislabeled reports reach it); Stop() releases its watches before registry_ goes.
  std::unique_ptr<ShardLabeler> shard_labeler_;
  std::unique_ptr<watch::ReflectorRegistry> registry_;
  std::unique_ptr<controller::apply::Applier> applier_;
  // One per entry of options_.operator_fences, in front of applier_ (constant after Create).
  std::map<std::string, std::unique_ptr<FencedApplier>> fenced_appliers_;

  common::Mutex apply_mu_;  // serialises Apply; acquired before mu_

  // Per-plugin users ("operator/plugin" -> n), with plugin_uid_per_plugin. A leaf lock.
  // Admits `describe` of plugin `operator_name`/`plugin_name` against the host-wide limits
  // (max_controllers, max_reconcile_workers) and records what it takes; called on handshake
  // threads. A later Describe of the same plugin (restart, swap) replaces its share.
  absl::Status Admit(const std::string& operator_name, const std::string& plugin_name,
                     const pluginpb::DescribeResponse& describe) const;
  // Forgets the share of a stopped plugin.
  void ReleaseAdmission(const std::string& operator_name, const std::string& plugin_name);

  mutable common::Mutex admit_mu_;
  struct Admitted {
    int64_t controllers = 0;
    int64_t workers = 0;
  };
  // By "operator/plugin".
  mutable absl::flat_hash_map<std::string, Admitted> admitted_ ABSL_GUARDED_BY(admit_mu_);
  // The operator files' spec.record directories seen so far, hidden from every plugin started
  // after (recordings hold what plugins were sent); never forgotten. A leaf lock.
  void NoteRecordDirs(const std::vector<config::OperatorSpec>& operators);
  mutable common::Mutex record_dirs_mu_;
  std::set<std::string> record_dirs_ ABSL_GUARDED_BY(record_dirs_mu_);
  mutable common::Mutex uid_mu_;
  mutable absl::flat_hash_map<std::string, uint32_t> plugin_uids_ ABSL_GUARDED_BY(uid_mu_);

  mutable common::Mutex mu_;
  common::CondVar cv_;  // wakes the loop (stop, plugin state change)
  std::vector<std::unique_ptr<Operator>> operators_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool dispatching_ ABSL_GUARDED_BY(mu_);
  // The operators with a fence of their own whose Lease this host holds.
  std::set<std::string> dispatching_operators_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<Plugin>> file_shadows_ ABSL_GUARDED_BY(mu_);
  common::CondVar file_shadows_cv_;  // wakes ShadowLoop (a queued plugin, stop)
  std::thread loop_;
  // Used by the loop's thread only: gives the heap a burst freed back to the kernel.
  common::HeapTrimmer heap_trimmer_;
  std::thread shadow_loop_;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_MANAGER_H_
