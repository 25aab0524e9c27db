#include "runtime/manager/manager.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "google/protobuf/util/message_differencer.h"
#include "runtime/common/logging.h"
#include "runtime/common/paths.h"
#include "runtime/common/status_macros.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/counting_dispatcher.h"
#include "runtime/manager/dump.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/manager/route_dispatcher.h"
#include "runtime/manager/watch_readiness.h"
#include "runtime/observe/adapters.h"
#include "runtime/plugin/sandbox.h"
#include "runtime/plugin/supervisor.h"
#include "runtime/watch/kube_lister_watcher.h"

namespace ctrlhost::manager {

namespace fs = std::filesystem;

namespace {

// A new directory for this run's plugin sockets: under $XDG_RUNTIME_DIR when that is a short
// absolute path (socket addresses hold 107 bytes), else /tmp; "ctrlhost-" and 64 random bits.
// Mode 0700, or 0711 when plugins run as another user (they reach their own subdirectories but
// cannot list the others). Not derived from the data dir, so a plugin cannot find the data dir
// from its socket address.
absl::StatusOr<std::string> MakeRunDir(bool other_user) {
  std::string parent = "/tmp";
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
      runtime != nullptr && runtime[0] == '/' && std::strlen(runtime) <= 32) {
    std::error_code error;
    if (fs::is_directory(runtime, error)) parent = runtime;
  }
  unsigned char random[8];
  if (getrandom(random, sizeof(random), 0) != static_cast<ssize_t>(sizeof(random))) {
    return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
  }
  std::string dir = absl::StrCat(parent, "/ctrlhost-");
  for (unsigned char byte : random) absl::StrAppend(&dir, absl::Hex(byte, absl::kZeroPad2));
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("creating the plugin socket directory ", dir, ": ", std::strerror(errno)));
  }
  if (other_user && ::chmod(dir.c_str(), 0711) != 0) {
    const int err = errno;
    ::rmdir(dir.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("chmod 0711 ", dir, ": ", std::strerror(err)));
  }
  return dir;
}

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

bool SameControllers(const pluginpb::DescribeResponse& a, const pluginpb::DescribeResponse& b) {
  if (a.controllers_size() != b.controllers_size()) return false;
  for (int i = 0; i < a.controllers_size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(a.controllers(i), b.controllers(i))) {
      return false;
    }
  }
  return true;
}

std::string StateName(plugin::PluginState state) { return plugin::PluginStateName(state); }

}  // namespace

struct Manager::Plugin {
  std::string operator_name;  // constant
  std::string name;           // constant: the plugin's name in the operator
  // Guarded by the manager's mu_ once the plugin is shared (a swap or an operator update
  // changes them); readers use PluginView's copies.
  config::PluginSpec spec;
  std::vector<config::ControllerSpec> overrides;
  std::vector<config::RouteSpec> routes;  // the operator's spec.routes
  // The RouteDispatchers of the routed controllers of its latest group (for the dump); set by
  // DepsFor, guarded by the manager's mu_.
  std::vector<std::shared_ptr<RouteDispatcher>> route_dispatchers;
  // Its background tasks (set before the slot starts, destroyed after it: the instances'
  // sessions call into it). `slot_for_tasks` is `slot` once set, for its notices.
  std::unique_ptr<BackgroundTasks> tasks;
  std::atomic<PluginSlot*> slot_for_tasks{nullptr};
  std::unique_ptr<PluginSlot> slot;                // set before the plugin is shared
  std::unique_ptr<CountingDispatcher> dispatcher;  // counts, then forwards to the slot
  std::unique_ptr<FencedDispatcher> fenced;        // in front of `dispatcher` when fenced
  // Set by the loop once the plugin was first ready; guarded by the manager's mu_.
  std::shared_ptr<ControllerGroup> group;
  std::string group_error;  // why some overrides did not apply; guarded by mu_
  // Set when the caches its controllers read went over spec.max_cache_bytes and the loop
  // stopped its controllers (until a new group replaces the stopped one); guarded by mu_.
  std::string cache_error;
  // The serving instance the group last saw ready: {generation, restarts}. A new one (a swap,
  // a crash restart, a remote plugin's reconnect) re-enqueues every object of the group's
  // controllers with REASON_PLUGIN_STARTED. Guarded by the manager's mu_.
  std::pair<uint64_t, uint64_t> ready_instance{0, 0};
  // Held while its controllers are being replaced (ReplaceGroup): the loop (a crash restart
  // that brought another Describe, a cache cap) and an admin thread (a swap) may both want to,
  // for the same new instance; one at a time, each against the group current then. Taken
  // before the manager's mu_, never while holding it.
  common::Mutex replace_mu;
};

struct Manager::Operator {
  config::OperatorSpec spec;
  std::vector<std::shared_ptr<Plugin>> plugins;
};

