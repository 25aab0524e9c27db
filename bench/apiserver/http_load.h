// The HTTP side of the apiserver benchmark: keep-alive clients that create custom objects or
// merge-patch their status subresource from several threads, and a fleet of watchers that
// stream `?watch=true` from a resourceVersion and record when each event arrives.
//
//   Endpoint endpoint{"https://127.0.0.1:6443", token, data_dir + "/ca.crt"};
//   RETURN_IF_ERROR(SetUpBenchResource(endpoint));          // namespace, CRD, sentinel object
//   WriteOptions create;  create.kind = WriteKind::kCreate;  create.name_prefix = "https-";
//   ASSIGN_OR_RETURN(WriteRun creates, RunWriters(endpoint, create));
//   ASSIGN_OR_RETURN(auto fleet, WatchFleet::Start(endpoint, 10, from_revision));
//   ... writers ...;  ASSIGN_OR_RETURN(int64_t end, TouchSentinel(endpoint));
//   fleet->WaitForSentinel(absl::Now() + absl::Seconds(60));
//
// Every request is the one a Kubernetes client would send: bearer token over TLS verified
// against the server's CA (or plain HTTP for the insecure endpoint), JSON bodies, TCP_NODELAY
// like Go's net/http. Failed requests are counted, never fatal, so a run always reports.
//
// Thread-safety: the free functions are thread-safe. WatchFleet is thread-safe: its watcher
// threads write their own slots, and mu_ guards the done count and the clients (for stop()).
#ifndef CTRLHOST_BENCH_APISERVER_HTTP_LOAD_H_
#define CTRLHOST_BENCH_APISERVER_HTTP_LOAD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/apiserver/watch_stream.h"
#include "runtime/common/mutex.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace ctrlhost::bench {

struct Endpoint {
  std::string url;      // "https://127.0.0.1:PORT" or "http://..."
  std::string token;    // bearer token; "" for plain HTTP
  std::string ca_path;  // the server's CA certificate; "" for plain HTTP
};

// Nanoseconds on the monotonic clock since a process-wide origin: comparable across threads.
int64_t NowNanos();

// The custom resource every phase writes: widgets.bench.ctrlhost.dev/v1, namespace "bench".
inline constexpr char kWidgetsPath[] = "/apis/bench.ctrlhost.dev/v1/namespaces/bench/widgets";
inline constexpr char kSentinelName[] = "sentinel";

// Creates the namespace, the CRD (status subresource) and the sentinel object; returns once
// the resource is served. Any failure is an error with the server's answer.
absl::Status SetUpBenchResource(const Endpoint& endpoint);

// Merge-patches the sentinel's status; returns the resourceVersion of that write. Watchers stop
// when they see it, so everything written before it has been delivered.
absl::StatusOr<int64_t> TouchSentinel(const Endpoint& endpoint);

enum class WriteKind { kCreate, kStatusPatch };

struct WriteOptions {
  WriteKind kind = WriteKind::kCreate;
  int clients = 8;
  absl::Duration duration = absl::Seconds(5);
  // kCreate: objects are named <name_prefix>c<client>-<n>.
  // kStatusPatch: client c patches <name_prefix>c<c>-<i> for i < patch_objects[c] round-robin.
  std::string name_prefix;
  std::vector<int64_t> patch_objects;
};

struct WriteRun {
  int64_t writes = 0;  // acknowledged (2xx)
  int64_t errors = 0;
  std::string first_error;
  absl::Duration elapsed;
  std::vector<absl::Duration> latencies;          // one per acknowledged write
  std::vector<std::pair<int64_t, int64_t>> acks;  // (resourceVersion, NowNanos() at the ack)
  std::vector<int64_t> per_client;                // acknowledged writes of each client
  std::string sample_body;                        // one response body (the stored object)
  double PerSecond() const {
    return elapsed > absl::ZeroDuration() ? writes / absl::ToDoubleSeconds(elapsed) : 0;
  }
};

// `options.clients` threads, each with one keep-alive connection, write as fast as the server
// acknowledges for `options.duration`. An error only when a client cannot be set up.
absl::StatusOr<WriteRun> RunWriters(const Endpoint& endpoint, const WriteOptions& options);

// N watchers of kWidgetsPath from one resourceVersion, each on its own connection and thread.
class WatchFleet {
 public:
  struct Watcher {
    DeliveryChecker checker;
    std::vector<std::pair<int64_t, int64_t>> received;  // (resourceVersion, NowNanos())
    absl::Status status;  // stream errors (not delivery errors: see checker)
    bool saw_sentinel = false;
    int64_t sentinel_nanos = 0;  // NowNanos() when the sentinel's event arrived
  };

  // Connects `count` watchers from `from_revision` and returns once each has the response
  // headers (200), or an error naming the first that failed within `connect_timeout`.
  static absl::StatusOr<std::unique_ptr<WatchFleet>> Start(
      const Endpoint& endpoint, int count, int64_t from_revision,
      absl::Duration connect_timeout = absl::Seconds(30));
  ~WatchFleet();  // stops and joins the watchers
  WatchFleet(const WatchFleet&) = delete;
  WatchFleet& operator=(const WatchFleet&) = delete;

  // Waits until every watcher has seen the sentinel event (see TouchSentinel) or `deadline`
  // passes, then closes the rest and joins every thread. True when all saw it. Watchers'
  // results are readable afterwards.
  bool WaitForSentinel(absl::Time deadline);
  const std::vector<std::unique_ptr<Watcher>>& watchers() const { return watchers_; }

 private:
  explicit WatchFleet(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}
  void Run(int index, int64_t from_revision);
  void MarkReady();

  // Constant after construction.
  const Endpoint endpoint_;
  // Each Watcher is written only by its own thread until WaitForSentinel joins it.
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::vector<std::thread> threads_;

  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<httplib::Client*> clients_ ABSL_GUARDED_BY(mu_);  // borrowed from Run's stack
  int ready_ ABSL_GUARDED_BY(mu_) = 0;     // watchers that got their headers or failed first
  int finished_ ABSL_GUARDED_BY(mu_) = 0;  // watchers whose stream ended (sentinel or error)
};

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_APISERVER_HTTP_LOAD_H_
