// The manager's plugins: their supervisor options and dispatch chains (NewPlugin), admission
// against the host's limits, the controller-name check, the dependencies of their controller
// groups (DepsFor), swaps and canaries, and the replacement of a plugin's controllers.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/common/paths.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/dispatch_chain.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/manager_internal.h"
#include "runtime/manager/plugin_slot.h"

namespace ctrlhost::manager {

using internal::SameControllers;

namespace {

plugin::SupervisorOptions SupervisorOptionsFor(const ManagerOptions& options,
                                               const std::string& socket_dir,
                                               const std::string& operator_name,
                                               const config::PluginSpec& spec,
                                               common::Clock* clock) {
  plugin::SupervisorOptions so;
  // Unique in the host (plugin names are unique only within an operator).
  so.name = absl::StrCat(operator_name, "-", spec.name);
  if (const config::ExecSpec* exec = spec.exec(); exec != nullptr) {
    so.source.exec.command = exec->command;
    so.source.exec.args = exec->args;
    so.source.exec.env = exec->env;
    so.source.exec.working_dir = exec->working_dir;
  } else if (const config::EndpointSpec* endpoint = spec.endpoint(); endpoint != nullptr) {
    so.source.endpoint = endpoint->address;
    if (endpoint->tls.has_value()) {
      so.source.tls.enabled = true;
      so.source.tls.ca_file = endpoint->tls->ca_file;
      so.source.tls.cert_file = endpoint->tls->cert_file;
      so.source.tls.key_file = endpoint->tls->key_file;
      so.source.tls.server_name = endpoint->tls->server_name;
    }
  }
  so.socket_dir = socket_dir;
  so.sandbox.uid = options.plugin_uid;
  so.sandbox.gid = options.plugin_gid;
  so.sandbox.landlock = options.plugin_landlock;
  so.sandbox.hidden_paths = options.plugin_hidden_paths;
  so.sandbox.hidden_paths.push_back(common::AbsolutePath(options.data_dir));
  so.handshake.host_version = options.host_version;
  if (spec.startup_timeout.has_value()) so.handshake.deadline = *spec.startup_timeout;
  if (spec.max_in_flight.has_value()) {
    so.handshake.max_in_flight = static_cast<uint32_t>(*spec.max_in_flight);
  }
  if (spec.shutdown_grace_period.has_value()) so.default_stop_grace = *spec.shutdown_grace_period;
  if (spec.not_serving_timeout.has_value()) {
    so.not_serving_restart_after = *spec.not_serving_timeout;
  }
  so.clock = clock;
  return so;
}

namespace {

SwapResult SwapError(absl::Status status) {
  SwapResult result;
  result.status = std::move(status);
  return result;
}

}  // namespace

}  // namespace

PluginSlot::OptionsFactory Manager::OptionsFactoryFor(const std::string& operator_name,
                                                      const config::PluginSpec& spec,
                                                      BackgroundTasks* tasks) const {
  return [this, operator_name, spec, tasks](uint64_t generation) {
    plugin::SupervisorOptions so =
        SupervisorOptionsFor(options_, socket_dir_, operator_name, spec, clock_);
    so.generation = generation;
    {
      common::MutexLock lock(&record_dirs_mu_);
      so.sandbox.hidden_paths.insert(so.sandbox.hidden_paths.end(), record_dirs_.begin(),
                                     record_dirs_.end());
    }
    if (spec.max_controllers.has_value())
      so.handshake.limits.max_controllers = *spec.max_controllers;
    so.handshake.admit = [this, operator_name,
                          name = spec.name](const pluginpb::DescribeResponse& describe) {
      return Admit(operator_name, name, describe);
    };
    if (tasks != nullptr) {
      so.on_plugin_message = [tasks, generation](pluginpb::ReconcileResponse message) {
        (void)tasks->OnPluginMessage(generation, message);  // refusals are logged and answered
      };
    }  // else a shadow: no tasks run there, and the session drops what it sends unasked
    if (options_.plugin_uid.has_value() && options_.plugin_uid_per_plugin) {
      common::MutexLock lock(&uid_mu_);
      auto [it, added] = plugin_uids_.try_emplace(absl::StrCat(operator_name, "/", spec.name),
                                                  static_cast<uint32_t>(plugin_uids_.size()));
      so.sandbox.uid = *options_.plugin_uid + it->second;
      so.sandbox.gid = *so.sandbox.uid;
    }
    return so;
  };
}
absl::StatusOr<std::shared_ptr<Manager::Plugin>> Manager::NewPlugin(
    const config::OperatorSpec& op, const config::PluginSpec& plugin_spec) {
  auto p = std::make_shared<Plugin>();
  p->operator_name = op.name;
  p->name = plugin_spec.name;
  p->spec = plugin_spec;
  p->overrides = op.controllers;
  p->routes = op.routes;
  p->record = op.record;
  p->file_shadow_pending = plugin_spec.shadow.has_value();
  BackgroundTasksOptions task_options;
  task_options.operator_name = op.name;
  task_options.plugin = plugin_spec.name;
  task_options.clock = clock_;
  Plugin* const raw = p.get();
  task_options.send = [raw](pluginpb::ReconcileRequest notice) -> absl::Status {
    PluginSlot* slot = raw->slot_for_tasks.load(std::memory_order_acquire);
    if (slot == nullptr) return absl::UnavailableError("plugin not started yet");
    return slot->SendNotice(std::move(notice));
  };
  task_options.enqueue = [this, raw](const std::string& controller, const std::string& key) {
    std::shared_ptr<ControllerGroup> group;
    {
      common::MutexLock lock(&mu_);
      group = raw->group;
    }
    return group != nullptr && group->EnqueueFromTask(controller, key);
  };
  p->tasks = std::make_unique<BackgroundTasks>(std::move(task_options));
  absl::StatusOr<std::unique_ptr<PluginSlot>> slot = PluginSlot::Start(
      OptionsFactoryFor(op.name, plugin_spec, p->tasks.get()), [this] { Wake(); }, clock_);
  if (!slot.ok()) {
    return absl::Status(slot.status().code(),
                        absl::StrCat(plugin_spec.location.ToString(), ": plugin ", plugin_spec.name,
                                     ": ", slot.status().message()));
  }
  p->slot = *std::move(slot);
  p->slot_for_tasks.store(p->slot.get(), std::memory_order_release);
  p->chain = std::make_unique<DispatchChain>(p->slot.get(), FenceFor(op.name), clock_);
  return p;
}

absl::Status Manager::Admit(const std::string& operator_name, const std::string& plugin_name,
                            const pluginpb::DescribeResponse& describe) const {
  std::vector<config::ControllerSpec> overrides;
  {
    common::MutexLock lock(&mu_);
    for (const auto& op : operators_) {
      if (op->spec.name == operator_name) overrides = op->spec.controllers;
    }
  }
  Admitted wanted;
  for (const pluginpb::ControllerSpec& c : describe.controllers()) {
    int64_t workers = std::max<int64_t>(1, c.max_concurrent_reconciles());
    for (const config::ControllerSpec& o : overrides) {
      if (o.name == c.name() && (o.plugin.empty() || o.plugin == plugin_name) &&
          o.max_concurrent_reconciles.has_value()) {
        workers = *o.max_concurrent_reconciles;
      }
    }
    ++wanted.controllers;
    wanted.workers += workers;
  }
  const std::string key = absl::StrCat(operator_name, "/", plugin_name);
  common::MutexLock lock(&admit_mu_);
  Admitted others;
  for (const auto& [other, taken] : admitted_) {
    if (other == key) continue;
    others.controllers += taken.controllers;
    others.workers += taken.workers;
  }
  if (others.controllers + wanted.controllers > options_.max_controllers) {
    return absl::FailedPreconditionError(
        absl::StrCat("the plugin declares ", wanted.controllers, " controllers and the host runs ",
                     others.controllers, " of other plugins; the host's limit is ",
                     options_.max_controllers, " controllers (ctrlhost run --max-controllers)"));
  }
  if (others.workers + wanted.workers > options_.max_reconcile_workers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plugin's controllers need ", wanted.workers,
        " reconcile workers (maxConcurrentReconciles) and the host runs ", others.workers,
        " for other plugins; the host's limit is ", options_.max_reconcile_workers,
        " workers (ctrlhost run --max-reconcile-workers)"));
  }
  admitted_[key] = wanted;
  return absl::OkStatus();
}

