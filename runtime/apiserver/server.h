// The embedded Kubernetes-compatible API server: HTTPS (or, on explicit request, plain HTTP)
// on 127.0.0.1 by default, bearer-token authentication, durable SQLite storage, the built-in
// kinds and CustomResourceDefinitions. `ctrlhost apiserver` runs it alone; `ctrlhost run`
// embeds it when no kubeconfig is given.
//
//   ApiServerOptions o;
//   o.data_dir = ".ctrlhost";
//   ASSIGN_OR_RETURN(std::unique_ptr<ApiServer> s, ApiServer::Start(o));
//   // kubectl --kubeconfig .ctrlhost/kubeconfig get ns
//   s->Stop();
//
// Thread-safe. Start() returns once the server is listening.
#ifndef CTRLHOST_RUNTIME_APISERVER_SERVER_H_
#define CTRLHOST_RUNTIME_APISERVER_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/serving/connection_server.h"

namespace ctrlhost::apiserver {

struct ApiServerOptions {
  std::string data_dir = ".ctrlhost";
  std::string bind = "127.0.0.1";
  // KEP-5866's shardSelector on LIST and WATCH (the ShardedListAndWatch feature gate); false
  // serves as Kubernetes before 1.36: the parameter is ignored.
  bool sharded_list_and_watch = true;
  int port = 6443;             // 0: any free port (see ApiServer::port())
  bool insecure_http = false;  // plain HTTP without authentication; tests and debugging only
  bool sync_full = true;       // fsync every commit (group-committed)
  int64_t retained_revisions = 10000;
  absl::Duration compaction_interval = absl::Minutes(1);
  size_t max_body_bytes = 3 * 1024 * 1024;  // like kube-apiserver
  // Open connections at most (--max-connections); lowered at start to fit the open-file limit.
  size_t max_connections = 8192;
  // Connections that have not yet sent an authenticated request at most: a new one beyond
  // closes the oldest, so idle or trickling connections cannot keep clients out.
  size_t max_unauthenticated_connections = 256;
  // An unauthenticated connection is closed when its TLS handshake and first authenticated
  // request take longer (slowloris).
  absl::Duration authentication_deadline = absl::Seconds(10);
  // Requests served at once besides watches and health probes (kube-apiserver's
  // --max-requests-inflight and --max-mutating-requests-inflight), per priority level
  // (RequestSeats, seats.h): users (the kubeconfig's token) have these many; collection LISTs
  // and OpenAPI documents may take 3/4 of the read seats, the rest stays for single-object
  // GETs and discovery. The in-process host (system_token()) has as many again of its own.
  // More get 429 with Retry-After. 0: no limit.
  int max_requests_inflight = 400;
  int max_mutating_requests_inflight = 200;
  // A response write to a client that accepts no byte for this long ends its connection, and
  // its request's seat is freed (--write-stall-timeout).
  absl::Duration write_stall_timeout = absl::Seconds(10);
  // Threads that write every watch once it is set up (--watch-threads), driven by readiness
  // (epoll): a watch costs its buffers, not a thread. 0: each watch keeps its connection's
  // thread until it ends (the former model).
  int watch_threads = 2;
  // A watch whose client accepts no byte for this long while events wait is ended, as
  // kube-apiserver ends a watcher that cannot keep up (--watch-stall-timeout): the client
  // watches again from its last resourceVersion (or relists on 410).
  absl::Duration watch_stall_timeout = absl::Seconds(10);
  // Bytes of events a watch may have made and not yet written at most (its window); beyond
  // it no more are made for it until its client reads (they wait in the store's shared window).
  size_t watch_window_bytes = 1 << 20;
  // Extra names/IPs for the serving certificate.
  std::vector<std::string> hosts;
};

class ApiServer {
 public:
  static absl::StatusOr<std::unique_ptr<ApiServer>> Start(const ApiServerOptions& options);
  ~ApiServer();  // Stop()s
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  int port() const;
  // "https://127.0.0.1:6443" (or http://).
  std::string url() const;
  // Path of the kubeconfig written for this server.
  std::string kubeconfig_path() const;
  // The bearer token of the in-process host's own client: generated at each start, held in
  // memory only (never in the data directory or a kubeconfig), accepted wherever the
  // kubeconfig's token is, with seats of its own (ApiServerOptions::max_requests_inflight).
  // Give it to no process and no plugin.
  const std::string& system_token() const;
  // Connections of the HTTP listener (open, unauthenticated, closed by the limits).
  serving::ConnectionServer::Stats connection_stats() const;
  // Blocks until Stop() is called from another thread (or a signal handler thread).
  void Wait();
  // Stops accepting, ends watches, closes the store. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_SERVER_H_
