// The runner: one per controller. It turns watch events into queued primary keys and queued
// keys into reconcile calls, at most `max_concurrent_reconciles` at once and never two for one
// key.
//
// Event side (reflector threads): `PrimaryHandler()`, `OwnedHandler(i)` and `WatchHandler(i)`
// are watch::EventHandler adapters the manager adds to the reflectors of the primary kind, of
// each owned kind and of each watched kind. Each is mapper + predicate -> queue (mapper.h,
// predicate.h); they never block.
//
// Worker side (`max_concurrent_reconciles` threads): for each key handed out by the work queue
// the worker reads the primary from the primary store and, when asked for, its children (the
// owner-uid index of each owned kind's store) and related objects (watches with
// include_in_requests), builds a `pluginpb::ReconcileCall`, sends it through the `Dispatcher` and
// waits for the answer on its own condition variable (never on a gRPC thread), hands the response
// to the `ResponseApplier` and acts on the `ApplyOutcome`:
//   kDone -> Forget; kRequeueAfter -> Forget + AddAfter; kRetry and every dispatch error ->
//   AddRateLimited; kRequeueNow -> Add; kTerminal -> Forget, and the key is not reconciled again
//   (not even by resync or schedules) until an event maps to it. A terminal NotControlled
//   refusal (ApplyOutcome::blocked_by: an existing object the primary does not control was in
//   the way of a desired one) is also lifted by that object's delete event: its owner reference
//   does not map it to the primary, so the runner remembers what blocked which key.
//
// Guarantees:
// - Before the first reconcile of a live primary that lacks the controller's finalizer, the
//   worker calls `ResponseApplier::EnsureFinalizer` (once per observed resourceVersion of the
//   object, so a lagging cache does not cause repeated calls); the primary it returns replaces
//   the cached one in that reconcile's request and context.
// - A primary that disappears gets one more request with an empty object and reason
//   REASON_PRIMARY_DELETED (retried on dispatch errors and kRetry), then its key is forgotten.
//   A key that maps to a primary the runner never saw is dropped without a request.
// - `finalizing` is set when deletionTimestamp is set and the controller's finalizer is present.
// - Shutdown stops handing out keys, waits (bounded) for reconciles in flight and returns every
//   key that was queued or wanted a requeue and will now never run; they are also logged.
//
// Objects in requests carry apiVersion/kind (added when missing, as in list items), reduced to
// apiVersion/kind/metadata for metadata-only kinds and without the strip_fields paths.
//
// With a `key_gate` (sharding across hosts, key_gate.h) only keys the gate says this host owns
// are queued, and a worker asks the gate before each reconcile (kNotMine: forgotten; kWait:
// queued again after the gate's retry_after), calling End after it.
//
// Not done here: label-selector filtering of primaries (give the primary reflector the
// selector).
//
// Thread-safety: thread-safe. Constant after construction: the controller info, sources,
// options, mappers. `mu_` guards per-key bookkeeping (reasons, terminal keys, deleted uids,
// finalizer records), the metrics and the shutdown state. The work queue has its own lock.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Runner> runner,
//                    Runner::Create(&info, sources, dispatcher, applier, options));
//   int id = primary_reflector.AddHandler(runner->PrimaryHandler());  // and owned/watched kinds
//   runner->Start();
//   ...
//   std::vector<std::string> unrun = runner->Shutdown(absl::Seconds(30));
//   primary_reflector.RemoveHandler(id);                                // before ~Runner
#ifndef CTRLHOST_RUNTIME_CONTROLLER_RUNNER_H_
#define CTRLHOST_RUNTIME_CONTROLLER_RUNNER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/cache/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/field_path.h"
#include "runtime/controller/key_gate.h"
#include "runtime/controller/mapper.h"
#include "runtime/controller/reconcile.h"
#include "runtime/kube/api_tenant.h"
#include "runtime/queue/metrics.h"
#include "runtime/queue/work_queue.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::controller {

// A watched kind: the plugin's declaration, its resolved resource and its store.
struct WatchSource {
  pluginpb::WatchedKind spec;
  kube::ResourceMapping mapping;
  const cache::Store* store = nullptr;  // borrowed; outlives the runner
};

// Where the runner reads objects. All stores are borrowed and must outlive the runner (the
// manager holds the reflectors that fill them).
struct RunnerSources {
  const cache::Store* primary = nullptr;
  std::vector<const cache::Store*> owned;  // parallel to ControllerInfo::owns
  std::vector<WatchSource> watches;
};

