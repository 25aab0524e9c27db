#include "sdk/cpp/plugin.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/absl_deadlock.h"
#include "runtime/common/logging.h"
#include "sdk/cpp/server_internal.h"

namespace ctrlhost::sdk {

Plugin::Plugin(absl::string_view name, absl::string_view version, PluginOptions options)
    : name_(name), version_(version), options_(options), capabilities_(AllSdkCapabilities()) {}

Plugin& Plugin::Add(const ControllerBuilder& builder) {
  absl::StatusOr<std::shared_ptr<const Controller>> controller = builder.Build();
  if (!controller.ok()) {
    if (status_.ok()) status_ = controller.status();
    return *this;
  }
  return Add(*std::move(controller));
}

Plugin& Plugin::Add(std::shared_ptr<const Controller> controller) {
  if (controller == nullptr) {
    if (status_.ok()) status_ = absl::InvalidArgumentError("Add(nullptr)");
    return *this;
  }
  if (Find(controller->name()) != nullptr) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("two controllers are named \"", controller->name(), "\""));
    }
    return *this;
  }
  controllers_.push_back(std::move(controller));
  return *this;
}

absl::Status Plugin::status() const {
  if (!status_.ok()) return status_;
  if (controllers_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin \"", name_, "\" declares no controllers"));
  }
  return absl::OkStatus();
}

const Controller* Plugin::Find(absl::string_view controller) const {
  for (const auto& c : controllers_) {
    if (c->name() == controller) return c.get();
  }
  return nullptr;
}

absl::StatusOr<pluginpb::DescribeResponse> Plugin::Describe(
    const pluginpb::DescribeRequest& request) {
  if (absl::Status s = status(); !s.ok()) return s;
  const auto& offered = request.protocol_versions();
  if (std::find(offered.begin(), offered.end(), kProtocolVersion) == offered.end()) {
    return absl::FailedPreconditionError(absl::StrCat("plugin \"", name_, "\" speaks protocol ",
                                                      kProtocolVersion, " only; the host offered [",
                                                      absl::StrJoin(offered, ", "), "]"));
  }
  std::set<pluginpb::Capability> host;
  for (int c : request.capabilities()) {
    if (pluginpb::Capability_IsValid(c) && c != pluginpb::CAPABILITY_UNSPECIFIED) {
      host.insert(static_cast<pluginpb::Capability>(c));
    }
  }
  for (const auto& controller : controllers_) {
    for (pluginpb::Capability needed : controller->RequiredCapabilities()) {
      if (host.count(needed) == 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("controller \"", controller->name(), "\" needs ",
                         pluginpb::Capability_Name(needed), ", which the host does not offer"));
      }
    }
  }
  std::set<pluginpb::Capability> effective;
  const std::set<pluginpb::Capability> ours = AllSdkCapabilities();
  std::set_intersection(host.begin(), host.end(), ours.begin(), ours.end(),
                        std::inserter(effective, effective.begin()));
  {
    common::MutexLock lock(&mu_);
    capabilities_ = effective;
  }
  pluginpb::DescribeResponse response;
  response.set_protocol_version(kProtocolVersion);
  response.set_plugin_name(name_);
  response.set_plugin_version(version_);
  for (pluginpb::Capability c : ours) response.add_capabilities(c);
  for (const auto& controller : controllers_) *response.add_controllers() = controller->spec();
  common::LogInfo("plugin described", {{"plugin", name_},
                                       {"host_version", request.host_version()},
                                       {"instance", request.instance_name()},
                                       {"controllers", controllers_.size()}});
  return response;
}

std::set<pluginpb::Capability> Plugin::capabilities() const {
  common::MutexLock lock(&mu_);
  return capabilities_;
}

pluginpb::ReconcileResponse Plugin::Handle(
    uint64_t request_id, const pluginpb::ReconcileCall& call,
    std::shared_ptr<const std::atomic<bool>> cancelled) const {
  const Controller* controller = Find(call.controller());
  if (controller == nullptr) {
    return ErrorResponse(
        request_id, pluginpb::ERROR_KIND_TERMINAL,
        absl::StrCat("plugin \"", name_, "\" has no controller \"", call.controller(), "\""));
  }
  pluginpb::ReconcileResponse response =
      Invoke(*controller, request_id, call, capabilities(), std::move(cancelled));
  if (response.has_error()) {
    common::LogWarning("reconcile failed", {{"controller", call.controller()},
                                            {"namespace", call.namespace_()},
                                            {"name", call.name()},
                                            {"trace_id", call.trace_id()},
                                            {"error", response.error().message()}});
  }
  return response;
}

void Plugin::SetServing(bool serving) {
  common::MutexLock lock(&mu_);
  for (PluginServer* server : servers_) server->SetServing(serving);
}