absl::StatusOr<std::unique_ptr<Manager>> Manager::Create(ManagerOptions options) {
  if (options.client == nullptr || options.discovery == nullptr) {
    return absl::InvalidArgumentError("the manager needs an API client and discovery");
  }
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir must be set");
  std::unique_ptr<Manager> manager(new Manager(std::move(options)));
  ASSIGN_OR_RETURN(manager->socket_dir_, MakeRunDir(manager->options_.plugin_uid.has_value()));
  const int landlock = manager->options_.plugin_landlock ? plugin::LandlockAbi() : 0;
  common::LogInfo(
      "plugin isolation",
      {{"sockets", manager->socket_dir_},
       {"user",
        !manager->options_.plugin_uid.has_value() ? std::string("the host's")
        : manager->options_.plugin_uid_per_plugin
            ? absl::StrCat("one per plugin from ", *manager->options_.plugin_uid)
            : absl::StrCat(*manager->options_.plugin_uid, ":",
                           manager->options_.plugin_gid.value_or(*manager->options_.plugin_uid))},
       {"landlock", landlock > 0 ? absl::StrCat("ABI ", landlock)
                                 : std::string(manager->options_.plugin_landlock
                                                   ? "unavailable (kernel)"
                                                   : "off (--plugin-landlock=false)")}});
  manager->loop_ = std::thread([m = manager.get()] { m->Loop(); });
  return manager;
}

