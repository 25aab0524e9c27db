#include "runtime/manager/controller_group.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/version.h"
#include "runtime/controller/record/recording.h"
#include "runtime/controller/schedule.h"
#include "runtime/observe/adapters.h"

namespace ctrlhost::manager {

namespace {

std::string GvkString(const pluginpb::GroupVersionKind& gvk) {
  return absl::StrCat(gvk.group().empty() ? "" : absl::StrCat(gvk.group(), "/"), gvk.version(), " ",
                      gvk.kind());
}

kube::GroupVersionKind ToKube(const pluginpb::GroupVersionKind& gvk) {
  return kube::GroupVersionKind{gvk.group(), gvk.version(), gvk.kind()};
}

watch::WatchKey KeyFor(const kube::ResourceMapping& mapping, std::string namespace_,
                       std::string label_selector) {
  watch::WatchKey key;
  key.group = mapping.group;
  key.version = mapping.version;
  key.kind = mapping.kind;
  key.namespace_ = mapping.namespaced ? std::move(namespace_) : "";
  key.label_selector = std::move(label_selector);
  return key;
}

// discovery's answer for `gvk`, its error prefixed with what the kind is for.
absl::StatusOr<kube::ResourceMapping> Resolve(kube::Discovery* discovery,
                                              const pluginpb::GroupVersionKind& gvk,
                                              absl::string_view role) {
  absl::StatusOr<kube::ResourceMapping> mapping = discovery->MappingFor(ToKube(gvk));
  if (!mapping.ok()) {
    return absl::Status(mapping.status().code(),
                        absl::StrCat(role, " ", GvkString(gvk), ": ", mapping.status().message()));
  }
  return mapping;
}

absl::Duration Seconds(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace

struct ControllerGroup::Controller {
  pluginpb::ControllerSpec spec;
  std::optional<config::ControllerSpec> override_spec;
  absl::Duration request_timeout = absl::Seconds(30);
  absl::Duration resync = absl::ZeroDuration();

  // Guarded by the group's mu_ (read by Status/Collect while the group runs).
  std::string state = "pending";
  std::string pending_reason;

  // Written only by StartController/StopController (serialised by the group's callers) before
  // state becomes "running" / after it stops being so.
  controller::ControllerInfo info;
  std::vector<watch::ReflectorHandle> handles;  // primary, owned..., watches...
  std::vector<watch::WatchKey> keys;            // of `handles`, in the same order
  std::vector<kube::ResourceMapping> watched;   // the watched kinds, in the spec's order
  std::vector<std::pair<watch::Reflector*, int>> subscriptions;
  // Before `runner`, which reports to it: destroyed after it. Set (StartRecorder) and taken
  // (Stop) under the group's mu_, which Status holds to read its figures.
  std::unique_ptr<controller::record::Recorder> recorder;
  std::unique_ptr<controller::Runner> runner;
  std::unique_ptr<controller::Scheduler> scheduler;  // resync period and cron schedules
  bool runner_started = false;                       // guarded by the group's mu_
};

ControllerGroup::ControllerGroup(std::string operator_name, std::string plugin,
                                 ControllerGroupDeps deps)
    : operator_name_(std::move(operator_name)),
      plugin_(std::move(plugin)),
      deps_(deps),
      clock_(deps.clock != nullptr ? deps.clock : common::Clock::Real()),
      dispatching_(deps.dispatching) {}

ControllerGroup::~ControllerGroup() { Stop(absl::Seconds(10)); }

controller::Dispatcher* ControllerGroup::DispatcherFor(const std::string& controller) const {
  auto it = deps_.routed.find(controller);
  return it != deps_.routed.end() ? it->second.get() : deps_.dispatcher;
}

absl::Status ControllerGroup::Start(const pluginpb::DescribeResponse& describe,
                                    const std::vector<config::ControllerSpec>& overrides,
                                    const config::PluginSpec& plugin) {
  std::vector<std::string> unmatched;
  for (const config::ControllerSpec& o : overrides) {
    if (!o.plugin.empty() && o.plugin != plugin_) continue;
    bool found = false;
    for (const pluginpb::ControllerSpec& spec : describe.controllers())
      found |= spec.name() == o.name;
    if (!found && !o.plugin.empty()) unmatched.push_back(o.name);
  }
  {
    common::MutexLock lock(&mu_);
    if (stopped_) return absl::FailedPreconditionError("the controller group was stopped");
    describe_ = describe;
    for (const pluginpb::ControllerSpec& spec : describe.controllers()) {
      if (deps_.run_elsewhere.contains(spec.name())) {
        common::LogInfo(
            "routed controller: run by the first plugin of its routes (spec.routes)",
            {{"operator", operator_name_}, {"plugin", plugin_}, {"controller", spec.name()}});
        continue;
      }
      auto c = std::make_unique<Controller>();
      c->spec = spec;
      for (const config::ControllerSpec& o : overrides) {
        if (o.name == spec.name() && (o.plugin.empty() || o.plugin == plugin_))
          c->override_spec = o;
      }
      if (c->override_spec.has_value() && c->override_spec->disabled) {
        common::LogInfo(
            "controller disabled by the operator file",
            {{"operator", operator_name_}, {"plugin", plugin_}, {"controller", spec.name()}});
        continue;
      }
      if (plugin.request_timeout.has_value()) c->request_timeout = *plugin.request_timeout;
      if (spec.has_resync_period()) c->resync = Seconds(spec.resync_period());
      if (c->override_spec.has_value() && c->override_spec->resync_period.has_value()) {
        c->resync = *c->override_spec->resync_period;
      }
      controllers_.push_back(std::move(c));
    }
  }
  RetryPending();
  if (!unmatched.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.controllers names controllers that plugin ", plugin_,
                     " does not declare: ", absl::StrJoin(unmatched, ", ")));
  }
  return absl::OkStatus();
}

int ControllerGroup::RetryPending() {
  std::vector<Controller*> pending;
  {
    common::MutexLock lock(&mu_);
    if (stopped_) return 0;
    for (auto& c : controllers_) {
      if (c->state == "pending") pending.push_back(c.get());
    }
  }
  int started = 0;
  for (Controller* c : pending) {
    absl::Status status = StartController(*c);
    common::MutexLock lock(&mu_);
    if (status.ok()) {
      ++started;
      c->state = "running";
      c->pending_reason.clear();
      common::LogInfo("controller started", {{"operator", operator_name_},
                                             {"plugin", plugin_},
                                             {"controller", c->spec.name()},
                                             {"primary", GvkString(c->spec.primary())}});
    } else if (c->pending_reason != status.message()) {
      c->pending_reason = std::string(status.message());
      common::LogInfo("controller pending", {{"operator", operator_name_},
                                             {"plugin", plugin_},
                                             {"controller", c->spec.name()},
                                             {"reason", c->pending_reason}});
    }
  }
  return started;
}

absl::StatusOr<ControllerGroup::RunnerPlan> ControllerGroup::PlanRunner(
    const Controller& c, controller::ControllerInfo* info) const {
  const pluginpb::ControllerSpec& spec = c.spec;
  RunnerPlan plan;
  controller::RunnerOptions& options = plan.options;
  std::vector<std::string> namespaces(spec.namespaces().begin(), spec.namespaces().end());
  plan.selector = spec.label_selector();
  options.max_concurrent_reconciles =
      spec.max_concurrent_reconciles() > 0 ? static_cast<int>(spec.max_concurrent_reconciles()) : 1;
  if (c.override_spec.has_value()) {
    const config::ControllerSpec& o = *c.override_spec;
    info->host_status = o.host_status;
    if (!o.namespaces.empty()) namespaces = o.namespaces;
    if (!o.label_selector.empty()) plan.selector = o.label_selector;
    if (o.max_concurrent_reconciles.has_value()) {
      options.max_concurrent_reconciles = *o.max_concurrent_reconciles;
    }
    if (o.sharded) {
      if (deps_.shard_gate == nullptr) {
        return absl::FailedPreconditionError(
            "sharding is enabled for this controller but the host is in no shard ring (ctrlhost "
            "run --shard-ring)");
      }
      options.key_gate = deps_.shard_gate;
    }
    if (o.rate_limit.has_value()) {
      const config::RateLimitSpec& r = *o.rate_limit;
      if (r.qps.has_value()) options.queue.qps = *r.qps;
      if (r.burst.has_value()) options.queue.burst = *r.burst;
      if (r.base_delay.has_value()) options.queue.base_delay = *r.base_delay;
      if (r.max_delay.has_value()) options.queue.max_delay = *r.max_delay;
    }
    if (o.priorities.has_value()) options.priorities = *o.priorities;
    if (o.max_wait.has_value()) options.queue.max_wait = *o.max_wait;
  }
  options.api_tenant = kube::ApiTenant{operator_name_, info->name};
  if (deps_.api_budget != nullptr) {
    const double weight = c.override_spec.has_value() && c.override_spec->api_weight.has_value()
                              ? *c.override_spec->api_weight
                              : 1;
    deps_.api_budget->SetControllerWeight(operator_name_, info->name, weight).IgnoreError();
  }
  options.predicates = spec.predicates();
  options.include_children = spec.request_contents().children();
  options.include_related = spec.request_contents().related_objects();
  options.namespaces = std::move(namespaces);
  options.clock = clock_;
  return plan;
}

absl::StatusOr<ControllerGroup::Watches> ControllerGroup::AcquireWatches(
    bool sharded, const controller::ControllerInfo& info, const pluginpb::ControllerSpec& spec,
    const std::vector<kube::ResourceMapping>& watched, const std::string& primary_namespace,
    const std::string& selector) {
  Watches out;
  std::vector<watch::ReflectorHandle>& handles = out.handles;
  std::vector<watch::WatchKey>& keys = out.keys;
  // A sharded controller caches its shard only: primaries by their own uid (the server filters
  // when it can), children by their controller owner's (they follow their primary).
  const std::shared_ptr<watch::ShardScope> shard = sharded ? deps_.shard_scope : nullptr;
  if (shard != nullptr && deps_.shard_labeler != nullptr)
    deps_.shard_labeler->AddKind(info.primary);
  keys.push_back(KeyFor(info.primary, primary_namespace, selector));
  keys.back().shard = shard;
  keys.back().shard_by = watch::ShardBy::kUid;
  ASSIGN_OR_RETURN(watch::ReflectorHandle primary, deps_.registry->Acquire(keys.back()));
  handles.push_back(std::move(primary));
  // Children live in their primary's namespace, so a controller held to one namespace watches
  // its namespaced owned kinds there too: a namespace-scoped Role is then enough to run it.
  for (const controller::OwnedResource& owned : info.owns) {
    const bool primary_namespaced = info.primary.namespaced && !primary_namespace.empty();
    keys.push_back(KeyFor(owned.mapping,
                          primary_namespaced && owned.mapping.namespaced ? primary_namespace : "",
                          ""));
    keys.back().shard = shard;
    keys.back().shard_by = watch::ShardBy::kOwnerUid;
    ASSIGN_OR_RETURN(watch::ReflectorHandle h, deps_.registry->Acquire(keys.back()));
    handles.push_back(std::move(h));
  }
  for (int i = 0; i < spec.watches_size(); ++i) {
    keys.push_back(KeyFor(watched[i], "", spec.watches(i).label_selector()));
    ASSIGN_OR_RETURN(watch::ReflectorHandle h, deps_.registry->Acquire(keys.back()));
    handles.push_back(std::move(h));
  }
  return out;
}

absl::Status ControllerGroup::StartController(Controller& c) {
  const pluginpb::ControllerSpec& spec = c.spec;
  controller::ControllerInfo& info = c.info;
  info = controller::ControllerInfo{};
  info.operator_name = operator_name_;
  info.plugin = plugin_;
  info.name = spec.name();
  info.finalizer = spec.finalizer();
  info.field_manager = absl::StrCat("ctrlhost-", spec.name());
  info.request_timeout = c.request_timeout;
  ASSIGN_OR_RETURN(info.primary, Resolve(deps_.discovery, spec.primary(), "primary kind"));
  for (const pluginpb::OwnedKind& owned : spec.owns()) {
    controller::OwnedResource resource;
    ASSIGN_OR_RETURN(resource.mapping, Resolve(deps_.discovery, owned.kind(), "owned kind"));
    resource.delete_absent = owned.delete_absent();
    info.owns.push_back(std::move(resource));
  }
  std::vector<kube::ResourceMapping> watched;
  for (const pluginpb::WatchedKind& w : spec.watches()) {
    ASSIGN_OR_RETURN(kube::ResourceMapping mapping,
                     Resolve(deps_.discovery, w.kind(), "watched kind"));
    watched.push_back(std::move(mapping));
  }

  ASSIGN_OR_RETURN(RunnerPlan plan, PlanRunner(c, &info));
  controller::RunnerOptions& options = plan.options;
  const std::vector<std::string>& namespaces = options.namespaces;

  // A bad cron expression keeps the controller pending (with the parser's message).
  ASSIGN_OR_RETURN(controller::SchedulerOptions schedule,
                   controller::SchedulerOptionsFromSpec(spec));
  schedule.resync_period = c.resync;
  schedule.clock = clock_;
  // One namespace: watch only it; several: watch all and let the runner filter.
  std::string primary_namespace = namespaces.size() == 1 ? namespaces[0] : "";
  ASSIGN_OR_RETURN(Watches acquired, AcquireWatches(options.key_gate != nullptr, info, spec,
                                                    watched, primary_namespace, plan.selector));
  c.watched = std::move(watched);
  return WireRunner(c, std::move(acquired), std::move(options), std::move(schedule));
}

absl::Status ControllerGroup::WireRunner(Controller& c, Watches acquired,
                                         controller::RunnerOptions options,
                                         controller::SchedulerOptions schedule) {
  const pluginpb::ControllerSpec& spec = c.spec;
  controller::ControllerInfo& info = c.info;
  std::vector<watch::ReflectorHandle>& handles = acquired.handles;
  std::vector<watch::WatchKey>& keys = acquired.keys;

  controller::RunnerSources sources;
  sources.primary = &handles[0]->store();
  for (size_t i = 0; i < info.owns.size(); ++i) sources.owned.push_back(&handles[1 + i]->store());
  for (int i = 0; i < spec.watches_size(); ++i) {
    controller::WatchSource source;
    source.spec = spec.watches(i);
    source.mapping = c.watched[i];
    source.store = &handles[1 + info.owns.size() + i]->store();
    sources.watches.push_back(std::move(source));
  }
  RETURN_IF_ERROR(StartRecorder(c));
  options.recorder = c.recorder.get();
  ASSIGN_OR_RETURN(std::unique_ptr<controller::Runner> runner,
                   controller::Runner::Create(&info, std::move(sources), DispatcherFor(spec.name()),
                                              deps_.applier, options));
  controller::Runner* runner_ptr = runner.get();
  auto scheduler = std::make_unique<controller::Scheduler>(
      std::move(schedule), [runner_ptr](pluginpb::Reason reason, absl::Duration spread) {
        runner_ptr->EnqueueAll(reason, spread);
      });
  RETURN_IF_ERROR(scheduler->Start());
  std::vector<std::pair<watch::Reflector*, int>> subscriptions;
  subscriptions.emplace_back(handles[0].get(), handles[0]->AddHandler(runner->PrimaryHandler()));
  for (size_t i = 0; i < runner->owned_count(); ++i) {
    watch::Reflector* r = handles[1 + i].get();
    subscriptions.emplace_back(r, r->AddHandler(runner->OwnedHandler(i)));
  }
  for (size_t i = 0; i < runner->watch_count(); ++i) {
    watch::Reflector* r = handles[1 + info.owns.size() + i].get();
    subscriptions.emplace_back(r, r->AddHandler(runner->WatchHandler(i)));
  }
  std::vector<watch::ReflectorHandle> replaced;  // a restart's old handles: released unlocked
  common::MutexLock lock(&mu_);
  replaced = std::move(c.handles);
  c.handles = std::move(handles);
  c.keys = std::move(keys);
  c.subscriptions = std::move(subscriptions);
  c.runner = std::move(runner);
  c.scheduler = std::move(scheduler);
  if (dispatching_) {
    RETURN_IF_ERROR(c.runner->Start());
    c.runner_started = true;
  }
  return absl::OkStatus();
}

absl::Status ControllerGroup::StartRecorder(Controller& c) {
  if (!deps_.record.has_value() || c.recorder != nullptr) return absl::OkStatus();
  const RecordSettings& r = *deps_.record;
  const std::string& name = c.info.name;
  if (!r.controllers.empty() &&
      std::find(r.controllers.begin(), r.controllers.end(), name) == r.controllers.end()) {
    return absl::OkStatus();
  }
  pluginpb::RecordingHeader header;
  header.set_operator_(operator_name_);
  header.set_plugin(plugin_);
  *header.mutable_controller() = controller::record::ToRecorded(c.info);
  header.set_host_version(common::kCtrlhostVersion);
  controller::record::RecorderOptions options;
  options.dir = absl::StrCat(r.dir, "/", name);
  options.max_bytes = r.max_bytes;
  options.secret_data = r.secret_data;
  options.idle_cpu = r.idle_cpu;
  options.clock = clock_;
  absl::StatusOr<std::unique_ptr<controller::record::Recorder>> recorder =
      controller::record::Recorder::Start(std::move(options), std::move(header));
  if (!recorder.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("recording (spec.record or --record): ", recorder.status().message()));
  }
  const std::string dir = (*recorder)->figures().dir;
  {
    common::MutexLock lock(&mu_);  // Status reads it
    c.recorder = *std::move(recorder);
  }
  common::LogInfo("recording reconciles",
                  {{"operator", operator_name_}, {"controller", name}, {"dir", dir}});
  return absl::OkStatus();
}

