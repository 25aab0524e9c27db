#include "runtime/controller/runner.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/controller/predicate.h"
#include "runtime/controller/type_meta.h"

namespace ctrlhost::controller {
namespace {

bool HasFinalizer(const cache::Object& object, absl::string_view finalizer) {
  for (size_t i = 0; i < object.finalizer_count(); ++i) {
    if (object.finalizer(i) == finalizer) return true;
  }
  return false;
}

std::string TraceId() {
  thread_local absl::InsecureBitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t nanos = absl::ToUnixNanos(t);
  ts.set_seconds(nanos / 1000000000);
  ts.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  if (ts.nanos() < 0) {
    ts.set_seconds(ts.seconds() - 1);
    ts.set_nanos(ts.nanos() + 1000000000);
  }
  return ts;
}

}  // namespace

absl::string_view ReconcileResultLabel(ReconcileResult result) {
  switch (result) {
    case ReconcileResult::kSuccess:
      return "success";
    case ReconcileResult::kError:
      return "error";
    case ReconcileResult::kRequeue:
      return "requeue";
    case ReconcileResult::kRequeueAfter:
      return "requeue_after";
    case ReconcileResult::kTerminal:
      return "terminal";
  }
  return "unknown";
}

// One adapter from a reflector to the runner: mapper + predicate -> queue.
class Runner::Handler : public watch::EventHandler {
 public:
  enum class Role { kPrimary, kOwned, kWatched };
  Handler(Runner* runner, Role role, const Mapper* mapper)
      : runner_(runner), role_(role), mapper_(mapper) {}

  void OnAdd(const cache::ObjectPtr& object, bool /*initial*/) override {
    if (role_ == Role::kPrimary) runner_->ObservePrimary(nullptr, object);
    Enqueue(mapper_->MapEvent(nullptr, object));
  }

  void OnUpdate(const cache::ObjectPtr& old_object, const cache::ObjectPtr& object) override {
    switch (role_) {
      case Role::kPrimary:
        runner_->ObservePrimary(old_object, object);
        if (!PrimaryUpdateTriggers(runner_->options_.predicates, *old_object, *object)) return;
        break;
      case Role::kOwned:
        if (!ChildUpdateTriggers(runner_->options_.predicates, *old_object, *object)) return;
        break;
      case Role::kWatched:
        break;
    }
    Enqueue(mapper_->MapEvent(old_object, object));
  }

  void OnDelete(const cache::ObjectPtr& object) override {
    if (role_ == Role::kPrimary) {
      runner_->ObservePrimary(object, nullptr);
      runner_->OnPrimaryDeleted(*object);
      return;
    }
    Enqueue(mapper_->MapEvent(nullptr, object));
  }

 private:
  void Enqueue(const std::vector<std::string>& keys) {
    const pb::Reason reason = role_ == Role::kPrimary ? pb::REASON_PRIMARY_CHANGED
                              : role_ == Role::kOwned ? pb::REASON_CHILD_CHANGED
                                                      : pb::REASON_RELATED_CHANGED;
    for (const std::string& key : keys) runner_->EnqueueFromEvent(key, reason);
  }

