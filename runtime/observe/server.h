// The host's observability endpoints over HTTP (cpp-httplib):
//   GET /metrics        Prometheus text format 0.0.4 (MetricsRegistry::ScrapeText)
//   GET /healthz        200 "ok" while the process serves (liveness)
//   GET /readyz         200 "ok" when every registered readiness check passes, else 503 with
//                       the failed checks; `?verbose` lists every check like kube-apiserver;
//   GET /readyz/<name>  one check
//   GET /debug/dump     YAML from the registered dump provider (application/yaml)
//
//   observe::ObserveServerOptions options;   // 127.0.0.1, port 9090 by default
//   options.port = 0;                         // tests: any free port
//   options.metrics = &metrics;
//   ASSIGN_OR_RETURN(std::unique_ptr<observe::ObserveServer> server,
//                    observe::ObserveServer::Start(options));
//   server->SetReadyCheck("informers-synced", [&] { return synced ? absl::OkStatus()
//                                                   : absl::UnavailableError("2 of 5 synced"); });
//   server->SetDumpProvider([&]() -> absl::StatusOr<std::string> { return DumpYaml(); });
//   ...
//   server->Stop();   // or destroy it
//
// Thread-safe. Impl::mu guards the checks and the dump provider. Checks and the dump provider run
// on HTTP worker threads, outside that mutex: they must be quick and must not block for long (read
// a flag, take a short lock). Start() returns once the listener is accepting, so Stop() right after
// it is safe; Stop() returns after every in-flight request has finished, after which no check or
// provider runs again.
#ifndef CTRLHOST_RUNTIME_OBSERVE_SERVER_H_
#define CTRLHOST_RUNTIME_OBSERVE_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/observe/metrics.h"
#include "runtime/serving/connection_server.h"

namespace ctrlhost::observe {

struct ObserveServerOptions {
  // Loopback by default: the dump shows plugin and controller internals.
  std::string bind = "127.0.0.1";
  int port = 9090;  // 0: any free port (see ObserveServer::port())
  // Borrowed; must outlive the server. Null: /metrics answers 404.
  const MetricsRegistry* metrics = nullptr;
};

class ObserveServer {
 public:
  using ReadyCheck = std::function<absl::Status()>;
  using DumpProvider = std::function<absl::StatusOr<std::string>()>;

  // Binds and starts serving. Unavailable when the address cannot be bound; InvalidArgument for
  // a port outside 0..65535.
  static absl::StatusOr<std::unique_ptr<ObserveServer>> Start(const ObserveServerOptions& options);
  ~ObserveServer();  // Stop()s
  ObserveServer(const ObserveServer&) = delete;
  ObserveServer& operator=(const ObserveServer&) = delete;

  int port() const;  // the bound port
  // Connections of this listener (open, not yet authenticated, closed by the limits).
  serving::ConnectionServer::Stats connection_stats() const;
  std::string url() const;  // "http://127.0.0.1:PORT"

  // Adds or replaces the readiness check `name` (a kube-style name such as "informers-synced";
  // its failure message is shown to callers of /readyz).
  void SetReadyCheck(const std::string& name, ReadyCheck check);
  // Adds or replaces what `?verbose` says beside a passing check `name`:
  // "[+]leader ok: standby, leader host-a_1f2e3d4c". Empty: nothing.
  void SetReadyDetail(const std::string& name, std::function<std::string()> detail);
  // A request already running the check may still finish that call: what a check captures
  // must live until Stop() (or until such a request has surely finished).
  void RemoveReadyCheck(const std::string& name);
  // Null clears it (/debug/dump answers 503 until one is set).
  void SetDumpProvider(DumpProvider provider);

  // Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit ObserveServer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrlhost::observe

#endif  // CTRLHOST_RUNTIME_OBSERVE_SERVER_H_