void ControllerGroup::StartDispatching() {
  common::MutexLock dispatch_lock(&dispatch_mu_);
  common::MutexLock lock(&mu_);
  if (stopped_) return;
  const bool was = dispatching_;
  dispatching_ = true;
  for (auto& c : controllers_) {
    if (c->runner == nullptr || c->runner_started) continue;
    if (absl::Status s = c->runner->Start(); !s.ok()) {
      // Not started: the next StartDispatching (a later leadership, a swap) tries again.
      common::LogError("controller cannot dispatch", {{"error", s.message()}});
      continue;
    }
    c->runner_started = true;
  }
  if (was) return;
  for (auto& c : controllers_) {
    if (c->state == "running") c->runner->EnqueueAll(pluginpb::REASON_PLUGIN_STARTED);
  }
}

// The runners DrainForStandby took off their controllers, for RewireAsStandby.
struct ControllerGroup::Drained {
  struct Old {
    Controller* controller = nullptr;  // the group's (controllers_ never shrinks)
    std::unique_ptr<controller::Scheduler> scheduler;
    std::unique_ptr<controller::Runner> runner;  // shut down; its workers may still run
    std::vector<std::pair<watch::Reflector*, int>> subscriptions;
  };
  std::vector<Old> old;
};

void ControllerGroup::DrainedDeleter::operator()(Drained* drained) const { delete drained; }

