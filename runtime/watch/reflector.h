// The reflector: keeps one cache::Store equal to the server's list of one resource.
//
// It is the watcher state machine of DESIGN.md §3 and the store's only writer:
//
//   kListing --ok--> kWatching --clean end (timeoutSeconds)--> kWatching (from the last version)
//      ^  |             |  \--connection error--> kBackoff --> kWatching (from the last version)
//      |  error         \--410 Gone / malformed event / unparsable object--> kListing
//      |  v
//    kBackoff (jittered exponential: 800 ms doubling to 30 s; reset after a healthy period;
//              at most 5 s after a 401/403, so a permission granted later takes effect soon)
//
// Guarantees:
// - After every list the store is replaced atomically and handlers receive exactly the
//   differences (adds, updates, and deletes of objects that vanished while disconnected).
// - Watch events update the store first, then call the handlers, in server order.
// - Bookmarks and events keep ResourceVersion() fresh, so a re-watch rarely needs a relist.
// - A watch that delivers nothing for `watch_timeout + watch_grace` is closed by a watchdog
//   and re-established (the server normally ends it at timeoutSeconds already).
// - Malformed events are logged and cause a relist; no input crashes the reflector.
// - Failures are visible: Metrics() says since when the watch has been failing (from the first
//   failed list or watch after a success until a list succeeds or a watch opens), with the last
//   error's code and the server's own message (a 403 names the verb, resource and namespace).
//   A log line (warning) names the watch on its first failure, when the error changes and at
//   most once per `failure_log_interval` meanwhile; a recovery, a 410 Gone and the relist after
//   it each log an info line (410s at most once per interval, with a count of the others).
// Assumptions: handlers do not block (they run on the reflector thread, in order) and do not
// call AddHandler/RemoveHandler.
//
// Sharding (ReflectorOptions::shard, see shard_scope.h): the reflector caches only the objects
// whose ShardHashOf(object, shard_by) is in the scope's ranges.
// - Every list takes the scope's ranges first and keeps only the objects in them, whatever the
//   server sent: correctness never depends on the server. For ShardBy::kUid with ranges short
//   of the whole hash space it also sends them as KEP-5866's `shardSelector` on the list pages
//   and the watch; if the server applied it (the first page's shardInfo) the mode is "server",
//   else "client" (also for kOwnerUid, whole-space ranges, a selector past the server's limits,
//   and a server that refused the selector with 422: the list is then made again without it).
// - Label mode (ShardScope::EnableLabels, kUid only): when the server did not apply the shard
//   selector (or refused it, or it is too long) the list pages and the watch select the scope's
//   buckets by label instead (`<key> in (...)`, joined to `label_selector` with a comma): mode
//   "label". The scope's generation remembers it: later lists of the same generation go
//   straight to labels. Objects received with a missing or wrong bucket label are reported to
//   the scope's mislabeled handler (and still filtered by range). Labels never cause a false
//   deletion: a DELETED event without the right label means the object left the selector, so
//   a stored object is updated (OnUpdate) and reported instead; a relist confirms each stored
//   object in range missing from the new list with a name-scoped list (at most 100; past that
//   one list without the bucket selector) and keeps the ones that still exist. Objects kept
//   without the right label are outside the watch's selector (a deletion sends no event): each
//   re-watch confirms them the same way, and those gone leave (OnDelete).
// - Watch events of objects outside the ranges are ignored, except that an object the store
//   holds leaves it (OnDelete with the stored state) when an ADDED/MODIFIED event shows it
//   outside (its controller owner changed) and a DELETED event deletes it as usual.
// - A change of the scope (a new generation) closes the watch and lists again at once, without
//   backoff (cutting a backoff short): handlers get adds for objects now in range and deletes
//   for those that left. A change during a list is seen when the list ends and lists again.
// - Nothing in scope (generation 0, never set, or no ranges): neither list nor watch is made;
//   the store is emptied (deletes to the handlers) and synced with resourceVersion "", so
//   WaitForSync returns, and the reflector waits (state Watching, no stream open) for the scope
//   to change.
//
//   watch::Reflector reflector(std::move(lister_watcher), {.description = "v1/configmaps"});
//   reflector.AddHandler(my_handler);
//   reflector.Start();
//   reflector.WaitForSync(absl::Seconds(30));
//   auto objects = reflector.store().List();
#ifndef CTRLHOST_RUNTIME_WATCH_REFLECTOR_H_
#define CTRLHOST_RUNTIME_WATCH_REFLECTOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/cache/object.h"
#include "runtime/cache/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/watch/lister_watcher.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::watch {

