// Thin RAII wrappers over the SQLite C API, used only by the storage engine.
//
// A Database owns one sqlite3 connection; a Statement owns one prepared statement of it.
// Every SQLite failure becomes an absl::Status whose message carries the SQLite error text and
// what was being done, with the closest canonical code (a file that is not a database or is
// corrupt is kDataLoss, a busy/locked database kUnavailable, a write refused for lack of room
// (full file system, file size limit) kResourceExhausted, everything else kInternal).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, /*read_only=*/false));
//   RETURN_IF_ERROR(db->Exec("PRAGMA journal_mode=WAL"));
//   ASSIGN_OR_RETURN(Statement stmt, db->Prepare("SELECT value FROM meta WHERE name=?"));
//   stmt.BindText(1, "schema_version");
//   ASSIGN_OR_RETURN(bool row, stmt.Step());
//
// Thread-safety: none. A connection and its statements are used by one thread at a time; the
// owner provides the exclusion (the store's writer thread, or the read pool's checkout).
#ifndef CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_SQLITE_H_
#define CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_SQLITE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace ctrlhost::apiserver::internal {

class Database;

// A prepared statement. Movable, not copyable. Reset() makes it reusable with new bindings.
class Statement {
 public:
  Statement() = default;
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based. Text and blob bindings copy nothing: the bytes must stay valid
  // until the statement is reset or destroyed.
  void BindInt(int index, int64_t value);
  void BindText(int index, absl::string_view value);
  void BindBlob(int index, absl::string_view value);

  // Runs one step: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Runs the statement to completion, ignoring rows.
  absl::Status Run();
  // Clears bindings and rewinds, ready for the next execution.
  void Reset();

  // Columns are 0-based. The returned views are valid until the next Step/Reset.
  int64_t ColumnInt(int index) const;
  absl::string_view ColumnText(int index) const;
  absl::string_view ColumnBlob(int index) const;
  bool ColumnIsNull(int index) const;

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, Database* db) : stmt_(stmt), db_(db) {}

  sqlite3_stmt* stmt_ = nullptr;
  Database* db_ = nullptr;  // borrowed; the database outlives its statements
};

// One SQLite connection.
class Database {
 public:
  // Opens (creating when `read_only` is false) the database file at `path`.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path, bool read_only);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Executes one or more statements that return no rows of interest.
  absl::Status Exec(const char* sql);
  absl::StatusOr<Statement> Prepare(absl::string_view sql);

  // The status for the connection's last error, prefixed with `context`.
  absl::Status LastError(int code, absl::string_view context) const;

  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  const std::string path_;
};

// Maps an SQLite result code to the closest canonical code.
absl::StatusCode SqliteCodeToStatusCode(int sqlite_code);

// Runs BEGIN on construction (with the given statement, e.g. "BEGIN IMMEDIATE") and ROLLBACK on
// destruction unless Commit() succeeded.
class Transaction {
 public:
  static absl::StatusOr<std::unique_ptr<Transaction>> Begin(Database* db,
                                                            const char* begin_sql = "BEGIN");
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}

  Database* db_;  // borrowed
  bool done_ = false;
};

}  // namespace ctrlhost::apiserver::internal

#endif  // CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_SQLITE_H_
