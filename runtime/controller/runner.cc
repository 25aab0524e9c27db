#include "runtime/controller/runner.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/controller/predicate.h"

namespace ctrlhost::controller {

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
  // `index`: the owned kind's index for kOwned (unused otherwise).
  Handler(Runner* runner, Role role, const Mapper* mapper, size_t index = 0)
      : runner_(runner), role_(role), mapper_(mapper), index_(index) {}

  void OnAdd(const cache::ObjectPtr& object, bool initial) override {
    if (role_ == Role::kPrimary) runner_->ObservePrimary(nullptr, object);
    // The first list and a new handler's replay: catching up, not a change.
    Enqueue(mapper_->MapEvent(nullptr, object), initial);
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
    if (role_ == Role::kOwned) runner_->OnOwnedDeleted(index_, *object);
    Enqueue(mapper_->MapEvent(nullptr, object));
  }

 private:
  void Enqueue(const std::vector<std::string>& keys, bool initial = false) {
    const pluginpb::Reason reason = role_ == Role::kPrimary ? pluginpb::REASON_PRIMARY_CHANGED
                                    : role_ == Role::kOwned ? pluginpb::REASON_CHILD_CHANGED
                                                            : pluginpb::REASON_RELATED_CHANGED;
    const queue::Priority priority = runner_->PriorityOf(reason, initial);
    for (const std::string& key : keys) runner_->EnqueueFromEvent(key, reason, priority);
  }

  Runner* const runner_;
  const Role role_;
  const Mapper* const mapper_;
  const size_t index_;
};