void Manager::ReleaseAdmission(const std::string& operator_name, const std::string& plugin_name) {
  common::MutexLock lock(&admit_mu_);
  admitted_.erase(absl::StrCat(operator_name, "/", plugin_name));
}

void Manager::StopPlugin(const std::shared_ptr<Plugin>& p) {
  std::shared_ptr<ControllerGroup> group;
  {
    common::MutexLock lock(&mu_);
    group = p->group;
  }
  p->tasks->StopAll("operator removed");
  if (group != nullptr) {
    std::vector<std::string> unrun = group->Stop(options_.shutdown_timeout);
    if (!unrun.empty()) {
      common::LogWarning("keys not reconciled before the plugin stopped",
                         {{"operator", p->operator_name},
                          {"plugin", p->name},
                          {"keys", absl::StrJoin(unrun, ",")}});
    }
  }
  p->slot->Stop();
  ReleaseAdmission(p->operator_name, p->name);
}
std::string Manager::ControllerNameConflict(const Plugin& plugin,
                                            const pluginpb::DescribeResponse& describe) const {
  // Targets of one route (spec.routes) share the controller's name: the first one runs it.
  auto routed_between = [](const PluginView& other, const Plugin& p, const std::string& name) {
    if (other.plugin->operator_name != p.operator_name) return false;
    for (const config::RouteSpec& r : other.routes) {
      if (r.controller != name) continue;
      bool mine = false, theirs = false;
      for (const config::RouteTargetSpec& t : r.to) {
        mine |= t.plugin == p.name;
        theirs |= t.plugin == other.plugin->name;
      }
      return mine && theirs;
    }
    return false;
  };
  for (const PluginView& other : AllPlugins()) {
    if (other.plugin.get() == &plugin || other.group == nullptr) continue;
    const pluginpb::DescribeResponse theirs = other.group->describe();
    for (const auto& mine : describe.controllers()) {
      for (const auto& their : theirs.controllers()) {
        if (mine.name() != their.name()) continue;
        if (routed_between(other, plugin, mine.name())) continue;
        return absl::StrCat("controller \"", mine.name(), "\" of plugin ", plugin.operator_name,
                            "/", plugin.name, " is already declared by plugin ",
                            other.plugin->operator_name, "/", other.plugin->name,
                            ": controller names must be unique in the host (they name "
                            "metrics, field managers and logs); rename one");
      }
    }
  }
  return "";
}
ControllerGroupDeps Manager::DepsFor(Plugin* p) {
  ControllerGroupDeps deps;
  deps.discovery = options_.discovery;
  deps.registry = registry_.get();
  if (auto it = fenced_appliers_.find(p->operator_name); it != fenced_appliers_.end()) {
    deps.applier = it->second.get();
  } else {
    deps.applier = applier_.get();
  }
  deps.dispatcher = p->chain->dispatcher();
  deps.clock = clock_;
  deps.shard_gate = options_.shard_gate;
  deps.shard_scope = options_.shard_scope;
  deps.shard_labeler = shard_labeler_.get();
  deps.api_budget = options_.api_budget;
  common::MutexLock lock(&mu_);
  deps.dispatching = DispatchingLocked(p->operator_name);
  if (p->record.has_value()) {
    RecordSettings r;
    r.dir = p->record->dir;
    r.controllers = p->record->controllers;
    if (p->record->max_bytes.has_value())
      r.max_bytes = static_cast<uint64_t>(*p->record->max_bytes);
    r.secret_data = p->record->secret_data;
    r.idle_cpu = !p->record->normal_cpu;
    deps.record = std::move(r);
  } else if (!options_.record_dir.empty()) {
    deps.record = RecordSettings{options_.record_dir, {}};
  }
  const Operator* op = nullptr;
  for (const auto& candidate : operators_) {
    if (candidate->spec.name == p->operator_name) op = candidate.get();
  }
  std::vector<std::shared_ptr<RouteDispatcher>> route_dispatchers;
  for (const config::RouteSpec& r : p->routes) {
    if (r.to.empty()) continue;
    if (r.to[0].plugin != p->name) {
      for (const config::RouteTargetSpec& t : r.to) {
        if (t.plugin == p->name) deps.run_elsewhere.insert(r.controller);
      }
      continue;
    }
    std::vector<DispatchChain::RouteTarget> targets;
    for (const config::RouteTargetSpec& t : r.to) {
      std::shared_ptr<Plugin> target;
      if (op != nullptr) {
        for (const auto& q : op->plugins) {
          if (q->name == t.plugin) target = q;
        }
      }
      absl::StatusOr<kube::LabelSelector> selector = kube::LabelSelector::Parse(t.label_selector);
      if (target == nullptr || !selector.ok()) {
        // The loader checked both; a plugin of an operator being changed may not be added yet.
        common::LogError("route left out: its plugin is not running",
                         {{"operator", p->operator_name},
                          {"controller", r.controller},
                          {"route", t.name},
                          {"plugin", t.plugin}});
        continue;
      }
      // The chain shares the target plugin's lifetime: it outlives the route's requests.
      targets.push_back({t.name, t.plugin, *std::move(selector),
                         std::shared_ptr<const DispatchChain>(target, target->chain.get())});
    }
    if (targets.empty()) continue;
    std::shared_ptr<RouteDispatcher> dispatcher =
        DispatchChain::RouteTo(r.controller, std::move(targets), clock_);
    route_dispatchers.push_back(dispatcher);
    deps.routed[r.controller] = std::move(dispatcher);
  }
  p->route_dispatchers = std::move(route_dispatchers);
  return deps;
}
absl::StatusOr<Manager::PluginView> Manager::FindPlugin(const std::string& operator_name,
                                                        const std::string& plugin) const {
  bool operator_found = false;
  for (PluginView& view : AllPlugins()) {
    if (view.plugin->operator_name != operator_name) continue;
    operator_found = true;
    if (view.plugin->name == plugin) return std::move(view);
  }
  if (!operator_found) {
    return absl::NotFoundError(absl::StrCat("operator ", operator_name, " does not run"));
  }
  return absl::NotFoundError(
      absl::StrCat("operator ", operator_name, " has no plugin named ", plugin));
}
SwapResult Manager::SwapPlugin(const std::string& operator_name, const std::string& plugin,
                               const config::PluginSpec& source, const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return SwapError(view.status());
  PluginSlot& slot = *view->plugin->slot;
  if (options.expected_generation != 0 && slot.generation() != options.expected_generation) {
    return SwapError(absl::FailedPreconditionError(
        absl::StrCat("generation ", slot.generation(), " serves, not ", options.expected_generation,
                     " as the request expected")));
  }
  config::PluginSpec spec = source;
  spec.name = plugin;
  // A release that declares a controller another plugin runs is refused before it serves.
  Plugin* const p = view->plugin.get();
  auto accept = [this, p](const pluginpb::DescribeResponse& describe) -> absl::Status {
    const std::string conflict = ControllerNameConflict(*p, describe);
    return conflict.empty() ? absl::OkStatus() : absl::FailedPreconditionError(conflict);
  };
  SwapResult result = slot.Swap(OptionsFactoryFor(operator_name, spec, p->tasks.get()),
                                options.ready_timeout, options.drain_timeout, accept);
  if (result.status.ok() && result.describe != nullptr) AfterSwap(*view, &spec, *result.describe);
  return result;
}

