// The client side of the host admin API (ctrlhost.admin.v1alpha1.AdminService) used by
// `ctrlhost plugin ...` and `ctrlhost dump`: the flags that say where the host listens, and a
// connection that fails fast and clearly when nothing is there.
//
// Every admin command starts the same way, through AdminCommand:
//
//   FlagSet flags("ctrlhost dump", "...");
//   ... the command's own flags ...
//   AdminCommand command_line(flags);         // --data-dir, --admin-socket, ..., --log-level
//   if (std::optional<int> exit = command_line.Parse(args, out, err)) return *exit;
//   ... the command's own checks ...
//   absl::StatusOr<std::unique_ptr<AdminClient>> client = command_line.Connect();
//   if (!client.ok()) return command_line.ConnectFailed(client.status(), err);
//   absl::StatusOr<adminpb::ListPluginsResponse> plugins = (*client)->ListPlugins({});
//
// Errors: flag problems are InvalidArgument; a host that cannot be reached is Unavailable with
//   cannot reach the ctrlhost admin API at unix:///x/admin.sock: is "ctrlhost run" running?
// and an RPC the host refused carries the host's code and message.
//
// Thread-safety: AdminClient is thread-safe (a gRPC stub); the functions are thread-safe.
#ifndef CTRLHOST_RUNTIME_EXE_ADMIN_CLIENT_H_
#define CTRLHOST_RUNTIME_EXE_ADMIN_CLIENT_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/admin/v1alpha1/admin.grpc.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {

// Where the admin API listens and how long to wait for it.
struct AdminClientFlags {
  std::string data_dir = ".ctrlhost";
  std::string admin_socket;   // empty: <data-dir>/admin.sock
  std::string admin_address;  // HOST:PORT instead of the socket
  absl::Duration timeout = absl::Seconds(5);
};

// Declares --data-dir, --admin-socket, --admin-address and --timeout.
void AddAdminClientFlags(FlagSet& flags, AdminClientFlags* values);

// The gRPC target: "unix:///absolute/path.sock" or "HOST:PORT". InvalidArgument when both
// --admin-socket and --admin-address are given or the address is malformed.
absl::StatusOr<std::string> ResolveAdminTarget(const AdminClientFlags& values);

// A connection to the host admin API. Thread-safe: the gRPC channel and stub are; every member
// is constant after construction.
class AdminClient {
 public:
  // Connects to `target` within `timeout`. Unavailable (with the "is ctrlhost run running?"
  // message) when the socket does not exist, the connection is refused, or nothing answers in
  // time.
  static absl::StatusOr<std::unique_ptr<AdminClient>> Connect(const std::string& target,
                                                              absl::Duration timeout);

  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  // Each call has a deadline of the connect timeout unless given one.
  absl::StatusOr<adminpb::ListPluginsResponse> ListPlugins(
      const adminpb::ListPluginsRequest& request);
  absl::StatusOr<adminpb::SwapPluginResponse> SwapPlugin(const adminpb::SwapPluginRequest& request,
                                                         absl::Duration deadline);
  absl::StatusOr<adminpb::DumpStateResponse> DumpState();

  const std::string& target() const { return target_; }

 private:
  AdminClient(std::string target, absl::Duration timeout, std::shared_ptr<grpc::Channel> channel,
              std::string token)
      : target_(std::move(target)),
        timeout_(timeout),
        token_(std::move(token)),
        channel_(std::move(channel)),
        stub_(adminpb::AdminService::NewStub(channel_)) {}

  // The host's answer as an absl::Status, with the target named for transport failures.
  absl::Status FromGrpc(const grpc::Status& status, absl::Duration deadline) const;
  void SetDeadline(grpc::ClientContext* context, absl::Duration deadline) const;

  // Constant after construction.
  const std::string target_;
  const absl::Duration timeout_;
  const std::string token_;  // from "<socket>.token" when the host wrote one
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<adminpb::AdminService::Stub> stub_;
};

// The start every admin command shares: declares the admin-client flags and the common flags on
// `flags`, parses the command line, and connects, answering each failure with the exit code a
// user expects (usage error 2 for a bad --admin-socket/--admin-address, failure 1 for a host
// that cannot be reached). Thread-compatible: one command's thread uses it. `flags` is borrowed
// and must outlive this object, which it holds pointers into (hence not copyable or movable).
class AdminCommand {
 public:
  // Call after declaring the command's own flags (the common flags get their own help section).
  explicit AdminCommand(FlagSet& flags);
  AdminCommand(const AdminCommand&) = delete;
  AdminCommand& operator=(const AdminCommand&) = delete;

  // ParseCommandLine (command.h): nullopt when the command goes on, else the exit code.
  std::optional<int> Parse(const std::vector<std::string>& args, std::ostream& out,
                           std::ostream& err);
  // After Parse: resolves the target and connects (ResolveAdminTarget, AdminClient::Connect).
  absl::StatusOr<std::unique_ptr<AdminClient>> Connect() const;
  // Prints Connect()'s error and returns the exit code: kExitUsage for InvalidArgument (the
  // target flags), kExitFailure otherwise. Only for Connect()'s errors: an RPC's error is
  // always a run-time failure.
  int ConnectFailed(const absl::Status& status, std::ostream& err) const;

  // The parsed admin-client flags (--timeout bounds the calls).
  const AdminClientFlags& where() const { return where_; }

 private:
  FlagSet& flags_;
  AdminClientFlags where_;
  CommonFlags common_;
};

// The message for a host that cannot be reached at `target`.
std::string UnreachableMessage(absl::string_view target);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_ADMIN_CLIENT_H_