struct RunnerOptions {
  int max_concurrent_reconciles = 1;  // values < 1 mean 1
  queue::WorkQueue::Options queue;    // qps / burst / backoff / max_wait (aging bound)
  // Catching up (the initial list and a new handler's replay, REASON_RESYNC,
  // REASON_PLUGIN_STARTED, keys a shard hand-over brings) is queued at low priority, every other
  // add (changes after the sync, deletes, requeues, retries, REASON_SCHEDULE, background tasks)
  // at high priority (queue::WorkQueue). false: everything at one priority, plain FIFO.
  bool priorities = true;
  // Whose API budget share this controller's requests use (kube::FairLimiter): the worker
  // threads carry it (kube::ApiTenantScope) while they process a key. Empty: the host's.
  kube::ApiTenant api_tenant;
  pluginpb::Predicates predicates;
  bool include_children = false;  // RequestContents.children (and the capability) in effect
  bool include_related = false;   // RequestContents.related_objects in effect
  // RequestContents.metadata_only_kinds (matched by group and kind) and strip_fields.
  std::vector<pluginpb::GroupVersionKind> metadata_only_kinds;
  std::vector<std::string> strip_fields;
  // Namespaces whose primaries are reconciled; empty: all. Ignored for cluster-scoped kinds.
  std::vector<std::string> namespaces;
  // Sharding: which keys this host may reconcile (key_gate.h). Borrowed; outlives the runner.
  // nullptr: every key.
  KeyGate* key_gate = nullptr;
  // Receives every reconcile (the call, the answer, what the applier did): `ctrlhost run
  // --record`. Borrowed; outlives the runner. nullptr: nothing is recorded (and the call is not
  // copied).
  ReconcileRecorder* recorder = nullptr;
  // How long a worker waits for `done` beyond the request deadline before it gives up on a
  // dispatcher that broke its promise to call it (the reconcile then counts as
  // DEADLINE_EXCEEDED).
  absl::Duration dispatch_grace = absl::Seconds(10);
  // Cap on the per-key backoff after a failure the API server answered with 401 or 403: a
  // missing RBAC rule is usually added while the host runs, and the key should see it within
  // seconds, not after the exponential backoff has grown to minutes.
  absl::Duration access_denied_max_backoff = absl::Seconds(10);
  // The shortest requeue_after a plugin's answer gets: a shorter one (1 ns, say) is raised to
  // it, so that a plugin cannot make one key spin (docs/protocol.md, requeue_after).
  absl::Duration min_requeue_after = absl::Milliseconds(100);
  common::Clock* clock = nullptr;  // borrowed; nullptr: Clock::Real()
};

// controller-runtime's `result` label values of controller_runtime_reconcile_total.
// Conflicts in a row on one key that are requeued at once; later ones back off.
inline constexpr int kMaxImmediateConflicts = 5;

enum class ReconcileResult { kSuccess, kError, kRequeue, kRequeueAfter, kTerminal };
inline constexpr int kReconcileResults = 5;
absl::string_view ReconcileResultLabel(ReconcileResult result);

// A consistent snapshot of one runner's metrics.
struct RunnerMetrics {
  std::string controller;
  std::array<uint64_t, kReconcileResults> reconciles{};  // indexed by ReconcileResult
  queue::DurationHistogram reconcile_time;               // dispatch + apply, per reconcile
  int active_workers = 0;                                // workers inside a reconcile now
  int max_workers = 0;
  size_t terminal_keys = 0;  // keys parked after a terminal outcome
  // Of those, the keys refused as NotControlled that wait for an object in the way to go.
  size_t blocked_keys = 0;
  std::string last_error;  // the last failed reconcile's status, "" when none yet
  // Its machine-readable reason (ApplyOutcome::reason: NotControlled, InvalidResponse, the
  // plugin's error reason, ...), "" when it had none.
  std::string last_error_reason;
  std::string last_error_key;
  absl::Time last_error_time = absl::InfinitePast();
  queue::QueueMetrics queue;

  uint64_t reconciles_for(ReconcileResult r) const { return reconciles[static_cast<int>(r)]; }
};

class Runner {
 public:
  // `info`, `dispatcher` and `applier` are borrowed and must outlive the runner. Errors:
  // kInvalidArgument when a source is missing, a watch's mapping or a strip_fields path is
  // invalid.
  static absl::StatusOr<std::unique_ptr<Runner>> Create(const ControllerInfo* info,
                                                        RunnerSources sources,
                                                        Dispatcher* dispatcher,
                                                        ResponseApplier* applier,
                                                        RunnerOptions options);
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  // Shuts down (without waiting for in-flight work beyond the workers' own bounds) and joins.
  ~Runner();

  const std::string& name() const { return info_->name; }

  // Starts the workers. Events may be handled before Start: their keys wait in the queue.
  // RESOURCE_EXHAUSTED when the system refuses every worker thread (fewer than asked: a
  // warning, and the runner works with those).
  absl::Status Start();
  // Stops handing out keys, waits up to `timeout` for reconciles in flight and returns the keys
  // that will never be reconciled now (logged, unless the runner was never started: a warm
  // standby's runner was not expected to run them). Idempotent (a second call returns nothing).
  std::vector<std::string> Shutdown(absl::Duration timeout);