namespace {

// A swap's `accept` that refuses a Describe declaring other controllers than `group`'s (none
// yet: anything), naming `what` ("a canary") in the refusal.
std::function<absl::Status(const pluginpb::DescribeResponse&)> SameControllersAs(
    std::shared_ptr<ControllerGroup> group, std::string what) {
  return [group = std::move(group),
          what = std::move(what)](const pluginpb::DescribeResponse& describe) -> absl::Status {
    if (group != nullptr && !SameControllers(group->describe(), describe)) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " must declare the same controllers as the serving instance"));
    }
    return absl::OkStatus();
  };
}

}  // namespace

SwapResult Manager::StartCanary(const std::string& operator_name, const std::string& plugin,
                                const config::PluginSpec& source, uint32_t percent,
                                const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return SwapError(view.status());
  config::PluginSpec spec = source;
  spec.name = plugin;
  // A canary serves the same controllers: a different Describe is refused (promote it with a
  // plain swap instead).
  auto accept = SameControllersAs(view->group, "a canary");
  return view->plugin->slot->StartCanary(
      OptionsFactoryFor(operator_name, spec, view->plugin->tasks.get()), percent,
      options.ready_timeout, accept);
}

SwapResult Manager::PromoteCanary(const std::string& operator_name, const std::string& plugin,
                                  const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return SwapError(view.status());
  return view->plugin->slot->PromoteCanary(options.drain_timeout);
}

