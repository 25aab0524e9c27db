// The manager's lifecycle: Create, Start, Stop, the loop (Tick: controller groups of ready
// plugins, pending retries, cache caps, new instances; background tasks), and dispatch start per
// Lease. Plugins and swaps: manager_plugins.cc; Apply: manager_apply.cc; readiness, figures and
// the dump: manager_status.cc.
#include "runtime/manager/manager.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/dump.h"
#include "runtime/manager/manager_internal.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/plugin/sandbox.h"
#include "runtime/watch/kube_lister_watcher.h"

namespace ctrlhost::manager {

namespace fs = std::filesystem;

using internal::SameControllers;

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

}  // namespace

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
  manager->shadow_loop_ = std::thread([m = manager.get()] { m->ShadowLoop(); });
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
  if (options_.shard_scope != nullptr) {
    shard_labeler_ = std::make_unique<ShardLabeler>(
        options_.shard_labeler_client != nullptr ? options_.shard_labeler_client : options_.client,
        registry_.get());
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
void Manager::NoteRecordDirs(const std::vector<config::OperatorSpec>& operators) {
  common::MutexLock lock(&record_dirs_mu_);
  for (const config::OperatorSpec& op : operators) {
    if (op.record.has_value()) record_dirs_.insert(op.record->dir);
  }
}

absl::Status Manager::Start(const std::vector<config::OperatorSpec>& operators) {
  NoteRecordDirs(operators);
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
    SetApiWeight(spec);
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
    // After a burst (initial lists, a wave of reconciles) glibc keeps each thread's arena at
    // its peak; hand what is free back (at most every 10 s, once 16 MiB more sits free).
    if (const size_t freed = heap_trimmer_.Tick(); freed > 0) {
      common::LogInfo("freed heap given back to the kernel",
                      {{"free_mib", static_cast<int64_t>(freed >> 20)}});
    }
  }
}
void Manager::Tick() {
  const bool api_reachable = !options_.api_reachable || options_.api_reachable();
  const std::vector<PluginView> views = AllPlugins();
  QueueFileShadows(views);
  for (const PluginView& view : views) {
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

void Manager::StopDispatching(const std::string& operator_name,
                              const std::function<void()>& drained) {
  bool was = false;
  if (options_.operator_fences.count(operator_name) > 0) {
    common::MutexLock lock(&mu_);
    // Erased before the groups are listed: a group published later reads the flag (CatchUp)
    // after this and does not start.
    was = dispatching_operators_.erase(operator_name) > 0;
  }
  std::vector<std::pair<std::shared_ptr<ControllerGroup>, ControllerGroup::DrainedPtr>> groups;
  if (was) {
    // One deadline for all the operator's groups: each stops handing out keys in turn and
    // they drain together.
    const absl::Time deadline = clock_->Now() + options_.shutdown_timeout;
    for (const PluginView& view : AllPlugins()) {
      if (view.group == nullptr || view.plugin->operator_name != operator_name) continue;
      groups.emplace_back(view.group, view.group->DrainForStandby(std::max(
                                          absl::ZeroDuration(), deadline - clock_->Now())));
    }
  }
  if (drained) drained();
  for (auto& [group, drained_group] : groups) group->RewireAsStandby(std::move(drained_group));
  if (was) {
    common::LogInfo("dispatch stopped: the operator stands by (plugins and caches kept)",
                    {{"operator", operator_name}, {"controller_groups", groups.size()}});
  }
}

bool Manager::dispatching(const std::string& operator_name) const {
  common::MutexLock lock(&mu_);
  return DispatchingLocked(operator_name);
}

size_t Manager::EnqueueSharded(const std::function<bool(const cache::Object& primary)>& filter) {
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
void Manager::Stop() {
  // Waits for an Apply in progress (bounded by its swaps' timeouts) and serialises Stop calls.
  common::MutexLock apply_lock(&apply_mu_);
  std::vector<std::unique_ptr<Operator>> operators;
  {
    common::MutexLock lock(&mu_);
    if (stopping_ && operators_.empty()) return;
    stopping_ = true;
    cv_.SignalAll();
    file_shadows_cv_.SignalAll();
  }
  if (loop_.joinable()) loop_.join();
  if (shadow_loop_.joinable()) shadow_loop_.join();
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
  // Its watches are released here, while registry_ lives; the object itself outlives the
  // reflectors (declared before registry_).
  if (shard_labeler_ != nullptr) shard_labeler_->Stop();
  if (!socket_dir_.empty()) {
    std::error_code error;
    fs::remove_all(socket_dir_, error);
  }
}

}  // namespace ctrlhost::manager