ControllerGroup::DrainedPtr ControllerGroup::DrainForStandby(absl::Duration timeout) {
  common::MutexLock dispatch_lock(&dispatch_mu_);
  DrainedPtr drained(new Drained);
  {
    common::MutexLock lock(&mu_);
    if (stopped_ || !dispatching_) return drained;
    dispatching_ = false;
    // The runner leaves its controller first (Enqueue* skip a controller without one), so
    // nothing reaches it while it shuts down.
    for (auto& c : controllers_) {
      if (c->state != "running" || !c->runner_started) continue;
      Drained::Old old;
      old.controller = c.get();
      old.scheduler = std::move(c->scheduler);
      old.runner = std::move(c->runner);
      c->runner_started = false;
      old.subscriptions = std::move(c->subscriptions);
      c->subscriptions.clear();
      drained->old.push_back(std::move(old));
    }
  }
  const absl::Time deadline = clock_->Now() + timeout;
  for (Drained::Old& old : drained->old) {
    if (old.scheduler != nullptr) old.scheduler->Stop();
    for (auto& [reflector, id] : old.subscriptions) reflector->RemoveHandler(id);
    // The keys it does not run stay in the caches: the new runner queues every object again.
    old.runner->Shutdown(std::max(absl::ZeroDuration(), deadline - clock_->Now()));
  }
  return drained;
}