absl::Status Manager::AbortCanary(const std::string& operator_name, const std::string& plugin,
                                  const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return view.status();
  return view->plugin->slot->AbortCanary(options.drain_timeout);
}

SwapResult Manager::StartShadow(const std::string& operator_name, const std::string& plugin,
                                const config::PluginSpec& source, ShadowOptions shadow,
                                const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return SwapError(view.status());
  config::PluginSpec spec = source;
  spec.name = plugin;
  // Its answers are compared call by call: it must serve the same controllers.
  auto accept = SameControllersAs(view->group, "a shadow");
  // Each comparison judges both answers against the controller as it runs then (found again
  // per pair: a swap replaces the plugin's controllers while the shadow runs on).
  auto comparator = std::make_shared<ShadowComparator>(
      [this, operator_name,
       plugin](absl::string_view controller) -> std::optional<controller::ControllerInfo> {
        absl::StatusOr<PluginView> current = FindPlugin(operator_name, plugin);
        if (!current.ok() || current->group == nullptr) return std::nullopt;
        return current->group->Info(std::string(controller));
      },
      ShadowComparator::Options{.plugin = absl::StrCat(operator_name, "/", plugin),
                                .idle_cpu = shadow.idle_cpu});
  // A shadow gets no background tasks: nothing routes task messages to it.
  SwapResult result =
      view->plugin->slot->StartShadow(OptionsFactoryFor(operator_name, spec, nullptr), shadow,
                                      std::move(comparator), options.ready_timeout, accept);
  if (result.status.ok()) {
    common::MutexLock lock(&mu_);
    view->plugin->shadow_spec = spec;
  }
  return result;
}

