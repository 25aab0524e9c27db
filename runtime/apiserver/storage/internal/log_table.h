// The SQLite schema of the storage engine and every query on it.
//
// The database is a log, like kine's: one row per write, never updated in place.
//
//   log(rev INTEGER PRIMARY KEY,   -- the write's revision
//       key TEXT, created INT (1 when the write created the key), deleted INT (1 for a delete),
//       create_rev INT, prev_rev INT (the key's previous row, 0 when created),
//       value BLOB,                -- the object's JSON; for a delete its final state
//       checksum INT)              -- ValueChecksum(key, value); NULL in rows of schema 1
//   index log_key_rev ON log(key, rev)
//   meta(name TEXT PRIMARY KEY, value INT): schema_version, revision (highest revision ever
//       handed out as of the last compaction), compacted, compact_progress
//
// The latest row of a key that is not a delete is its current state. Revisions are never
// reused: at open the next revision is above max(meta.revision, max(log.rev)), and compaction
// stores the revision before it can remove the highest row (a tombstone).
//
// Compaction to C (meta.compacted = C, then chunks): every row s with rev in (progress, C]
// deletes the row it superseded (s.prev_rev) and, if s is a delete, itself. What remains at or
// below C is the latest live row of each key, which is exactly what history above C refers to.
//
// Thread-safety: LogWriter is used by one thread at a time (the store's writer thread).
// Reader functions take a connection checked out of a ReadPool, which is thread-safe.
#ifndef CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_LOG_TABLE_H_
#define CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_LOG_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/apiserver/storage/internal/sqlite.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver::internal {

using LabelExtractor = std::function<Labels(absl::string_view json)>;

// Builds a StoredObject, extracting labels when an extractor is set.
ObjectPtr MakeObject(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                     std::string value, const LabelExtractor& extract_labels);
// FNV-1a (64 bits) of key, a NUL byte and value: any single changed byte changes it.
int64_t ValueChecksum(absl::string_view key, absl::string_view value);

// MakeObject for a row read from disk: when `checksum_is_null` is false and `checksum` does
// not match, the object is marked corrupt (no labels extracted) and the problem logged.
ObjectPtr MakeCheckedObject(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                            std::string value, bool checksum_is_null, int64_t checksum,
                            const LabelExtractor& extract_labels);

// Builds a StoredObject whose labels are known.
ObjectPtr MakeObject(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                     std::string value, Labels labels);

// One row to append. Views must stay valid until Append returns.
struct LogEntry {
  int64_t rev;
  absl::string_view key;
  bool created;
  bool deleted;
  int64_t create_rev;
  int64_t prev_rev;
  absl::string_view value;
};

// What Open found in the database.
struct LoadedState {
  std::vector<ObjectPtr> objects;  // live objects, key order
  int64_t revision = 0;            // highest revision ever handed out
  int64_t compacted = 0;
  int64_t compact_progress = 0;  // compaction chunks are done up to here (<= compacted)
};

// The writer's connection: schema, appends, compaction.
class LogWriter {
 public:
  // Opens or creates the database, takes the process lock (path + ".lock"), switches to WAL and
  // checks the schema version.
  static absl::StatusOr<std::unique_ptr<LogWriter>> Open(const std::string& path, bool sync_full);
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  absl::StatusOr<LoadedState> Load(const LabelExtractor& extract_labels);

  // Appends all entries in one transaction and commits (durable when this returns OK).
  absl::Status Append(const std::vector<LogEntry>& entries);

  // Records a new compaction target and the current revision (durably).
  absl::Status StartCompaction(int64_t compacted, int64_t revision);
  // Compacts the rows with rev in (from, to] in one transaction; records `to` as progress.
  // Returns the number of rows deleted.
  absl::StatusOr<int64_t> CompactChunk(int64_t from, int64_t to);

 private:
  LogWriter(std::unique_ptr<Database> db, int lock_fd) : db_(std::move(db)), lock_fd_(lock_fd) {}
  absl::Status Init(bool sync_full);

  std::unique_ptr<Database> db_;
  const int lock_fd_;
  Statement insert_;  // prepared once; the hot path
};

// A pool of read-only connections, so that readers never wait for the writer (WAL) nor for
// each other beyond checking a connection out. Thread-safe; State below is guarded by mu_.
class ReadPool {
 public:
  ReadPool(std::string path, size_t max_idle) : path_(std::move(path)), max_idle_(max_idle) {}

  // A checked-out connection, returned to the pool when destroyed.
  class Lease {
   public:
    Lease(ReadPool* pool, std::unique_ptr<Database> db) : pool_(pool), db_(std::move(db)) {}
    Lease(Lease&&) = default;
    ~Lease();
    Database* db() const { return db_.get(); }

   private:
    ReadPool* pool_;
    std::unique_ptr<Database> db_;
  };
  absl::StatusOr<Lease> Acquire();

 private:
  const std::string path_;
  const size_t max_idle_;
  common::Mutex mu_;
  std::vector<std::unique_ptr<Database>> idle_ ABSL_GUARDED_BY(mu_);
};

// The state as of `options.revision`, read in one SQLite snapshot. kube::GoneError when that
// snapshot shows the revision compacted.
absl::StatusOr<Store::ListResult> ListAtRevision(Database* db, const Store::ListOptions& options,
                                                 const LabelExtractor& extract_labels);

// Events with rev in (after, upto] and a key starting with `prefix`, in revision order, at most
// `limit`. `*complete` says whether every such event was returned (false when `limit` cut it).
// kube::GoneError when `after` is below the snapshot's compacted revision.
absl::StatusOr<std::vector<WatchEvent>> ReadEvents(Database* db, absl::string_view prefix,
                                                   int64_t after, int64_t upto, size_t limit,
                                                   const LabelExtractor& extract_labels,
                                                   bool* complete);

// The smallest string greater than every string starting with `prefix`; "" when none exists
// (prefix empty or all 0xff bytes).
std::string PrefixEnd(absl::string_view prefix);

}  // namespace ctrlhost::apiserver::internal

#endif  // CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_LOG_TABLE_H_
