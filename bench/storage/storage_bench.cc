// Storage engine benchmark: durable writes/s from 1 and 8 concurrent writers (1 KiB objects),
// write latency percentiles, events/s delivered to 16 watchers, against raw SQLite inserts of
// the same rows in the same run (one row per transaction with the same sync setting, and all
// rows in one transaction).
//
//   bazel run -c opt //bench/storage:storage_bench -- [--json] [--sync=normal] [--scale=0.5]
//
// The database lives in a fresh directory under /tmp, removed at the end. The disk is what it
// is: the figures are fsync-bound, which is why the raw SQLite one-row-per-transaction rate
// (one fsync per row) is the baseline for the store's throughput.
#include <sqlite3.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/report.h"
#include "runtime/apiserver/storage/store.h"

namespace ctrlhost::bench {
namespace {

using apiserver::Mutation;
using apiserver::Store;
using apiserver::StoredObject;

constexpr size_t kValueBytes = 1024;
constexpr int kWatchers = 16;

// A 1 KiB JSON object, distinct per (writer, n).
std::string Value(int writer, int n, int64_t revision) {
  std::string head =
      absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w)", writer, "-", n,
                   R"(","resourceVersion":")", revision, R"("},"data":{"payload":")");
  const std::string tail = R"("}})";
  head.append(kValueBytes - head.size() - tail.size(), 'x');
  return head + tail;
}

void Die(const std::string& message) {
  std::fprintf(stderr, "storage_bench: %s\n", message.c_str());
  std::exit(2);
}

void Exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    Die(absl::StrCat(sql, ": ", error != nullptr ? error : "?"));
  }
}

struct RawRun {
  double rows_per_second = 0;
  std::vector<absl::Duration> latencies;  // per transaction, when one row per transaction
};

// Raw SQLite: the store's table and index, WAL, the same synchronous setting; inserts `rows`
// 1 KiB rows either one per transaction or all in one.
RawRun RawSqliteInserts(const std::string& path, bool sync_full, int rows, bool one_transaction) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) Die("open raw database");
  Exec(db, "PRAGMA journal_mode=WAL");
  Exec(db, sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  Exec(db,
       "CREATE TABLE log(rev INTEGER PRIMARY KEY, key TEXT NOT NULL, created INTEGER NOT NULL,"
       " deleted INTEGER NOT NULL, create_rev INTEGER NOT NULL, prev_rev INTEGER NOT NULL,"
       " value BLOB); CREATE INDEX log_key_rev ON log(key, rev);");
  sqlite3_stmt* insert = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT INTO log VALUES (?, ?, 1, 0, ?, 0, ?)", -1, &insert,
                         nullptr) != SQLITE_OK) {
    Die("prepare raw insert");
  }
  RawRun run;
  Stopwatch watch;
  if (one_transaction) Exec(db, "BEGIN");
  for (int i = 1; i <= rows; ++i) {
    Stopwatch one;
    const std::string key = absl::StrCat("/core/configmaps/bench/w0-", i);
    const std::string value = Value(0, i, i);
    if (!one_transaction) Exec(db, "BEGIN IMMEDIATE");
    sqlite3_bind_int64(insert, 1, i);
    sqlite3_bind_text(insert, 2, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert, 3, i);
    sqlite3_bind_blob(insert, 4, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
    if (sqlite3_step(insert) != SQLITE_DONE) Die("raw insert");
    sqlite3_reset(insert);
    if (!one_transaction) {
      Exec(db, "COMMIT");
      run.latencies.push_back(one.Elapsed());
    }
  }
  if (one_transaction) Exec(db, "COMMIT");
  run.rows_per_second = rows / watch.Seconds();
  sqlite3_finalize(insert);
  sqlite3_close(db);
  return run;
}

