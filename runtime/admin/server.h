// AdminServer: serves the host admin API (ctrlhost.admin.v1alpha1.AdminService) on a Unix socket,
// in front of an AdminBackend (backend.h) that the manager implements.
//
//   admin::AdminServerOptions options;
//   options.socket_path = "/var/lib/ctrlhost/admin.sock";   // its directory must exist
//   options.backend = &manager_admin;                        // outlives the server
//   ASSIGN_OR_RETURN(std::unique_ptr<admin::AdminServer> server,
//                    admin::AdminServer::Start(std::move(options)));
//   ... `ctrlhost plugin list`, `ctrlhost plugin swap`, `ctrlhost dump` now reach the host ...
//   server->Stop();                                          // also done by the destructor
//
// What it guarantees:
// - The socket file is created with mode 0600 (chmod right after the bind; see unix_socket.h for
//   the instant before it), so access is governed by file ownership. A stale socket file from an
//   earlier run is removed; a socket another live host serves is never taken over: Start fails
//   with FAILED_PRECONDITION "another host serves <path>". Stop() removes the socket file if it is
//   still the one this server created.
// - Every request is validated before the backend sees it (validate.h): a malformed request is
//   INVALID_ARGUMENT naming the field, and the backend is not called.
// - The backend's absl::Status code becomes the gRPC code one to one, message unchanged.
// - Threading: gRPC's callback API. gRPC's threads only validate a request and hand it to a
//   worker pool; they never wait for the backend. Two pools: `max_concurrent_swaps` workers for
//   SwapPlugin and ReloadConfig (each may block for a swap's ready timeout plus its drain; a
//   request beyond the cap is refused at once with RESOURCE_EXHAUSTED rather than waiting behind
//   minutes of swaps), and `query_threads` workers with a queue of `max_queued_queries` for the
//   rest (reads answer from snapshots; beyond the queue RESOURCE_EXHAUSTED). So a long swap never
//   delays `plugin list` or `dump`, and a flood of requests cannot grow memory without bound.
//   A request whose client went away (cancelled, deadline passed) before its turn is answered
//   CANCELLED without calling the backend.
// - Stop(): refuses new requests (UNAVAILABLE), answers the queued ones UNAVAILABLE, waits for
//   backend calls in progress (a running swap finishes or the backend cancels it: stop the
//   manager's swaps first for a fast shutdown), shuts gRPC down and removes the socket.
//
// Not served: TCP (the CLI's --admin-address). Authentication: the socket file's permissions, and
// with require_token a bearer token kept in a file beside the socket.
//
// Thread-safety: AdminServer is thread-safe. Stop() may be called from any thread except a backend
// call (it waits for backend calls). mu_ guards the running state; everything else is constant
// after Start().
#ifndef CTRLHOST_RUNTIME_ADMIN_SERVER_H_
#define CTRLHOST_RUNTIME_ADMIN_SERVER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "runtime/admin/backend.h"
#include "runtime/admin/unix_socket.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::admin {

class WorkPool;
class AdminServiceImpl;

struct AdminServerOptions {
  // Where to listen. A relative path is made absolute against the working directory; the result
  // must fit a sockaddr_un (107 bytes).
  std::string socket_path;
  // Answers the requests. Borrowed: must stay valid until Stop() has returned. Required.
  AdminBackend* backend = nullptr;
  // SwapPlugin and ReloadConfig calls running at once (>= 1); more are refused with
  // RESOURCE_EXHAUSTED. The backend refuses two swaps of one plugin itself (ABORTED).
  int max_concurrent_swaps = 2;
  // Workers for the other RPCs (>= 1), and how many such requests may wait for one.
  int query_threads = 2;
  int max_queued_queries = 64;
  // Largest request accepted (a SwapPluginRequest with a long environment is still tiny).
  int max_request_bytes = 1 << 20;
  // Require a token: Start writes a random one to "<socket path>.token" (mode 0600, removed by
  // Stop), and every request must carry "authorization: Bearer <token>" (else UNAUTHENTICATED).
  // The socket's 0600 mode keeps other users out; the token also keeps out processes of the
  // host's own user that cannot read the file, such as exec'd plugins under Landlock, which
  // does not mediate connect() on a socket file. The CLI reads the file (admin_client.h).
  bool require_token = false;
};

// Where Start writes the token of a server on `socket_path` with require_token.
inline std::string TokenPathFor(const std::string& socket_path) { return socket_path + ".token"; }

// absl::Status to grpc::Status: same code (they share the canonical numbering; an out-of-range
// code becomes UNKNOWN), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

class AdminServer {
 public:
  // Claims the socket path, binds, restricts the socket to 0600 and starts serving.
  // InvalidArgument for bad options (no backend, a path too long, counts < 1); FailedPrecondition
  // when the directory is missing, the path holds something else or another host serves it, or
  // the bind fails.
  static absl::StatusOr<std::unique_ptr<AdminServer>> Start(AdminServerOptions options);

  ~AdminServer();  // Stop()
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // See the file comment. Idempotent; returns once no backend call runs and the socket is gone.
  void Stop();

  // The absolute socket path, and the gRPC target "unix://<path>" clients dial.
  const std::string& socket_path() const { return socket_path_; }
  // "<socket path>.token" with require_token, else empty.
  const std::string& token_path() const { return token_path_; }
  std::string target() const { return "unix://" + socket_path_; }

 private:
  AdminServer(std::string socket_path, std::unique_ptr<WorkPool> swaps,
              std::unique_ptr<WorkPool> queries, std::unique_ptr<AdminServiceImpl> service);

  // Constant after Start().
  const std::string socket_path_;
  std::string token_path_;
  const std::unique_ptr<WorkPool> swaps_;
  const std::unique_ptr<WorkPool> queries_;
  // Declared before server_: the service must outlive the gRPC server that calls it.
  const std::unique_ptr<AdminServiceImpl> service_;

  common::Mutex mu_;
  std::unique_ptr<grpc::Server> server_ ABSL_GUARDED_BY(mu_);
  SocketFile socket_file_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ctrlhost::admin

#endif  // CTRLHOST_RUNTIME_ADMIN_SERVER_H_
