#include "runtime/admin/server.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/admin/v1alpha1/admin.grpc.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "runtime/admin/validate.h"
#include "runtime/admin/work_pool.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::admin {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  // absl and gRPC share the canonical codes 1..16.
  const grpc::StatusCode grpc_code =
      code >= 1 && code <= 16 ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN;
  return grpc::Status(grpc_code, std::string(status.message()));
}

namespace {

std::string ActionName(const adminpb::SwapPluginRequest& request) {
  switch (request.action_case()) {
    case adminpb::SwapPluginRequest::kReplace:
      return "replace";
    case adminpb::SwapPluginRequest::kStartCanary:
      return absl::StrCat("start_canary ", request.start_canary().percent(), "%");
    case adminpb::SwapPluginRequest::kPromoteCanary:
      return "promote_canary";
    case adminpb::SwapPluginRequest::kAbortCanary:
      return "abort_canary";
    case adminpb::SwapPluginRequest::kStartShadow:
      return absl::StrCat(
          "start_shadow ",
          request.start_shadow().percent() == 0 ? 100 : request.start_shadow().percent(), "%");
    case adminpb::SwapPluginRequest::kStopShadow:
      return "stop_shadow";
    case adminpb::SwapPluginRequest::kPromoteShadow:
      return "promote_shadow";
    case adminpb::SwapPluginRequest::ACTION_NOT_SET:
      break;
  }
  return "none";
}

// Mutations are rare and consequential: they are logged with their outcome.
void LogSwap(const adminpb::SwapPluginRequest& request,
             const absl::StatusOr<adminpb::SwapPluginResponse>& result) {
  const std::string plugin = absl::StrCat(request.operator_(), "/", request.plugin());
  if (!result.ok()) {
    common::LogWarning(
        "admin: swap refused",
        {{"plugin", plugin}, {"action", ActionName(request)}, {"error", result.status()}});
  } else if (result->has_failed()) {
    common::LogWarning("admin: swap failed",
                       {{"plugin", plugin},
                        {"action", ActionName(request)},
                        {"reason", adminpb::SwapFailureReason_Name(result->failed().reason())},
                        {"message", result->failed().message()}});
  } else {
    common::LogInfo("admin: swap done", {{"plugin", plugin},
                                         {"action", ActionName(request)},
                                         {"generation", result->succeeded().swap_generation()}});
  }
}

void LogReload(const adminpb::ReloadConfigRequest& request,
               const absl::StatusOr<adminpb::ReloadConfigResponse>& result) {
  if (!result.ok()) {
    common::LogWarning("admin: configuration reload refused",
                       {{"dryRun", request.dry_run()}, {"error", result.status()}});
  } else {
    common::LogInfo("admin: configuration reloaded",
                    {{"dryRun", request.dry_run()}, {"operators", result->changes_size()}});
  }
}

// Carries no data: see UnaryCall. Process-wide, so that OnDone's thread can acquire it without
// first reading any memory of the call.
common::Mutex& Handoff() {
  static common::Mutex* const mu = new common::Mutex();
  return *mu;
}

// One unary call's reactor. The call is handed to a worker only once gRPC has bound the reactor
// to the call (OnSendInitialMetadataDone, after the handler returned): a Finish() from a worker
// before the bind would be recorded and replayed by gRPC under its own lock, which lives in the
// uninstrumented Abseil, and ThreadSanitizer would flag every such hand-off. After the bind, gRPC
// orders Finish() through an atomic in its headers, which TSan sees. The remaining hand-offs
// between our threads and gRPC's (the worker read the request and wrote the response and gRPC
// frees them after OnDone; the reaction that starts the work reads this object) are stated to TSan
// by the empty critical sections on Handoff(). Deletes itself in OnDone(), which gRPC calls only
// after every reaction returned. Thread-safe.
class UnaryCall final : public grpc::ServerUnaryReactor {
 public:
  // Returns whether `start` accepted the call; if not, the call finishes with its status.
  using Start = std::function<absl::Status(UnaryCall*)>;

  explicit UnaryCall(Start start) : start_(std::move(start)) {
    StartSendInitialMetadata();
    // After the last write of this thread to the object.
    { common::MutexLock lock(&Handoff()); }
  }

  void FinishWith(grpc::Status status) {
    { common::MutexLock lock(&Handoff()); }
    Finish(std::move(status));
  }

  void OnSendInitialMetadataDone(bool ok) override {
    { common::MutexLock lock(&Handoff()); }
    if (!ok) {
      FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
      return;
    }
    if (absl::Status s = start_(this); !s.ok()) FinishWith(ToGrpcStatus(s));
  }

  void OnDone() override {
    { common::MutexLock lock(&Handoff()); }
    delete this;
  }

 private:
  // Constant after construction.
  const Start start_;
};

}  // namespace

