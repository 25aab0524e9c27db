#include "runtime/apiserver/storage/internal/log_table.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver::internal {
namespace {

// 1: no checksum column (rows of it are read without verification); 2: log.checksum.
constexpr int64_t kSchemaVersion = 2;

constexpr char kSchema[] =
    "CREATE TABLE IF NOT EXISTS log("
    "  rev INTEGER PRIMARY KEY, key TEXT NOT NULL, created INTEGER NOT NULL,"
    "  deleted INTEGER NOT NULL, create_rev INTEGER NOT NULL, prev_rev INTEGER NOT NULL,"
    "  value BLOB, checksum INTEGER);"
    "CREATE INDEX IF NOT EXISTS log_key_rev ON log(key, rev);"
    "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta(name, value) VALUES ('revision', 0), ('compacted', 0),"
    "  ('compact_progress', 0);";

absl::StatusOr<int64_t> QueryInt(Database* db, absl::string_view sql, int64_t if_no_row) {
  ASSIGN_OR_RETURN(Statement stmt, db->Prepare(sql));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.ColumnInt(0) : if_no_row;
}

absl::StatusOr<int64_t> MetaValue(Database* db, absl::string_view name) {
  ASSIGN_OR_RETURN(Statement stmt, db->Prepare("SELECT value FROM meta WHERE name = ?"));
  stmt.BindText(1, name);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.ColumnInt(0) : 0;
}

absl::Status SetMeta(Database* db, absl::string_view name, int64_t value) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db->Prepare("INSERT OR REPLACE INTO meta(name, value) VALUES (?, ?)"));
  stmt.BindText(1, name);
  stmt.BindInt(2, value);
  return stmt.Run();
}

// The key-range condition for keys starting with `prefix` and after `after_key`, with the
// parameters it binds (in order) appended to `params`.
std::string KeyRange(absl::string_view prefix, absl::string_view after_key,
                     std::vector<std::string>* params) {
  std::string sql;
  if (!after_key.empty() && after_key >= prefix) {
    sql = "key > ?";
    params->emplace_back(after_key);
  } else {
    sql = "key >= ?";
    params->emplace_back(prefix);
  }
  std::string end = PrefixEnd(prefix);
  if (!end.empty()) {
    absl::StrAppend(&sql, " AND key < ?");
    params->push_back(std::move(end));
  }
  return sql;
}

}  // namespace

ObjectPtr MakeObject(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                     std::string value, const LabelExtractor& extract_labels) {
  auto object = std::make_shared<StoredObject>();
  object->key = std::string(key);
  object->create_revision = create_revision;
  object->mod_revision = mod_revision;
  object->value = std::move(value);
  if (extract_labels) object->labels = extract_labels(object->value);
  return object;
}

int64_t ValueChecksum(absl::string_view key, absl::string_view value) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](absl::string_view bytes) {
    for (char c : bytes) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  };
  mix(key);
  mix(absl::string_view("\0", 1));
  mix(value);
  return static_cast<int64_t>(h);
}

ObjectPtr MakeCheckedObject(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                            std::string value, bool checksum_is_null, int64_t checksum,
                            const LabelExtractor& extract_labels) {
  if (checksum_is_null || ValueChecksum(key, value) == checksum) {
    return MakeObject(key, create_revision, mod_revision, std::move(value), extract_labels);
  }
  common::LogError("storage: stored value fails its checksum (corrupt on disk)",
                   {{"key", std::string(key)}, {"revision", mod_revision}});
  auto object = std::make_shared<StoredObject>();
  object->key = std::string(key);
  object->create_revision = create_revision;
  object->mod_revision = mod_revision;
  object->value = std::move(value);
  object->corrupt = true;
  return object;
}