void ControllerGroup::RewireAsStandby(DrainedPtr drained) {
  if (drained == nullptr) return;
  common::MutexLock dispatch_lock(&dispatch_mu_);
  bool stopped = false;
  {
    common::MutexLock lock(&mu_);
    stopped = stopped_;
  }
  for (Drained::Old& old : drained->old) {
    old.scheduler.reset();
    old.runner.reset();  // joins its workers (the caller's fence cancelled what was left)
    if (stopped) continue;
    Controller& c = *old.controller;
    absl::Status rewired = RewireController(c);
    if (rewired.ok()) continue;
    // Pending: RetryPending starts it again from scratch (as a standby: dispatching_ is false).
    std::vector<watch::ReflectorHandle> released;
    common::MutexLock lock(&mu_);
    c.state = "pending";
    c.pending_reason = absl::StrCat("restarting without dispatch: ", rewired.message());
    released = std::move(c.handles);
    c.handles.clear();
    common::LogWarning("controller pending", {{"operator", operator_name_},
                                              {"plugin", plugin_},
                                              {"controller", c.spec.name()},
                                              {"reason", c.pending_reason}});
  }
}

void ControllerGroup::StopDispatching(absl::Duration timeout) {
  RewireAsStandby(DrainForStandby(timeout));
}

