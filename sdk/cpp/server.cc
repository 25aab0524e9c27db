// The gRPC server behind Plugin::Start: Describe, the Reconcile streams and health.
//
// Threading: gRPC's sync server gives each RPC a thread. A stream's thread only reads: it
// hands reconciles to the worker pool and records cancel notices. Workers write answers through
// the stream's StreamState, whose write_mu serializes writes (gRPC allows one writer and one
// reader at a time) and whose `open` flag stops writes once the handler has returned.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "sdk/cpp/server_internal.h"
#include "sdk/cpp/task_runner.h"
#include "sdk/cpp/worker_pool.h"

namespace ctrlhost::sdk::internal {
namespace {

using Stream = grpc::ServerReaderWriter<pluginpb::ReconcileResponse, pluginpb::ReconcileRequest>;
namespace health = ::grpc::health::v1;

// grpc.health.v1.Health for "" and the plugin service. Written on the sync API rather than
// gRPC's default health service (grpc::EnableDefaultHealthCheckService), whose callback-API
// code is compiled into our instrumented binaries from gRPC's headers and reports races under
// ThreadSanitizer that are gRPC's own. Thread-safe: `mu_` guards the status.
class HealthService final : public health::Health::Service {
 public:
  void Set(bool serving) {
    common::MutexLock lock(&mu_);
    serving_ = serving;
    cv_.SignalAll();
  }
  void Stop() {
    common::MutexLock lock(&mu_);
    stopped_ = true;
    cv_.SignalAll();
  }

  grpc::Status Check(grpc::ServerContext*, const health::HealthCheckRequest* request,
                     health::HealthCheckResponse* response) override {
    if (!Known(request->service())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    common::MutexLock lock(&mu_);
    response->set_status(Status());
    return grpc::Status::OK;
  }

  // The current status at once, then each change, until the call is cancelled or the server
  // stops.
  grpc::Status Watch(grpc::ServerContext* context, const health::HealthCheckRequest* request,
                     grpc::ServerWriter<health::HealthCheckResponse>* writer) override {
    health::HealthCheckResponse response;
    if (!Known(request->service())) {
      response.set_status(health::HealthCheckResponse::SERVICE_UNKNOWN);
      writer->Write(response);
      return grpc::Status::OK;
    }
    common::MutexLock lock(&mu_);
    int last = -1;
    while (!stopped_ && !context->IsCancelled()) {
      if (Status() != last) {
        last = Status();
        response.set_status(Status());
        if (!writer->Write(response)) break;
        continue;
      }
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));  // re-checks IsCancelled
    }
    return grpc::Status::OK;
  }

 private:
  static bool Known(const std::string& service) {
    return service.empty() || service == kServiceName;
  }
  health::HealthCheckResponse::ServingStatus Status() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return serving_ ? health::HealthCheckResponse::SERVING
                    : health::HealthCheckResponse::NOT_SERVING;
  }

  common::Mutex mu_;
  common::CondVar cv_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// One Reconcile stream. Shared by its handler and the worker tasks of its requests.
struct StreamState {
  common::Mutex mu;  // guards the bookkeeping below
  common::CondVar cv;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<std::atomic<bool>>> cancel_flags
      ABSL_GUARDED_BY(mu);

  common::Mutex write_mu;  // serializes writes; guards `open` and `stream`
  bool open ABSL_GUARDED_BY(write_mu) = true;
  Stream* stream ABSL_GUARDED_BY(write_mu) = nullptr;