std::unique_ptr<Store> OpenStore(const std::string& path, bool sync_full) {
  apiserver::StoreOptions options;
  options.path = path;
  options.sync_full = sync_full;
  options.compaction_interval = absl::ZeroDuration();
  auto store = Store::Open(options);
  if (!store.ok()) Die(store.status().ToString());
  return std::move(*store);
}

struct WriteRun {
  double writes_per_second = 0;
  std::vector<absl::Duration> latencies;
};

// `writers` threads each create `per_writer` objects; every Write is durable when it returns.
WriteRun DurableWrites(Store* store, int writers, int per_writer, const std::string& tag) {
  std::vector<std::vector<absl::Duration>> latencies(writers);
  std::vector<std::thread> threads;
  Stopwatch watch;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      latencies[w].reserve(per_writer);
      for (int n = 0; n < per_writer; ++n) {
        Stopwatch one;
        auto result =
            store->Write(absl::StrCat("/core/configmaps/", tag, "/w", w, "-", n),
                         [&](const StoredObject*, int64_t revision) -> absl::StatusOr<Mutation> {
                           return Mutation{Mutation::Op::kPut, Value(w, n, revision)};
                         });
        if (!result.ok()) Die(result.status().ToString());
        latencies[w].push_back(one.Elapsed());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  WriteRun run;
  run.writes_per_second = static_cast<double>(writers) * per_writer / watch.Seconds();
  for (auto& samples : latencies) {
    run.latencies.insert(run.latencies.end(), samples.begin(), samples.end());
  }
  return run;
}

struct FanOut {
  double delivered_per_second = 0;
  double writes_per_second = 0;
};

// 16 watchers from the current revision while 8 writers write; done when every watcher has
// every event.
FanOut WatchFanOut(Store* store, int per_writer) {
  constexpr int kWriters = 8;
  const int64_t start = store->Revision();
  const int64_t total = static_cast<int64_t>(kWriters) * per_writer;
  std::vector<std::unique_ptr<apiserver::Watch>> watches;
  for (int i = 0; i < kWatchers; ++i) {
    auto watch = store->Watch("/core/configmaps/", start);
    if (!watch.ok()) Die(watch.status().ToString());
    watches.push_back(std::move(*watch));
  }
  std::atomic<int64_t> delivered{0};
  std::vector<std::thread> readers;
  Stopwatch watch;
  for (int i = 0; i < kWatchers; ++i) {
    readers.emplace_back([&, i] {
      int64_t seen = 0;
      const absl::Time give_up = absl::Now() + absl::Minutes(2);
      while (seen < total && absl::Now() < give_up) {
        auto events = watches[i]->Next(absl::Now() + absl::Seconds(1), 1000, nullptr);
        if (!events.ok()) Die(events.status().ToString());
        seen += static_cast<int64_t>(events->size());
      }
      delivered += seen;
    });
  }
  WriteRun writes = DurableWrites(store, kWriters, per_writer, "fanout");
  for (auto& reader : readers) reader.join();
  FanOut result;
  result.delivered_per_second = static_cast<double>(delivered.load()) / watch.Seconds();
  result.writes_per_second = writes.writes_per_second;
  return result;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

int Main(int argc, char** argv) {
  Reporter reporter("storage", argc, argv);
  bool sync_full = true;
  double scale = 1.0;
  for (const std::string& arg : reporter.args()) {
    if (arg == "--sync=normal") {
      sync_full = false;
    } else if (arg == "--sync=full") {
      sync_full = true;
    } else if (absl::StartsWith(arg, "--scale=") && absl::SimpleAtod(arg.substr(8), &scale) &&
               scale > 0) {
    } else {
      Die(absl::StrCat("unknown argument ", arg,
                       " (flags: --json --sync=full|normal --scale=<factor>)"));
    }
  }
  const int single_writes = static_cast<int>(1500 * scale);
  const int per_writer = static_cast<int>(2500 * scale);
  const int raw_rows = static_cast<int>(1500 * scale);
  const int fanout_per_writer = static_cast<int>(1000 * scale);
  const std::string sync_name = sync_full ? "FULL" : "NORMAL";

  char dir_template[] = "/tmp/ctrlhost-storage-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) Die("mkdtemp");
  const std::string dir = dir_template;

  // The disk's fsync time drifts during a run (other tenants): the one-row-per-transaction
  // baseline is measured in two halves, before and after the store, and pooled.
  RawRun raw_per_txn =
      RawSqliteInserts(dir + "/raw1.db", sync_full, raw_rows / 2, /*one_transaction=*/false);
  const RawRun raw_one_txn = RawSqliteInserts(dir + "/raw2.db", sync_full, raw_rows * 10,
                                              /*one_transaction=*/true);

  WriteRun one;
  WriteRun eight;
  FanOut fanout;
  {
    auto store = OpenStore(dir + "/store.db", sync_full);
    DurableWrites(store.get(), 8, 100, "warmup");
    one = DurableWrites(store.get(), 1, single_writes, "one");
    eight = DurableWrites(store.get(), 8, per_writer, "eight");
    fanout = WatchFanOut(store.get(), fanout_per_writer);
  }
  const RawRun raw_after =
      RawSqliteInserts(dir + "/raw3.db", sync_full, raw_rows / 2, /*one_transaction=*/false);
  std::filesystem::remove_all(dir);
  absl::Duration raw_total;
  for (absl::Duration d : raw_per_txn.latencies) raw_total += d;
  for (absl::Duration d : raw_after.latencies) raw_total += d;
  raw_per_txn.latencies.insert(raw_per_txn.latencies.end(), raw_after.latencies.begin(),
                               raw_after.latencies.end());
  raw_per_txn.rows_per_second =
      static_cast<double>(raw_per_txn.latencies.size()) / absl::ToDoubleSeconds(raw_total);

  Figure figure;
  figure.metric = absl::StrCat("durable writes/s, 8 writers (sync ", sync_name, ")");
  figure.value = eight.writes_per_second;
  figure.unit = "writes/s";
  figure.baseline = raw_per_txn.rows_per_second;
  figure.target = ">= 5000/s";
  figure.met = eight.writes_per_second >= 5000;
  reporter.Add(figure);

  figure = Figure();
  figure.metric = absl::StrCat("durable writes/s, 1 writer (sync ", sync_name, ")");
  figure.value = one.writes_per_second;
  figure.unit = "writes/s";
  figure.baseline = raw_per_txn.rows_per_second;
  reporter.Add(figure);

  for (const auto& [name, run] :
       {std::pair<const char*, const WriteRun*>{"1 writer", &one}, {"8 writers", &eight}}) {
    for (double p : {50.0, 99.0}) {
      figure = Figure();
      figure.metric = absl::StrCat("write latency p", static_cast<int>(p), ", ", name);
      figure.value = Ms(Percentile(run->latencies, p));
      figure.unit = "ms";
      // Baseline: the same percentile of raw single-row transactions.
      figure.baseline = Ms(Percentile(raw_per_txn.latencies, p));
      reporter.Add(figure);
    }
  }

  figure = Figure();
  figure.metric = absl::StrCat("watch events/s delivered to ", kWatchers, " watchers");
  figure.value = fanout.delivered_per_second;
  figure.unit = "events/s";
  // Ideal: every watcher gets every write as fast as the writers commit them.
  figure.baseline = fanout.writes_per_second * kWatchers;
  reporter.Add(figure);

  figure = Figure();
  figure.metric = "raw SQLite inserts/s, 1 row per transaction";
  figure.value = raw_per_txn.rows_per_second;
  figure.unit = "rows/s";
  reporter.Add(figure);

  figure = Figure();
  figure.metric = "raw SQLite inserts/s, all rows in 1 transaction";
  figure.value = raw_one_txn.rows_per_second;
  figure.unit = "rows/s";
  reporter.Add(figure);

  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