absl::Status ControllerGroup::RewireController(Controller& c) {
  // A runner as StartController builds it, over the same watches (new references to them, the
  // old ones held meanwhile: nothing lists again) and the same resolved kinds.
  controller::ControllerInfo planned = c.info;  // c.info stays as it is: Info() reads it
  ASSIGN_OR_RETURN(RunnerPlan plan, PlanRunner(c, &planned));
  ASSIGN_OR_RETURN(controller::SchedulerOptions schedule,
                   controller::SchedulerOptionsFromSpec(c.spec));
  schedule.resync_period = c.resync;
  schedule.clock = clock_;
  Watches acquired;
  for (const watch::WatchKey& key : c.keys) {
    ASSIGN_OR_RETURN(watch::ReflectorHandle handle, deps_.registry->Acquire(key));
    acquired.handles.push_back(std::move(handle));
    acquired.keys.push_back(key);
  }
  return WireRunner(c, std::move(acquired), std::move(plan.options), std::move(schedule));
}

bool ControllerGroup::dispatching() const {
  common::MutexLock lock(&mu_);
  return dispatching_;
}

void ControllerGroup::EnqueueAll(pluginpb::Reason reason, absl::Duration spread) {
  common::MutexLock lock(&mu_);
  for (auto& c : controllers_) {
    if (c->state == "running" && c->runner != nullptr) c->runner->EnqueueAll(reason, spread);
  }
}

