#include "runtime/exe/cmd_apiserver.h"

#include <pthread.h>
#include <signal.h>

#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/server.h"
#include "runtime/common/logging.h"
#include "runtime/common/paths.h"
#include "runtime/exe/command.h"

namespace ctrlhost::exe {

void AddApiServerFlags(FlagSet& flags, ApiServerFlags* values) {
  flags
      .AddString("data-dir", &values->data_dir,
                 "Directory for the database, the generated CA and certificates and the "
                 "kubeconfig; created if missing")
      .ValueName("DIR");
  flags.AddString("bind", &values->bind, "Address to listen on").ValueName("ADDRESS");
  flags.AddInt("port", &values->port, 0, 65535, "Port to listen on; 0 picks a free port")
      .ValueName("PORT");
  flags.AddBool("insecure-http", &values->insecure_http,
                "Serve plain HTTP instead of TLS (no encryption: local testing only)");
  flags.AddEnum("storage-sync", &values->storage_sync, {"full", "normal"},
                "SQLite durability: full acknowledges a write only once it is on disk; normal "
                "is faster but a power loss may drop the last writes");
  flags.AddInt("compaction-retain-revisions", &values->compaction_retain_revisions, 1,
               std::numeric_limits<int32_t>::max(),
               "Revisions of history kept for watches; a watch from an older resourceVersion "
               "gets 410 Gone");
  flags
      .AddDuration("compaction-interval", &values->compaction_interval,
                   "How often old revisions are compacted (at least 10ms)")
      .MinDuration(absl::Milliseconds(10));
  flags
      .AddInt("max-connections", &values->max_connections, 1, 1000000,
              "Open connections at most (lowered at start to fit the open-file limit). At "
              "the limit a new one closes an unauthenticated one, else the keep-alive "
              "connection idle the longest; when every connection is busy it is answered 429 "
              "with Retry-After. Unauthenticated ones beyond 256 are closed, silent ones first")
      .ValueName("INT");
  flags
      .AddInt("max-requests-inflight", &values->max_requests_inflight, 0, 1000000,
              "Read requests served at once, not counting watches; more get 429 "
              "TooManyRequests with Retry-After (0: no limit). Collection LISTs and OpenAPI "
              "documents may take 3/4 of them, the rest stays for single-object GETs and "
              "discovery. Counted per level: the kubeconfig's token (users) has these, the "
              "in-process host's own client as many again")
      .ValueName("INT");
  flags
      .AddInt("max-mutating-requests-inflight", &values->max_mutating_requests_inflight, 0, 1000000,
              "Write requests served at once; more get 429 TooManyRequests with Retry-After "
              "(0: no limit). Counted per level, as --max-requests-inflight")
      .ValueName("INT");
  flags
      .AddDuration("write-stall-timeout", &values->write_stall_timeout,
                   "A response write to a client that accepts no byte for this long ends its "
                   "connection and frees its request's seat (at least 100ms)")
      .MinDuration(absl::Milliseconds(100));
  flags
      .AddInt("watch-threads", &values->watch_threads, 0, 64,
              "Threads that write every watch once it is set up, driven by socket readiness: "
              "a watch costs a few KiB, not a thread. 0: each watch keeps its connection's "
              "thread (the former model)")
      .ValueName("INT");
  flags
      .AddDuration("watch-stall-timeout", &values->watch_stall_timeout,
                   "A watch whose client accepts no byte for this long while events wait for "
                   "it is ended (its client watches again from its last resourceVersion); "
                   "counted and logged (at least 100ms)")
      .MinDuration(absl::Milliseconds(100));
  flags
      .AddString("feature-gates", &values->feature_gates,
                 "Alpha features on or off, as kube-apiserver's flag: ShardedListAndWatch=true|"
                 "false (KEP-5866's shardSelector on LIST and WATCH; default true; false serves "
                 "as a Kubernetes before 1.36 does: the parameter is ignored)")
      .ValueName("NAME=BOOL,...");
  flags.AddBool("print-kubeconfig-path", &values->print_kubeconfig_path,
                "Print the path of the kubeconfig written for kubectl on stdout once serving");
}

absl::Status ApplyFeatureGates(absl::string_view gates, apiserver::ApiServerOptions* options) {
  for (absl::string_view gate : absl::StrSplit(gates, ',', absl::SkipWhitespace())) {
    gate = absl::StripAsciiWhitespace(gate);
    const size_t eq = gate.find('=');
    const absl::string_view name = absl::StripAsciiWhitespace(gate.substr(0, eq));
    const absl::string_view value =
        eq == absl::string_view::npos ? "" : absl::StripAsciiWhitespace(gate.substr(eq + 1));
    if (name != "ShardedListAndWatch") {
      return absl::InvalidArgumentError(absl::StrCat("--feature-gates: unknown feature gate \"",
                                                     name, "\" (known: ShardedListAndWatch)"));
    }
    if (value != "true" && value != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("--feature-gates: ", name, " must be true or false, not \"", value, "\""));
    }
    options->sharded_list_and_watch = value == "true";
  }
  return absl::OkStatus();
}

int RunApiServerCommand(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  FlagSet flags("ctrlhost apiserver",
                "Runs the embedded Kubernetes-compatible API server on its own: SQLite storage "
                "in --data-dir, TLS with a self-signed CA generated on first start, bearer "
                "token authentication, and a kubeconfig written for kubectl.");
  ApiServerFlags values;
  AddApiServerFlags(flags, &values);
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
  if (values.bind.empty()) return UsageError(flags.command(), "--bind must not be empty", err);

  if (values.storage_sync != "full" && values.storage_sync != "normal") {
    return UsageError(flags.command(), "--storage-sync must be full or normal", err);
  }
  apiserver::ApiServerOptions options;
  options.data_dir = common::AbsolutePath(values.data_dir);
  options.bind = values.bind;
  options.port = static_cast<int>(values.port);
  options.insecure_http = values.insecure_http;
  options.sync_full = values.storage_sync == "full";
  options.retained_revisions = values.compaction_retain_revisions;
  options.compaction_interval = values.compaction_interval;
  options.max_connections = static_cast<size_t>(values.max_connections);
  options.max_requests_inflight = static_cast<int>(values.max_requests_inflight);
  options.max_mutating_requests_inflight = static_cast<int>(values.max_mutating_requests_inflight);
  options.write_stall_timeout = values.write_stall_timeout;
  options.watch_threads = static_cast<int>(values.watch_threads);
  options.watch_stall_timeout = values.watch_stall_timeout;
  if (absl::Status s = ApplyFeatureGates(values.feature_gates, &options); !s.ok()) {
    return UsageError(flags.command(), s.message(), err);
  }
  return ServeApiServerUntilSignal(options, values.print_kubeconfig_path, out, err);
}

int ServeApiServerUntilSignal(const apiserver::ApiServerOptions& options,
                              bool print_kubeconfig_path, std::ostream& out, std::ostream& err) {
  // Block the stop signals before any thread starts, then wait for them on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> server =
      apiserver::ApiServer::Start(options);
  if (!server.ok()) return Failure(server.status().ToString(), err);
  out << "API server listening on " << (*server)->url() << "\n";
  if (print_kubeconfig_path) out << "kubeconfig: " << (*server)->kubeconfig_path() << "\n";
  out << "try: kubectl --kubeconfig " << (*server)->kubeconfig_path() << " api-resources"
      << std::endl;
  int signal = 0;
  sigwait(&stop_signals, &signal);
  common::LogInfo("stopping the API server", {{"signal", signal}});
  (*server)->Stop();
  return 0;
}

}  // namespace ctrlhost::exe