ObjectPtr MakeObject(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                     std::string value, Labels labels) {
  auto object = std::make_shared<StoredObject>();
  object->key = std::string(key);
  object->create_revision = create_revision;
  object->mod_revision = mod_revision;
  object->value = std::move(value);
  object->labels = std::move(labels);
  return object;
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

absl::StatusOr<std::unique_ptr<LogWriter>> LogWriter::Open(const std::string& path,
                                                           bool sync_full) {
  // SQLite's own locks do not stop a second process from running a second writer thread
  // with its own revision counter; this lock does.
  const std::string lock_path = path + ".lock";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("opening lock file ", lock_path, ": ", std::strerror(errno)));
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(lock_fd);
    return absl::FailedPreconditionError(absl::StrCat("storage ", path, " is already open (lock ",
                                                      lock_path, "): ", std::strerror(err)));
  }
  auto db = Database::Open(path, /*read_only=*/false);
  if (!db.ok()) {
    close(lock_fd);
    return db.status();
  }
  std::unique_ptr<LogWriter> writer(new LogWriter(std::move(*db), lock_fd));
  RETURN_IF_ERROR(writer->Init(sync_full));
  return writer;
}

LogWriter::~LogWriter() {
  insert_ = Statement();
  db_.reset();
  close(lock_fd_);  // releases the flock
}

absl::Status LogWriter::Init(bool sync_full) {
  // The first statement reads the header: a file that is not a database fails here.
  ASSIGN_OR_RETURN(Statement mode, db_->Prepare("PRAGMA journal_mode=WAL"));
  ASSIGN_OR_RETURN(bool row, mode.Step());
  if (!row || !absl::EqualsIgnoreCase(mode.ColumnText(0), "wal")) {
    return absl::FailedPreconditionError(
        absl::StrCat("storage ", db_->path(), ": cannot switch to WAL journal mode"));
  }
  mode = Statement();
  RETURN_IF_ERROR(db_->Exec(sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));

  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get(), "BEGIN IMMEDIATE"));
  ASSIGN_OR_RETURN(int64_t tables, QueryInt(db_.get(), "SELECT count(*) FROM sqlite_master", 0));
  if (tables > 0) {
    ASSIGN_OR_RETURN(int64_t version,
                     QueryInt(db_.get(),
                              "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                              "AND name = 'meta')",
                              0));
    if (version == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "storage ", db_->path(), ": SQLite database is not a ctrlhost store (no meta table)"));
    }
    ASSIGN_OR_RETURN(version, MetaValue(db_.get(), "schema_version"));
    if (version == 1) {
      // Rows written before have no checksum (NULL) and are read unverified.
      RETURN_IF_ERROR(db_->Exec("ALTER TABLE log ADD COLUMN checksum INTEGER"));
      version = kSchemaVersion;
    }
    if (version != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("storage ", db_->path(),
                                                        ": unsupported schema version ", version,
                                                        " (want ", kSchemaVersion, ")"));
    }
  }
  RETURN_IF_ERROR(db_->Exec(kSchema));
  RETURN_IF_ERROR(SetMeta(db_.get(), "schema_version", kSchemaVersion));
  RETURN_IF_ERROR(txn->Commit());

  ASSIGN_OR_RETURN(insert_,
                   db_->Prepare("INSERT INTO log(rev, key, created, deleted, create_rev, "
                                "prev_rev, value, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
  return absl::OkStatus();
}

absl::StatusOr<LoadedState> LogWriter::Load(const LabelExtractor& extract_labels) {
  LoadedState state;
  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  ASSIGN_OR_RETURN(int64_t meta_revision, MetaValue(db_.get(), "revision"));
  ASSIGN_OR_RETURN(int64_t max_rev, QueryInt(db_.get(), "SELECT max(rev) FROM log", 0));
  ASSIGN_OR_RETURN(state.compacted, MetaValue(db_.get(), "compacted"));
  ASSIGN_OR_RETURN(state.compact_progress, MetaValue(db_.get(), "compact_progress"));
  state.revision = std::max({meta_revision, max_rev, state.compacted});

  ASSIGN_OR_RETURN(Statement stmt,
                   db_->Prepare("SELECT key, create_rev, rev, value, checksum FROM log l WHERE "
                                "deleted = 0 "
                                "AND rev = (SELECT max(rev) FROM log m WHERE m.key = l.key) "
                                "ORDER BY key"));
  for (;;) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    state.objects.push_back(MakeCheckedObject(
        stmt.ColumnText(0), stmt.ColumnInt(1), stmt.ColumnInt(2), std::string(stmt.ColumnBlob(3)),
        stmt.ColumnIsNull(4), stmt.ColumnInt(4), extract_labels));
  }
  return state;
}