void Manager::QueueFileShadows(const std::vector<PluginView>& views) {
  const absl::Time now = clock_->Now();
  common::MutexLock lock(&mu_);
  for (const PluginView& view : views) {
    Plugin* p = view.plugin.get();
    // Once the plugin serves: a shadow is checked against the serving instance's controllers.
    if (!p->file_shadow_pending || view.group == nullptr || now < p->file_shadow_retry_at) continue;
    if (p->slot->Snapshot().serving.state != plugin::PluginState::kReady) continue;
    p->file_shadow_pending = false;
    file_shadows_.push_back(view.plugin);
    file_shadows_cv_.SignalAll();
  }
}

void Manager::ShadowLoop() {
  while (true) {
    std::shared_ptr<Plugin> p;
    {
      common::MutexLock lock(&mu_);
      while (file_shadows_.empty() && !stopping_) file_shadows_cv_.Wait(&mu_);
      if (stopping_) return;
      p = std::move(file_shadows_.front());
      file_shadows_.pop_front();
    }
    ApplyFileShadow(p);
  }
}

void Manager::ApplyFileShadow(const std::shared_ptr<Plugin>& p) {
  std::optional<config::ShadowSpec> wanted;
  config::PluginSpec spec;
  bool from_file = false;
  {
    common::MutexLock lock(&mu_);
    wanted = p->spec.shadow;
    spec = p->spec;
    from_file = p->file_shadow_running;
  }
  SwapOptions swap;
  if (spec.startup_timeout.has_value()) swap.ready_timeout = *spec.startup_timeout;
  // A running shadow gives way to the file's new one; one started by hand stays unless the file
  // names one.
  if (p->slot->shadow_comparator() != nullptr && (wanted.has_value() || from_file)) {
    StopShadow(p->operator_name, p->name, swap).IgnoreError();
    common::MutexLock lock(&mu_);
    p->file_shadow_running = false;
  }
  if (!wanted.has_value()) return;
  config::PluginSpec source = spec;
  source.source = wanted->source;
  ShadowOptions options;
  if (wanted->percent.has_value()) options.percent = static_cast<uint32_t>(*wanted->percent);
  if (wanted->max_in_flight.has_value()) {
    options.max_in_flight = static_cast<size_t>(*wanted->max_in_flight);
  }
  options.idle_cpu = !wanted->normal_cpu;
  const SwapResult result = StartShadow(p->operator_name, p->name, source, options, swap);
  common::MutexLock lock(&mu_);
  if (result.status.ok()) {
    p->file_shadow_running = true;
    p->file_shadow_failures = 0;
    common::LogInfo("shadow from the operator file started",
                    {{"operator", p->operator_name},
                     {"plugin", p->name},
                     {"location", wanted->location.ToString()}});
    return;
  }
  // Retried with backoff (5 s doubling to 5 min) until it starts or the block changes.
  const absl::Duration backoff = std::min(
      absl::Seconds(5) * (int64_t{1} << std::min(p->file_shadow_failures, 6)), absl::Minutes(5));
  ++p->file_shadow_failures;
  p->file_shadow_pending = true;
  p->file_shadow_retry_at = clock_->Now() + backoff;
  common::LogWarning("shadow from the operator file did not start; retrying",
                     {{"operator", p->operator_name},
                      {"plugin", p->name},
                      {"location", wanted->location.ToString()},
                      {"error", result.status.message()},
                      {"retry_in", absl::FormatDuration(backoff)}});
}