// Consumers of a reflector's changes. Called on the reflector thread, one call at a time, in
// order: implementations must not block (enqueue keys and return).
class EventHandler {
 public:
  virtual ~EventHandler() = default;
  // `initial` is true for objects of the first list and for the replay of AddHandler.
  virtual void OnAdd(const cache::ObjectPtr& object, bool initial) = 0;
  virtual void OnUpdate(const cache::ObjectPtr& old_object, const cache::ObjectPtr& object) = 0;
  // `object` is the last state the reflector knew (from the DELETED event or the store).
  virtual void OnDelete(const cache::ObjectPtr& object) = 0;
};

struct ReflectorOptions {
  std::string description;  // for logs and metrics, e.g. "apps/v1 Deployment ns=default"
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  absl::Duration watch_timeout = absl::Minutes(5);  // sent as timeoutSeconds
  absl::Duration watch_grace = absl::Seconds(30);   // watchdog slack beyond the timeout
  absl::Duration initial_backoff = absl::Milliseconds(800);
  absl::Duration max_backoff = absl::Seconds(30);
  // Each delay is multiplied by a uniform factor in [1 - jitter, 1] (never above max_backoff).
  double jitter = 0.2;
  // After this long without a failure the next failure starts from initial_backoff again.
  absl::Duration backoff_reset_after = absl::Minutes(2);
  // Cap on the delay after a 401 Unauthorized or 403 Forbidden: RBAC is often fixed while the
  // host runs, and the fix should not wait out a long backoff.
  absl::Duration auth_max_backoff = absl::Seconds(5);
  // Repeated failure (and 410 Gone) log lines of one watch are limited to one per interval.
  absl::Duration failure_log_interval = absl::Minutes(1);
  cache::ParseOptions parse;
  // Cache only this shard (see the top of the file); null: everything. Shared with the host's
  // shard ring, which sets its ranges.
  std::shared_ptr<ShardScope> shard;
  ShardBy shard_by = ShardBy::kUid;
  common::Clock* clock = nullptr;  // borrowed; nullptr: Clock::Real()
  uint64_t seed = 0;               // jitter seed; 0: random
};

enum class ReflectorState { kNotStarted, kListing, kWatching, kBackoff, kStopped };
absl::string_view ReflectorStateName(ReflectorState state);

// Plain counters, copied out under the reflector's lock.
struct ReflectorMetrics {
  std::string description;
  ReflectorState state = ReflectorState::kNotStarted;
  size_t objects = 0;
  size_t bytes = 0;              // JSON bytes held (after stripping)
  size_t memory_bytes = 0;       // approximate heap bytes of the cached objects
  uint64_t events_total = 0;     // watch events received and parsed (bookmarks excluded)
  double events_per_second = 0;  // over the last completed 10 s window
  uint64_t bookmarks_total = 0;
  uint64_t relists_total = 0;  // lists after the first
  uint64_t lists_total = 0;
  uint64_t watches_total = 0;       // watch streams opened
  uint64_t errors_total = 0;        // failed lists/watches and broken streams
  uint64_t parse_errors_total = 0;  // malformed events and unparsable list items
  uint64_t watchdog_closes_total = 0;
  std::string resource_version;
  bool synced = false;
  std::string last_error;       // the most recent failure, as absl::Status::ToString()
  absl::Duration last_backoff;  // the most recent backoff delay
  // Set by the first failed list or watch after a success; cleared when a list succeeds or the
  // server accepts a watch (not when a stream is merely created: it may connect later and
  // fail). `failing_since` is on the reflector's clock.
  bool failing = false;
  absl::Time failing_since = absl::InfinitePast();
  uint64_t consecutive_failures = 0;
  // The most recent failure's code (kPermissionDenied for 403, kUnauthenticated for 401,
  // kUnavailable for an unreachable server) and message (for API errors the server's Status
  // message, e.g. `configmaps is forbidden: User "x" cannot list resource "configmaps" ...`).
  absl::StatusCode last_error_code = absl::StatusCode::kOk;
  std::string last_error_message;
  // Sharding (empty and zero without a scope). "server": the server applies the selector;
  // "label": the server selects the shard's bucket labels; "client": the reflector filters
  // alone. Known after the first list that had ranges.
  std::string shard_mode;
  uint64_t shard_generation = 0;      // the scope generation of the last list
  uint64_t shard_filtered_total = 0;  // listed objects and watch events dropped out of scope
  uint64_t shard_relists_total = 0;   // lists made because the scope changed
  // Label mode: objects reported to the mislabeled handler, and lists made to confirm that an
  // object a relist did not return still exists (one per name, or one full list past 100).
  uint64_t shard_mislabeled_total = 0;
  uint64_t shard_label_checks_total = 0;
};

