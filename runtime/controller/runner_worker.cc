// The runner's worker side: building requests, dispatching, acting on outcomes. The event
// side and the lifecycle are in runner.cc.
#include <exception>
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/common/proto_time.h"
#include "runtime/controller/runner.h"
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

// The applier works on plugin-supplied data with libraries that throw (nlohmann's dump() on
// broken UTF-8, for one). Whatever it missed is this plugin answer's fault: a terminal error for
// the key (recorded on the primary, best effort), never an exception that ends the host.
ApplyOutcome ApplyGuarded(ResponseApplier* applier, const ReconcileContext& context,
                          const pluginpb::ReconcileResponse& response) {
  ApplyOutcome outcome;
  outcome.kind = OutcomeKind::kTerminal;
  try {
    return applier->Apply(context, response);
  } catch (const std::exception& e) {
    outcome.status = absl::InternalError(
        absl::StrCat("the controller's answer could not be applied: ", e.what()));
  } catch (...) {
    outcome.status = absl::InternalError("the controller's answer could not be applied");
  }
  try {
    applier->RecordTerminal(context, outcome.status);
  } catch (...) {
    // Recording is best effort; the outcome stands.
  }
  return outcome;
}

}  // namespace

void Runner::ReportOverdue(absl::string_view key) {
  uint64_t suppressed = 0;
  if (!overdue_log_.Allow(&suppressed)) return;
  common::LogWarning(
      "key waited longer than its queue's maxWait: the controller cannot keep up (more workers "
      "with maxConcurrentReconciles, or a longer scheduling.maxWait); /debug/dump shows the "
      "queue by priority",
      {{"controller", info_->name},
       {"key", key},
       {"max_wait", absl::FormatDuration(options_.queue.max_wait)},
       {"suppressed", suppressed}});
}

