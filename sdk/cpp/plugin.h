// Plugin: a process that serves one or more controllers to the ctrlhost host over gRPC.
//
//   int main() {
//     ctrlhost::sdk::Plugin plugin("webapp", "1.0.0");
//     plugin.Add(ctrlhost::sdk::ControllerBuilder("webapp")
//                    .For("apps.ctrlhost.dev", "v1alpha1", "WebApp")
//                    .Owns("apps", "v1", "Deployment")
//                    .Reconcile(ReconcileWebApp));
//     return plugin.Run();
//   }
//
// Run() listens on $CTRLHOST_PLUGIN_ADDRESS (`unix:///abs/path.sock`, `unix:/abs/path.sock` or
// `host:port`; exits with code 2 and a clear message on stderr when unset or malformed), with
// TLS or mutual TLS when $CTRLHOST_PLUGIN_TLS_CERT_FILE/_KEY_FILE (and _CLIENT_CA_FILE) are set
// (server_tls.h; plaintext only on Unix sockets and loopback hosts, else exit code 2), and
// serves, until SIGTERM or SIGINT:
// - ctrlhost.plugin.v1alpha1.ControllerPluginService: Describe answers "v1alpha1" when the host
//   offers it (else FAILED_PRECONDITION), the plugin's capabilities and controller specs; it
//   also fails with FAILED_PRECONDITION, naming the controller, when the host lacks a capability
//   a controller's spec needs. Reconcile: each stream's requests run on a bounded worker pool
//   and are answered as they finish (any order); a CancelNotice marks the request cancelled
//   (Request::cancelled()) and its answer is not sent.
// - grpc.health.v1.Health (Check and Watch): SERVING for "" and for
//   "ctrlhost.plugin.v1alpha1.ControllerPluginService" once serving, NOT_SERVING once draining;
//   other service names are NOT_FOUND. (Our own sync-API service rather than gRPC's default one,
//   whose callback code reports gRPC-internal races under ThreadSanitizer.)
//
// Message limits: the server accepts and sends messages up to 64 MiB (the protocol's default
// DescribeRequest.max_message_bytes; PluginOptions::max_message_bytes to change it). A response
// that would exceed the limit is replaced with the terminal error ResponseTooLarge naming its
// size (it would not shrink on a retry), so one oversized answer never breaks the stream for
// the other requests.
//
// Shutdown (SIGTERM/SIGINT, or PluginServer::Shutdown): health goes NOT_SERVING; new reconciles
// are answered at once with a retryable error ("plugin shutting down"); in-flight ones get up to
// `shutdown_grace` (default 8 s, under the host's 10 s kill grace) to finish and be answered;
// then open streams are cancelled and Run() returns 0. Reconciles still running after that are
// abandoned (the host retries their keys).
//
// Threading: gRPC's sync server runs Describe and each stream's read loop on its own threads;
// reconcile functions run on the worker pool (PluginOptions::workers, default: the sum of the
// controllers' max_concurrent_reconciles, at least 1 each, at most 64). Writes to one stream are
// serialized by a per-stream mutex. A Plugin is configured (Add) from one thread before
// Start/Run; afterwards it is read-only except for the negotiated capabilities (guarded by mu_).
#ifndef CTRLHOST_SDK_CPP_PLUGIN_H_
#define CTRLHOST_SDK_CPP_PLUGIN_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/mutex.h"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/server_tls.h"

namespace ctrlhost::sdk {

inline constexpr char kProtocolVersion[] = "v1alpha1";
inline constexpr char kServiceName[] = "ctrlhost.plugin.v1alpha1.ControllerPluginService";
inline constexpr char kAddressEnv[] = "CTRLHOST_PLUGIN_ADDRESS";
inline constexpr int kDefaultMaxMessageBytes = 64 << 20;

struct PluginOptions {
  int workers = 0;  // 0: derived from the controllers (see the file comment)
  int max_message_bytes = kDefaultMaxMessageBytes;
  absl::Duration shutdown_grace = absl::Seconds(8);
  // A failed background task is restarted after this delay, doubling up to the maximum.
  absl::Duration task_backoff = absl::Seconds(1);
  absl::Duration task_max_backoff = absl::Seconds(60);
};

class PluginServer;

class Plugin {
 public:
  Plugin(absl::string_view name, absl::string_view version, PluginOptions options = {});
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Adds a controller. A declaration error is kept; Start() and Run() report the first one.
  Plugin& Add(const ControllerBuilder& builder);
  Plugin& Add(std::shared_ptr<const Controller> controller);