Manager::Manager(ManagerOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      dispatching_(options_.dispatching) {
  watch::ReflectorOptions defaults;
  defaults.clock = clock_;
  registry_ = std::make_unique<watch::ReflectorRegistry>(
      watch::KubeListerWatcherFactory(options_.client, options_.discovery), defaults);
  controller::apply::ApplierOptions applier_options;
  applier_options.clock = clock_;
  applier_ = std::make_unique<controller::apply::Applier>(options_.client, applier_options);
  for (const auto& [op, fence] : options_.operator_fences) {
    fenced_appliers_[op] = std::make_unique<FencedApplier>(applier_.get(), fence);
  }
}

Fence* Manager::FenceFor(const std::string& operator_name) const {
  auto it = options_.operator_fences.find(operator_name);
  return it != options_.operator_fences.end() ? it->second : options_.fence;
}

bool Manager::DispatchingLocked(const std::string& operator_name) const {
  if (options_.operator_fences.count(operator_name) > 0) {
    return dispatching_operators_.count(operator_name) > 0;
  }
  return dispatching_;
}

Manager::~Manager() { Stop(); }

PluginSlot::OptionsFactory Manager::OptionsFactoryFor(const std::string& operator_name,
                                                      const config::PluginSpec& spec,
                                                      BackgroundTasks* tasks) const {
  return [this, operator_name, spec, tasks](uint64_t generation) {
    plugin::SupervisorOptions so =
        SupervisorOptionsFor(options_, socket_dir_, operator_name, spec, clock_);
    so.generation = generation;
    if (spec.max_controllers.has_value())
      so.handshake.limits.max_controllers = *spec.max_controllers;
    so.handshake.admit = [this, operator_name,
                          name = spec.name](const pluginpb::DescribeResponse& describe) {
      return Admit(operator_name, name, describe);
    };
    so.on_plugin_message = [tasks, generation](pluginpb::ReconcileResponse message) {
      (void)tasks->OnPluginMessage(generation, message);  // refusals are logged and answered
    };
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

absl::Status Manager::Start(const std::vector<config::OperatorSpec>& operators) {
  std::vector<std::unique_ptr<Operator>> added;
  {
    common::MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("the manager is stopped");
    for (const config::OperatorSpec& spec : operators) {
      for (const auto& existing : operators_) {
        if (existing->spec.name == spec.name) {
          return absl::InvalidArgumentError(
              absl::StrCat(spec.location.ToString(), ": operator ", spec.name, " already runs"));
        }
      }
    }
  }
  for (const config::OperatorSpec& spec : operators) {
    auto op = std::make_unique<Operator>();
    op->spec = spec;
    for (const config::PluginSpec& plugin_spec : spec.plugins) {
      absl::StatusOr<std::shared_ptr<Plugin>> p = NewPlugin(spec, plugin_spec);
      if (!p.ok()) {
        // Stop what this call started; operators already running are untouched.
        for (auto& started : added) {
          for (auto& q : started->plugins) q->slot->Stop();
        }
        for (auto& q : op->plugins) q->slot->Stop();
        return p.status();
      }
      op->plugins.push_back(*std::move(p));
    }
    added.push_back(std::move(op));
  }
  for (auto& op : added) {
    common::LogInfo("operator started", {{"operator", op->spec.name},
                                         {"plugins", op->plugins.size()},
                                         {"source", op->spec.location.ToString()}});
  }
  {
    common::MutexLock lock(&mu_);
    if (!stopping_) {
      for (auto& op : added) operators_.push_back(std::move(op));
      wake_ = true;
      cv_.SignalAll();
      return absl::OkStatus();
    }
  }
  // Stop() ran meanwhile: nothing of this call may outlive it.
  for (auto& op : added) {
    for (auto& p : op->plugins) p->slot->Stop();
  }
  return absl::FailedPreconditionError("the manager is stopped");
}

absl::StatusOr<std::shared_ptr<Manager::Plugin>> Manager::NewPlugin(
    const config::OperatorSpec& op, const config::PluginSpec& plugin_spec) {
  auto p = std::make_shared<Plugin>();
  p->operator_name = op.name;
  p->name = plugin_spec.name;
  p->spec = plugin_spec;
  p->overrides = op.controllers;
  p->routes = op.routes;
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
  p->dispatcher = std::make_unique<CountingDispatcher>(p->slot.get(), clock_);
  if (Fence* fence = FenceFor(op.name); fence != nullptr) {
    p->fenced = std::make_unique<FencedDispatcher>(p->dispatcher.get(), fence);
  }
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

absl::StatusOr<config::OperatorSetDiff> Manager::Apply(
    const std::vector<config::OperatorSpec>& operators, bool dry_run,
    std::vector<std::string>* errors) {
  common::MutexLock apply_lock(&apply_mu_);
  std::vector<config::OperatorSpec> current;
  {
    common::MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("the manager is stopped");
    for (const auto& op : operators_) current.push_back(op->spec);
  }
  config::OperatorSetDiff diff = config::Diff(current, operators);
  if (dry_run || diff.empty()) return diff;
  auto find_new = [&](const std::string& name) -> const config::OperatorSpec* {
    for (const config::OperatorSpec& op : operators) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  auto report = [&](absl::string_view message) {
    common::LogError("operator change not applied", {{"error", message}});
    if (errors != nullptr) errors->push_back(std::string(message));
  };

  // Removed operators: their controllers and plugins stop; the others are untouched.
  for (const std::string& name : diff.removed) {
    std::unique_ptr<Operator> gone;
    {
      common::MutexLock lock(&mu_);
      for (auto it = operators_.begin(); it != operators_.end(); ++it) {
        if ((*it)->spec.name == name) {
          gone = std::move(*it);
          operators_.erase(it);
          break;
        }
      }
    }
    if (gone == nullptr) continue;
    for (auto& p : gone->plugins) StopPlugin(p);
    common::LogInfo("operator deleted", {{"operator", name}});
  }
  // Added operators.
  std::vector<config::OperatorSpec> added;
  for (const std::string& name : diff.added) added.push_back(*find_new(name));
  if (!added.empty()) {
    if (absl::Status s = Start(added); !s.ok()) report(s.message());
  }
  // Changed operators: plugins added, removed, swapped; controller overrides re-applied.
  for (const config::OperatorChange& change : diff.changed) {
    const config::OperatorSpec* spec = find_new(change.name);
    Operator* op = nullptr;
    {
      common::MutexLock lock(&mu_);
      for (auto& candidate : operators_) {
        if (candidate->spec.name == change.name) op = candidate.get();
      }
    }
    if (op == nullptr || spec == nullptr) continue;
    for (const std::string& name : change.removed_plugins) {
      std::shared_ptr<Plugin> gone;
      {
        common::MutexLock lock(&mu_);
        for (auto it = op->plugins.begin(); it != op->plugins.end(); ++it) {
          if ((*it)->name == name) {
            gone = *it;
            op->plugins.erase(it);
            break;
          }
        }
      }
      if (gone != nullptr) StopPlugin(gone);
    }
    for (const std::string& name : change.added_plugins) {
      const config::PluginSpec* plugin_spec = spec->FindPlugin(name);
      if (plugin_spec == nullptr) continue;
      absl::StatusOr<std::shared_ptr<Plugin>> p = NewPlugin(*spec, *plugin_spec);
      if (!p.ok()) {
        report(p.status().message());
        continue;
      }
      common::MutexLock lock(&mu_);
      op->plugins.push_back(*std::move(p));
    }
    for (const std::string& name : change.changed_plugins) {
      const config::PluginSpec* plugin_spec = spec->FindPlugin(name);
      if (plugin_spec == nullptr) continue;
      SwapOptions swap;
      if (plugin_spec->startup_timeout.has_value())
        swap.ready_timeout = *plugin_spec->startup_timeout;
      SwapResult result = SwapPlugin(change.name, name, *plugin_spec, swap);
      if (!result.status.ok()) {
        report(absl::StrCat(
            plugin_spec->location.ToString(), ": plugin ", name,
            ": swap refused, the running instance keeps serving: ", result.status.message()));
      }
    }
    if (change.controllers_changed || change.routes_changed) {
      std::vector<std::shared_ptr<Plugin>> plugins;
      {
        common::MutexLock lock(&mu_);
        plugins = op->plugins;
        for (auto& p : plugins) {
          p->overrides = spec->controllers;
          p->routes = spec->routes;
        }
      }
      // Plugins that run no routed controller are replaced first: one that ran a controller
      // which a route now gives to another plugin stops it before that plugin starts it.
      auto leads = [&](const std::shared_ptr<Plugin>& p) {
        for (const config::RouteSpec& r : spec->routes) {
          if (!r.to.empty() && r.to[0].plugin == p->name) return true;
        }
        return false;
      };
      std::stable_partition(plugins.begin(), plugins.end(),
                            [&](const std::shared_ptr<Plugin>& p) { return !leads(p); });
      for (auto& p : plugins) {
        absl::StatusOr<PluginView> view = FindPlugin(change.name, p->name);
        if (view.ok() && view->group != nullptr) {
          ReplaceGroup(*view, view->group->describe(), /*force=*/true);
        }
      }
    }
    {
      common::MutexLock lock(&mu_);
      op->spec = *spec;
    }
    common::LogInfo("operator updated", {{"operator", change.name}});
  }
  Wake();
  return diff;
}

std::vector<Manager::PluginView> Manager::AllPlugins() const {
  std::vector<PluginView> out;
  common::MutexLock lock(&mu_);
  for (const auto& op : operators_) {
    for (const auto& p : op->plugins) {
      out.push_back(PluginView{p, p->group, p->group_error, p->spec, p->overrides, p->cache_error,
                               p->routes, p->route_dispatchers});
    }
  }
  return out;
}

void Manager::Wake() {
  common::MutexLock lock(&mu_);
  wake_ = true;
  cv_.SignalAll();
}

void Manager::Loop() {
  while (true) {
    {
      common::MutexLock lock(&mu_);
      if (!wake_ && !stopping_) clock_->WaitWithDeadline(&mu_, &cv_, clock_->Now() + options_.tick);
      if (stopping_) return;
      wake_ = false;
    }
    Tick();
    SyncBackgroundTasks();
  }
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

void Manager::Tick() {
  const bool api_reachable = !options_.api_reachable || options_.api_reachable();
  for (const PluginView& view : AllPlugins()) {
    Plugin* p = view.plugin.get();
    const SlotStatus slot = p->slot->Snapshot();
    const std::pair<uint64_t, uint64_t> instance{slot.serving_generation, slot.serving.restarts};
    const bool ready = slot.serving.state == plugin::PluginState::kReady;
    if (view.group == nullptr) {
      plugin::PluginStatus status = p->slot->status();
      if (status.state != plugin::PluginState::kReady || status.describe == nullptr) continue;
      const pluginpb::DescribeResponse& describe = *status.describe;
      // Controller names are unique in the host: they name metrics, field managers and logs.
      if (std::string conflict = ControllerNameConflict(*p, describe); !conflict.empty()) {
        bool changed = false;
        {
          common::MutexLock lock(&mu_);
          changed = p->group_error != conflict;
          p->group_error = conflict;
        }
        if (changed) {
          common::LogError(
              "plugin's controllers refused",
              {{"operator", p->operator_name}, {"plugin", p->name}, {"error", conflict}});
        }
        continue;
      }
      auto group = std::make_shared<ControllerGroup>(p->operator_name, p->name, DepsFor(p));
      absl::Status started = group->Start(describe, view.overrides, view.spec);
      if (!started.ok()) {
        common::LogWarning(
            "operator file override not applied",
            {{"operator", p->operator_name}, {"plugin", p->name}, {"error", started.message()}});
      }
      {
        common::MutexLock lock(&mu_);
        p->group_error = std::string(started.message());
        p->group = group;
        p->ready_instance = instance;  // the controllers' initial lists enqueue every object
        if (stopping_) return;         // Stop stops the group
      }
      CatchUpDispatching(p->operator_name, group);
      continue;
    }
    if (!view.cache_error.empty()) continue;  // stopped over its cache cap
    if (view.spec.max_cache_bytes.has_value() && EnforceCacheCap(view)) continue;
    if (api_reachable) view.group->RetryPending();
    if (!ready) continue;
    bool new_instance = false;
    {
      common::MutexLock lock(&mu_);
      new_instance = p->ready_instance != instance;
      p->ready_instance = instance;
    }
    if (new_instance) {
      // A crash restart may bring another release (the command's file was replaced): its
      // Describe decides the controllers, as after a swap. The new controllers list every
      // object from the caches, so nothing more needs enqueueing.
      if (const plugin::PluginStatus status = p->slot->status();
          status.describe != nullptr &&
          !SameControllers(view.group->describe(), *status.describe)) {
        ReplaceGroup(view, *status.describe, /*force=*/false);
        continue;
      }
      // docs/protocol.md §7: keys parked on a terminal error, and objects the previous instance
      // reconciled, get a chance with the new one.
      common::LogInfo("plugin instance ready: re-enqueueing its controllers' objects",
                      {{"operator", p->operator_name},
                       {"plugin", p->name},
                       {"generation", instance.first},
                       {"restarts", instance.second}});
      view.group->EnqueueAll(pluginpb::REASON_PLUGIN_STARTED, absl::ZeroDuration());
      EnqueueRoutedTo(view);
    }
  }
}

void Manager::EnqueueRoutedTo(const PluginView& view) {
  const Plugin& p = *view.plugin;
  for (const config::RouteSpec& r : view.routes) {
    if (r.to.empty() || r.to[0].plugin == p.name) continue;  // its own group: already queued
    bool targets_p = false;
    for (const config::RouteTargetSpec& t : r.to) targets_p |= t.plugin == p.name;
    if (!targets_p) continue;
    for (const PluginView& leader : AllPlugins()) {
      if (leader.plugin->operator_name == p.operator_name &&
          leader.plugin->name == r.to[0].plugin && leader.group != nullptr) {
        leader.group->EnqueueAll(pluginpb::REASON_PLUGIN_STARTED, absl::ZeroDuration());
      }
    }
  }
}

void Manager::SyncBackgroundTasks() {
  // A closed fence (leadership lost, or a Lease not renewed in time) stops every task; a
  // standby's controllers do not dispatch, so theirs never start.
  for (const PluginView& view : AllPlugins()) {
    Plugin* p = view.plugin.get();
    const Fence* fence = FenceFor(p->operator_name);
    const bool fenced = fence != nullptr && !fence->open();
    const SlotStatus slot = p->slot->Snapshot();
    BackgroundTasks::InstanceId instance{0, 0};
    if (slot.serving.state == plugin::PluginState::kReady) {
      instance = {slot.serving_generation, slot.serving.restarts};
    }
    // A new instance whose Describe differs from the running controllers' (a swap or a crash
    // restart to other code) is about to get its controllers replaced: its tasks start with the
    // new controllers, not now from the old ones' declarations only to be stopped and started
    // again (the first run would happen twice).
    if (view.group != nullptr && slot.serving.describe != nullptr &&
        !SameControllers(view.group->describe(), *slot.serving.describe)) {
      continue;
    }
    std::vector<BackgroundTasks::Wanted> wanted;
    if (view.group != nullptr && view.cache_error.empty() && !fenced) {
      wanted = view.group->TasksWanted();
    }
    p->tasks->Sync(instance, wanted, fenced ? "leadership lost" : "controller stopped");
  }
}

bool Manager::EnforceCacheCap(const PluginView& view) {
  const uint64_t cap = static_cast<uint64_t>(*view.spec.max_cache_bytes);
  const uint64_t bytes = CacheBytes(view.group->Status());
  if (bytes <= cap) return false;
  Plugin* p = view.plugin.get();
  std::string error = absl::StrCat(
      "the caches its controllers read hold ", bytes, " bytes, over its maxCacheBytes ", cap,
      "; its controllers are stopped (raise the cap, or narrow what they watch, and the "
      "operator file change restarts them)");
  common::LogError("plugin over its cache cap: controllers stopped",
                   {{"operator", p->operator_name},
                    {"plugin", p->name},
                    {"cache_bytes", bytes},
                    {"max_cache_bytes", cap}});
  {
    common::MutexLock lock(&mu_);
    p->cache_error = std::move(error);
  }
  // Releasing the controllers' watch handles stops the watches no other plugin reads and frees
  // their caches.
  view.group->Stop(options_.shutdown_timeout);
  return true;
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

namespace {

SwapResult SwapError(absl::Status status) {
  SwapResult result;
  result.status = std::move(status);
  return result;
}

}  // namespace

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

SwapResult Manager::StartCanary(const std::string& operator_name, const std::string& plugin,
                                const config::PluginSpec& source, uint32_t percent,
                                const SwapOptions& options) {
  absl::StatusOr<PluginView> view = FindPlugin(operator_name, plugin);
  if (!view.ok()) return SwapError(view.status());
  config::PluginSpec spec = source;
  spec.name = plugin;
  // A canary serves the same controllers: a different Describe is refused (promote it with a
  // plain swap instead).
  std::shared_ptr<ControllerGroup> group = view->group;
  auto accept = [group](const pluginpb::DescribeResponse& describe) -> absl::Status {
    if (group != nullptr && !SameControllers(group->describe(), describe)) {
      return absl::FailedPreconditionError(
          "a canary must declare the same controllers as the serving instance");
    }
    return absl::OkStatus();
  };
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

ControllerGroupDeps Manager::DepsFor(Plugin* p) {
  ControllerGroupDeps deps;
  deps.discovery = options_.discovery;
  deps.registry = registry_.get();
  if (auto it = fenced_appliers_.find(p->operator_name); it != fenced_appliers_.end()) {
    deps.applier = it->second.get();
  } else {
    deps.applier = applier_.get();
  }
  deps.dispatcher = p->fenced != nullptr ? static_cast<controller::Dispatcher*>(p->fenced.get())
                                         : p->dispatcher.get();
  deps.clock = clock_;
  deps.shard_gate = options_.shard_gate;
  common::MutexLock lock(&mu_);
  deps.dispatching = DispatchingLocked(p->operator_name);
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
    std::vector<Route> routes;
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
      controller::Dispatcher* d = target->fenced != nullptr
                                      ? static_cast<controller::Dispatcher*>(target->fenced.get())
                                      : target->dispatcher.get();
      routes.push_back(Route{t.name, t.plugin, *std::move(selector),
                             std::shared_ptr<controller::Dispatcher>(target, d)});
    }
    if (routes.empty()) continue;
    auto dispatcher = std::make_shared<RouteDispatcher>(r.controller, std::move(routes), clock_);
    route_dispatchers.push_back(dispatcher);
    deps.routed[r.controller] = std::move(dispatcher);
  }
  p->route_dispatchers = std::move(route_dispatchers);
  return deps;
}

void Manager::CatchUpDispatching(const std::string& operator_name,
                                 const std::shared_ptr<ControllerGroup>& group) {
  bool dispatching = false;
  {
    common::MutexLock lock(&mu_);
    dispatching = DispatchingLocked(operator_name);
  }
  if (dispatching) group->StartDispatching();
}

void Manager::StartDispatching() {
  {
    common::MutexLock lock(&mu_);
    if (dispatching_ || stopping_) return;
    dispatching_ = true;
  }
  int groups = 0;
  for (const PluginView& view : AllPlugins()) {
    if (view.group == nullptr) continue;
    if (options_.operator_fences.count(view.plugin->operator_name) > 0) continue;  // own Lease
    view.group->StartDispatching();
    ++groups;
  }
  common::LogInfo("dispatch started: every controller reconciles all its objects",
                  {{"controller_groups", groups}});
}

void Manager::StartDispatching(const std::string& operator_name) {
  if (options_.operator_fences.count(operator_name) == 0) {
    StartDispatching();
    return;
  }
  {
    common::MutexLock lock(&mu_);
    if (stopping_ || !dispatching_operators_.insert(operator_name).second) return;
  }
  int groups = 0;
  for (const PluginView& view : AllPlugins()) {
    if (view.group == nullptr || view.plugin->operator_name != operator_name) continue;
    view.group->StartDispatching();
    ++groups;
  }
  common::LogInfo("dispatch started: every controller of the operator reconciles all its objects",
                  {{"operator", operator_name}, {"controller_groups", groups}});
}

bool Manager::dispatching(const std::string& operator_name) const {
  common::MutexLock lock(&mu_);
  return DispatchingLocked(operator_name);
}

size_t Manager::EnqueueSharded(const std::function<bool(absl::string_view key)>& filter) {
  size_t queued = 0;
  for (const PluginView& view : AllPlugins()) {
    if (view.group != nullptr) {
      queued += view.group->EnqueueSharded(pluginpb::REASON_RESYNC, filter);
    }
  }
  return queued;
}

bool Manager::dispatching() const {
  common::MutexLock lock(&mu_);
  return dispatching_;
}

absl::Status Manager::Ready() const { return Check(nullptr); }

absl::Status Manager::Started(std::vector<std::string>* pending,
                              std::vector<std::string>* refused) const {
  std::vector<std::string> ignored;
  return Check(pending != nullptr ? pending : &ignored, refused);
}

absl::Status Manager::Check(std::vector<std::string>* pending,
                            std::vector<std::string>* refused) const {
  std::vector<std::string> not_ready;
  const absl::Time now = clock_->Now();
  for (const PluginView& view : AllPlugins()) {
    const Plugin* p = view.plugin.get();
    const std::string name = absl::StrCat(p->operator_name, "/", p->name);
    plugin::PluginStatus status = p->slot->status();
    if (!view.cache_error.empty()) {
      not_ready.push_back(absl::StrCat("plugin ", name, ": ", view.cache_error));
    } else if (refused != nullptr && status.state == plugin::PluginState::kFailed) {
      refused->push_back(absl::StrCat("operator ", p->operator_name, ", plugin ", p->name, ": ",
                                      status.last_error.message()));
    } else if (status.state != plugin::PluginState::kReady) {
      not_ready.push_back(absl::StrCat(
          "plugin ", name, " is ", StateName(status.state),
          status.last_error.ok() ? "" : absl::StrCat(": ", status.last_error.message())));
    } else if (status.health != plugin::HealthStatus::kServing) {
      // It drains, say: its requests wait in the host (docs/protocol.md, "Liveness").
      not_ready.push_back(absl::StrCat(
          "plugin ", name, " is not serving: it reports ", plugin::HealthStatusName(status.health),
          " since ",
          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", status.health_since, absl::UTCTimeZone()), "; ",
          status.held, " request(s) wait for it"));
    } else if (view.group == nullptr) {
      not_ready.push_back(
          absl::StrCat("plugin ", name, ": controllers not started",
                       view.group_error.empty() ? " yet" : absl::StrCat(": ", view.group_error)));
    } else {
      for (const ControllerStatus& c : view.group->Status()) {
        if (c.state == "pending") {
          const std::string why =
              absl::StrCat("controller ", c.name, " pending: ", c.pending_reason);
          if (pending != nullptr) {
            pending->push_back(why);
          } else {
            not_ready.push_back(why);
          }
        } else {
          // A failing watch says why (403s at once, others after the grace period); a cache
          // that has not listed yet without a failure is just not synced yet.
          bool explained = false;
          for (const watch::ReflectorMetrics& w : c.watch_metrics) {
            if (!w.failing) continue;
            std::string problem = WatchReadinessProblem(w, now, options_.watch_stale_after);
            if (problem.empty()) continue;
            not_ready.push_back(absl::StrCat("controller ", c.name, ": ", problem));
            explained = true;
          }
          if (!c.synced && !explained) {
            not_ready.push_back(absl::StrCat("controller ", c.name, ": caches not synced"));
          }
        }
      }
    }
  }
  if (not_ready.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrJoin(not_ready, "; "));
}

std::vector<std::string> Manager::AllPluginsRefused() const {
  std::vector<std::string> refused;
  for (const PluginView& view : AllPlugins()) {
    const plugin::PluginStatus status = view.plugin->slot->status();
    if (status.state != plugin::PluginState::kFailed) return {};
    refused.push_back(absl::StrCat("operator ", view.plugin->operator_name, ", plugin ",
                                   view.plugin->name, ": ", status.last_error.message()));
  }
  return refused;
}

absl::Status Manager::WaitReady(absl::Duration timeout) const {
  // Real time: this is a bounded wait for callers (the CLI, tests), not host logic.
  common::Clock* real = common::Clock::Real();
  const absl::Time deadline = real->Now() + timeout;
  absl::Status status = Ready();
  while (!status.ok() && real->Now() < deadline) {
    // A refused plugin is not restarted until the operators change, so Ready() cannot pass:
    // say so now rather than at the deadline.
    for (const PluginView& view : AllPlugins()) {
      const plugin::PluginStatus plugin_status = view.plugin->slot->status();
      if (plugin_status.state == plugin::PluginState::kFailed) {
        return absl::FailedPreconditionError(
            absl::StrCat("operator ", view.plugin->operator_name, ", plugin ", view.plugin->name,
                         " was refused: ", plugin_status.last_error.message()));
      }
    }
    real->SleepFor(absl::Milliseconds(50));
    status = Ready();
  }
  return status;
}

void Manager::Stop() {
  // Waits for an Apply in progress (bounded by its swaps' timeouts) and serialises Stop calls.
  common::MutexLock apply_lock(&apply_mu_);
  std::vector<std::unique_ptr<Operator>> operators;
  {
    common::MutexLock lock(&mu_);
    if (stopping_ && operators_.empty()) return;
    stopping_ = true;
    cv_.SignalAll();
  }
  if (loop_.joinable()) loop_.join();
  {
    common::MutexLock lock(&mu_);
    operators.swap(operators_);
  }
  // Controllers first (their runners drain into the plugins), then the plugins. Readers
  // (Collect, Ready, DumpYaml) may still hold shared pointers: groups and plugins only stop
  // here, they are destroyed with the last reference.
  for (auto& op : operators) {
    for (auto& p : op->plugins) {
      std::shared_ptr<ControllerGroup> group;
      {
        common::MutexLock lock(&mu_);
        group = p->group;
      }
      p->tasks->StopAll("host shutting down");
      if (group == nullptr) continue;
      std::vector<std::string> unrun = group->Stop(options_.shutdown_timeout);
      if (!unrun.empty()) {
        common::LogWarning("keys not reconciled before shutdown (the next start lists them again)",
                           {{"operator", op->spec.name},
                            {"plugin", p->name},
                            {"keys", absl::StrJoin(unrun, ",")}});
      }
    }
  }
  for (auto& op : operators) {
    for (auto& p : op->plugins) p->slot->Stop();
  }
  operators.clear();
  if (!socket_dir_.empty()) {
    std::error_code error;
    fs::remove_all(socket_dir_, error);
  }
}

void Manager::Collect(observe::Figures& figures) const {
  for (const PluginView& view : AllPlugins()) {
    uint64_t cache_bytes = 0;
    if (view.group != nullptr) {
      view.group->Collect(figures);
      cache_bytes = CacheBytes(view.group->Status());
    }
    const Plugin& p = *view.plugin;
    const SlotStatus slot = p.slot->Snapshot();
    const plugin::PluginStatus& status = slot.serving;
    PluginRequestFigures requests = p.dispatcher->Figures();
    observe::PluginFigures f;
    f.operator_name = p.operator_name;
    f.plugin = p.name;
    f.up = status.state == plugin::PluginState::kReady;
    f.restarts_total = status.restarts;
    f.swaps_total = slot.swaps;
    f.swap_failures_total = slot.failed_swaps;
    f.in_flight = static_cast<double>(requests.in_flight);
    f.requests_total = requests.requests_total;
    f.request_duration = observe::FromDurationHistogram(requests.duration);
    f.cache_bytes = static_cast<double>(cache_bytes);
    figures.plugins.push_back(std::move(f));
    for (const TaskControllerReport& r : p.tasks->Report()) {
      observe::TaskEnqueueFigures t;
      t.operator_name = p.operator_name;
      t.plugin = p.name;
      t.controller = r.controller;
      t.accepted_total = r.enqueued;
      t.refused_rate_limited_total = r.refused_rate_limited;
      t.refused_invalid_total = r.refused_invalid;
      t.refused_not_running_total = r.refused_not_running;
      figures.task_enqueues.push_back(std::move(t));
    }
  }
  for (const watch::ReflectorMetrics& m : registry_->Metrics()) {
    figures.watches.push_back(observe::FromReflectorMetrics(m));
  }
}

std::vector<Manager::PluginReport> Manager::Report() const {
  std::vector<PluginReport> out;
  for (const PluginView& view : AllPlugins()) {
    PluginReport r;
    r.operator_name = view.plugin->operator_name;
    r.name = view.plugin->name;
    r.spec = view.spec;
    r.slot = view.plugin->slot->Snapshot();
    r.group_error = view.group_error;
    if (view.group != nullptr) {
      r.controllers = view.group->Status();
      pluginpb::DescribeResponse describe = view.group->describe();
      r.controller_specs.assign(describe.controllers().begin(), describe.controllers().end());
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<config::OperatorSpec> Manager::Operators() const {
  std::vector<config::OperatorSpec> out;
  common::MutexLock lock(&mu_);
  for (const auto& op : operators_) out.push_back(op->spec);
  return out;
}

std::string Manager::DumpYaml() const {
  DumpInput input;
  for (const PluginView& view : AllPlugins()) {
    DumpPlugin dp;
    dp.operator_name = view.plugin->operator_name;
    dp.plugin = view.plugin->name;
    SlotStatus slot = view.plugin->slot->Snapshot();
    const plugin::PluginStatus& status = slot.serving;
    dp.state = StateName(status.state);
    dp.pid = static_cast<int>(status.pid);
    dp.generation = slot.serving_generation;
    dp.swaps = slot.swaps;
    dp.last_swap_error = slot.last_swap_error;
    if (slot.has_canary) {
      dp.canary = absl::StrCat("generation ", slot.canary_generation, " ",
                               StateName(slot.canary.state), " ", slot.canary_percent, "%");
    }
    dp.address = slot.serving_socket.empty()
                     ? (view.spec.endpoint() != nullptr ? view.spec.endpoint()->address : "")
                     : absl::StrCat("unix://", slot.serving_socket);
    dp.restarts = status.restarts;
    if (status.state == plugin::PluginState::kReady) {
      dp.health = plugin::HealthStatusName(status.health);
      dp.health_since = status.health_since;
      dp.held = status.held;
    }
    if (status.describe != nullptr) {
      dp.reported_name = status.describe->plugin_name();
      dp.reported_version = status.describe->plugin_version();
    }
    if (!status.last_error.ok()) dp.last_error = status.last_error.ToString();
    dp.group_error = view.group_error;
    dp.cache_error = view.cache_error;
    dp.tasks = view.plugin->tasks->Report();
    if (view.group != nullptr) dp.controllers = view.group->Status();
    for (const auto& routes : view.route_dispatchers) {
      const RouteFigures f = routes->Figures();
      dp.routes.push_back(
          DumpRoutes{routes->controller(), f.routed, f.unrouted, f.ambiguous, f.moved});
    }
    input.plugins.push_back(std::move(dp));
  }
  input.now = clock_->Now();
  input.watches = registry_->Metrics();
  return RenderDump(input);
}

}  // namespace ctrlhost::manager