absl::Status LogWriter::Append(const std::vector<LogEntry>& entries) {
  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get(), "BEGIN IMMEDIATE"));
  for (const LogEntry& entry : entries) {
    insert_.BindInt(1, entry.rev);
    insert_.BindText(2, entry.key);
    insert_.BindInt(3, entry.created ? 1 : 0);
    insert_.BindInt(4, entry.deleted ? 1 : 0);
    insert_.BindInt(5, entry.create_rev);
    insert_.BindInt(6, entry.prev_rev);
    insert_.BindBlob(7, entry.value);
    insert_.BindInt(8, ValueChecksum(entry.key, entry.value));
    absl::Status status = insert_.Run();
    insert_.Reset();
    RETURN_IF_ERROR(status);
  }
  return txn->Commit();
}

absl::Status LogWriter::StartCompaction(int64_t compacted, int64_t revision) {
  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get(), "BEGIN IMMEDIATE"));
  ASSIGN_OR_RETURN(int64_t stored, MetaValue(db_.get(), "revision"));
  RETURN_IF_ERROR(SetMeta(db_.get(), "revision", std::max(stored, revision)));
  RETURN_IF_ERROR(SetMeta(db_.get(), "compacted", compacted));
  return txn->Commit();
}

absl::StatusOr<int64_t> LogWriter::CompactChunk(int64_t from, int64_t to) {
  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get(), "BEGIN IMMEDIATE"));
  // Superseded rows first: the tombstones deleted next still name theirs.
  ASSIGN_OR_RETURN(Statement superseded,
                   db_->Prepare("DELETE FROM log WHERE rev IN (SELECT prev_rev FROM log WHERE "
                                "rev > ? AND rev <= ? AND prev_rev > 0)"));
  superseded.BindInt(1, from);
  superseded.BindInt(2, to);
  RETURN_IF_ERROR(superseded.Run());
  ASSIGN_OR_RETURN(int64_t deleted, QueryInt(db_.get(), "SELECT changes()", 0));
  ASSIGN_OR_RETURN(Statement tombstones,
                   db_->Prepare("DELETE FROM log WHERE rev > ? AND rev <= ? AND deleted = 1"));
  tombstones.BindInt(1, from);
  tombstones.BindInt(2, to);
  RETURN_IF_ERROR(tombstones.Run());
  ASSIGN_OR_RETURN(int64_t more, QueryInt(db_.get(), "SELECT changes()", 0));
  RETURN_IF_ERROR(SetMeta(db_.get(), "compact_progress", to));
  RETURN_IF_ERROR(txn->Commit());
  return deleted + more;
}

ReadPool::Lease::~Lease() {
  if (db_ == nullptr) return;
  common::MutexLock lock(&pool_->mu_);
  if (pool_->idle_.size() < pool_->max_idle_) pool_->idle_.push_back(std::move(db_));
}

absl::StatusOr<ReadPool::Lease> ReadPool::Acquire() {
  {
    common::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Database> db = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(db));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path_, /*read_only=*/true));
  return Lease(this, std::move(db));
}