  // Event adapters for Reflector::AddHandler (of the primary kind, of owned kind i, of watched
  // kind i). They call into the runner: remove them from the reflectors (RemoveHandler) before
  // destroying the runner.
  std::shared_ptr<watch::EventHandler> PrimaryHandler() const { return primary_handler_; }
  std::shared_ptr<watch::EventHandler> OwnedHandler(size_t i) const { return owned_handlers_[i]; }
  std::shared_ptr<watch::EventHandler> WatchHandler(size_t i) const { return watch_handlers_[i]; }
  size_t owned_count() const { return owned_handlers_.size(); }
  size_t watch_count() const { return watch_handlers_.size(); }

  // Queues `key` with `reason` (REASON_RESYNC, REASON_SCHEDULE, REASON_PLUGIN_STARTED), skipping
  // keys outside the namespaces and keys parked as terminal, except that
  // REASON_PLUGIN_STARTED unparks them (a swapped plugin may succeed). Returns whether it was
  // queued.
  bool Enqueue(absl::string_view key, pluginpb::Reason reason);
  // Queues every primary in the store, each after a random delay in [0, spread) so that a
  // resync does not arrive as one burst. Returns the number of keys queued.
  size_t EnqueueAll(pluginpb::Reason reason, absl::Duration spread = absl::ZeroDuration());
  // Like EnqueueAll, but only the keys for which `filter` is true (the key gate still applies).
  size_t EnqueueMatching(pluginpb::Reason reason, absl::Duration spread,
                         const std::function<bool(const cache::Object& primary)>& filter);
  // Sharding: queues the keys for which `filter` is true because this host has just acquired
  // them (a new shard view). Unlike EnqueueMatching it unparks terminal keys: one parked here
  // before its shard moved away and came back is retried once, as a new owner would retry it
  // (another host may have reconciled it, and the object changed, in between).
  size_t EnqueueAcquired(pluginpb::Reason reason,
                         const std::function<bool(const cache::Object& primary)>& filter);
  // How many primaries in the store the key gate says this host owns now (all without a gate).
  size_t CountOwned() const;
  bool sharded() const { return options_.key_gate != nullptr; }

  RunnerMetrics Metrics() const;
  // True once Shutdown has begun.
  bool ShuttingDown() const { return queue_.ShuttingDown(); }

 private:
  class Handler;
  struct Prepared;

  Runner(const ControllerInfo* info, RunnerSources sources, Dispatcher* dispatcher,
         ResponseApplier* applier, RunnerOptions options);