namespace {

std::string BlockKey(size_t owned_index, absl::string_view ns, absl::string_view name) {
  return absl::StrCat(owned_index, "/", ns, "/", name);
}

}  // namespace

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
    for (const pluginpb::GroupVersionKind& gvk : options.metadata_only_kinds) {
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
      overdue_log_({.per_second = 1.0 / 60, .burst = 1, .clock = clock_}),
      primary_api_version_(ApiVersion(info->primary.group, info->primary.version)),
      owner_mapper_(OwnerMapper(
          PrimaryKind{info->primary.group, info->primary.kind, info->primary.namespaced},
          /*controller_only=*/true)),
      queue_(info->name, options_.queue, clock_) {
  self_mapper_ = SelfMapper();
  primary_handler_ = std::make_shared<Handler>(this, Handler::Role::kPrimary, self_mapper_.get());
  for (size_t i = 0; i < info_->owns.size(); ++i) {
    owned_handlers_.push_back(
        std::make_shared<Handler>(this, Handler::Role::kOwned, owner_mapper_.get(), i));
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

absl::Status Runner::Start() {
  common::MutexLock lock(&mu_);
  if (started_ || shut_down_) return absl::OkStatus();
  started_ = true;
  const int n = std::max(1, options_.max_concurrent_reconciles);
  for (int i = 0; i < n; ++i) {
    // The system may refuse a thread (RLIMIT_NPROC, memory, pid limit): that is this
    // controller's error, never std::terminate for the whole host.
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error& e) {
      if (i == 0) {
        started_ = false;
        return absl::ResourceExhaustedError(absl::StrCat(
            "controller ", info_->name, ": cannot start a reconcile worker thread: ", e.what()));
      }
      common::LogWarning(
          "controller runs with fewer reconcile workers than asked: the system "
          "refused a thread",
          {{"controller", info_->name}, {"workers", i}, {"asked", n}, {"error", e.what()}});
      break;
    }
    ++running_workers_;
  }
  return absl::OkStatus();
}

std::vector<std::string> Runner::Shutdown(absl::Duration timeout) {
  bool started = false;
  {
    common::MutexLock lock(&mu_);
    if (shut_down_) return {};
    shut_down_ = true;
    started = started_;
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
  // A runner never started (a warm standby's) was not expected to run its keys: the caller
  // decides whether they matter.
  if (!unrun.empty() && started) {
    common::LogWarning("controller shutdown: keys not reconciled",
                       {{"controller", info_->name},
                        {"count", unrun.size()},
                        {"keys", absl::StrJoin(unrun, ",")}});
  }
  return unrun;
}

std::optional<uint64_t> Runner::ShardHashOf(absl::string_view key, absl::string_view uid) const {
  if (!uid.empty()) return ShardHash(uid);
  if (cache::ObjectPtr primary = sources_.primary->Get(key); primary != nullptr) {
    return ShardHash(primary->uid());
  }
  common::MutexLock lock(&mu_);
  if (auto it = deleted_uids_.find(key); it != deleted_uids_.end()) return ShardHash(it->second);
  return std::nullopt;
}

bool Runner::InNamespaces(absl::string_view key, absl::string_view uid) const {
  if (options_.key_gate != nullptr) {
    const std::optional<uint64_t> hash = ShardHashOf(key, uid);
    if (!hash.has_value() || !options_.key_gate->Owns(*hash)) return false;
  }
  if (options_.namespaces.empty() || !info_->primary.namespaced) return true;
  const size_t slash = key.find('/');
  const absl::string_view ns = slash == absl::string_view::npos ? "" : key.substr(0, slash);
  return std::find(options_.namespaces.begin(), options_.namespaces.end(), ns) !=
         options_.namespaces.end();
}

bool Runner::UnparkLocked(absl::string_view key, pluginpb::Reason reason) {
  if (!terminal_.contains(key)) return true;
  // A new plugin may well handle what the old one failed on terminally; a background task's
  // enqueue reports an outside change, like a watch event.
  if (reason != pluginpb::REASON_PLUGIN_STARTED && reason != pluginpb::REASON_BACKGROUND_TASK)
    return false;
  terminal_.erase(key);
  return true;
}

queue::Priority Runner::PriorityOf(pluginpb::Reason reason, bool catching_up) const {
  if (!options_.priorities) return queue::Priority::kHigh;
  if (catching_up || reason == pluginpb::REASON_RESYNC ||
      reason == pluginpb::REASON_PLUGIN_STARTED) {
    return queue::Priority::kLow;
  }
  return queue::Priority::kHigh;
}

void Runner::EnqueueFromEvent(const std::string& key, pluginpb::Reason reason,
                              queue::Priority priority) {
  if (!InNamespaces(key)) return;
  {
    common::MutexLock lock(&mu_);
    terminal_.erase(key);
    reasons_[key] = reason;
  }
  queue_.Add(key, priority);
}

bool Runner::Enqueue(absl::string_view key, pluginpb::Reason reason) {
  if (!InNamespaces(key)) return false;
  {
    common::MutexLock lock(&mu_);
    if (!UnparkLocked(key, reason)) return false;
    reasons_.try_emplace(key, reason);
  }
  return queue_.Add(key, PriorityOf(reason));
}

size_t Runner::EnqueueAll(pluginpb::Reason reason, absl::Duration spread) {
  return EnqueueMatching(reason, spread, nullptr);
}

size_t Runner::CountOwned() const {
  size_t owned = 0;
  for (const cache::ObjectPtr& object : sources_.primary->List()) {
    if (InNamespaces(object->key(), object->uid())) ++owned;
  }
  return owned;
}

size_t Runner::EnqueueMatching(pluginpb::Reason reason, absl::Duration spread,
                               const std::function<bool(const cache::Object& primary)>& filter) {
  return EnqueueMatchingKeys(reason, spread, filter, /*acquired=*/false);
}

size_t Runner::EnqueueAcquired(pluginpb::Reason reason,
                               const std::function<bool(const cache::Object& primary)>& filter) {
  return EnqueueMatchingKeys(reason, absl::ZeroDuration(), filter, /*acquired=*/true);
}

size_t Runner::EnqueueMatchingKeys(pluginpb::Reason reason, absl::Duration spread,
                                   const std::function<bool(const cache::Object& primary)>& filter,
                                   bool acquired) {
  thread_local absl::InsecureBitGen gen;
  // Keys a shard hand-over brings are caught up like a restart's.
  const queue::Priority priority = PriorityOf(reason, acquired);
  size_t queued = 0;
  for (const cache::ObjectPtr& object : sources_.primary->List()) {
    const absl::string_view key = object->key();
    if (filter != nullptr && !filter(*object)) continue;
    if (!InNamespaces(key, object->uid())) continue;
    {
      common::MutexLock lock(&mu_);
      if (acquired) terminal_.erase(key);
      if (!UnparkLocked(key, reason)) continue;
      reasons_.try_emplace(key, reason);
    }
    absl::Duration delay = absl::ZeroDuration();
    if (spread > absl::ZeroDuration()) {
      delay = absl::Nanoseconds(
          absl::Uniform<int64_t>(gen, 0, std::max<int64_t>(1, absl::ToInt64Nanoseconds(spread))));
    }
    if (queue_.AddAfter(key, delay, priority)) ++queued;
  }
  return queued;
}

void Runner::ObservePrimary(const cache::ObjectPtr& old_primary,
                            const cache::ObjectPtr& new_primary) {
  for (const auto& mapper : watch_mappers_) mapper->ObservePrimary(old_primary, new_primary);
}

void Runner::OnOwnedDeleted(size_t index, const cache::Object& object) {
  std::vector<std::string> unblocked;
  {
    common::MutexLock lock(&mu_);
    if (blocked_by_object_.empty()) return;
    auto it = blocked_by_object_.find(BlockKey(index, object.namespace_(), object.name()));
    if (it == blocked_by_object_.end()) return;
    unblocked.assign(it->second.begin(), it->second.end());
    for (const std::string& key : unblocked) ForgetBlockedLocked(key);
  }
  for (const std::string& key : unblocked) {
    common::LogInfo(
        "object in the way deleted; reconciling its primary again",
        {{"controller", info_->name},
         {"key", key},
         {"deleted", absl::StrCat(info_->owns[index].mapping.kind, " ", object.namespace_(),
                                  object.namespace_().empty() ? "" : "/", object.name())}});
    EnqueueFromEvent(key, pluginpb::REASON_CHILD_CHANGED);
  }
}

void Runner::RecordBlocked(const std::string& key, const std::vector<BlockingObject>& blocked_by) {
  bool gone = false;
  {
    common::MutexLock lock(&mu_);
    ForgetBlockedLocked(key);
    std::vector<std::string>& objects = blocking_objects_[key];
    for (const BlockingObject& b : blocked_by) {
      if (b.owned_index < 0 || static_cast<size_t>(b.owned_index) >= sources_.owned.size()) {
        continue;
      }
      const std::string object = BlockKey(b.owned_index, b.namespace_, b.name);
      blocked_by_object_[object].insert(key);
      objects.push_back(object);
    }
    if (objects.empty()) blocking_objects_.erase(key);
  }
  // Its delete event may have come between the applier's check and this record.
  for (const BlockingObject& b : blocked_by) {
    if (b.owned_index < 0 || static_cast<size_t>(b.owned_index) >= sources_.owned.size()) continue;
    if (sources_.owned[b.owned_index]->Get(b.namespace_, b.name) == nullptr) gone = true;
  }
  if (gone) {
    {
      common::MutexLock lock(&mu_);
      ForgetBlockedLocked(key);
    }
    EnqueueFromEvent(key, pluginpb::REASON_CHILD_CHANGED);
  }
}

void Runner::ForgetBlockedLocked(const std::string& key) {
  auto it = blocking_objects_.find(key);
  if (it == blocking_objects_.end()) return;
  for (const std::string& object : it->second) {
    auto blocked = blocked_by_object_.find(object);
    if (blocked == blocked_by_object_.end()) continue;
    blocked->second.erase(key);
    if (blocked->second.empty()) blocked_by_object_.erase(blocked);
  }
  blocking_objects_.erase(it);
}

void Runner::OnPrimaryDeleted(const cache::Object& object) {
  const std::string key(object.key());
  if (!InNamespaces(key, object.uid())) return;
  {
    common::MutexLock lock(&mu_);
    terminal_.erase(key);
    ForgetBlockedLocked(key);
    finalizer_ensured_.erase(object.uid());
    deleted_uids_[key] = std::string(object.uid());
    reasons_[key] = pluginpb::REASON_PRIMARY_DELETED;
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
  m.blocked_keys = blocking_objects_.size();
  m.last_error = last_error_;
  m.last_error_reason = last_error_reason_;
  m.last_error_key = last_error_key_;
  m.last_error_time = last_error_time_;
  return m;
}

}  // namespace ctrlhost::controller