// The AdminService callback implementation: validates on gRPC's thread, then hands the call to a
// pool. Thread-safe: it holds only pointers that are constant after construction.
class AdminServiceImpl final : public adminpb::AdminService::CallbackService {
 public:
  AdminServiceImpl(AdminBackend* backend, WorkPool* swaps, WorkPool* queries, std::string token)
      : backend_(backend), swaps_(swaps), queries_(queries), token_(std::move(token)) {}

  grpc::ServerUnaryReactor* ListOperators(grpc::CallbackServerContext* context,
                                          const adminpb::ListOperatorsRequest* request,
                                          adminpb::ListOperatorsResponse* response) override {
    return Handle(context, request, response, queries_, nullptr, &AdminBackend::ListOperators);
  }
  grpc::ServerUnaryReactor* ListPlugins(grpc::CallbackServerContext* context,
                                        const adminpb::ListPluginsRequest* request,
                                        adminpb::ListPluginsResponse* response) override {
    return Handle(context, request, response, queries_, nullptr, &AdminBackend::ListPlugins);
  }
  grpc::ServerUnaryReactor* GetPlugin(grpc::CallbackServerContext* context,
                                      const adminpb::GetPluginRequest* request,
                                      adminpb::GetPluginResponse* response) override {
    return Handle(context, request, response, queries_, &ValidateGetPluginRequest,
                  &AdminBackend::GetPlugin);
  }
  grpc::ServerUnaryReactor* ListControllers(grpc::CallbackServerContext* context,
                                            const adminpb::ListControllersRequest* request,
                                            adminpb::ListControllersResponse* response) override {
    return Handle(context, request, response, queries_, nullptr, &AdminBackend::ListControllers);
  }
  grpc::ServerUnaryReactor* GetController(grpc::CallbackServerContext* context,
                                          const adminpb::GetControllerRequest* request,
                                          adminpb::GetControllerResponse* response) override {
    return Handle(context, request, response, queries_, &ValidateGetControllerRequest,
                  &AdminBackend::GetController);
  }
  grpc::ServerUnaryReactor* SwapPlugin(grpc::CallbackServerContext* context,
                                       const adminpb::SwapPluginRequest* request,
                                       adminpb::SwapPluginResponse* response) override {
    return Handle(context, request, response, swaps_, &ValidateSwapPluginRequest,
                  &AdminBackend::SwapPlugin, &LogSwap);
  }
  grpc::ServerUnaryReactor* ReloadConfig(grpc::CallbackServerContext* context,
                                         const adminpb::ReloadConfigRequest* request,
                                         adminpb::ReloadConfigResponse* response) override {
    return Handle(context, request, response, swaps_, nullptr, &AdminBackend::ReloadConfig,
                  &LogReload);
  }
  grpc::ServerUnaryReactor* DumpState(grpc::CallbackServerContext* context,
                                      const adminpb::DumpStateRequest* request,
                                      adminpb::DumpStateResponse* response) override {
    return Handle(context, request, response, queries_, nullptr, &AdminBackend::DumpState);
  }

 private:
  template <typename Request, typename Response>
  using Method = absl::StatusOr<Response> (AdminBackend::*)(const Request&);
  // Validators and loggers are optional (nullptr): they must not take part in deduction.
  template <typename T>
  struct NonDeduced {
    using type = T;
  };
  template <typename Request>
  using Validator = typename NonDeduced<absl::Status (*)(const Request&)>::type;
  template <typename Request, typename Response>
  using Logger =
      typename NonDeduced<void (*)(const Request&, const absl::StatusOr<Response>&)>::type;

  // Runs on a gRPC thread: never waits. `request` and `response` stay valid until Finish().
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Handle(grpc::CallbackServerContext* context, const Request* request,
                                   Response* response, WorkPool* pool, Validator<Request> validate,
                                   Method<Request, Response> method,
                                   Logger<Request, Response> log = nullptr) {
    if (!token_.empty() && !Authorized(*context)) {
      common::LogDebug("admin: request without the host's token",
                       {{"method", Request::descriptor()->name()}});
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                   "the admin API needs the host's token (the file beside its "
                                   "socket, readable by the host's user only)"));
      return reactor;
    }
    if (validate != nullptr) {
      if (absl::Status s = validate(*request); !s.ok()) {
        common::LogDebug("admin: invalid request",
                         {{"method", Request::descriptor()->name()}, {"error", s}});
        // Answered on the handler's thread: gRPC's own reactor, no hand-off.
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        reactor->Finish(ToGrpcStatus(s));
        return reactor;
      }
    }
    AdminBackend* backend = backend_;
    return new UnaryCall([=](UnaryCall* reactor) {
      return pool->TrySchedule([=](bool run) {
        if (!run) {
          reactor->FinishWith(
              grpc::Status(grpc::StatusCode::UNAVAILABLE, "the admin server is stopping"));
          return;
        }
        if (context->IsCancelled()) {
          reactor->FinishWith(grpc::Status(grpc::StatusCode::CANCELLED,
                                           "the client went away before the request ran"));
          return;
        }
        absl::StatusOr<Response> result = (backend->*method)(*request);
        if (log != nullptr) log(*request, result);
        if (!result.ok()) {
          reactor->FinishWith(ToGrpcStatus(result.status()));
          return;
        }
        *response = *std::move(result);
        reactor->FinishWith(grpc::Status::OK);
      });
    });
  }

  // Compares in constant time, so the answer's timing says nothing about the token.
  bool Authorized(const grpc::CallbackServerContext& context) const {
    const auto& metadata = context.client_metadata();
    auto it = metadata.find("authorization");
    if (it == metadata.end()) return false;
    const std::string expected = "Bearer " + token_;
    const grpc::string_ref& got = it->second;
    if (got.size() != expected.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < expected.size(); ++i) diff |= got.data()[i] ^ expected[i];
    return diff == 0;
  }

  // Constant after construction; borrowed from the AdminServer and its options.
  AdminBackend* const backend_;
  WorkPool* const swaps_;
  WorkPool* const queries_;
  const std::string token_;  // empty: no token required
};

