#include "runtime/exe/admin_client.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "runtime/exe/command.h"

namespace ctrlhost::exe {

void AddAdminClientFlags(FlagSet& flags, AdminClientFlags* values) {
  flags.AddString("data-dir", &values->data_dir, "Data directory of the host (\"ctrlhost run\")")
      .ValueName("DIR");
  flags.AddString("admin-socket", &values->admin_socket, "Unix socket of the host's admin API")
      .ValueName("PATH")
      .DefaultText("<data-dir>/admin.sock");
  flags
      .AddString("admin-address", &values->admin_address,
                 "TCP address of the host's admin API, instead of --admin-socket")
      .ValueName("HOST:PORT");
  flags.AddDuration("timeout", &values->timeout, "How long to wait for the host to answer")
      .MinDuration(absl::Milliseconds(1));
}

absl::StatusOr<std::string> ResolveAdminTarget(const AdminClientFlags& values) {
  if (!values.admin_address.empty()) {
    if (!values.admin_socket.empty()) {
      return absl::InvalidArgumentError(
          "--admin-socket and --admin-address are mutually exclusive");
    }
    if (absl::Status s = ValidateHostPort("--admin-address", values.admin_address); !s.ok()) {
      return s;
    }
    return values.admin_address;
  }
  std::string path = values.admin_socket;
  if (path.empty()) {
    if (values.data_dir.empty()) return absl::InvalidArgumentError("--data-dir must not be empty");
    path = (std::filesystem::path(values.data_dir) / "admin.sock").string();
  }
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (!error) path = absolute.lexically_normal().string();
  return absl::StrCat("unix://", path);
}

AdminCommand::AdminCommand(FlagSet& flags) : flags_(flags) {
  AddAdminClientFlags(flags_, &where_);
  AddCommonFlags(flags_, &common_);
}

std::optional<int> AdminCommand::Parse(const std::vector<std::string>& args, std::ostream& out,
                                       std::ostream& err) {
  return ParseCommandLine(flags_, common_, args, out, err);
}

absl::StatusOr<std::unique_ptr<AdminClient>> AdminCommand::Connect() const {
  absl::StatusOr<std::string> target = ResolveAdminTarget(where_);
  if (!target.ok()) return target.status();
  return AdminClient::Connect(*target, where_.timeout);
}

int AdminCommand::ConnectFailed(const absl::Status& status, std::ostream& err) const {
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    return UsageError(flags_.command(), status.message(), err);
  }
  return Failure(status.message(), err);
}

std::string UnreachableMessage(absl::string_view target) {
  return absl::StrCat("cannot reach the ctrlhost admin API at ", target,
                      ": is \"ctrlhost run\" running?");
}

absl::StatusOr<std::unique_ptr<AdminClient>> AdminClient::Connect(const std::string& target,
                                                                  absl::Duration timeout) {
  // A missing socket file is the common case ("ctrlhost run" is not running): say so at once
  // instead of letting gRPC retry until the deadline.
  std::string token;
  if (absl::StartsWith(target, "unix://")) {
    struct stat info;
    const std::string path = target.substr(std::string("unix://").size());
    if (stat(path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) {
      return absl::UnavailableError(UnreachableMessage(target));
    }
    // The host's admin token (server.h: require_token), beside the socket.
    const std::string token_path = path + ".token";
    std::ifstream in(token_path, std::ios::binary);
    if (in) {
      char buffer[256];
      in.read(buffer, sizeof(buffer));
      token.assign(buffer, static_cast<size_t>(in.gcount()));
    } else if (errno != ENOENT) {
      return absl::PermissionDeniedError(absl::StrCat("cannot read the admin token ", token_path,
                                                      ": ", std::strerror(errno),
                                                      " (run as the user of \"ctrlhost run\")"));
    }
  }
  grpc::ChannelArguments arguments;
  // Fail fast on a refused connection rather than backing off quietly until the deadline.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), arguments);
  const auto deadline = std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
  for (;;) {
    grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) break;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
      return absl::UnavailableError(UnreachableMessage(target));
    }
    if (!channel->WaitForStateChange(state, deadline)) {
      return absl::UnavailableError(UnreachableMessage(target));
    }
  }
  return std::unique_ptr<AdminClient>(
      new AdminClient(target, timeout, std::move(channel), std::move(token)));
}

void AdminClient::SetDeadline(grpc::ClientContext* context, absl::Duration deadline) const {
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(deadline));
  if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
}

absl::Status AdminClient::FromGrpc(const grpc::Status& status, absl::Duration deadline) const {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(
          absl::StrCat("the ctrlhost admin API at ", target_, " did not answer within ",
                       absl::FormatDuration(deadline), " (see --timeout)"));
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(
          absl::StrCat(UnreachableMessage(target_), " (", status.error_message(), ")"));
    default:
      // gRPC and absl share the canonical codes.
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
  }
}

absl::StatusOr<adminpb::ListPluginsResponse> AdminClient::ListPlugins(
    const adminpb::ListPluginsRequest& request) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_);
  adminpb::ListPluginsResponse response;
  if (absl::Status s = FromGrpc(stub_->ListPlugins(&context, request, &response), timeout_);
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<adminpb::SwapPluginResponse> AdminClient::SwapPlugin(
    const adminpb::SwapPluginRequest& request, absl::Duration deadline) {
  grpc::ClientContext context;
  SetDeadline(&context, deadline);
  adminpb::SwapPluginResponse response;
  if (absl::Status s = FromGrpc(stub_->SwapPlugin(&context, request, &response), deadline);
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<adminpb::DumpStateResponse> AdminClient::DumpState() {
  grpc::ClientContext context;
  SetDeadline(&context, timeout_);
  adminpb::DumpStateResponse response;
  if (absl::Status s =
          FromGrpc(stub_->DumpState(&context, adminpb::DumpStateRequest(), &response), timeout_);
      !s.ok()) {
    return s;
  }
  return response;
}

}  // namespace ctrlhost::exe
