#include "runtime/manager/admin_backend.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/common/paths.h"
#include "runtime/common/proto_time.h"
#include "runtime/common/status_macros.h"
#include "runtime/manager/host.h"

namespace ctrlhost::manager {

namespace {

// Leaves `out` unset for a time that never happened (InfinitePast/Future).
void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  if (t == absl::InfinitePast() || t == absl::InfiniteFuture()) return;
  *out = common::ToProtoTimestamp(t);
}

absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field) {
  if (d.seconds() < 0 || d.nanos() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must not be negative"));
  }
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

adminpb::PluginState ToProto(plugin::PluginState state) {
  switch (state) {
    case plugin::PluginState::kStarting:
      return adminpb::PLUGIN_STATE_STARTING;
    case plugin::PluginState::kReady:
      return adminpb::PLUGIN_STATE_READY;
    case plugin::PluginState::kBackoff:
      return adminpb::PLUGIN_STATE_BACKOFF;
    case plugin::PluginState::kFailed:
      return adminpb::PLUGIN_STATE_FAILED;
    case plugin::PluginState::kStopped:
      return adminpb::PLUGIN_STATE_STOPPED;
  }
  return adminpb::PLUGIN_STATE_UNSPECIFIED;
}

void SourceToProto(const config::PluginSpec& spec, adminpb::PluginSource* out) {
  if (const config::ExecSpec* exec = spec.exec(); exec != nullptr) {
    adminpb::ExecSource* e = out->mutable_exec();
    e->set_command(exec->command);
    for (const std::string& arg : exec->args) e->add_args(arg);
    for (const auto& [k, v] : exec->env) (*e->mutable_env())[k] = v;
    e->set_working_dir(exec->working_dir);
  } else if (const config::EndpointSpec* endpoint = spec.endpoint(); endpoint != nullptr) {
    adminpb::EndpointSource* e = out->mutable_endpoint();
    e->set_address(endpoint->address);
    if (endpoint->tls.has_value()) {
      e->mutable_tls()->set_ca_file(endpoint->tls->ca_file);
      e->mutable_tls()->set_cert_file(endpoint->tls->cert_file);
      e->mutable_tls()->set_key_file(endpoint->tls->key_file);
      e->mutable_tls()->set_server_name(endpoint->tls->server_name);
    }
  }
}

// The plugin spec a swap runs: `base` (timeouts, limits) with the request's source.
config::PluginSpec SourceFromProto(const config::PluginSpec& base,
                                   const adminpb::PluginSource& source) {
  config::PluginSpec spec = base;
  if (source.has_exec()) {
    config::ExecSpec exec;
    exec.command = source.exec().command();
    exec.args.assign(source.exec().args().begin(), source.exec().args().end());
    for (const auto& [k, v] : source.exec().env()) exec.env.emplace_back(k, v);
    std::sort(exec.env.begin(), exec.env.end());
    exec.working_dir = source.exec().working_dir();
    spec.source = exec;
  } else {
    config::EndpointSpec endpoint;
    endpoint.address = source.endpoint().address();
    if (source.endpoint().has_tls()) {
      config::TlsSpec tls;
      tls.ca_file = source.endpoint().tls().ca_file();
      tls.cert_file = source.endpoint().tls().cert_file();
      tls.key_file = source.endpoint().tls().key_file();
      tls.server_name = source.endpoint().tls().server_name();
      endpoint.tls = tls;
    }
    spec.source = endpoint;
  }
  return spec;
}

adminpb::WorkFigures Work(const controller::RunnerMetrics& m) {
  adminpb::WorkFigures w;
  w.set_in_flight(static_cast<uint32_t>(m.active_workers));
  w.set_max_in_flight(static_cast<uint32_t>(m.max_workers));
  w.set_queued(static_cast<uint32_t>(m.queue.depth));
  w.set_delayed(static_cast<uint32_t>(m.queue.delayed));
  w.set_terminal(static_cast<uint32_t>(m.terminal_keys));
  uint64_t total = 0;
  for (uint64_t n : m.reconciles) total += n;
  w.set_reconciles_total(total);
  w.set_errors_total(m.reconciles_for(controller::ReconcileResult::kError) +
                     m.reconciles_for(controller::ReconcileResult::kTerminal));
  return w;
}

void AddWork(const adminpb::WorkFigures& add, adminpb::WorkFigures* sum) {
  sum->set_in_flight(sum->in_flight() + add.in_flight());
  sum->set_max_in_flight(sum->max_in_flight() + add.max_in_flight());
  sum->set_queued(sum->queued() + add.queued());
  sum->set_delayed(sum->delayed() + add.delayed());
  sum->set_terminal(sum->terminal() + add.terminal());
  sum->set_reconciles_total(sum->reconciles_total() + add.reconciles_total());
  sum->set_errors_total(sum->errors_total() + add.errors_total());
}

adminpb::Controller ControllerToProto(const Manager::PluginReport& r, const ControllerStatus& c) {
  adminpb::Controller out;
  out.set_operator_(r.operator_name);
  out.set_plugin(r.name);
  out.set_name(c.name);
  out.set_state(c.state == "running"   ? (c.synced ? adminpb::CONTROLLER_STATE_READY
                                                   : adminpb::CONTROLLER_STATE_STARTING)
                : c.state == "pending" ? adminpb::CONTROLLER_STATE_STARTING
                                       : adminpb::CONTROLLER_STATE_STOPPED);
  for (const pluginpb::ControllerSpec& spec : r.controller_specs) {
    if (spec.name() == c.name) *out.mutable_spec() = spec;
  }
  out.set_swap_generation(r.slot.serving_generation);
  *out.mutable_work() = Work(c.metrics);
  if (!c.metrics.last_error.empty()) {
    out.mutable_last_error()->set_message(c.metrics.last_error);
    out.mutable_last_error()->set_key(c.metrics.last_error_key);
    SetTime(c.metrics.last_error_time, out.mutable_last_error()->mutable_time());
  } else if (!c.pending_reason.empty()) {
    out.mutable_last_error()->set_message(c.pending_reason);
  }
  return out;
}

adminpb::Plugin PluginToProto(const Manager::PluginReport& r) {
  adminpb::Plugin out;
  out.set_operator_(r.operator_name);
  out.set_name(r.name);
  out.set_state(ToProto(r.slot.serving.state));
  SourceToProto(r.spec, out.mutable_source());
  out.set_swap_generation(r.slot.serving_generation);
  if (r.slot.has_canary) {
    adminpb::Canary* canary = out.mutable_canary();
    canary->set_swap_generation(r.slot.canary_generation);
    canary->set_state(ToProto(r.slot.canary.state));
    canary->set_percent(r.slot.canary_percent);
  }
  if (r.slot.has_shadow) {
    adminpb::Shadow* shadow = out.mutable_shadow();
    shadow->set_swap_generation(r.slot.shadow_generation);
    shadow->set_state(ToProto(r.slot.shadow.state));
    shadow->set_percent(r.slot.shadow_percent);
    shadow->set_restarts(r.slot.shadow.restarts);
    shadow->set_idle_cpu(r.slot.shadow_idle_cpu &&
                         std::holds_alternative<config::ExecSpec>(r.shadow_spec.source));
    SourceToProto(r.shadow_spec, shadow->mutable_source());
    if (!r.slot.shadow.last_error.ok()) {
      shadow->mutable_last_error()->set_message(std::string(r.slot.shadow.last_error.message()));
    }
    for (const auto& [name, f] : r.shadow_figures.controllers) {
      adminpb::ShadowFigures* figures = shadow->add_controllers();
      figures->set_controller(name);
      figures->set_compared(f.compared);
      figures->set_same(f.same);
      figures->set_different(f.different);
      figures->set_shadow_errors(f.shadow_errors);
      figures->set_dropped(f.dropped);
      figures->set_agreement(f.agreement());
    }
    for (const ShadowComparator::Difference& d : r.shadow_figures.differences) {
      adminpb::ShadowDifference* difference = shadow->add_differences();
      difference->set_controller(d.controller);
      difference->set_key(d.key);
      SetTime(d.at, difference->mutable_at());
      difference->set_differs(d.summary);
      difference->set_patch(d.patch);
    }
  }
  if (r.slot.serving.describe != nullptr) {
    out.set_reported_name(r.slot.serving.describe->plugin_name());
    out.set_reported_version(r.slot.serving.describe->plugin_version());
    out.set_protocol_version(r.slot.serving.describe->protocol_version());
  }
  for (pluginpb::Capability c : r.slot.serving.capabilities) out.add_capabilities(c);
  for (const ControllerStatus& c : r.controllers) out.add_controllers(c.name);
  out.set_address(!r.slot.serving_socket.empty()
                      ? absl::StrCat("unix://", r.slot.serving_socket)
                      : (r.spec.endpoint() != nullptr ? r.spec.endpoint()->address : ""));
  out.set_pid(static_cast<int32_t>(r.slot.serving.pid));
  out.set_restarts(static_cast<uint32_t>(r.slot.serving.restarts));
  if (r.slot.serving.state == plugin::PluginState::kReady) {
    out.set_health(plugin::HealthStatusName(r.slot.serving.health));
    SetTime(r.slot.serving.health_since, out.mutable_health_since());
    out.set_waiting_requests(static_cast<uint32_t>(r.slot.serving.held));
  }
  for (const ControllerStatus& c : r.controllers) AddWork(Work(c.metrics), out.mutable_work());
  std::string error = !r.slot.serving.last_error.ok()
                          ? std::string(r.slot.serving.last_error.message())
                          : r.slot.last_swap_error;
  if (!error.empty()) out.mutable_last_error()->set_message(error);
  return out;
}

}  // namespace

