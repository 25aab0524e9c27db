// Same-run baselines of the apiserver benchmark: what the API server's writes cost without the
// API server around them.
//
// - RawSqliteInserts: the storage engine's table and index in WAL mode with the same
//   synchronous setting, one row per durable transaction from one thread (what a serial
//   kine-style server pays per write: one fsync).
// - StoreOnlyWrites: the embedded server's own storage engine (Store::Write, group commit)
//   driven by the same number of client threads as the HTTP run, without HTTP, TLS or JSON
//   handling. The gap between it and the HTTP figures is the cost of the request path.
//
//   RateRun raw = RawSqliteInserts(dir + "/raw.db", /*sync_full=*/true, absl::Seconds(2), value);
//   RateRun store = StoreOnlyWrites(dir + "/store.db", true, 8, absl::Seconds(5), value);
//
// Both return InternalError (with SQLite's message) when the database cannot be used.
// Thread-safety: thread-safe (each call owns its database).
#ifndef CTRLHOST_BENCH_APISERVER_BASELINES_H_
#define CTRLHOST_BENCH_APISERVER_BASELINES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ctrlhost::bench {

struct RateRun {
  int64_t operations = 0;
  absl::Duration elapsed;
  std::vector<absl::Duration> latencies;  // one per operation
  double PerSecond() const {
    return elapsed > absl::ZeroDuration() ? operations / absl::ToDoubleSeconds(elapsed) : 0;
  }
};

// Inserts rows whose value has `value`'s size, one per transaction, for `duration`.
absl::StatusOr<RateRun> RawSqliteInserts(const std::string& path, bool sync_full,
                                         absl::Duration duration, const std::string& value);

// `writers` threads create keys with `value` through a fresh Store at `path` for `duration`.
absl::StatusOr<RateRun> StoreOnlyWrites(const std::string& path, bool sync_full, int writers,
                                        absl::Duration duration, const std::string& value);

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_APISERVER_BASELINES_H_
