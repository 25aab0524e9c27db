#include "runtime/plugin/health_watch.h"

#include <utility>

#include "grpc/health/v1/health.grpc.pb.h"
#include "runtime/common/logging.h"

namespace ctrlhost::plugin {
namespace {

namespace health = ::grpc::health::v1;

HealthStatus FromProto(health::HealthCheckResponse::ServingStatus status) {
  switch (status) {
    case health::HealthCheckResponse::SERVING:
      return HealthStatus::kServing;
    case health::HealthCheckResponse::NOT_SERVING:
      return HealthStatus::kNotServing;
    case health::HealthCheckResponse::SERVICE_UNKNOWN:
      return HealthStatus::kServiceUnknown;
    default:
      return HealthStatus::kUnknown;
  }
}

std::chrono::system_clock::time_point GrpcDeadline(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

}  // namespace

const char* HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kUnknown:
      return "UNKNOWN";
    case HealthStatus::kServing:
      return "SERVING";
    case HealthStatus::kNotServing:
      return "NOT_SERVING";
    case HealthStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "UNKNOWN";
}

std::unique_ptr<HealthWatcher> HealthWatcher::Start(std::shared_ptr<grpc::Channel> channel,
                                                    HealthWatcherOptions options) {
  std::unique_ptr<HealthWatcher> watcher(new HealthWatcher(std::move(channel), std::move(options)));
  watcher->thread_ = std::thread([w = watcher.get()] { w->Run(); });
  return watcher;
}

HealthWatcher::HealthWatcher(std::shared_ptr<grpc::Channel> channel, HealthWatcherOptions options)
    : channel_(std::move(channel)), options_(std::move(options)) {}

HealthWatcher::~HealthWatcher() { Stop(); }

void HealthWatcher::Stop() {
  {
    common::MutexLock lock(&mu_);
    stopped_ = true;
    if (current_ != nullptr) current_->TryCancel();
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

bool HealthWatcher::polling() const {
  common::MutexLock lock(&mu_);
  return polling_;
}

bool HealthWatcher::Sleep(absl::Duration d) {
  const absl::Time until = absl::Now() + d;
  common::MutexLock lock(&mu_);
  while (!stopped_) {
    if (cv_.WaitWithDeadline(&mu_, until)) break;
  }
  return !stopped_;
}

bool HealthWatcher::Begin(grpc::ClientContext* context) {
  common::MutexLock lock(&mu_);
  if (stopped_) return false;
  current_ = context;
  return true;
}

void HealthWatcher::End() {
  common::MutexLock lock(&mu_);
  current_ = nullptr;
}

void HealthWatcher::Run() {
  auto stub = health::Health::NewStub(channel_);
  health::HealthCheckRequest request;
  request.set_service(options_.service);
  auto report = [&](health::HealthCheckResponse::ServingStatus s) {
    if (options_.on_status) options_.on_status(FromProto(s));
  };
  // Watch until the plugin says it has no Watch.
  for (;;) {
    grpc::ClientContext context;
    if (!Begin(&context)) return;
    std::unique_ptr<grpc::ClientReader<health::HealthCheckResponse>> reader =
        stub->Watch(&context, request);
    health::HealthCheckResponse answer;
    while (reader->Read(&answer)) report(answer.status());
    const grpc::Status status = reader->Finish();
    End();
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) break;
    common::LogDebug("plugin health watch ended; watching again",
                     {{"plugin", options_.instance_name},
                      {"code", static_cast<int>(status.error_code())},
                      {"error", status.error_message()}});
    if (!Sleep(options_.check_interval)) return;
  }
  {
    common::MutexLock lock(&mu_);
    polling_ = true;
  }
  common::LogInfo(
      "plugin does not implement grpc.health.v1.Health/Watch; checking its health "
      "periodically",
      {{"plugin", options_.instance_name}, {"interval", options_.check_interval}});
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(options_.check_timeout));
    if (!Begin(&context)) return;
    health::HealthCheckResponse answer;
    const grpc::Status status = stub->Check(&context, request, &answer);
    End();
    if (status.ok()) report(answer.status());
    if (!Sleep(options_.check_interval)) return;
  }
}

}  // namespace ctrlhost::plugin