  void Write(const pluginpb::ReconcileResponse& response) {
    common::MutexLock lock(&write_mu);
    if (!open || stream == nullptr) return;
    if (!stream->Write(response)) open = false;  // broken: later answers are dropped
  }
};

// Plaintext, TLS, or TLS that requires and verifies a client certificate signed by the client
// CA (mutual TLS). A handshake that fails (no certificate, an unknown CA) never reaches a
// service: the client sees UNAVAILABLE with the TLS error.
std::shared_ptr<grpc::ServerCredentials> Credentials(const std::optional<ServerTls>& tls) {
  if (!tls.has_value()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      tls->client_ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = tls->client_ca_pem;
  options.pem_key_cert_pairs.push_back({tls->private_key_pem, tls->cert_chain_pem});
  return grpc::SslServerCredentials(options);
}

class ServerImpl;

class Service final : public pluginpb::ControllerPluginService::Service {
 public:
  explicit Service(ServerImpl* server) : server_(server) {}
  grpc::Status Describe(grpc::ServerContext* context, const pluginpb::DescribeRequest* request,
                        pluginpb::DescribeResponse* response) override;
  grpc::Status Reconcile(grpc::ServerContext* context, Stream* stream) override;

 private:
  ServerImpl* const server_;
};

class ServerImpl final : public PluginServer {
 public:
  explicit ServerImpl(Plugin* plugin)
      : plugin_(plugin), service_(this), pool_(plugin->WorkerCount()) {
    plugin_->Register(this);
  }
  ~ServerImpl() override {
    plugin_->Unregister(this);
    Shutdown(absl::ZeroDuration());
  }

  absl::Status Start(const std::string& listen, const std::optional<ServerTls>& tls) {
    if (absl::StartsWith(listen, "unix:")) {
      const std::string path = listen.substr(5);
      struct stat st;
      if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
    }
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(listen, Credentials(tls), &port);
    builder.SetMaxReceiveMessageSize(plugin_->options().max_message_bytes);
    builder.SetMaxSendMessageSize(plugin_->options().max_message_bytes);
    // Accept the host's HTTP/2 keepalive pings (every 10 s, also on an idle connection; see
    // docs/protocol.md, "Liveness") down to one per second, never answering them with GOAWAY
    // "too_many_pings" (gRPC's default allows one per 5 minutes without calls).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.RegisterService(&service_);
    builder.RegisterService(&health_);
    // Serving from the first answer: the host checks health as soon as the socket appears.
    health_.Set(true);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
    }
    if (absl::StartsWith(listen, "unix:")) {
      address_ = listen;
    } else {
      address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
    }
    return absl::OkStatus();
  }

  const std::string& address() const override { return address_; }

  void Shutdown(absl::Duration grace) override {
    {
      common::MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
      draining_ = true;
      health_.Set(false);
    }
    if (server_ == nullptr) return;
    common::Clock* clock = common::Clock::Real();
    const absl::Time deadline = clock->Now() + grace;
    {
      common::MutexLock lock(&mu_);
      while (in_flight_ > 0 && !clock->WaitWithDeadline(&mu_, &cv_, deadline)) {
      }
      abandoning_ = true;
    }
    health_.Stop();
    // Cancels the open streams (their reads fail, their handlers return) and waits for them.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    if (InFlight() == 0) pool_.Stop();
  }

  int InFlight() const override {
    common::MutexLock lock(&mu_);
    return in_flight_;
  }

  void SetServing(bool serving) override {
    // Under mu_ so that a concurrent Shutdown's NOT_SERVING cannot be overwritten.
    common::MutexLock lock(&mu_);
    if (draining_) return;
    health_.Set(serving);
  }

  Plugin* plugin() const { return plugin_; }
  WorkerPool* pool() { return &pool_; }
  bool draining() const {
    common::MutexLock lock(&mu_);
    return draining_;
  }
  bool abandoning() const {
    common::MutexLock lock(&mu_);
    return abandoning_;
  }
  void AddInFlight(int delta) {
    common::MutexLock lock(&mu_);
    in_flight_ += delta;
    cv_.SignalAll();
  }

 private:
  Plugin* const plugin_;
  Service service_;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;  // set by Start
  std::string address_;                   // set by Start

  mutable common::Mutex mu_;
  common::CondVar cv_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoning_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;

  // Last, so that it is destroyed first: its threads are joined while everything their tasks
  // touch still exists.
  WorkerPool pool_;
};

grpc::Status Service::Describe(grpc::ServerContext*, const pluginpb::DescribeRequest* request,
                               pluginpb::DescribeResponse* response) {
  absl::StatusOr<pluginpb::DescribeResponse> answer = server_->plugin()->Describe(*request);
  if (!answer.ok()) {
    common::LogError("describe refused", {{"error", answer.status()}});
    return grpc::Status(static_cast<grpc::StatusCode>(answer.status().code()),
                        std::string(answer.status().message()));
  }
  *response = *std::move(answer);
  return grpc::Status::OK;
}

grpc::Status Service::Reconcile(grpc::ServerContext* context, Stream* stream) {
  auto state = std::make_shared<StreamState>();
  {
    common::MutexLock lock(&state->write_mu);
    state->stream = stream;
  }
  Plugin* plugin = server_->plugin();
  // The background tasks started on this stream: stopped and joined when it ends (before the
  // stream is closed for writes, so their last status goes out if the stream still works).
  auto tasks = std::make_unique<TaskRunner>(
      [plugin](const std::string& controller) {
        const Controller* c = plugin->Find(controller);
        return c != nullptr ? c->tasks() : std::vector<std::pair<std::string, TaskFn>>{};
      },
      [state](const pluginpb::ReconcileResponse& message) { state->Write(message); },
      plugin->options().task_backoff, plugin->options().task_max_backoff);
  const size_t max_bytes = static_cast<size_t>(plugin->options().max_message_bytes);
  pluginpb::ReconcileRequest request;
  while (stream->Read(&request)) {
    const uint64_t id = request.request_id();
    if (request.payload_case() == pluginpb::ReconcileRequest::kCancel) {
      common::MutexLock lock(&state->mu);
      auto it = state->cancel_flags.find(id);
      if (it != state->cancel_flags.end()) it->second->store(true);
      continue;
    }
    if (request.payload_case() == pluginpb::ReconcileRequest::kStartTasks) {
      if (!server_->draining()) tasks->Start(request.start_tasks().controller());
      continue;
    }
    if (request.payload_case() == pluginpb::ReconcileRequest::kStopTasks) {
      tasks->Stop(request.stop_tasks().controller(), request.stop_tasks().reason());
      continue;
    }
    if (request.payload_case() == pluginpb::ReconcileRequest::kEnqueueRefused) {
      const pluginpb::TaskEnqueueRefused& refused = request.enqueue_refused();
      common::LogWarning("the host refused a background task's enqueue",
                         {{"enqueue_id", refused.enqueue_id()},
                          {"code", refused.code()},
                          {"error", refused.message()}});
      continue;
    }
    if (request.payload_case() != pluginpb::ReconcileRequest::kReconcile || id == 0) {
      common::LogWarning("ignoring a malformed reconcile request", {{"request_id", id}});
      continue;
    }
    if (server_->draining()) {
      state->Write(ErrorResponse(id, pluginpb::ERROR_KIND_RETRYABLE, "plugin shutting down"));
      continue;
    }
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    {
      common::MutexLock lock(&state->mu);
      ++state->in_flight;
      state->cancel_flags[id] = cancelled;
    }
    server_->AddInFlight(1);
    auto call = std::make_shared<pluginpb::ReconcileCall>(std::move(*request.mutable_reconcile()));
    ServerImpl* server = server_;
    auto task = [server, plugin, state, call, cancelled, id, max_bytes] {
      pluginpb::ReconcileResponse response = plugin->Handle(id, *call, cancelled);
      if (response.ByteSizeLong() > max_bytes) {
        // Only this request fails; terminal, since it would not shrink on a retry.
        response = ErrorResponse(id, pluginpb::ERROR_KIND_TERMINAL,
                                 absl::StrCat("response of ", response.ByteSizeLong(),
                                              " bytes exceeds the message limit of ", max_bytes),
                                 kResponseTooLarge);
      }
      if (!cancelled->load()) state->Write(response);
      {
        common::MutexLock lock(&state->mu);
        state->cancel_flags.erase(id);
        --state->in_flight;
        state->cv.SignalAll();
      }
      server->AddInFlight(-1);
    };
    if (!server_->pool()->Submit(std::move(task))) {
      {
        common::MutexLock lock(&state->mu);
        state->cancel_flags.erase(id);
        --state->in_flight;
      }
      server_->AddInFlight(-1);
      state->Write(ErrorResponse(id, pluginpb::ERROR_KIND_RETRYABLE, "plugin shutting down"));
    }
  }
  // Reads ended: the host half-closed, went away, or the server is stopping. The tasks stop
  // with the stream. Answer what is in flight unless the call is cancelled or the server gave
  // up waiting.
  tasks->Stop("", server_->draining() ? "plugin shutting down" : "stream ended");
  tasks.reset();  // joins the task threads
  {
    common::MutexLock lock(&state->mu);
    while (state->in_flight > 0 && !context->IsCancelled() && !server_->abandoning()) {
      state->cv.WaitWithTimeout(&state->mu, absl::Milliseconds(50));
    }
  }
  common::MutexLock lock(&state->write_mu);
  state->open = false;
  state->stream = nullptr;
  return grpc::Status::OK;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PluginServer>> StartServer(Plugin* plugin, const std::string& listen,
                                                          const std::optional<ServerTls>& tls) {
  auto server = std::make_unique<ServerImpl>(plugin);
  if (absl::Status s = server->Start(listen, tls); !s.ok()) return s;
  return std::unique_ptr<PluginServer>(std::move(server));
}

}  // namespace ctrlhost::sdk::internal