// True for the failures a reflector reports as denied access (401 Unauthorized, 403 Forbidden).
bool IsAccessDenied(absl::StatusCode code);

// Thread-safe. Start/Stop/AddHandler/RemoveHandler/Metrics/WaitForSync may be called from any
// thread (not from a handler). mu_ guards the run state and metrics; dispatch_mu_ serialises
// store writes with handler calls, so a newly added handler sees each object exactly once.
class Reflector {
 public:
  Reflector(std::shared_ptr<ListerWatcher> lister_watcher, ReflectorOptions options);
  ~Reflector();  // Stop()s
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // Starts the reflector thread. Idempotent; a stopped reflector does not restart.
  void Start();
  // Stops and joins the thread: no handler runs after it returns. Idempotent.
  void Stop();

  const cache::Store& store() const { return store_; }
  bool HasSynced() const { return store_.HasSynced(); }
  // Waits (real time) until synced and the first list was dispatched to the handlers, or
  // `timeout`; true when so.
  bool WaitForSync(absl::Duration timeout) const;

  // Registers a handler and replays the current objects to it as OnAdd(initial=true), under
  // the dispatch lock so it misses and doubles nothing. Returns an id for RemoveHandler.
  int AddHandler(std::shared_ptr<EventHandler> handler);
  // After it returns the handler is never called again.
  void RemoveHandler(int id);

  ReflectorMetrics Metrics() const;
  ReflectorState state() const;

 private:
  enum class WatchEnd { kContinue, kRewatch, kRelistNow, kRelistAfterBackoff, kBackoff, kStopped };

  // One complete list, parsed and filtered to the scope.
  struct Listed {
    std::vector<cache::ObjectPtr> objects;
    std::string resource_version;
    bool shard_applied = false;  // the server applied the shard selector (first page)
    bool label_mode = false;     // selected by bucket label
    uint64_t parse_errors = 0;
    uint64_t filtered = 0;
  };