namespace {

// 32 random bytes from the kernel, hex-encoded.
absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

// Writes `token` to `path` with mode 0600 (a new file, renamed over any old one).
absl::Status WriteTokenFile(const std::string& path, const std::string& token) {
  const std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write the admin token ", tmp, ": ", std::strerror(errno)));
  }
  const bool written = write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  const bool closed = close(fd) == 0;
  if (!written || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write the admin token ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

}  // namespace

AdminServer::AdminServer(std::string socket_path, std::unique_ptr<WorkPool> swaps,
                         std::unique_ptr<WorkPool> queries,
                         std::unique_ptr<AdminServiceImpl> service)
    : socket_path_(std::move(socket_path)),
      swaps_(std::move(swaps)),
      queries_(std::move(queries)),
      service_(std::move(service)) {}

absl::StatusOr<std::unique_ptr<AdminServer>> AdminServer::Start(AdminServerOptions options) {
  if (options.backend == nullptr) {
    return absl::InvalidArgumentError("AdminServerOptions.backend is required");
  }
  if (options.max_concurrent_swaps < 1 || options.query_threads < 1 ||
      options.max_queued_queries < 0 || options.max_request_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdminServerOptions: max_concurrent_swaps (", options.max_concurrent_swaps,
                     ") and query_threads (", options.query_threads,
                     ") must be >= 1, max_queued_queries (", options.max_queued_queries,
                     ") >= 0 and max_request_bytes (", options.max_request_bytes, ") >= 1"));
  }
  std::string path = options.socket_path;
  if (!path.empty() && path[0] != '/') {
    std::error_code error;
    std::filesystem::path absolute = std::filesystem::absolute(path, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat("cannot make the admin socket path \"",
                                                        path, "\" absolute: ", error.message()));
    }
    path = absolute.lexically_normal().string();
  }
  if (absl::Status s = ClaimSocketPath(path); !s.ok()) return s;

  auto swaps = std::make_unique<WorkPool>("admin swaps", options.max_concurrent_swaps,
                                          /*max_queued=*/0);
  auto queries = std::make_unique<WorkPool>("admin queries", options.query_threads,
                                            options.max_queued_queries);
  std::string token;
  if (options.require_token) {
    ASSIGN_OR_RETURN(token, NewToken());
    RETURN_IF_ERROR(WriteTokenFile(TokenPathFor(path), token));
  }
  auto service =
      std::make_unique<AdminServiceImpl>(options.backend, swaps.get(), queries.get(), token);
  std::unique_ptr<AdminServer> server(
      new AdminServer(path, std::move(swaps), std::move(queries), std::move(service)));
  if (options.require_token) server->token_path_ = TokenPathFor(path);

  grpc::ServerBuilder builder;
  builder.AddListeningPort(server->target(), grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(options.max_request_bytes);
  builder.RegisterService(server->service_.get());
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  if (grpc_server == nullptr) {
    // The destructor stops the pools; nothing was bound.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", server->target(), " (see the gRPC log line above)"));
  }
  absl::StatusOr<SocketFile> file = RestrictSocket(path);
  if (!file.ok()) {
    grpc_server->Shutdown(std::chrono::system_clock::now());
    return file.status();
  }
  {
    common::MutexLock lock(&server->mu_);
    server->server_ = std::move(grpc_server);
    server->socket_file_ = *file;
  }
  common::LogInfo("admin API serving", {{"socket", path}});
  return server;
}

AdminServer::~AdminServer() { Stop(); }

void AdminServer::Stop() {
  common::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  // Pools first: queued requests are answered UNAVAILABLE and running backend calls finish, so
  // every reactor has finished when gRPC's Shutdown waits for them; requests that arrive meanwhile
  // are refused by the stopped pools.
  swaps_->Stop();
  queries_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
    RemoveSocketFile(socket_file_);
    if (!token_path_.empty()) unlink(token_path_.c_str());
    common::LogInfo("admin API stopped", {{"socket", socket_path_}});
  }
}

}  // namespace ctrlhost::admin