void Runner::WorkerLoop() {
  std::optional<queue::WorkQueue::Item> item = queue_.Get();
  while (item.has_value()) {
    if (item->overdue) ReportOverdue(item->key);
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

bool Runner::AddAfterFailure(const std::string& key, const absl::Status& cause,
                             absl::Duration retry_after) {
  if (cause.code() == absl::StatusCode::kPermissionDenied ||
      cause.code() == absl::StatusCode::kUnauthenticated) {
    return queue_.AddRateLimited(key, options_.access_denied_max_backoff, retry_after);
  }
  return queue_.AddRateLimited(key, absl::InfiniteDuration(), retry_after);
}

void Runner::Record(ReconcileResult result, const std::string& key, const absl::Status& status,
                    absl::Duration took, const std::string& reason) {
  common::MutexLock lock(&mu_);
  ++reconciles_[static_cast<int>(result)];
  // Any other result means the key ran again since a terminal outcome (an event re-queued it).
  if (result != ReconcileResult::kTerminal) {
    terminal_.erase(key);
    ForgetBlockedLocked(key);
  }
  reconcile_time_.Observe(took);
  if (!status.ok()) {
    last_error_ = status.ToString();
    last_error_reason_ = reason;
    last_error_key_ = key;
    last_error_time_ = clock_->Now();
  }
}

DispatchResult Runner::DispatchAndWait(pluginpb::ReconcileCall call, absl::Time deadline) {
  // Shared with the callback, which may run after this worker gave up waiting.
  struct Pending {
    common::Mutex mu;
    common::CondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    DispatchResult result ABSL_GUARDED_BY(mu) = absl::UnknownError("no answer");
  };
  auto pending = std::make_shared<Pending>();
  dispatcher_->Dispatch(std::move(call), deadline, [pending](DispatchResult result) {
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

pluginpb::ReconcileCall Runner::BuildCall(const std::string& key, const cache::ObjectPtr& primary,
                                          absl::string_view uid, pluginpb::Reason reason,
                                          uint32_t attempt, absl::Time deadline) const {
  pluginpb::ReconcileCall call;
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
  *call.mutable_deadline() = common::ToProtoTimestamp(deadline);
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
        pluginpb::RawObject* raw = call.add_children();
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
        pluginpb::RawObject* raw = call.add_related_objects();
        raw->set_api_version(api_version);
        raw->set_kind(watch.mapping.kind);
        raw->set_object(ShapeObject(object->json(), api_version, watch.mapping.kind,
                                    watch_metadata_only_[i], strip_));
      }
    }
  }
  return call;
}

bool Runner::PassKeyGate(const std::string& key) {
  KeyGate* const gate = options_.key_gate;
  if (gate == nullptr) return true;
  const std::optional<uint64_t> hash = ShardHashOf(key);
  switch (hash.has_value() ? gate->Begin(key, *hash) : KeyGate::kNotMine) {
    case KeyGate::kRun:
      return true;
    case KeyGate::kNotMine: {
      // Moved to another host, which queued it when its ring changed (or no uid is known:
      // the object's owner queues it when its cache receives it).
      queue_.Forget(key);
      common::MutexLock lock(&mu_);
      reasons_.erase(key);
      return false;
    }
    case KeyGate::kWait:
      // Ours, but its previous owner has not drained yet: keep the key (and its reason).
      Requeue(key, queue_.AddAfter(key, gate->retry_after()));
      return false;
  }
  return false;
}

bool Runner::EnsureFinalizerBeforeRequest(const std::string& key, absl::Time start,
                                          cache::ObjectPtr& primary, ReconcileContext& context) {
  if (info_->finalizer.empty() || !primary->deletion_timestamp().empty() ||
      HasFinalizer(*primary, info_->finalizer)) {
    return true;
  }
  {
    common::MutexLock lock(&mu_);
    auto it = finalizer_ensured_.find(primary->uid());
    if (it != finalizer_ensured_.end() && it->second == primary->resource_version()) return true;
  }
  absl::StatusOr<cache::ObjectPtr> ensured_primary = applier_->EnsureFinalizer(context);
  if (absl::IsNotFound(ensured_primary.status())) {
    queue_.Forget(key);  // its delete event follows
    return false;
  }
  if (!ensured_primary.ok()) {
    Record(ReconcileResult::kError, key, ensured_primary.status(), clock_->Now() - start);
    Requeue(key, AddAfterFailure(key, ensured_primary.status()));
    return false;
  }
  {
    common::MutexLock lock(&mu_);
    finalizer_ensured_[std::string(primary->uid())] = std::string(primary->resource_version());
  }
  // The request and the applier's status write see the object with the finalizer and its new
  // resourceVersion (the cache has not caught up yet).
  if (*ensured_primary != nullptr && (*ensured_primary)->uid() == primary->uid()) {
    primary = *std::move(ensured_primary);
    context.primary = primary;
  }
  return true;
}

void Runner::ProcessKey(const std::string& key) {
  // Every API request made for this key is charged to this controller's share.
  const kube::ApiTenantScope tenant(&options_.api_tenant);
  if (!PassKeyGate(key)) return;
  struct GateGuard {
    KeyGate* gate;
    const std::string& key;
    ~GateGuard() {
      if (gate != nullptr) gate->End(key);
    }
  } gate_guard{options_.key_gate, key};
  const absl::Time start = clock_->Now();
  pluginpb::Reason reason = pluginpb::REASON_UNSPECIFIED;
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
  if (attempt > 0 && reason == pluginpb::REASON_UNSPECIFIED) reason = pluginpb::REASON_RETRY;
  cache::ObjectPtr primary = sources_.primary->Get(key);
  ReconcileContext context;
  context.controller = info_;
  const size_t slash = key.find('/');
  context.namespace_ = slash == std::string::npos ? "" : key.substr(0, slash);
  context.name = slash == std::string::npos ? key : key.substr(slash + 1);
  context.primary = primary;
  context.owned_stores = sources_.owned;
  context.attempt = attempt;

  if (primary == nullptr) {
    if (!deleted_known) {
      // Mapped from a child or watch to a primary that does not exist (yet): nothing to do;
      // the primary's own add event will queue it.
      queue_.Forget(key);
      common::LogDebug("no such primary", {{"controller", info_->name}, {"key", key}});
      return;
    }
    reason = pluginpb::REASON_PRIMARY_DELETED;
  } else {
    if (deleted_known) {
      common::MutexLock lock(&mu_);
      deleted_uids_.erase(key);  // re-created since
    }
    if (!EnsureFinalizerBeforeRequest(key, start, primary, context)) return;
  }

  const absl::Time deadline = clock_->Now() + info_->request_timeout;
  context.trace_id = TraceId();
  pluginpb::ReconcileCall call =
      BuildCall(key, primary, primary != nullptr ? primary->uid() : absl::string_view(deleted_uid),
                reason == pluginpb::REASON_UNSPECIFIED ? pluginpb::REASON_PRIMARY_CHANGED : reason,
                attempt, deadline);
  call.set_trace_id(context.trace_id);
  std::optional<std::string> recorded_call;
  if (options_.recorder != nullptr) recorded_call = options_.recorder->Capture(call);
  DispatchResult answer = DispatchAndWait(std::move(call), deadline);
  const absl::StatusOr<pluginpb::ReconcileResponse>& response = answer.response;
  context.capabilities = std::move(answer.capabilities);

  ApplyOutcome outcome;
  if (!response.ok()) {
    outcome.kind = OutcomeKind::kRetry;
    outcome.status = response.status();
  } else {
    outcome = ApplyGuarded(applier_, context, *response);
  }
  const absl::Duration took = clock_->Now() - start;
  if (recorded_call.has_value()) {
    answer.capabilities = context.capabilities;
    options_.recorder->Record(*std::move(recorded_call), std::move(answer), outcome, took);
  }

  if (primary == nullptr) {
    FinishDeleted(key, outcome, took, deleted_uid);
  } else {
    Finish(key, outcome, took);
  }
}

void Runner::FinishDeleted(const std::string& key, const ApplyOutcome& outcome, absl::Duration took,
                           const std::string& deleted_uid) {
  // The plugin was told; only a failure to tell it is retried.
  if (outcome.kind == OutcomeKind::kRetry) {
    Record(ReconcileResult::kError, key, outcome.status, took, outcome.reason);
    Requeue(key, AddAfterFailure(key, outcome.status, outcome.retry_after));
    return;
  }
  queue_.Forget(key);
  Record(outcome.kind == OutcomeKind::kTerminal ? ReconcileResult::kTerminal
                                                : ReconcileResult::kSuccess,
         key, outcome.status, took, outcome.reason);
  common::MutexLock lock(&mu_);
  // A re-creation meanwhile replaced the record's meaning: keep it only if it changed.
  if (auto it = deleted_uids_.find(key); it != deleted_uids_.end() && it->second == deleted_uid) {
    deleted_uids_.erase(it);
  }
}

void Runner::Finish(const std::string& key, const ApplyOutcome& outcome, absl::Duration took) {
  // Conflicts (409) requeue at once to read fresh state, but a plugin that keeps writing with a
  // stale resourceVersion (or a `test` that never holds) would spin: from the
  // kMaxImmediateConflicts-th conflict in a row on, the key backs off like any retry.
  bool conflict_backoff = false;
  {
    common::MutexLock lock(&mu_);
    if (outcome.kind == OutcomeKind::kRequeueNow) {
      conflict_backoff = ++conflicts_[key] >= kMaxImmediateConflicts;
    } else {
      conflicts_.erase(key);
    }
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
        reasons_.try_emplace(key, pluginpb::REASON_REQUEUE);
      }
      // Floored: a plugin asking for 1 ns would have one key reconciled thousands of times a
      // second (RunnerOptions::min_requeue_after).
      Requeue(key,
              queue_.AddAfter(key, std::max(outcome.requeue_after, options_.min_requeue_after)));
      Record(ReconcileResult::kRequeueAfter, key, absl::OkStatus(), took);
      break;
    case OutcomeKind::kRetry:
      Requeue(key, AddAfterFailure(key, outcome.status, outcome.retry_after));
      Record(ReconcileResult::kError, key, outcome.status, took, outcome.reason);
      common::LogDebug("reconcile failed, retrying",
                       {{"controller", info_->name}, {"key", key}, {"status", outcome.status}});
      break;
    case OutcomeKind::kRequeueNow:
      Requeue(key, conflict_backoff ? queue_.AddRateLimited(key) : queue_.Add(key));
      Record(ReconcileResult::kRequeue, key, absl::OkStatus(), took);
      break;
    case OutcomeKind::kTerminal: {
      queue_.Forget(key);
      Record(ReconcileResult::kTerminal, key, outcome.status, took, outcome.reason);
      {
        common::MutexLock lock(&mu_);
        terminal_.insert(key);
      }
      if (!outcome.blocked_by.empty()) RecordBlocked(key, outcome.blocked_by);
      break;
    }
  }
}

}  // namespace ctrlhost::controller