  // From the event adapters: clears the key's terminal state and queues it.
  void EnqueueFromEvent(const std::string& key, pluginpb::Reason reason,
                        queue::Priority priority = queue::Priority::kHigh);
  // The priority of an add for `reason` (low when catching up; high without priorities).
  queue::Priority PriorityOf(pluginpb::Reason reason, bool catching_up = false) const;
  void OnPrimaryDeleted(const cache::Object& object);
  // An object of owned kind `index` was deleted: the keys it blocked (NotControlled) are queued.
  void OnOwnedDeleted(size_t index, const cache::Object& object);
  // Records that `key` was refused because of `blocked_by`; queues it at once when one of them
  // is already gone from the cache (its delete event may have come before this record).
  void RecordBlocked(const std::string& key, const std::vector<BlockingObject>& blocked_by);
  void ForgetBlockedLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ObservePrimary(const cache::ObjectPtr& old_primary, const cache::ObjectPtr& new_primary);
  // In the namespaces and, with a key gate, this host's (`uid`: the primary's, when the caller
  // knows it; else ShardHashOf finds it).
  bool InNamespaces(absl::string_view key, absl::string_view uid = {}) const;
  // The shard hash of `key` (key_gate.h): of `uid` when given, else of the uid of the primary
  // in the cache or of the one last deleted from it; nullopt when no uid is known (no host's
  // key: its owner queues it when its cache receives the object).
  std::optional<uint64_t> ShardHashOf(absl::string_view key, absl::string_view uid = {}) const;
  // False when `key` is parked as terminal and `reason` does not lift that
  // (only REASON_PLUGIN_STARTED does, and then unparks it).
  bool UnparkLocked(absl::string_view key, pluginpb::Reason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EnqueueMatching and EnqueueAcquired; `acquired`: unpark every matching key.
  size_t EnqueueMatchingKeys(pluginpb::Reason reason, absl::Duration spread,
                             const std::function<bool(const cache::Object& primary)>& filter,
                             bool acquired);

  void WorkerLoop();
  // Logs (rate limited) that `key` waited longer than the queue's maxWait.
  void ReportOverdue(absl::string_view key);
  void ProcessKey(const std::string& key);
  // ProcessKey's steps. Whether this host may process `key` now (options_.key_gate); when not,
  // the key was forgotten or requeued as the gate said.
  bool PassKeyGate(const std::string& key);
  // Adds the controller's finalizer to a live primary that lacks it, before the request; then
  // `primary` and `context.primary` are the object with it. False when the key is done for now
  // (the primary is gone, or the write failed and the key was requeued).
  bool EnsureFinalizerBeforeRequest(const std::string& key, absl::Time start,
                                    cache::ObjectPtr& primary, ReconcileContext& context);
  // Acts on the outcome for a deleted primary (`deleted_uid`): only a failure to tell the plugin
  // is retried.
  void FinishDeleted(const std::string& key, const ApplyOutcome& outcome, absl::Duration took,
                     const std::string& deleted_uid);
  // Acts on the outcome for a live primary: forgets, requeues or parks the key.
  void Finish(const std::string& key, const ApplyOutcome& outcome, absl::Duration took);
  // Sends `call` and waits for the answer (bounded by deadline + dispatch_grace).
  DispatchResult DispatchAndWait(pluginpb::ReconcileCall call, absl::Time deadline);
  pluginpb::ReconcileCall BuildCall(const std::string& key, const cache::ObjectPtr& primary,
                                    absl::string_view uid, pluginpb::Reason reason,
                                    uint32_t attempt, absl::Time deadline) const;
  // Requeue helpers: record the key as lost when the queue is shut down.
  void Requeue(const std::string& key, bool ok);
  // AddRateLimited, capped at access_denied_max_backoff when `cause` is a 401/403, waiting at
  // least `retry_after` (the plugin's Error.retry_after; zero: none).
  bool AddAfterFailure(const std::string& key, const absl::Status& cause,
                       absl::Duration retry_after = absl::ZeroDuration());
  void Record(ReconcileResult result, const std::string& key, const absl::Status& status,
              absl::Duration took, const std::string& reason = "");

  // Constant after construction.
  const ControllerInfo* const info_;
  const RunnerSources sources_;
  Dispatcher* const dispatcher_;
  ResponseApplier* const applier_;
  const RunnerOptions options_;
  common::Clock* const clock_;
  // "key waited longer than maxWait": one line a minute at most (the dump and metrics count all).
  common::LogLimiter overdue_log_;
  const std::string primary_api_version_;
  std::vector<FieldPath> strip_;  // options_.strip_fields, parsed
  bool primary_metadata_only_ = false;
  std::vector<bool> owned_metadata_only_;               // parallel to info_->owns
  std::vector<bool> watch_metadata_only_;               // parallel to sources_.watches
  std::unique_ptr<Mapper> self_mapper_;                 // primary events -> own key
  std::unique_ptr<Mapper> owner_mapper_;                // owned kinds -> primary
  std::vector<std::unique_ptr<Mapper>> watch_mappers_;  // parallel to sources_.watches
  std::shared_ptr<watch::EventHandler> primary_handler_;
  std::vector<std::shared_ptr<watch::EventHandler>> owned_handlers_;
  std::vector<std::shared_ptr<watch::EventHandler>> watch_handlers_;

  queue::WorkQueue queue_;

  mutable common::Mutex mu_;
  common::CondVar workers_cv_;  // signalled when a worker exits
  // State below is protected by mu_.
  absl::flat_hash_map<std::string, pluginpb::Reason> reasons_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> terminal_ ABSL_GUARDED_BY(mu_);
  // NotControlled refusals: "owned index/namespace/name" of an object in the way -> the keys it
  // blocks, and back. A key leaves both when it is reconciled again or its primary goes.
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> blocked_by_object_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<std::string>> blocking_objects_ ABSL_GUARDED_BY(mu_);
  // Consecutive kRequeueNow outcomes per key (see kMaxImmediateConflicts).
  absl::flat_hash_map<std::string, int> conflicts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> deleted_uids_ ABSL_GUARDED_BY(mu_);
  // uid -> resourceVersion at which EnsureFinalizer succeeded.
  absl::flat_hash_map<std::string, std::string> finalizer_ensured_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> lost_ ABSL_GUARDED_BY(mu_);  // requeues refused after shutdown
  std::array<uint64_t, kReconcileResults> reconciles_ ABSL_GUARDED_BY(mu_){};
  queue::DurationHistogram reconcile_time_ ABSL_GUARDED_BY(mu_);
  int active_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int running_workers_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::string last_error_reason_ ABSL_GUARDED_BY(mu_);
  std::string last_error_key_ ABSL_GUARDED_BY(mu_);
  absl::Time last_error_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_RUNNER_H_
