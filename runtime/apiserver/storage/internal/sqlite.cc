#include "runtime/apiserver/storage/internal/sqlite.h"

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::apiserver::internal {
namespace {

// Within this much of a limit, a write error is taken for lack of room.
constexpr int64_t kRoomMargin = 1 << 20;

// ": no room to write: ..." when the file system holding `db_path` is (nearly) full or one of
// its files reached the process's file size limit (RLIMIT_FSIZE); "" otherwise.
std::string NoRoomToWrite(const std::string& db_path) {
  const std::string dir = db_path.substr(0, db_path.find_last_of('/') + 1);
  struct statvfs fs;
  if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) == 0) {
    const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < kRoomMargin) {
      return absl::StrCat(": no room to write: ", free_bytes, " bytes free on its file system");
    }
  }
  rlimit limit;
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    for (const char* suffix : {"", "-wal", "-journal"}) {
      struct stat st;
      const std::string file = db_path + suffix;
      if (stat(file.c_str(), &st) == 0 &&
          static_cast<int64_t>(st.st_size) + kRoomMargin >= static_cast<int64_t>(limit.rlim_cur)) {
        return absl::StrCat(": no room to write: ", file, " reached the file size limit (",
                            limit.rlim_cur, " bytes, RLIMIT_FSIZE)");
      }
    }
  }
  return "";
}

}  // namespace

absl::StatusCode SqliteCodeToStatusCode(int sqlite_code) {
  switch (sqlite_code & 0xff) {
    case SQLITE_OK:
      return absl::StatusCode::kOk;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
    case SQLITE_TOOBIG:
      return absl::StatusCode::kResourceExhausted;
    default:
      return absl::StatusCode::kInternal;
  }
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), db_(other.db_) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    db_ = other.db_;
  }
  return *this;
}

void Statement::BindInt(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }

void Statement::BindText(int index, absl::string_view value) {
  sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_STATIC, SQLITE_UTF8);
}

void Statement::BindBlob(int index, absl::string_view value) {
  // A zero-length blob must still be a blob, not NULL: pass a valid pointer.
  static const char kEmpty = 0;
  sqlite3_bind_blob64(stmt_, index, value.empty() ? &kEmpty : value.data(), value.size(),
                      SQLITE_STATIC);
}

absl::StatusOr<bool> Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->LastError(rc, absl::StrCat("executing \"", sqlite3_sql(stmt_), "\""));
}

absl::Status Statement::Run() {
  for (;;) {
    auto row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::ColumnInt(int index) const { return sqlite3_column_int64(stmt_, index); }

absl::string_view Statement::ColumnText(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  if (text == nullptr) return absl::string_view();
  return absl::string_view(reinterpret_cast<const char*>(text), static_cast<size_t>(size));
}

bool Statement::ColumnIsNull(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

absl::string_view Statement::ColumnBlob(int index) const {
  const void* blob = sqlite3_column_blob(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  if (blob == nullptr) return absl::string_view();
  return absl::string_view(static_cast<const char*>(blob), static_cast<size_t>(size));
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path, bool read_only) {
  sqlite3* db = nullptr;
  // NOMUTEX: each connection is used by one thread at a time (see the header).
  const int flags =
      (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::Status(SqliteCodeToStatusCode(rc),
                        absl::StrCat("opening SQLite database ", path, ": ", message));
  }
  sqlite3_extended_result_codes(db, 1);
  auto database = std::unique_ptr<Database>(new Database(db, path));
  // Readers and the writer share the file; a checkpoint or WAL recovery may briefly hold a
  // lock that another connection must wait for rather than fail on.
  sqlite3_busy_timeout(db, 5000);
  return database;
}

Database::~Database() { sqlite3_close_v2(db_); }

absl::Status Database::Exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return LastError(rc, absl::StrCat("executing \"", sql, "\""));
  return absl::OkStatus();
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return LastError(rc, absl::StrCat("preparing \"", sql, "\""));
  return Statement(stmt, this);
}

absl::Status Database::LastError(int code, absl::string_view context) const {
  absl::StatusCode status_code = SqliteCodeToStatusCode(code);
  std::string cause;
  // SQLite calls only ENOSPC on a write SQLITE_FULL; a write refused by a file size limit
  // (EFBIG) or a quota is SQLITE_IOERR_WRITE, and the errno is not kept for the connection. So
  // look at the room left: out of room is resource exhaustion the client may retry once room is
  // made (429), not a broken server (500).
  if ((code & 0xff) == SQLITE_IOERR || (code & 0xff) == SQLITE_FULL) {
    cause = NoRoomToWrite(path_);
    if (!cause.empty()) status_code = absl::StatusCode::kResourceExhausted;
  }
  return absl::Status(
      status_code, absl::StrCat("SQLite database ", path_, ": ", context, ": ", sqlite3_errmsg(db_),
                                " (", sqlite3_errstr(code), ")", cause));
}

absl::StatusOr<std::unique_ptr<Transaction>> Transaction::Begin(Database* db,
                                                                const char* begin_sql) {
  absl::Status status = db->Exec(begin_sql);
  if (!status.ok()) return status;
  return std::unique_ptr<Transaction>(new Transaction(db));
}

Transaction::~Transaction() {
  if (!done_) (void)db_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  absl::Status status = db_->Exec("COMMIT");
  // A failed COMMIT may leave the transaction open (e.g. SQLITE_BUSY): the destructor rolls
  // it back. A successful one ends it.
  if (status.ok()) done_ = true;
  return status;
}

}  // namespace ctrlhost::apiserver::internal