size_t ControllerGroup::EnqueueSharded(
    pluginpb::Reason reason, const std::function<bool(const cache::Object& primary)>& filter) {
  size_t queued = 0;
  common::MutexLock lock(&mu_);
  for (auto& c : controllers_) {
    if (c->state == "running" && c->runner != nullptr && c->runner->sharded()) {
      queued += c->runner->EnqueueAcquired(reason, filter);
    }
  }
  return queued;
}

std::vector<BackgroundTasks::Wanted> ControllerGroup::TasksWanted() const {
  std::vector<BackgroundTasks::Wanted> out;
  common::MutexLock lock(&mu_);
  for (const auto& c : controllers_) {
    if (c->state != "running" || !c->runner_started || c->spec.background_tasks_size() == 0) {
      continue;
    }
    BackgroundTasks::Wanted w;
    w.controller = c->spec.name();
    w.namespaced = c->info.primary.namespaced;
    for (const auto& task : c->spec.background_tasks()) w.tasks.push_back(task.name());
    if (c->override_spec.has_value()) {
      w.enqueues_per_second = c->override_spec->task_enqueue_qps;
      w.enqueue_burst = c->override_spec->task_enqueue_burst;
    }
    out.push_back(std::move(w));
  }
  return out;
}

bool ControllerGroup::EnqueueFromTask(const std::string& controller, const std::string& key) {
  common::MutexLock lock(&mu_);
  for (const auto& c : controllers_) {
    if (c->spec.name() != controller) continue;
    if (c->state != "running" || !c->runner_started) return false;
    return c->runner->Enqueue(key, pluginpb::REASON_BACKGROUND_TASK);
  }
  return false;
}