void Plugin::Register(PluginServer* server) {
  common::MutexLock lock(&mu_);
  servers_.insert(server);
}

void Plugin::Unregister(PluginServer* server) {
  common::MutexLock lock(&mu_);
  servers_.erase(server);
}

int Plugin::WorkerCount() const {
  if (options_.workers > 0) return options_.workers;
  int sum = 0;
  for (const auto& c : controllers_) {
    sum += std::max<int>(1, static_cast<int>(c->spec().max_concurrent_reconciles()));
  }
  return std::clamp(sum, 1, 64);
}

absl::StatusOr<std::string> ParseListenAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:")) {
    absl::string_view path = address.substr(5);
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);  // unix:///abs -> /abs
    if (!absl::StartsWith(path, "/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "address \"", address, "\": a unix socket path must be absolute (unix:///path)"));
    }
    if (path.size() > 107) {
      return absl::InvalidArgumentError(
          absl::StrCat("address \"", address, "\": socket path longer than 107 bytes"));
    }
    return absl::StrCat("unix:", path);
  }
  if (absl::StrContains(address, "://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address \"", address, "\": expected unix:///path or host:port (no other scheme)"));
  }
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", address, "\": expected unix:///path or host:port"));
  }
  return std::string(address);
}

absl::StatusOr<std::unique_ptr<PluginServer>> Plugin::Start(absl::string_view address,
                                                            std::optional<ServerTls> tls) {
  if (absl::Status s = status(); !s.ok()) return s;
  // Before gRPC's threads: Debian's Abseil would otherwise check every lock gRPC takes, and
  // abort the plugin on a lock-order false positive (absl_deadlock.h).
  common::TurnOffAbslDeadlockDetection();
  absl::StatusOr<std::string> listen = ParseListenAddress(address);
  if (!listen.ok()) return listen.status();
  if (!tls.has_value()) {
    if (absl::Status s = CheckPlaintextAllowed(*listen); !s.ok()) return s;
  }
  return internal::StartServer(this, *listen, tls);
}

int Plugin::Run() {
  const char* address = std::getenv(kAddressEnv);
  if (address == nullptr || *address == '\0') {
    std::fprintf(stderr,
                 "%s: %s is not set. The ctrlhost host sets it when it starts the plugin; to "
                 "run by hand, set it to unix:///path/to/socket or host:port.\n",
                 name_.c_str(), kAddressEnv);
    return 2;
  }
  if (absl::Status s = status(); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", name_.c_str(), s.ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::string> listen = ParseListenAddress(address);
  if (!listen.ok()) {
    std::fprintf(stderr, "%s: %s=%s: %s\n", name_.c_str(), kAddressEnv, address,
                 std::string(listen.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::optional<ServerTls>> tls = ServerTlsFromEnvironment();
  if (!tls.ok()) {
    std::fprintf(stderr, "%s: %s\n", name_.c_str(), std::string(tls.status().message()).c_str());
    return 2;
  }
  if (!tls->has_value()) {
    if (absl::Status s = CheckPlaintextAllowed(*listen); !s.ok()) {
      std::fprintf(stderr, "%s: %s=%s: %s\n", name_.c_str(), kAddressEnv, address,
                   std::string(s.message()).c_str());
      return 2;
    }
  }
  // Block the stop signals in this thread before gRPC starts its threads (they inherit the
  // mask), so that only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const std::string tls_mode = !tls->has_value()               ? ""
                               : (*tls)->client_ca_pem.empty() ? "tls"
                                                               : "mutual";
  absl::StatusOr<std::unique_ptr<PluginServer>> server = Start(address, *std::move(tls));
  if (!server.ok()) {
    std::fprintf(stderr, "%s: cannot serve on %s: %s\n", name_.c_str(), address,
                 server.status().ToString().c_str());
    return 1;
  }
  common::LogInfo("plugin serving", {{"plugin", name_},
                                     {"version", version_},
                                     {"address", (*server)->address()},
                                     {"tls", !tls_mode.empty() ? tls_mode : "off"},
                                     {"workers", WorkerCount()}});
  int signal_number = 0;
  while (sigwait(&stop_signals, &signal_number) != 0) {
  }
  common::LogInfo("plugin stopping", {{"plugin", name_}, {"signal", signal_number}});
  (*server)->Shutdown(options_.shutdown_grace);
  if (const int left = (*server)->InFlight(); left > 0) {
    // Their threads cannot be joined; the host retries their keys.
    common::LogWarning("abandoning reconciles still running", {{"count", left}});
    std::fflush(nullptr);
    std::_Exit(0);
  }
  server->reset();
  common::LogInfo("plugin stopped", {{"plugin", name_}});
  return 0;
}

}  // namespace ctrlhost::sdk