absl::Status Manager::StopShadow(const std::string& operator_name, const std::string& plugin,
                                 const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return view.status();
  return view->plugin->slot->StopShadow(options.drain_timeout);
}

SwapResult Manager::PromoteShadow(const std::string& operator_name, const std::string& plugin,
                                  double min_agreement, uint64_t min_compared,
                                  const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return SwapError(view.status());
  std::shared_ptr<ShadowComparator> comparator = view->plugin->slot->shadow_comparator();
  if (comparator == nullptr) {
    return SwapError(absl::FailedPreconditionError(
        absl::StrCat("plugin ", plugin, " has no shadow: start one with ctrlhost plugin shadow")));
  }
  comparator->WaitIdle();
  const ShadowComparator::ControllerFigures total = comparator->Snapshot().Total();
  if (total.compared < min_compared || total.agreement() < min_agreement) {
    return SwapError(absl::FailedPreconditionError(absl::StrFormat(
        "the shadow is below the bar: %d compared (at least %d wanted), agreement %.4f (at "
        "least %.4f wanted): %d same, %d different, %d shadow errors, %d dropped",
        total.compared, min_compared, total.agreement(), min_agreement, total.same, total.different,
        total.shadow_errors, total.dropped)));
  }
  config::PluginSpec spec;
  {
    common::MutexLock lock(&mu_);
    spec = view->plugin->shadow_spec;
  }
  SwapResult result = SwapPlugin(operator_name, plugin, spec, options);
  if (result.status.ok()) {
    if (absl::Status stopped = view->plugin->slot->StopShadow(options.drain_timeout);
        !stopped.ok()) {
      common::LogWarning("promoted the shadow's release; stopping the shadow failed",
                         {{"plugin", plugin}, {"status", stopped}});
    }
  }
  return result;
}