absl::StatusOr<adminpb::ListOperatorsResponse> HostAdminBackend::ListOperators(
    const adminpb::ListOperatorsRequest&) {
  adminpb::ListOperatorsResponse out;
  std::vector<Manager::PluginReport> reports = host_->manager().Report();
  for (const config::OperatorSpec& spec : host_->manager().Operators()) {
    adminpb::Operator* op = out.add_operators();
    op->set_name(spec.name);
    op->set_source(spec.location.ToString());
    bool ready = true;
    bool failed = false;
    for (const Manager::PluginReport& r : reports) {
      if (r.operator_name != spec.name) continue;
      op->add_plugins(r.name);
      op->set_controller_count(op->controller_count() +
                               static_cast<uint32_t>(r.controllers.size()));
      ready = ready && r.slot.serving.state == plugin::PluginState::kReady;
      failed = failed || r.slot.serving.state == plugin::PluginState::kFailed;
      for (const ControllerStatus& c : r.controllers) {
        ready = ready && c.state == "running" && c.synced;
        AddWork(Work(c.metrics), op->mutable_work());
      }
      if (!r.slot.serving.last_error.ok() && !op->has_last_error()) {
        op->mutable_last_error()->set_message(std::string(r.slot.serving.last_error.message()));
      }
    }
    op->set_state(failed  ? adminpb::OPERATOR_STATE_DEGRADED
                  : ready ? adminpb::OPERATOR_STATE_READY
                          : adminpb::OPERATOR_STATE_STARTING);
  }
  return out;
}

