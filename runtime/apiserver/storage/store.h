// The durable storage engine of ctrlhost's embedded Kubernetes-compatible API server: the role
// kine plays for k3s, in-process.
//
// Every write gets the next value of one global revision, which is the resourceVersion of the
// object it produces and of the list it appears in. A write is acknowledged only once its SQLite
// transaction (WAL mode, PRAGMA synchronous=FULL by default) has committed. The current state is
// held in memory for reads that never wait for the disk; history lives in SQLite as a log of
// every version (like kine's table) and serves lists at a past revision and watches that start
// before the in-memory event window. Compaction drops history older than a revision.
//
//   StoreOptions options;
//   options.path = "/var/lib/ctrlhost/state.db";
//   ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(std::move(options)));
//   // Create-if-absent: the mutator decides from the current state.
//   ASSIGN_OR_RETURN(ObjectPtr created, store->Write("/core/configmaps/ns/a",
//       [&](const StoredObject* current, int64_t revision) -> absl::StatusOr<Mutation> {
//         if (current != nullptr) return kube::AlreadyExistsError("", "configmaps", "a");
//         return Mutation{Mutation::Op::kPut, WithResourceVersion(body, revision)};
//       }));
//   ASSIGN_OR_RETURN(auto watch, store->Watch("/core/configmaps/", created->mod_revision));
//
// Guarantees:
// - Revisions strictly increase in commit order and are never reused, also across restarts,
//   deletes and compaction. A revision that failed to commit may be skipped (gaps are allowed).
// - Write() returns only after the write is durable (survives kill -9; with sync_full also power
//   loss) and after Get/List/Watch reflect it (read-your-writes).
// - Each watcher sees every matching event after its start revision exactly once, in revision
//   order, or gets an error (kube::GoneError) it can recover from by relisting.
// - A List at a past revision R shows exactly the state after the write with revision R.
//
// Keys are opaque byte strings; byte order is list order. Callers choose keys so that prefixes
// select what they list and watch (e.g. "/<group>/<resource>/<namespace>/<name>").
#ifndef CTRLHOST_RUNTIME_APISERVER_STORAGE_STORE_H_
#define CTRLHOST_RUNTIME_APISERVER_STORAGE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"

namespace ctrlhost::apiserver {

namespace internal {
class StoreCore;
class WatchHub;
class ReadPool;
}  // namespace internal

using Labels = std::map<std::string, std::string>;  // same type as kube::Labels

// One version of an object as stored. Immutable once published; shared by readers.
struct StoredObject {
  std::string key;          // chosen by the caller; byte order = list order
  int64_t create_revision;  // revision of the write that created it
  int64_t mod_revision;     // revision of the write that produced this version (resourceVersion)
  std::string value;        // JSON bytes exactly as the mutator produced them
  Labels labels;            // from StoreOptions::extract_labels(value)
  // Read from disk with a checksum that does not match its key and value (a flipped byte):
  // `value` must not be served (labels are empty). Never set on objects written since Open.
  bool corrupt = false;
};
using ObjectPtr = std::shared_ptr<const StoredObject>;

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type;
  // State after; for kDeleted the final state the mutator gave (mod_revision = the delete's).
  ObjectPtr object;
  // State before; null for kAdded (lets a filtered watch turn "left the selector" into a delete).
  ObjectPtr previous;
};

struct Mutation {
  enum class Op { kPut, kDelete, kNoop };
  Mutation() = default;
  Mutation(Op op_in, std::string value_in, std::optional<Labels> labels_in = std::nullopt)
      : op(op_in), value(std::move(value_in)), labels(std::move(labels_in)) {}

  Op op = Op::kNoop;
  std::string value;  // kPut: the new JSON; kDelete: the final state shown to watchers, returned
  // The labels of `value` when the caller already knows them (it built the object): the store
  // then does not run StoreOptions::extract_labels on its writer thread. Must be what
  // extract_labels(value) would return. Unset: extracted. Ignored for kNoop and for a kDelete
  // with an empty value (which keeps the current object and its labels).
  std::optional<Labels> labels;
};

// Decides one write from the current state (nullptr if absent). Runs on the store's writer
// thread, serialized with every other write, so `current` cannot change under it; it must be
// quick, must not block and must not call the store. `revision` is the revision this write
// will get (the mutator writes it into metadata.resourceVersion). An error aborts this write
// only and is returned by Write() unchanged. kDelete of an absent key is kFailedPrecondition.
// `current` is valid only during the call.
using Mutator =
    std::function<absl::StatusOr<Mutation>(const StoredObject* current, int64_t revision)>;

