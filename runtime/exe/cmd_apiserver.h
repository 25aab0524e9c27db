// `ctrlhost apiserver`: runs the embedded Kubernetes-compatible API server on its own, for
// kubectl, client tests and development.
//
//   $ ctrlhost apiserver --data-dir /var/lib/ctrlhost --port 6443
//
// Thread-compatible: parsing happens on the main thread.
#ifndef CTRLHOST_RUNTIME_EXE_CMD_APISERVER_H_
#define CTRLHOST_RUNTIME_EXE_CMD_APISERVER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/apiserver/server.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {

// The command line of `ctrlhost apiserver`, with its defaults.
struct ApiServerFlags {
  // Where the SQLite database, the generated CA and certificates and the kubeconfig live.
  std::string data_dir = ".ctrlhost";
  // Address to listen on; loopback unless the user asks otherwise.
  std::string bind = "127.0.0.1";
  // 0 picks any free port (the chosen one is logged and written to the kubeconfig).
  int64_t port = 6443;
  // Plain HTTP instead of TLS; only on explicit request.
  bool insecure_http = false;
  // SQLite `PRAGMA synchronous`: "full" (nothing acknowledged before it is durable) or
  // "normal" (faster; a power loss may drop the last commits, never corrupts).
  std::string storage_sync = "full";
  // Revisions of history kept for watches; older ones are compacted (a watch from before them
  // gets 410 Gone).
  int64_t compaction_retain_revisions = 10000;
  // How often the compactor runs.
  absl::Duration compaction_interval = absl::Minutes(1);
  // Print the path of the kubeconfig written for kubectl on stdout once serving.
  bool print_kubeconfig_path = false;
  // Open connections at most (lowered to fit the open-file limit).
  int64_t max_connections = 8192;
  // Requests served at once besides watches; more get 429 (0: no limit).
  int64_t max_requests_inflight = 400;
  int64_t max_mutating_requests_inflight = 200;
  // A response write that makes no progress this long ends its connection.
  absl::Duration write_stall_timeout = absl::Seconds(10);
  // Threads of the event loop that writes watches (0: a thread per watch).
  int64_t watch_threads = 2;
  // A watch whose client accepts no byte this long while events wait is ended.
  absl::Duration watch_stall_timeout = absl::Seconds(10);
  // kube-apiserver's --feature-gates: "Name=true|false,..." of the gates this server knows.
  std::string feature_gates;
};

// Applies --feature-gates to `options`: InvalidArgument naming an unknown gate (and the known
// ones) or a value that is not true or false.
absl::Status ApplyFeatureGates(absl::string_view gates, apiserver::ApiServerOptions* options);

// Declares the apiserver flags in `flags`, bound to `values`.
void AddApiServerFlags(FlagSet& flags, ApiServerFlags* values);

// Starts the API server with `options`, prints where it listens on `out` ("API server listening
// on URL", then a kubectl hint; with `print_kubeconfig_path` also the machine-readable line
// "kubeconfig: PATH" between them), serves until SIGINT or
// SIGTERM, then stops it. Returns the exit code. Blocks SIGINT and SIGTERM in the calling thread
// (and so in every thread it starts); call it from the main thread.
int ServeApiServerUntilSignal(const apiserver::ApiServerOptions& options,
                              bool print_kubeconfig_path, std::ostream& out, std::ostream& err);

int RunApiServerCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_APISERVER_H_