  Runner* const runner_;
  const Role role_;
  const Mapper* const mapper_;
};

absl::StatusOr<std::unique_ptr<Runner>> Runner::Create(const ControllerInfo* info,
                                                       RunnerSources sources,
                                                       Dispatcher* dispatcher,
                                                       ResponseApplier* applier,
                                                       RunnerOptions options) {
  if (info == nullptr || dispatcher == nullptr || applier == nullptr) {
    return absl::InvalidArgumentError("runner needs controller info, dispatcher and applier");
  }
  if (sources.primary == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("controller ", info->name, ": no store for the primary kind"));
  }
  if (sources.owned.size() != info->owns.size() ||
      std::count(sources.owned.begin(), sources.owned.end(), nullptr) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("controller ", info->name, ": one store per owned kind is required"));
  }
  const PrimaryKind primary{info->primary.group, info->primary.kind, info->primary.namespaced};
  std::vector<std::unique_ptr<Mapper>> mappers;
  for (const WatchSource& watch : sources.watches) {
    if (watch.store == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "controller ", info->name, ": no store for watched kind ", watch.mapping.kind));
    }
    absl::StatusOr<std::unique_ptr<Mapper>> mapper =
        MapperFor(watch.spec, primary, sources.primary);
    if (!mapper.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("controller ", info->name, ": ", mapper.status().message()));
    }
    mappers.push_back(*std::move(mapper));
  }
  std::vector<FieldPath> strip;
  for (const std::string& field : options.strip_fields) {
    absl::StatusOr<FieldPath> path = FieldPath::Parse(field);
    if (!path.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("controller ", info->name, ": strip_fields: ", path.status().message()));
    }
    strip.push_back(*std::move(path));
  }
  auto metadata_only = [&options](const std::string& group, const std::string& kind) {
    for (const pb::GroupVersionKind& gvk : options.metadata_only_kinds) {
      if (gvk.group() == group && gvk.kind() == kind) return true;
    }
    return false;
  };
  const bool primary_metadata_only = metadata_only(info->primary.group, info->primary.kind);
  std::vector<bool> owned_metadata_only;
  for (const OwnedResource& owned : info->owns) {
    owned_metadata_only.push_back(metadata_only(owned.mapping.group, owned.mapping.kind));
  }
  std::vector<bool> watch_metadata_only;
  for (const WatchSource& watch : sources.watches) {
    watch_metadata_only.push_back(metadata_only(watch.mapping.group, watch.mapping.kind));
  }
  std::unique_ptr<Runner> runner(
      new Runner(info, std::move(sources), dispatcher, applier, std::move(options)));
  runner->strip_ = std::move(strip);
  runner->primary_metadata_only_ = primary_metadata_only;
  runner->owned_metadata_only_ = std::move(owned_metadata_only);
  runner->watch_metadata_only_ = std::move(watch_metadata_only);
  runner->watch_mappers_ = std::move(mappers);
  for (const auto& mapper : runner->watch_mappers_) {
    runner->watch_handlers_.push_back(
        std::make_shared<Handler>(runner.get(), Handler::Role::kWatched, mapper.get()));
  }
  return runner;
}

Runner::Runner(const ControllerInfo* info, RunnerSources sources, Dispatcher* dispatcher,
               ResponseApplier* applier, RunnerOptions options)
    : info_(info),
      sources_(std::move(sources)),
      dispatcher_(dispatcher),
      applier_(applier),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      primary_api_version_(ApiVersion(info->primary.group, info->primary.version)),
      owner_mapper_(OwnerMapper(
          PrimaryKind{info->primary.group, info->primary.kind, info->primary.namespaced},
          /*controller_only=*/true)),
      queue_(info->name, options_.queue, clock_) {
  self_mapper_ = SelfMapper();
  primary_handler_ = std::make_shared<Handler>(this, Handler::Role::kPrimary, self_mapper_.get());
  for (size_t i = 0; i < info_->owns.size(); ++i) {
    owned_handlers_.push_back(
        std::make_shared<Handler>(this, Handler::Role::kOwned, owner_mapper_.get()));
  }
}

