// An in-memory ListerWatcher for tests: a tiny API server for one resource (ConfigMap-like
// objects) with history, pagination, and switches for every fault a reflector must survive.
//
//   FakeListerWatcher server;
//   server.Set("ns", "a", "v1");                  // ADDED to open watches
//   server.BreakWatches(absl::UnavailableError("connection reset"));
//   server.Compact();                             // older versions now answer 410 Gone
//   EXPECT_EQ(StoreJson(store), server.Snapshot());
//
// Label selectors (kube::LabelSelector's full syntax) and field selectors on metadata.name and
// metadata.namespace apply as on a real server (anything else is a 400): a watch sends an object
// that comes into its selectors as ADDED and one that leaves them as DELETED with its new state.
// A KEP-5866 shard selector is ignored (as by a server without the feature) unless
// SetShardSelectorSupport(true): then lists and watches return only the objects whose
// metadata.uid hashes into it, lists say so (shard_applied), and an invalid selector is a 422
// (kInvalidArgument). Objects made by Set have the uid "uid-<ns>/<name>" (or, after
// SetUidPrefix(p), "<p><ns>/<name>"). Thread-safe: every method may be called from any thread;
// mu_ guards the server state, each stream's own mutex guards its queue.
#ifndef CTRLHOST_RUNTIME_WATCH_FAKE_LISTER_WATCHER_H_
#define CTRLHOST_RUNTIME_WATCH_FAKE_LISTER_WATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/watch/lister_watcher.h"

namespace ctrlhost::watch {

class FakeListerWatcher : public ListerWatcher {
 public:
  FakeListerWatcher() = default;
  ~FakeListerWatcher() override;

  absl::StatusOr<ListPage> List(const ListOptions& options) override;
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(const WatchOptions& options) override;

  // --- Server-side changes (each gets the next resourceVersion and an event).
  // Creates or updates ns/name with data {"value": value} and metadata.labels `labels` (none
  // when empty); returns the stored JSON.
  std::string Set(const std::string& ns, const std::string& name, const std::string& value,
                  const std::map<std::string, std::string>& labels = {});
  void Delete(const std::string& ns, const std::string& name);

  // Objects created from now on get uids "<prefix><ns>/<name>" (a deleted object re-created
  // with another uid).
  void SetUidPrefix(const std::string& prefix);

  // The server's current objects, sorted by key: what a correct cache must equal.
  std::map<std::string, std::string> Snapshot() const;
  int64_t resource_version() const;

  // --- Faults.
  // The next `n` List or Watch calls fail with `status`.
  void FailNextCalls(int n, absl::Status status);
  // While missing, List and Watch answer 404 (a kind whose CRD does not exist yet).
  void SetResourceMissing(bool missing);
  // Forgets the history: a watch from an older version gets 410 Gone.
  void Compact();
  // Watch failures injected by FailNextCalls come as the stream's first item instead of from
  // Watch(), and the watch is never established (a client that connects in the stream, as
  // KubeListerWatcher does).
  void SetLazyConnect(bool lazy);
  // Report Gone as an HTTP 410 from Watch() instead of a first ERROR event (the default).
  void SetGoneAsHttpError(bool http_error);
  // Continue tokens handed out so far answer 410 Gone.
  void ExpireContinueTokens();
  // The next List call that passes a continue token answers 410 Gone (expired mid-list).
  void ExpireNextContinueToken();
  // Open streams fail with `status` (after nothing more: undelivered events are lost, as with
  // a connection dropped mid-chunk).
  void BreakWatches(absl::Status status);
  // Open streams end cleanly, as when the server's timeoutSeconds passes.
  void EndWatches();
  // Delivers a raw event to open streams (a malformed object, an ERROR Status, ...).
  void InjectEvent(WatchEvent event);
  // Open streams return `status` next (e.g. kDataLoss for a malformed line) but stay open.
  void InjectStreamError(absl::Status status);
  // Open streams go silent: they deliver nothing more and never end by themselves (a hung
  // connection); only Close() (the client's watchdog) ends them. New streams are healthy.
  void HangWatches();
  // As a server with KEP-5866's sharded list and watch (see the top of the file).
  void SetShardSelectorSupport(bool supported);
  // An object leaving a watch's selectors is sent as DELETED with its previous state (the
  // labels it had), as Kubernetes 1.20's watch cache does; by default with its new state.
  void SetSelectorExitSendsPreviousState(bool previous);
  // `hook` runs once, at the start of the next List call, without the lock (a test's way to
  // change something while a list is in progress).
  void OnNextList(std::function<void()> hook);
  // Sends a BOOKMARK with the current resourceVersion to open streams.
  void SendBookmark();
  // A server restart: open watches break (kUnavailable), the next `failures` calls fail with
  // kUnavailable, and with `lose_history` older versions answer 410.
  void Restart(int failures, bool lose_history);

  // --- Observations.
  int list_calls() const;
  int watch_calls() const;
  int open_watches() const;
  ListOptions last_list_options() const;
  WatchOptions last_watch_options() const;
  // Waits (real time, bounded) until at least `n` Watch calls succeeded.
  bool WaitForWatchCalls(int n, absl::Duration timeout) const;

  struct StreamState;
  // What a list or watch selects (constant once made).
  struct Filter;

 private:
  struct Change {
    int64_t rv = 0;
    WatchEvent event;
    std::string previous;  // the object's state before a MODIFIED; "" otherwise
  };

  absl::StatusOr<std::unique_ptr<WatchStream>> OpenStream(const WatchOptions& options,
                                                          bool* established);
  absl::Status TakeInjectedFailure() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(EventType type, const std::string& object, const std::string& previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The selectors a list or watch applies (the shard selector only when supported); a 400 for
  // a malformed label or field selector, a 422 for a malformed shard selector.
  absl::StatusOr<std::shared_ptr<const Filter>> MakeFilter(const std::string& label_selector,
                                                           const std::string& field_selector,
                                                           const std::string& shard_selector) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PruneStreams() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable common::Mutex mu_;
  mutable common::CondVar watch_cv_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 100;
  int64_t compacted_rv_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> objects_ ABSL_GUARDED_BY(mu_);
  std::deque<Change> history_ ABSL_GUARDED_BY(mu_);
  std::string uid_prefix_ ABSL_GUARDED_BY(mu_) = "uid-";
  std::map<int64_t, std::pair<std::string, std::vector<std::string>>> snapshots_
      ABSL_GUARDED_BY(mu_);  // continue id -> {rv, items}
  int64_t next_snapshot_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::shared_ptr<StreamState>> streams_ ABSL_GUARDED_BY(mu_);
  int failures_left_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool missing_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_as_http_ ABSL_GUARDED_BY(mu_) = false;
  bool lazy_connect_ ABSL_GUARDED_BY(mu_) = false;
  bool expire_next_token_ ABSL_GUARDED_BY(mu_) = false;
  bool shard_support_ ABSL_GUARDED_BY(mu_) = false;
  bool exit_previous_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> next_list_hook_ ABSL_GUARDED_BY(mu_);
  ListOptions last_list_options_ ABSL_GUARDED_BY(mu_);
  int list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int watch_calls_ ABSL_GUARDED_BY(mu_) = 0;
  WatchOptions last_watch_options_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_FAKE_LISTER_WATCHER_H_
