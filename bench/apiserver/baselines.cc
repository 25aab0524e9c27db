#include "bench/apiserver/baselines.h"

#include <sqlite3.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/report.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/mutex.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::bench {
namespace {

// Closes the database and finalizes the statement on every return path.
struct RawDb {
  sqlite3* db = nullptr;
  sqlite3_stmt* insert = nullptr;
  ~RawDb() {
    sqlite3_finalize(insert);
    sqlite3_close(db);
  }
  absl::Status Exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      absl::Status s = absl::InternalError(absl::StrCat(sql, ": ", error ? error : "?"));
      sqlite3_free(error);
      return s;
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<RateRun> RawSqliteInserts(const std::string& path, bool sync_full,
                                         absl::Duration duration, const std::string& value) {
  RawDb raw;
  if (sqlite3_open(path.c_str(), &raw.db) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", sqlite3_errmsg(raw.db)));
  }
  // The storage engine's log table and index (runtime/apiserver/storage/internal/log_table.h).
  RETURN_IF_ERROR(raw.Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(raw.Exec(sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(raw.Exec(
      "CREATE TABLE log(rev INTEGER PRIMARY KEY, key TEXT NOT NULL, created INTEGER NOT NULL,"
      " deleted INTEGER NOT NULL, create_rev INTEGER NOT NULL, prev_rev INTEGER NOT NULL,"
      " value BLOB); CREATE INDEX log_key_rev ON log(key, rev);"));
  if (sqlite3_prepare_v2(raw.db, "INSERT INTO log VALUES (?, ?, 1, 0, ?, 0, ?)", -1, &raw.insert,
                         nullptr) != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("prepare: ", sqlite3_errmsg(raw.db)));
  }
  RateRun run;
  Stopwatch total;
  for (int64_t i = 1; total.Elapsed() < duration; ++i) {
    Stopwatch one;
    const std::string key = absl::StrCat("/bench.ctrlhost.dev/widgets/bench/raw-", i);
    RETURN_IF_ERROR(raw.Exec("BEGIN IMMEDIATE"));
    sqlite3_bind_int64(raw.insert, 1, i);
    sqlite3_bind_text(raw.insert, 2, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_int64(raw.insert, 3, i);
    sqlite3_bind_blob(raw.insert, 4, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
    if (sqlite3_step(raw.insert) != SQLITE_DONE) {
      return absl::InternalError(absl::StrCat("insert: ", sqlite3_errmsg(raw.db)));
    }
    sqlite3_reset(raw.insert);
    RETURN_IF_ERROR(raw.Exec("COMMIT"));
    run.latencies.push_back(one.Elapsed());
    ++run.operations;
  }
  run.elapsed = total.Elapsed();
  return run;
}

absl::StatusOr<RateRun> StoreOnlyWrites(const std::string& path, bool sync_full, int writers,
                                        absl::Duration duration, const std::string& value) {
  apiserver::StoreOptions options;
  options.path = path;
  options.sync_full = sync_full;
  options.compaction_interval = absl::ZeroDuration();
  ASSIGN_OR_RETURN(std::unique_ptr<apiserver::Store> store,
                   apiserver::Store::Open(std::move(options)));
  std::vector<std::vector<absl::Duration>> latencies(writers);
  common::Mutex mu;
  absl::Status first_error;  // guarded by mu
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  Stopwatch total;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      for (int n = 0; total.Elapsed() < duration && !failed.load(); ++n) {
        Stopwatch one;
        auto written = store->Write(
            absl::StrCat("/bench.ctrlhost.dev/widgets/bench/s", w, "-", n),
            [&](const apiserver::StoredObject*, int64_t) -> absl::StatusOr<apiserver::Mutation> {
              return apiserver::Mutation{apiserver::Mutation::Op::kPut, value};
            });
        if (!written.ok()) {
          common::MutexLock lock(&mu);
          if (first_error.ok()) first_error = written.status();
          failed = true;
          return;
        }
        latencies[w].push_back(one.Elapsed());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  RateRun run;
  run.elapsed = total.Elapsed();
  {
    common::MutexLock lock(&mu);
    if (!first_error.ok()) return first_error;
  }
  for (auto& samples : latencies) {
    run.operations += static_cast<int64_t>(samples.size());
    run.latencies.insert(run.latencies.end(), samples.begin(), samples.end());
  }
  return run;
}

}  // namespace ctrlhost::bench