Runner::~Runner() {
  Shutdown(absl::ZeroDuration());
  std::vector<std::thread> workers;
  {
    common::MutexLock lock(&mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

void Runner::Start() {
  common::MutexLock lock(&mu_);
  if (started_ || shut_down_) return;
  started_ = true;
  const int n = std::max(1, options_.max_concurrent_reconciles);
  running_workers_ = n;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

std::vector<std::string> Runner::Shutdown(absl::Duration timeout) {
  {
    common::MutexLock lock(&mu_);
    if (shut_down_) return {};
    shut_down_ = true;
  }
  std::vector<std::string> unrun = queue_.ShutDown(queue::ShutdownMode::kAbandon);
  std::vector<std::thread> workers;
  {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = clock_->Now() + timeout;
    while (running_workers_ > 0) {
      if (clock_->WaitWithDeadline(&mu_, &workers_cv_, deadline) && running_workers_ > 0) break;
    }
    if (running_workers_ == 0) workers.swap(workers_);
    if (running_workers_ > 0) {
      common::LogWarning("controller shutdown: reconciles still in flight after the timeout",
                         {{"controller", info_->name}, {"workers", running_workers_}});
    }
    unrun.insert(unrun.end(), lost_.begin(), lost_.end());
    lost_.clear();
  }
  for (std::thread& t : workers) t.join();
  std::sort(unrun.begin(), unrun.end());
  unrun.erase(std::unique(unrun.begin(), unrun.end()), unrun.end());
  if (!unrun.empty()) {
    common::LogWarning("controller shutdown: keys not reconciled",
                       {{"controller", info_->name},
                        {"count", unrun.size()},
                        {"keys", absl::StrJoin(unrun, ",")}});
  }
  return unrun;
}

bool Runner::InNamespaces(absl::string_view key) const {
  if (options_.namespaces.empty() || !info_->primary.namespaced) return true;
  const size_t slash = key.find('/');
  const absl::string_view ns = slash == absl::string_view::npos ? "" : key.substr(0, slash);
  return std::find(options_.namespaces.begin(), options_.namespaces.end(), ns) !=
         options_.namespaces.end();
}

bool Runner::UnparkLocked(absl::string_view key, pb::Reason reason) {
  if (!terminal_.contains(key)) return true;
  // A new plugin may well handle what the old one failed on terminally.
  if (reason != pb::REASON_PLUGIN_STARTED) return false;
  terminal_.erase(key);
  return true;
}

void Runner::EnqueueFromEvent(const std::string& key, pb::Reason reason) {
  if (!InNamespaces(key)) return;
  {
    common::MutexLock lock(&mu_);
    terminal_.erase(key);
    reasons_[key] = reason;
  }
  queue_.Add(key);
}

bool Runner::Enqueue(absl::string_view key, pb::Reason reason) {
  if (!InNamespaces(key)) return false;
  {
    common::MutexLock lock(&mu_);
    if (!UnparkLocked(key, reason)) return false;
    reasons_.try_emplace(key, reason);
  }
  return queue_.Add(key);
}

size_t Runner::EnqueueAll(pb::Reason reason, absl::Duration spread) {
  thread_local absl::InsecureBitGen gen;
  size_t queued = 0;
  for (const cache::ObjectPtr& object : sources_.primary->List()) {
    const absl::string_view key = object->key();
    if (!InNamespaces(key)) continue;
    {
      common::MutexLock lock(&mu_);
      if (!UnparkLocked(key, reason)) continue;
      reasons_.try_emplace(key, reason);
    }
    absl::Duration delay = absl::ZeroDuration();
    if (spread > absl::ZeroDuration()) {
      delay = absl::Nanoseconds(
          absl::Uniform<int64_t>(gen, 0, std::max<int64_t>(1, absl::ToInt64Nanoseconds(spread))));
    }
    if (queue_.AddAfter(key, delay)) ++queued;
  }
  return queued;
}

void Runner::ObservePrimary(const cache::ObjectPtr& old_primary,
                            const cache::ObjectPtr& new_primary) {
  for (const auto& mapper : watch_mappers_) mapper->ObservePrimary(old_primary, new_primary);
}

void Runner::OnPrimaryDeleted(const cache::Object& object) {
  const std::string key(object.key());
  if (!InNamespaces(key)) return;
  {
    common::MutexLock lock(&mu_);
    terminal_.erase(key);
    finalizer_ensured_.erase(object.uid());
    deleted_uids_[key] = std::string(object.uid());
    reasons_[key] = pb::REASON_PRIMARY_DELETED;
  }
  queue_.Add(key);
}

RunnerMetrics Runner::Metrics() const {
  RunnerMetrics m;
  m.controller = info_->name;
  m.max_workers = std::max(1, options_.max_concurrent_reconciles);
  m.queue = queue_.Metrics();
  common::MutexLock lock(&mu_);
  m.reconciles = reconciles_;
  m.reconcile_time = reconcile_time_;
  m.active_workers = active_workers_;
  m.terminal_keys = terminal_.size();
  m.last_error = last_error_;
  m.last_error_key = last_error_key_;
  m.last_error_time = last_error_time_;
  return m;
}

void Runner::WorkerLoop() {
  std::optional<queue::WorkQueue::Item> item = queue_.Get();
  while (item.has_value()) {
    ProcessKey(std::string(item->key));
    item = queue_.DoneAndGet(*item);
  }
  common::MutexLock lock(&mu_);
  --running_workers_;
  workers_cv_.SignalAll();
}

void Runner::Requeue(const std::string& key, bool ok) {
  if (ok) return;
  // The queue refuses keys only once it is shut down: the key will not run again.
  common::MutexLock lock(&mu_);
  lost_.push_back(key);
}

void Runner::Record(ReconcileResult result, const std::string& key, const absl::Status& status,
                    absl::Duration took) {
  common::MutexLock lock(&mu_);
  ++reconciles_[static_cast<int>(result)];
  // Any other result means the key ran again since a terminal outcome (an event re-queued it).
  if (result != ReconcileResult::kTerminal) terminal_.erase(key);
  reconcile_time_.Observe(took);
  if (!status.ok()) {
    last_error_ = status.ToString();
    last_error_key_ = key;
    last_error_time_ = clock_->Now();
  }
}

absl::StatusOr<pb::ReconcileResponse> Runner::DispatchAndWait(pb::ReconcileCall call,
                                                              absl::Time deadline) {
  // Shared with the callback, which may run after this worker gave up waiting.
  struct Pending {
    common::Mutex mu;
    common::CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::StatusOr<pb::ReconcileResponse> result ABSL_GUARDED_BY(mu) =
        absl::UnknownError("no answer");
  };
  auto pending = std::make_shared<Pending>();
  dispatcher_->Dispatch(std::move(call), deadline,
                        [pending](absl::StatusOr<pb::ReconcileResponse> result) {
                          common::MutexLock lock(&pending->mu);
                          if (pending->done) return;
                          pending->result = std::move(result);
                          pending->done = true;
                          pending->cv.SignalAll();
                        });
  common::MutexLock lock(&pending->mu);
  const absl::Time give_up = deadline + options_.dispatch_grace;
  while (!pending->done) {
    if (clock_->WaitWithDeadline(&pending->mu, &pending->cv, give_up) && !pending->done) {
      pending->done = true;  // a late callback is ignored
      pending->result = absl::DeadlineExceededError("the dispatcher never answered");
    }
  }
  return std::move(pending->result);
}

pb::ReconcileCall Runner::BuildCall(const std::string& key, const cache::ObjectPtr& primary,
                                    absl::string_view uid, pb::Reason reason, uint32_t attempt,
                                    absl::Time deadline) const {
  pb::ReconcileCall call;
  call.set_controller(info_->name);
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    call.set_name(key);
  } else {
    call.set_namespace_(key.substr(0, slash));
    call.set_name(key.substr(slash + 1));
  }
  call.set_uid(std::string(uid));
  call.set_reason(reason);
  call.set_attempt(attempt + 1);
  *call.mutable_deadline() = ToTimestamp(deadline);
  call.set_trace_id(TraceId());
  if (primary == nullptr) return call;
  call.set_object(ShapeObject(primary->json(), primary_api_version_, info_->primary.kind,
                              primary_metadata_only_, strip_));
  call.set_finalizing(!primary->deletion_timestamp().empty() && !info_->finalizer.empty() &&
                      HasFinalizer(*primary, info_->finalizer));
  if (options_.include_children && !primary->uid().empty()) {
    for (size_t i = 0; i < info_->owns.size(); ++i) {
      const kube::ResourceMapping& mapping = info_->owns[i].mapping;
      const std::string api_version = ApiVersion(mapping.group, mapping.version);
      for (const cache::ObjectPtr& child : owner_mapper_->Related(*primary, *sources_.owned[i])) {
        pb::RawObject* raw = call.add_children();
        raw->set_api_version(api_version);
        raw->set_kind(mapping.kind);
        raw->set_object(
            ShapeObject(child->json(), api_version, mapping.kind, owned_metadata_only_[i], strip_));
      }
    }
  }
  if (options_.include_related) {
    for (size_t i = 0; i < sources_.watches.size(); ++i) {
      const WatchSource& watch = sources_.watches[i];
      if (!watch.spec.include_in_requests()) continue;
      const std::string api_version = ApiVersion(watch.mapping.group, watch.mapping.version);
      for (const cache::ObjectPtr& object : watch_mappers_[i]->Related(*primary, *watch.store)) {
        pb::RawObject* raw = call.add_related_objects();
        raw->set_api_version(api_version);
        raw->set_kind(watch.mapping.kind);
        raw->set_object(ShapeObject(object->json(), api_version, watch.mapping.kind,
                                    watch_metadata_only_[i], strip_));
      }
    }
  }
  return call;
}

void Runner::ProcessKey(const std::string& key) {
  const absl::Time start = clock_->Now();
  pb::Reason reason = pb::REASON_UNSPECIFIED;
  std::string deleted_uid;
  bool deleted_known = false;
  {
    common::MutexLock lock(&mu_);
    ++active_workers_;
    if (auto it = reasons_.find(key); it != reasons_.end()) {
      reason = it->second;
      reasons_.erase(it);
    }
    if (auto it = deleted_uids_.find(key); it != deleted_uids_.end()) {
      deleted_uid = it->second;
      deleted_known = true;
    }
  }
  struct ActiveGuard {
    Runner* runner;
    ~ActiveGuard() {
      common::MutexLock lock(&runner->mu_);
      --runner->active_workers_;
    }
  } active_guard{this};

  const uint32_t attempt = queue_.NumRequeues(key);
  if (attempt > 0 && reason == pb::REASON_UNSPECIFIED) reason = pb::REASON_RETRY;
  cache::ObjectPtr primary = sources_.primary->Get(key);
  ReconcileContext context;
  context.controller = info_;
  const size_t slash = key.find('/');
  context.namespace_ = slash == std::string::npos ? "" : key.substr(0, slash);
  context.name = slash == std::string::npos ? key : key.substr(slash + 1);
  context.primary = primary;
  context.attempt = attempt;

  if (primary == nullptr) {
    if (!deleted_known) {
      // Mapped from a child or watch to a primary that does not exist (yet): nothing to do;
      // the primary's own add event will queue it.
      queue_.Forget(key);
      common::LogDebug("no such primary", {{"controller", info_->name}, {"key", key}});
      return;
    }
    reason = pb::REASON_PRIMARY_DELETED;
  } else {
    if (deleted_known) {
      common::MutexLock lock(&mu_);
      deleted_uids_.erase(key);  // re-created since
    }
    if (!info_->finalizer.empty() && primary->deletion_timestamp().empty() &&
        !HasFinalizer(*primary, info_->finalizer)) {
      bool ensured = false;
      {
        common::MutexLock lock(&mu_);
        auto it = finalizer_ensured_.find(primary->uid());
        ensured = it != finalizer_ensured_.end() && it->second == primary->resource_version();
      }
      if (!ensured) {
        absl::Status status = applier_->EnsureFinalizer(context);
        if (absl::IsNotFound(status)) {
          queue_.Forget(key);  // its delete event follows
          return;
        }
        if (!status.ok()) {
          Record(ReconcileResult::kError, key, status, clock_->Now() - start);
          Requeue(key, queue_.AddRateLimited(key));
          return;
        }
        common::MutexLock lock(&mu_);
        finalizer_ensured_[std::string(primary->uid())] = std::string(primary->resource_version());
      }
    }
  }

  const absl::Time deadline = clock_->Now() + info_->request_timeout;
  context.trace_id = TraceId();
  pb::ReconcileCall call = BuildCall(
      key, primary, primary != nullptr ? primary->uid() : absl::string_view(deleted_uid),
      reason == pb::REASON_UNSPECIFIED ? pb::REASON_PRIMARY_CHANGED : reason, attempt, deadline);
  call.set_trace_id(context.trace_id);
  absl::StatusOr<pb::ReconcileResponse> response = DispatchAndWait(std::move(call), deadline);

  ApplyOutcome outcome;
  if (!response.ok()) {
    outcome.kind = OutcomeKind::kRetry;
    outcome.status = response.status();
  } else {
    outcome = applier_->Apply(context, *response);
  }
  const absl::Duration took = clock_->Now() - start;

  if (primary == nullptr) {
    // The plugin was told; only a failure to tell it is retried.
    if (outcome.kind == OutcomeKind::kRetry) {
      Record(ReconcileResult::kError, key, outcome.status, took);
      Requeue(key, queue_.AddRateLimited(key));
      return;
    }
    queue_.Forget(key);
    Record(outcome.kind == OutcomeKind::kTerminal ? ReconcileResult::kTerminal
                                                  : ReconcileResult::kSuccess,
           key, outcome.status, took);
    common::MutexLock lock(&mu_);
    // A re-creation meanwhile replaced the record's meaning: keep it only if it changed.
    if (auto it = deleted_uids_.find(key); it != deleted_uids_.end() && it->second == deleted_uid) {
      deleted_uids_.erase(it);
    }
    return;
  }

  switch (outcome.kind) {
    case OutcomeKind::kDone:
      queue_.Forget(key);
      Record(ReconcileResult::kSuccess, key, absl::OkStatus(), took);
      break;
    case OutcomeKind::kRequeueAfter:
      queue_.Forget(key);
      {
        common::MutexLock lock(&mu_);
        reasons_.try_emplace(key, pb::REASON_REQUEUE);
      }
      Requeue(key, queue_.AddAfter(key, outcome.requeue_after));
      Record(ReconcileResult::kRequeueAfter, key, absl::OkStatus(), took);
      break;
    case OutcomeKind::kRetry:
      Requeue(key, queue_.AddRateLimited(key));
      Record(ReconcileResult::kError, key, outcome.status, took);
      common::LogDebug("reconcile failed, retrying",
                       {{"controller", info_->name}, {"key", key}, {"status", outcome.status}});
      break;
    case OutcomeKind::kRequeueNow:
      Requeue(key, queue_.Add(key));
      Record(ReconcileResult::kRequeue, key, absl::OkStatus(), took);
      break;
    case OutcomeKind::kTerminal: {
      queue_.Forget(key);
      Record(ReconcileResult::kTerminal, key, outcome.status, took);
      common::MutexLock lock(&mu_);
      terminal_.insert(key);
      break;
    }
  }
}

}  // namespace ctrlhost::controller