void ControllerGroup::StopController(Controller& c, absl::Duration timeout,
                                     std::vector<std::string>* unrun) {
  if (c.scheduler != nullptr) c.scheduler->Stop();
  for (auto& [reflector, id] : c.subscriptions) reflector->RemoveHandler(id);
  c.subscriptions.clear();
  if (c.runner != nullptr) {
    bool started = false;
    {
      common::MutexLock lock(&mu_);
      started = c.runner_started;
    }
    std::vector<std::string> keys = c.runner->Shutdown(timeout);
    // A standby's keys were the leader's to run: none of them is lost here.
    if (started) unrun->insert(unrun->end(), keys.begin(), keys.end());
  }
}

std::vector<std::string> ControllerGroup::Stop(absl::Duration timeout) {
  common::MutexLock dispatch_lock(&dispatch_mu_);
  std::vector<Controller*> running;
  {
    common::MutexLock lock(&mu_);
    if (stopped_) return {};
    stopped_ = true;
    for (auto& c : controllers_) {
      if (c->state == "running") running.push_back(c.get());
      c->state = "stopped";
    }
  }
  std::vector<std::string> unrun;
  for (Controller* c : running) StopController(*c, timeout, &unrun);
  // Runners go before the reflectors they read (handles release the reflectors), and before
  // the recorders they report to: those write what is queued and close their files now, not
  // when the last reader of the group lets go (a group that replaces this one records into
  // the same directories).
  std::vector<std::unique_ptr<controller::Runner>> runners;
  std::vector<watch::ReflectorHandle> handles;
  std::vector<std::unique_ptr<controller::record::Recorder>> recorders;
  {
    common::MutexLock lock(&mu_);
    for (Controller* c : running) {
      runners.push_back(std::move(c->runner));
      for (auto& h : c->handles) handles.push_back(std::move(h));
      c->handles.clear();
    }
    for (auto& c : controllers_) {
      if (c->runner == nullptr) recorders.push_back(std::move(c->recorder));
    }
  }
  runners.clear();
  recorders.clear();
  handles.clear();
  return unrun;
}