absl::StatusOr<adminpb::ListPluginsResponse> HostAdminBackend::ListPlugins(
    const adminpb::ListPluginsRequest& request) {
  adminpb::ListPluginsResponse out;
  for (const Manager::PluginReport& r : host_->manager().Report()) {
    if (!request.operator_().empty() && r.operator_name != request.operator_()) continue;
    *out.add_plugins() = PluginToProto(r);
  }
  return out;
}

absl::StatusOr<adminpb::GetPluginResponse> HostAdminBackend::GetPlugin(
    const adminpb::GetPluginRequest& request) {
  for (const Manager::PluginReport& r : host_->manager().Report()) {
    if (r.operator_name == request.operator_() && r.name == request.plugin()) {
      adminpb::GetPluginResponse out;
      *out.mutable_plugin() = PluginToProto(r);
      return out;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("no plugin ", request.plugin(), " in operator ", request.operator_()));
}

absl::StatusOr<adminpb::ListControllersResponse> HostAdminBackend::ListControllers(
    const adminpb::ListControllersRequest& request) {
  adminpb::ListControllersResponse out;
  for (const Manager::PluginReport& r : host_->manager().Report()) {
    if (!request.operator_().empty() && r.operator_name != request.operator_()) continue;
    if (!request.plugin().empty() && r.name != request.plugin()) continue;
    for (const ControllerStatus& c : r.controllers)
      *out.add_controllers() = ControllerToProto(r, c);
  }
  return out;
}

absl::StatusOr<adminpb::GetControllerResponse> HostAdminBackend::GetController(
    const adminpb::GetControllerRequest& request) {
  for (const Manager::PluginReport& r : host_->manager().Report()) {
    if (r.operator_name != request.operator_() || r.name != request.plugin()) continue;
    for (const ControllerStatus& c : r.controllers) {
      if (c.name != request.controller()) continue;
      adminpb::GetControllerResponse out;
      *out.mutable_controller() = ControllerToProto(r, c);
      return out;
    }
  }
  return absl::NotFoundError(absl::StrCat("no controller ", request.controller(), " in plugin ",
                                          request.operator_(), "/", request.plugin()));
}

absl::StatusOr<adminpb::SwapPluginResponse> HostAdminBackend::SwapPlugin(
    const adminpb::SwapPluginRequest& request) {
  Manager& manager = host_->manager();
  const Manager::PluginReport* current = nullptr;
  std::vector<Manager::PluginReport> reports = manager.Report();
  for (const Manager::PluginReport& r : reports) {
    if (r.operator_name == request.operator_() && r.name == request.plugin()) current = &r;
  }
  if (current == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no plugin ", request.plugin(), " in operator ", request.operator_()));
  }
  Manager::SwapOptions options;
  options.expected_generation = request.expected_generation();
  if (request.has_ready_timeout()) {
    absl::StatusOr<absl::Duration> timeout = FromProto(request.ready_timeout(), "ready_timeout");
    if (!timeout.ok()) return timeout.status();
    if (*timeout > absl::ZeroDuration()) options.ready_timeout = *timeout;
  }
  SwapResult result;
  switch (request.action_case()) {
    case adminpb::SwapPluginRequest::kReplace:
      result = manager.SwapPlugin(request.operator_(), request.plugin(),
                                  SourceFromProto(current->spec, request.replace()), options);
      break;
    case adminpb::SwapPluginRequest::kStartCanary:
      result = manager.StartCanary(request.operator_(), request.plugin(),
                                   SourceFromProto(current->spec, request.start_canary().source()),
                                   request.start_canary().percent(), options);
      break;
    case adminpb::SwapPluginRequest::kPromoteCanary:
      result = manager.PromoteCanary(request.operator_(), request.plugin(), options);
      break;
    case adminpb::SwapPluginRequest::kAbortCanary:
      result.status = manager.AbortCanary(request.operator_(), request.plugin(), options);
      result.serving_generation = current->slot.serving_generation;
      break;
    case adminpb::SwapPluginRequest::kStartShadow: {
      const adminpb::StartShadow& start = request.start_shadow();
      ShadowOptions shadow;
      if (start.percent() != 0) shadow.percent = start.percent();
      if (start.max_in_flight() != 0) shadow.max_in_flight = start.max_in_flight();
      shadow.idle_cpu = !start.normal_cpu();
      result = manager.StartShadow(request.operator_(), request.plugin(),
                                   SourceFromProto(current->spec, start.source()), shadow, options);
      break;
    }
    case adminpb::SwapPluginRequest::kStopShadow:
      result.status = manager.StopShadow(request.operator_(), request.plugin(), options);
      result.serving_generation = current->slot.serving_generation;
      break;
    case adminpb::SwapPluginRequest::kPromoteShadow: {
      const adminpb::PromoteShadow& promote = request.promote_shadow();
      result = manager.PromoteShadow(request.operator_(), request.plugin(),
                                     promote.min_agreement() == 0 ? 0.999 : promote.min_agreement(),
                                     promote.min_compared() == 0 ? 100 : promote.min_compared(),
                                     options);
      break;
    }
    default:
      return absl::InvalidArgumentError("SwapPluginRequest.action is required");
  }
  // Requests that could not be attempted are errors; attempts that failed are results.
  if (!result.status.ok() && result.failure == SwapFailure::kNone) return result.status;
  adminpb::SwapPluginResponse out;
  if (result.status.ok()) {
    adminpb::SwapSucceeded* ok = out.mutable_succeeded();
    ok->set_swap_generation(result.serving_generation);
    ok->set_draining_generation(result.drained_generation);
    SetTime(result.ready_at, ok->mutable_ready_at());
  } else {
    adminpb::SwapFailed* failed = out.mutable_failed();
    switch (result.failure) {
      case SwapFailure::kStartFailed:
        failed->set_reason(adminpb::SWAP_FAILURE_REASON_START_FAILED);
        break;
      case SwapFailure::kHandshakeFailed:
        failed->set_reason(adminpb::SWAP_FAILURE_REASON_HANDSHAKE_FAILED);
        break;
      case SwapFailure::kTimeout:
        failed->set_reason(adminpb::SWAP_FAILURE_REASON_TIMEOUT);
        break;
      case SwapFailure::kIncompatible:
        failed->set_reason(adminpb::SWAP_FAILURE_REASON_INCOMPATIBLE_CONTROLLERS);
        break;
      case SwapFailure::kNone:
        break;
    }
    failed->set_message(std::string(result.status.message()));
    failed->set_serving_generation(result.serving_generation);
  }
  return out;
}

absl::StatusOr<adminpb::ReloadConfigResponse> HostAdminBackend::ReloadConfig(
    const adminpb::ReloadConfigRequest& request) {
  std::vector<config::OperatorSpec> before = host_->manager().Operators();
  absl::StatusOr<config::OperatorSetDiff> diff = host_->Reload(request.dry_run());
  if (!diff.ok()) return diff.status();
  adminpb::ReloadConfigResponse out;
  out.set_dry_run(request.dry_run());
  for (const std::string& name : diff->added) {
    adminpb::OperatorChange* c = out.add_changes();
    c->set_operator_(name);
    c->set_type(adminpb::OPERATOR_CHANGE_TYPE_ADDED);
  }
  for (const std::string& name : diff->removed) {
    adminpb::OperatorChange* c = out.add_changes();
    c->set_operator_(name);
    c->set_type(adminpb::OPERATOR_CHANGE_TYPE_REMOVED);
  }
  for (const config::OperatorChange& change : diff->changed) {
    adminpb::OperatorChange* c = out.add_changes();
    c->set_operator_(change.name);
    c->set_type(adminpb::OPERATOR_CHANGE_TYPE_UPDATED);
    for (const std::string& p : change.changed_plugins) c->add_swapped_plugins(p);
  }
  for (const config::OperatorSpec& op : before) {
    bool touched = false;
    for (const adminpb::OperatorChange& c : out.changes()) touched |= c.operator_() == op.name;
    if (!touched) {
      adminpb::OperatorChange* c = out.add_changes();
      c->set_operator_(op.name);
      c->set_type(adminpb::OPERATOR_CHANGE_TYPE_UNCHANGED);
    }
  }
  return out;
}

absl::StatusOr<adminpb::DumpStateResponse> HostAdminBackend::DumpState(
    const adminpb::DumpStateRequest&) {
  adminpb::DumpStateResponse out;
  out.set_yaml(host_->manager().DumpYaml());
  SetTime(absl::Now(), out.mutable_taken_at());
  return out;
}

absl::StatusOr<std::unique_ptr<HostAdmin>> ServeHostAdmin(Host* host,
                                                          const std::string& socket_path) {
  auto admin = std::make_unique<HostAdmin>(host);
  const std::string path = common::AbsolutePath(socket_path);
  if (path.size() > 107) {
    // A Unix socket address holds 107 bytes: the host still does its job without the admin API.
    common::LogWarning(
        "admin API not served: its socket path is too long for a Unix socket (set "
        "--admin-socket to a shorter path)",
        {{"path", path}});
    return admin;
  }
  if (path.empty()) return admin;
  admin::AdminServerOptions options;
  options.socket_path = path;
  options.backend = &admin->backend;
  options.require_token = true;  // plugins of the host's own user can connect()
  ASSIGN_OR_RETURN(admin->server, admin::AdminServer::Start(options));
  return admin;
}

std::vector<std::string> AdminSocketFiles(const std::string& socket_path) {
  if (socket_path.empty()) return {};
  return {socket_path, admin::TokenPathFor(socket_path)};
}

}  // namespace ctrlhost::manager