  // OK, or the first declaration error (invalid controller, duplicate name, no controllers).
  absl::Status status() const;
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::vector<std::shared_ptr<const Controller>>& controllers() const { return controllers_; }
  const Controller* Find(absl::string_view controller) const;

  // The handshake answer (see the file comment). Records the capabilities in effect.
  absl::StatusOr<pluginpb::DescribeResponse> Describe(const pluginpb::DescribeRequest& request);
  // Capabilities in effect: the intersection from the last Describe; before any, everything
  // the SDK supports.
  std::set<pluginpb::Capability> capabilities() const;
  // One reconcile, never throws (see Invoke in controller.h); unknown controller: terminal.
  pluginpb::ReconcileResponse Handle(uint64_t request_id, const pluginpb::ReconcileCall& call,
                                     std::shared_ptr<const std::atomic<bool>> cancelled = {}) const;

  // Starts serving on `address` (see ParseListenAddress), with TLS when `tls` is set (see
  // server_tls.h); plaintext only on Unix sockets and loopback hosts (FailedPrecondition
  // otherwise). For tests and embedding. Turns off Abseil's mutex deadlock detector for the
  // process (runtime/common/absl_deadlock.h: Debian's Abseil would abort on a false positive).
  absl::StatusOr<std::unique_ptr<PluginServer>> Start(absl::string_view address,
                                                      std::optional<ServerTls> tls = std::nullopt);
  // Serves on $CTRLHOST_PLUGIN_ADDRESS until SIGTERM/SIGINT, with TLS from
  // $CTRLHOST_PLUGIN_TLS_* (server_tls.h); returns the exit code (0 after a graceful stop, 2
  // for a configuration error, 1 when serving fails).
  int Run();

  const PluginOptions& options() const { return options_; }
  int WorkerCount() const;

  // Reports SERVING (true) or NOT_SERVING (false) on grpc.health.v1, for "" and the service
  // name, on every server this plugin is running (Start or Run), e.g. to pause while a
  // dependency is down: the host then sends no new reconciles (they wait in the host) until
  // SetServing(true), and restarts the plugin if it stays NOT_SERVING longer than its
  // notServingTimeout (docs/protocol.md, "Liveness"). Ignored by a server that is draining.
  // Applies to running servers only; a server starts SERVING. Callable from any thread.
  void SetServing(bool serving);

  // Servers register themselves while they run (for SetServing). Internal.
  void Register(PluginServer* server);
  void Unregister(PluginServer* server);

 private:
  const std::string name_;
  const std::string version_;
  const PluginOptions options_;
  std::vector<std::shared_ptr<const Controller>> controllers_;  // set up before serving
  absl::Status status_;                                         // first declaration error

  mutable common::Mutex mu_;
  std::set<pluginpb::Capability> capabilities_ ABSL_GUARDED_BY(mu_);
  std::set<PluginServer*> servers_ ABSL_GUARDED_BY(mu_);  // running (Register/Unregister)
};

// A running server. Thread-safe: Shutdown and Wait may be called from any thread.
class PluginServer {
 public:
  virtual ~PluginServer() = default;
  // The address actually bound ("unix:/path" or "127.0.0.1:PORT" with the chosen port).
  virtual const std::string& address() const = 0;
  // Graceful stop as described in the file comment; returns when the server has stopped.
  // Idempotent.
  virtual void Shutdown(absl::Duration grace) = 0;
  // Reconciles running now (all streams).
  virtual int InFlight() const = 0;
  // SERVING (true) or NOT_SERVING (false) on grpc.health.v1 for "" and the service name; see
  // Plugin::SetServing. Ignored once draining (Shutdown keeps NOT_SERVING).
  virtual void SetServing(bool serving) = 0;
};

// Validates a listen address: "unix:///abs/path" and "unix:/abs/path" (socket path at most 107
// bytes; a stale socket file is removed before listening), or "host:port" with a port of
// 0-65535. Returns the form gRPC listens on. InvalidArgument with the reason otherwise.
absl::StatusOr<std::string> ParseListenAddress(absl::string_view address);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_PLUGIN_H_