void Manager::AfterSwap(const PluginView& view, const config::PluginSpec* source,
                        const pluginpb::DescribeResponse& describe) {
  Plugin* p = view.plugin.get();
  {
    common::MutexLock lock(&mu_);
    if (source != nullptr) p->spec = *source;
  }
  if (view.group == nullptr) {
    Wake();  // the loop starts the controllers from the new instance's Describe
    return;
  }
  // Controllers stopped over their cache cap start again under the new source's cap.
  ReplaceGroup(view, describe, /*force=*/!view.cache_error.empty());
}

void Manager::ReplaceGroup(const PluginView& view, const pluginpb::DescribeResponse& describe,
                           bool force) {
  Plugin* p = view.plugin.get();
  common::MutexLock replacing(&p->replace_mu);
  std::shared_ptr<ControllerGroup> old;
  {
    common::MutexLock lock(&mu_);
    old = p->group;
  }
  if (old == nullptr) return;
  // `view` may be stale: another thread may have replaced the group for this very Describe
  // since (a swap's caller and the loop both see the new instance); replacing it again would
  // stop and start the same controllers and their background tasks twice.
  if (old != view.group && SameControllers(old->describe(), describe)) return;
  if (!force && SameControllers(old->describe(), describe)) return;
  common::LogInfo("replacing the plugin's controllers (new Describe or new overrides)",
                  {{"operator", p->operator_name}, {"plugin", p->name}});
  // A finalizer the new controllers no longer declare is left on the objects that carry it: the
  // host never removes one silently (the cleanup it guards may matter), so deleting such an
  // object waits until someone removes it. Say so loudly, with the command that does it.
  const pluginpb::DescribeResponse before = old->describe();
  for (const auto& was : before.controllers()) {
    if (was.finalizer().empty()) continue;
    bool kept = false;
    for (const auto& now : describe.controllers())
      kept = kept || now.finalizer() == was.finalizer();
    if (kept) continue;
    common::LogWarning(
        "finalizer no longer declared: objects that carry it are not released by this plugin; "
        "finish their cleanup, then remove it (kubectl patch KIND NAME --type=json -p "
        "'[{\"op\":\"remove\",\"path\":\"/metadata/finalizers/INDEX\"}]')",
        {{"operator", p->operator_name},
         {"plugin", p->name},
         {"controller", was.name()},
         {"finalizer", was.finalizer()}});
  }
  // Hold the watches so that stopping the old controllers does not stop the shared caches.
  std::vector<watch::ReflectorHandle> keep = old->RetainWatches();
  p->tasks->StopAll("controllers replaced");  // the next tick starts the new ones' tasks
  std::vector<std::string> unrun = old->Stop(options_.shutdown_timeout);
  // Routes removed by an operator edit can leave two plugins declaring one controller: the
  // first one replaced keeps it; this one waits (the loop retries it, /readyz says why).
  if (std::string conflict = ControllerNameConflict(*p, describe); !conflict.empty()) {
    common::LogError("plugin's controllers refused",
                     {{"operator", p->operator_name}, {"plugin", p->name}, {"error", conflict}});
    common::MutexLock lock(&mu_);
    p->group = nullptr;
    p->group_error = conflict;
    return;
  }
  auto group = std::make_shared<ControllerGroup>(p->operator_name, p->name, DepsFor(p));
  config::PluginSpec spec;
  std::vector<config::ControllerSpec> overrides;
  {
    common::MutexLock lock(&mu_);
    spec = p->spec;
    overrides = p->overrides;
  }
  absl::Status started = group->Start(describe, overrides, spec);
  {
    common::MutexLock lock(&mu_);
    p->group = group;
    p->group_error = std::string(started.message());
    p->cache_error.clear();  // the new controllers start under the cap again
  }
  CatchUpDispatching(p->operator_name, group);
  // The new runners listed their primaries from the held caches at start (AddHandler replays),
  // so keys that never ran under the old controllers are reconciled by the new ones.
  if (!unrun.empty()) {
    common::LogInfo("keys handed over to the new controllers",
                    {{"plugin", p->name}, {"keys", unrun.size()}});
  }
}

}  // namespace ctrlhost::manager