  void Run();
  void Watchdog();
  absl::Status ListAndReplace();
  // All pages of one list into `*out`; falls back from a shard selector the server refused
  // or ignored (to labels when usable). `*options` ends with the selectors the list used.
  absl::Status ListPages(const ShardScope::Snapshot& shard, ListOptions* options, Listed* out);
  // All items of a list (every page) without scope filtering (unparsable ones skipped).
  absl::StatusOr<std::vector<cache::ObjectPtr>> ListAllItems(ListOptions options);
  // --- Label mode (reflector_label.cc).
  // Whether `shard` lets this reflector select by bucket label.
  bool LabelsUsable(const ShardScope::Snapshot& shard) const;
  // The selectors of a new list for `shard`: the shard selector, or labels straight away.
  void PlanShardList(const ShardScope::Snapshot& shard, ListOptions* options, Listed* listed);
  // Switches a list to label mode after the server ignored or refused the shard selector.
  void UseLabels(const ShardScope::Snapshot& shard, ListOptions* options, Listed* listed);
  // Adds to `*objects` the stored objects in range that the label-selected list did not return
  // but that still exist (their labels changed): no false deletions on a relist. The keys of
  // those still without the right label go to `*outside`.
  absl::Status KeepRelabeled(const ShardScope::Snapshot& shard,
                             std::vector<cache::ObjectPtr>* objects,
                             absl::flat_hash_set<std::string>* outside);
  // The fresh state, by uid, of those of `stored` that still exist under the reflector's own
  // selectors (a name-scoped list each, or one list past kMaxLabelChecks).
  absl::StatusOr<absl::flat_hash_map<std::string, cache::ObjectPtr>> StillExisting(
      const std::vector<cache::ObjectPtr>& stored);
  // Deletes the objects of outside_selector_ that no longer exist (before a re-watch).
  void ConfirmOutsideSelector();
  // A DELETED event without the right label: the object left the selector, it was not deleted.
  void HandleMislabeledDelete(const cache::ObjectPtr& object);
  // A DELETED event with the right label, in label mode, of a stored object. Kubernetes 1.20
  // sends an object that left a label-selected watch as DELETED with its *previous* state (the
  // label it had), so the event alone cannot tell: a name-scoped list does. True when the
  // object still exists (kept, with its fresh state); false when it is gone. An error when the
  // list failed (the caller relists, which confirms it).
  absl::StatusOr<bool> KeptAfterDelete(const cache::ObjectPtr& object);
  void ReportMislabeled(const cache::Object& object);
  // The selector to send for `ranges` ("" for none: kOwnerUid, whole space, or too long).
  std::string ShardSelectorFor(const std::vector<HashRange>& ranges) const;
  // Sharding bookkeeping after a successful list (mode, generation, its log line).
  void RecordShardList(const ShardScope::Snapshot& shard, absl::string_view mode,
                       uint64_t filtered);
  // Whether the scope moved past the generation of the last list.
  bool ShardMoved() const;
  // Nothing in scope: waits until the scope may have changed; false when stopping.
  bool WaitForShardChange();
  // The scope's listener: ends the watch (or a backoff) so that Run lists again.
  void OnShardChange();
  // One watch from the store's resourceVersion until it ends; `*cause` says why, if not cleanly.
  WatchEnd WatchOnce(absl::Status* cause);
  WatchEnd HandleEvent(const WatchEvent& event, absl::Status* cause);
  // Waits the next backoff delay on the clock; false when stopping.
  bool Backoff(const absl::Status& cause);
  // Failure bookkeeping and its rate-limited log line; `now` is the clock's.
  void RecordFailure(const absl::Status& cause, absl::Time now, absl::Duration delay)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A list succeeded or a watch opened: ends a failing period (logged once).
  void RecordSuccess(absl::string_view what);
  // A 410 Gone: logs (rate-limited) and remembers that the next list is a relist after it.
  void RecordGone(const absl::Status& cause);
  bool Stopping() const;
  void SetState(ReflectorState state);
  void CountEvent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(const cache::StoreDiff& diff, bool initial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(dispatch_mu_);

  // Constant after construction.
  const std::shared_ptr<ListerWatcher> lister_watcher_;
  const ReflectorOptions options_;
  common::Clock* const clock_;

  // Written only by the reflector thread (Store is itself thread-safe for readers).
  cache::Store store_;
  cache::ObjectParser parser_;  // reflector thread only

  // The scope of the last successful list and the selectors it sent (reflector thread only):
  // the watch sends the same. `label_mode_` holds the scheme when the list selected by label.
  ShardScope::Snapshot listed_shard_;
  std::string shard_selector_;
  std::string label_selector_;
  std::optional<ShardLabels> label_mode_;
  // The scope generation whose server did not apply the shard selector (0: none), and whether
  // that was logged (once per reflector).
  uint64_t no_shard_selector_generation_ = 0;
  bool logged_no_shard_selector_ = false;
  // Label mode: stored objects last seen without the right label, so outside the watch's
  // selector: their deletion would send no event, so each re-watch confirms they still exist.
  absl::flat_hash_set<std::string> outside_selector_;

  common::Mutex lifecycle_mu_;  // serialises Start and Stop (thread creation and joins)
  int shard_listener_ ABSL_GUARDED_BY(lifecycle_mu_) = 0;  // 0: none registered

  mutable common::Mutex dispatch_mu_;
  std::vector<std::pair<int, std::shared_ptr<EventHandler>>> handlers_
      ABSL_GUARDED_BY(dispatch_mu_);
  int next_handler_id_ ABSL_GUARDED_BY(dispatch_mu_) = 1;

  mutable common::Mutex mu_;
  mutable common::CondVar cv_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set after the first list's events were dispatched (the store is synced slightly earlier,
  // at its swap), so WaitForSync's callers see the handlers' initial adds.
  bool initial_list_dispatched_ ABSL_GUARDED_BY(mu_) = false;
  ReflectorState state_ ABSL_GUARDED_BY(mu_) = ReflectorState::kNotStarted;
  WatchStream* stream_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open watch, owned by WatchOnce
  absl::Time watch_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_failure_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_failure_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string last_logged_error_ ABSL_GUARDED_BY(mu_);
  uint64_t unlogged_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_gone_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t unlogged_gones_ ABSL_GUARDED_BY(mu_) = 0;
  bool relist_after_gone_ ABSL_GUARDED_BY(mu_) = false;  // the next list follows a 410
  // Set by the scope's listener, cleared when a list starts: wakes a backoff or an idle wait.
  bool shard_wakeup_ ABSL_GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  ReflectorMetrics metrics_ ABSL_GUARDED_BY(mu_);
  absl::Time window_start_ ABSL_GUARDED_BY(mu_);
  uint64_t window_events_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
  std::thread watchdog_;
};

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_REFLECTOR_H_