absl::StatusOr<Store::ListResult> ListAtRevision(Database* db, const Store::ListOptions& options,
                                                 const LabelExtractor& extract_labels) {
  // One read transaction: the compaction check and the rows come from the same snapshot, and
  // compaction records its target before it deletes anything.
  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db));
  ASSIGN_OR_RETURN(int64_t compacted, MetaValue(db, "compacted"));
  if (options.revision <= compacted) {
    return kube::GoneError(absl::StrCat("The resourceVersion for the provided list is too old: ",
                                        options.revision, " (compacted at ", compacted, ")"));
  }
  std::vector<std::string> params;
  const std::string range = KeyRange(options.prefix, options.after_key, &params);
  ASSIGN_OR_RETURN(Statement keys,
                   db->Prepare(absl::StrCat("SELECT key, max(rev) FROM log WHERE ", range,
                                            " AND rev <= ? GROUP BY key ORDER BY key")));
  int index = 1;
  for (const std::string& param : params) keys.BindText(index++, param);
  keys.BindInt(index, options.revision);
  ASSIGN_OR_RETURN(
      Statement row,
      db->Prepare("SELECT deleted, create_rev, value, checksum FROM log WHERE rev = ?"));

  Store::ListResult result;
  result.revision = options.revision;
  for (;;) {
    ASSIGN_OR_RETURN(bool has_key, keys.Step());
    if (!has_key) break;
    row.Reset();
    row.BindInt(1, keys.ColumnInt(1));
    ASSIGN_OR_RETURN(bool found, row.Step());
    if (!found || row.ColumnInt(0) != 0) continue;  // deleted as of the revision
    ObjectPtr object = MakeCheckedObject(keys.ColumnText(0), row.ColumnInt(1), keys.ColumnInt(1),
                                         std::string(row.ColumnBlob(2)), row.ColumnIsNull(3),
                                         row.ColumnInt(3), extract_labels);
    if (options.filter && !options.filter(*object)) continue;
    if (options.limit > 0 && result.items.size() == options.limit) {
      result.more = true;
      break;
    }
    result.items.push_back(std::move(object));
  }
  if (!result.items.empty()) result.last_key = result.items.back()->key;
  return result;
}

absl::StatusOr<std::vector<WatchEvent>> ReadEvents(Database* db, absl::string_view prefix,
                                                   int64_t after, int64_t upto, size_t limit,
                                                   const LabelExtractor& extract_labels,
                                                   bool* complete) {
  ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db));
  ASSIGN_OR_RETURN(int64_t compacted, MetaValue(db, "compacted"));
  if (after < compacted) {
    return kube::GoneError(absl::StrCat("too old resource version: ", after, " (", compacted, ")"));
  }
  std::vector<std::string> params;
  const std::string range = KeyRange(prefix, "", &params);
  ASSIGN_OR_RETURN(
      Statement events,
      db->Prepare(absl::StrCat("SELECT rev, key, created, deleted, create_rev, "
                               "prev_rev, value, checksum FROM log WHERE rev > ? AND rev <= ? "
                               "AND ",
                               range, " ORDER BY rev LIMIT ?")));
  events.BindInt(1, after);
  events.BindInt(2, upto);
  int index = 3;
  for (const std::string& param : params) events.BindText(index++, param);
  events.BindInt(index, static_cast<int64_t>(limit));
  ASSIGN_OR_RETURN(
      Statement previous,
      db->Prepare("SELECT key, create_rev, rev, value, checksum FROM log WHERE rev = ?"));

  std::vector<WatchEvent> result;
  for (;;) {
    ASSIGN_OR_RETURN(bool has_row, events.Step());
    if (!has_row) break;
    WatchEvent event;
    const bool created = events.ColumnInt(2) != 0;
    const bool deleted = events.ColumnInt(3) != 0;
    event.type = deleted   ? WatchEvent::Type::kDeleted
                 : created ? WatchEvent::Type::kAdded
                           : WatchEvent::Type::kModified;
    event.object = MakeCheckedObject(events.ColumnText(1), events.ColumnInt(4), events.ColumnInt(0),
                                     std::string(events.ColumnBlob(6)), events.ColumnIsNull(7),
                                     events.ColumnInt(7), extract_labels);
    const int64_t prev_rev = events.ColumnInt(5);
    if (!created && prev_rev > 0) {
      previous.Reset();
      previous.BindInt(1, prev_rev);
      ASSIGN_OR_RETURN(bool found, previous.Step());
      if (!found) {
        return absl::DataLossError(absl::StrCat("storage ", db->path(), ": revision ",
                                                events.ColumnInt(0), " names missing revision ",
                                                prev_rev, " as its previous version"));
      }
      event.previous =
          MakeCheckedObject(previous.ColumnText(0), previous.ColumnInt(1), previous.ColumnInt(2),
                            std::string(previous.ColumnBlob(3)), previous.ColumnIsNull(4),
                            previous.ColumnInt(4), extract_labels);
    }
    result.push_back(std::move(event));
  }
  *complete = result.size() < limit;
  return result;
}

}  // namespace ctrlhost::apiserver::internal