pluginpb::DescribeResponse ControllerGroup::describe() const {
  common::MutexLock lock(&mu_);
  return describe_;
}

std::vector<watch::ReflectorHandle> ControllerGroup::RetainWatches() const {
  std::vector<watch::WatchKey> keys;
  {
    common::MutexLock lock(&mu_);
    for (const auto& c : controllers_) keys.insert(keys.end(), c->keys.begin(), c->keys.end());
  }
  std::vector<watch::ReflectorHandle> handles;
  for (const watch::WatchKey& key : keys) {
    absl::StatusOr<watch::ReflectorHandle> h = deps_.registry->Acquire(key);
    if (h.ok()) handles.push_back(*std::move(h));
  }
  return handles;
}

bool ControllerGroup::Synced() const {
  common::MutexLock lock(&mu_);
  for (const auto& c : controllers_) {
    if (c->state != "running") return false;
    for (const auto& h : c->handles) {
      if (!h->HasSynced()) return false;
    }
  }
  return true;
}

std::optional<controller::ControllerInfo> ControllerGroup::Info(const std::string& name) const {
  common::MutexLock lock(&mu_);
  for (const auto& c : controllers_) {
    // `info` is written only while the controller is not running (see Controller).
    if (c->spec.name() == name && c->state == "running") return c->info;
  }
  return std::nullopt;
}

std::vector<ControllerStatus> ControllerGroup::Status() const {
  std::vector<ControllerStatus> out;
  common::MutexLock lock(&mu_);
  for (const auto& c : controllers_) {
    ControllerStatus s;
    s.name = c->spec.name();
    s.primary = GvkString(c->spec.primary());
    s.state = c->state;
    s.pending_reason = c->pending_reason;
    s.synced = c->state == "running";
    for (const auto& h : c->handles) {
      s.synced = s.synced && h->HasSynced();
      s.watch_metrics.push_back(h->Metrics());
      s.watches.push_back(s.watch_metrics.back().description);
    }
    if (c->runner != nullptr) {
      s.metrics = c->runner->Metrics();
      s.sharded = c->runner->sharded();
      if (s.sharded) s.keys_owned = c->runner->CountOwned();
    }
    if (c->recorder != nullptr) s.recording = c->recorder->figures();
    out.push_back(std::move(s));
  }
  return out;
}

void ControllerGroup::Collect(observe::Figures& figures) const {
  common::MutexLock lock(&mu_);
  for (const auto& c : controllers_) {
    if (c->recorder != nullptr) {
      const controller::record::Recorder::Figures r = c->recorder->figures();
      observe::RecordingFigures f;
      f.operator_name = operator_name_;
      f.plugin = plugin_;
      f.controller = c->info.name;
      f.written_total = r.recorded;
      f.dropped_total = r.dropped;
      f.bytes_total = r.bytes_written;
      figures.recordings.push_back(std::move(f));
    }
    if (c->runner == nullptr) continue;
    controller::RunnerMetrics m = c->runner->Metrics();
    observe::ControllerFigures f;
    f.controller = m.controller;
    for (int r = 0; r < controller::kReconcileResults; ++r) {
      f.reconcile_total[std::string(controller::ReconcileResultLabel(
          static_cast<controller::ReconcileResult>(r)))] = m.reconciles[r];
    }
    f.reconcile_errors_total = m.reconciles_for(controller::ReconcileResult::kError) +
                               m.reconciles_for(controller::ReconcileResult::kTerminal);
    f.reconcile_time = observe::FromDurationHistogram(m.reconcile_time);
    f.max_concurrent_reconciles = m.max_workers;
    f.active_workers = m.active_workers;
    if (c->runner->sharded()) f.shard_keys_owned = static_cast<int64_t>(c->runner->CountOwned());
    figures.controllers.push_back(std::move(f));
    figures.queues.push_back(observe::FromQueueMetrics(m.controller, m.queue));
  }
}

}  // namespace ctrlhost::manager