struct StoreOptions {
  std::string path;  // SQLite file (created if missing)
  // PRAGMA synchronous=FULL (fsync each commit) vs NORMAL (survives kill -9, not power loss).
  bool sync_full = true;
  int64_t retained_revisions = 10000;  // the background compactor keeps at least this history
  absl::Duration compaction_interval = absl::Minutes(1);  // 0 disables the background compactor
  size_t watch_window_events = 100000;  // most recent events kept in memory for watchers
  // Bytes of object versions that window may hold: past it the oldest events leave memory
  // (a watcher behind them continues from SQLite history), so repeated writes of a large
  // object cannot grow memory without bound. 0: no byte bound.
  size_t watch_window_bytes = 128 << 20;
  // Bytes of versions kept as history (counted from Open): past it the oldest revisions are
  // compacted at once, whatever retained_revisions says, and lists and watches from before
  // them get 410 Gone (as after etcd's compaction). 0: no byte bound.
  size_t retained_history_bytes = size_t{1} << 30;
  // Labels of an object, for selector filtering without parsing. May be empty: no labels. Runs
  // on the writer thread (and on readers of history); must not throw.
  std::function<Labels(absl::string_view json)> extract_labels;
  common::Clock* clock = common::Clock::Real();  // borrowed; must outlive the store
  // May be empty. Called on the writer thread after each committed batch is published to
  // watchers, outside the store's locks (an event loop wakes its watches). Must be quick and
  // must not call the store.
  std::function<void()> on_publish;
};

// A stream of events for one key prefix, from a start revision.
//
// Thread-safety: one consumer calls Next(); Stop() may be called from any thread. A Watch may
// outlive its Store: Next() then returns kCancelled.
class Watch {
 public:
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Waits until events exist, `deadline` (on the store's clock) passes, or Stop()/store
  // shutdown. Returns up to `max_events` (0 = no limit) events in revision order, empty on
  // timeout. `*progress_revision` (may be null) is set to a revision R such that every
  // matching event <= R has been returned (for bookmarks). A consumer that falls out of the
  // memory window continues from SQLite history if it can, or gets kube::GoneError. After
  // Stop()/shutdown: absl::CancelledError.
  absl::StatusOr<std::vector<WatchEvent>> Next(absl::Time deadline, size_t max_events,
                                               int64_t* progress_revision);
  // Thread-safe; wakes Next.
  void Stop();

 private:
  friend class Store;
  struct State;
  explicit Watch(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

// Thread-safe: every method may be called from any thread.
class Store {
 public:
  // Opens or creates the database at options.path and rebuilds the current state. A file that
  // is not a SQLite database or is corrupt is kDataLoss; a database another process (or
  // another Store in this process) has open is kFailedPrecondition.
  static absl::StatusOr<std::unique_ptr<Store>> Open(StoreOptions options);
  // Stops background threads; writes still queued fail with kUnavailable; watches are
  // cancelled.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Applies `mutator` to `key` atomically and returns once the write is durable: the new
  // object (kPut), the final state (kDelete), or the current object, possibly null (kNoop).
  // kUnavailable when the store is closing; the SQLite error when the commit failed.
  absl::StatusOr<ObjectPtr> Write(absl::string_view key, Mutator mutator);

  ObjectPtr Get(absl::string_view key) const;  // current committed state; null if absent
  int64_t Revision() const;                    // latest committed revision (0 when empty)
  int64_t CompactedRevision() const;           // history at or below this is gone

  struct ListOptions {
    std::string prefix;     // keys starting with it
    std::string after_key;  // exclusive start (continue tokens); "" = from the beginning
    size_t limit = 0;       // 0 = no limit; counts items that pass `filter`
    // 0 = current state; else the state as of that revision, which must be
    // > CompactedRevision() (else kube::GoneError) and <= Revision() (else a kube 504
    // Timeout "Too large resource version", reason ResourceVersionTooLarge).
    int64_t revision = 0;
    // May be empty. Called under a store lock: must be quick and must not call the store.
    std::function<bool(const StoredObject&)> filter;
  };
  struct ListResult {
    std::vector<ObjectPtr> items;  // key order
    int64_t revision = 0;          // the revision the list reflects (resourceVersion)
    bool more = false;             // more matching items exist after `last_key`
    std::string last_key;          // key of the last item returned
  };
  absl::StatusOr<ListResult> List(const ListOptions& options) const;

  // Events of keys with `prefix` and revision > from_revision, in revision order. Starts from
  // memory when the window still holds from_revision+1, else from SQLite history, else (older
  // than CompactedRevision()) kube::GoneError("too old resource version: X (Y)").
  // from_revision > Revision() is the 504 "Too large resource version" error.
  absl::StatusOr<std::unique_ptr<apiserver::Watch>> Watch(absl::string_view prefix,
                                                          int64_t from_revision);

  // Keeps the latest version of each key; drops older history and tombstones <= revision.
  // Returns once done (the work is done in bounded chunks between write batches). A revision
  // at or below CompactedRevision() is a no-op; above Revision() is kInvalidArgument.
  absl::Status Compact(int64_t revision);

  struct Stats {
    int64_t revision;
    int64_t compacted_revision;
    int64_t objects;             // live keys
    int64_t bytes;               // sum of the live objects' value sizes
    int64_t commits;             // SQLite transactions committed by the writer since Open
    int64_t writes;              // writes that produced a revision since Open
    int64_t watchers;            // open Watch objects
    int64_t queued_writes;       // writes waiting for the writer thread (added to the agreed API)
    int64_t watch_window_bytes;  // object bytes the in-memory watch window holds
  };
  Stats GetStats() const;

 private:
  explicit Store(std::unique_ptr<internal::StoreCore> core);

  std::unique_ptr<internal::StoreCore> core_;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_STORAGE_STORE_H_
