#include "runtime/watch/reflector.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::watch {
namespace {

constexpr absl::Duration kRateWindow = absl::Seconds(10);
constexpr absl::Duration kWatchdogTick = absl::Minutes(1);

// The absl::Status an ERROR watch event stands for (its object is a metav1.Status).
absl::Status StatusFromErrorEvent(absl::string_view object) {
  int code = 500;
  nlohmann::json status = nlohmann::json::parse(object.begin(), object.end(), nullptr,
                                                /*allow_exceptions=*/false);
  if (status.is_object()) {
    auto it = status.find("code");
    if (it != status.end() && it->is_number_integer()) code = it->get<int>();
  }
  if (code < 400 || code > 599) code = 500;
  return kube::FromHttpResponse(code, object);
}

}  // namespace

bool IsAccessDenied(absl::StatusCode code) {
  return code == absl::StatusCode::kPermissionDenied || code == absl::StatusCode::kUnauthenticated;
}

absl::string_view ReflectorStateName(ReflectorState state) {
  switch (state) {
    case ReflectorState::kNotStarted:
      return "NotStarted";
    case ReflectorState::kListing:
      return "Listing";
    case ReflectorState::kWatching:
      return "Watching";
    case ReflectorState::kBackoff:
      return "Backoff";
    case ReflectorState::kStopped:
      break;
  }
  return "Stopped";
}

Reflector::Reflector(std::shared_ptr<ListerWatcher> lister_watcher, ReflectorOptions options)
    : lister_watcher_(std::move(lister_watcher)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      parser_(options_.parse) {
  common::MutexLock lock(&mu_);
  rng_.seed(options_.seed != 0 ? options_.seed : std::random_device()());
  metrics_.description = options_.description;
  window_start_ = clock_->Now();
  label_selector_ = options_.label_selector;
}

Reflector::~Reflector() { Stop(); }

void Reflector::Start() {
  common::MutexLock lifecycle(&lifecycle_mu_);
  {
    common::MutexLock lock(&mu_);
    if (started_ || stopping_) return;
    started_ = true;
  }
  if (options_.shard != nullptr) {
    shard_listener_ = options_.shard->AddListener([this] { OnShardChange(); });
  }
  thread_ = std::thread([this] { Run(); });
  watchdog_ = std::thread([this] { Watchdog(); });
}

void Reflector::Stop() {
  common::MutexLock lifecycle(&lifecycle_mu_);
  // First, without mu_: RemoveListener waits for a listener call in progress, which takes it.
  if (shard_listener_ != 0) {
    options_.shard->RemoveListener(shard_listener_);
    shard_listener_ = 0;
  }
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    if (stream_ != nullptr) stream_->Close();
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (watchdog_.joinable()) watchdog_.join();
  SetState(ReflectorState::kStopped);
}

bool Reflector::Stopping() const {
  common::MutexLock lock(&mu_);
  return stopping_;
}

void Reflector::SetState(ReflectorState state) {
  common::MutexLock lock(&mu_);
  state_ = state;
}

ReflectorState Reflector::state() const {
  common::MutexLock lock(&mu_);
  return state_;
}

bool Reflector::WaitForSync(absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  common::MutexLock lock(&mu_);
  while (!initial_list_dispatched_) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) return initial_list_dispatched_;
  }
  return true;
}

int Reflector::AddHandler(std::shared_ptr<EventHandler> handler) {
  common::MutexLock lock(&dispatch_mu_);
  for (const cache::ObjectPtr& object : store_.List()) handler->OnAdd(object, true);
  const int id = next_handler_id_++;
  handlers_.emplace_back(id, std::move(handler));
  return id;
}

void Reflector::RemoveHandler(int id) {
  std::shared_ptr<EventHandler> removed;  // released without the lock
  common::MutexLock lock(&dispatch_mu_);
  for (auto it = handlers_.begin(); it != handlers_.end(); ++it) {
    if (it->first == id) {
      removed = std::move(it->second);
      handlers_.erase(it);
      return;
    }
  }
}

ReflectorMetrics Reflector::Metrics() const {
  ReflectorMetrics out;
  {
    common::MutexLock lock(&mu_);
    out = metrics_;
    out.state = state_;
  }
  out.objects = store_.Size();
  out.bytes = store_.JsonBytes();
  out.memory_bytes = store_.MemoryBytes();
  out.resource_version = store_.ResourceVersion();
  out.synced = store_.HasSynced();
  return out;
}

void Reflector::CountEvent() {
  ++metrics_.events_total;
  const absl::Time now = clock_->Now();
  const absl::Duration elapsed = now - window_start_;
  if (elapsed >= kRateWindow) {
    metrics_.events_per_second =
        static_cast<double>(window_events_) / absl::ToDoubleSeconds(elapsed);
    window_start_ = now;
    window_events_ = 0;
  }
  ++window_events_;
}

void Reflector::Dispatch(const cache::StoreDiff& diff, bool initial) {
  for (const auto& [id, handler] : handlers_) {
    for (const auto& object : diff.added) handler->OnAdd(object, initial);
    for (const auto& [old_object, object] : diff.updated) handler->OnUpdate(old_object, object);
    for (const auto& object : diff.deleted) handler->OnDelete(object);
  }
}

void Reflector::Run() {
  bool need_list = true;
  bool watched = false;  // a watch ran since the last list
  while (!Stopping()) {
    if (need_list) {
      SetState(ReflectorState::kListing);
      absl::Status status = ListAndReplace();
      if (!status.ok()) {
        if (!Backoff(status)) break;
        continue;
      }
      RecordSuccess("list");
      need_list = false;
      watched = false;
    }
    if (ShardMoved()) {  // during the list, the watch or a backoff
      common::MutexLock lock(&mu_);
      ++metrics_.shard_relists_total;
      need_list = true;
      continue;
    }
    if (options_.shard != nullptr && listed_shard_.ranges.empty()) {
      if (!WaitForShardChange()) break;
      continue;
    }
    SetState(ReflectorState::kWatching);
    // Label mode: an object outside the selector may have been deleted without an event.
    if (watched && !outside_selector_.empty()) ConfirmOutsideSelector();
    watched = true;
    absl::Status cause;
    switch (WatchOnce(&cause)) {
      case WatchEnd::kContinue:
      case WatchEnd::kRewatch:
        break;
      case WatchEnd::kRelistNow:
        if (kube::IsGone(cause)) RecordGone(cause);
        need_list = true;
        break;
      case WatchEnd::kRelistAfterBackoff:
        need_list = true;
        if (!Backoff(cause)) return;
        break;
      case WatchEnd::kBackoff:
        if (!Backoff(cause)) return;
        break;
      case WatchEnd::kStopped:
        return;
    }
  }
}

void Reflector::Watchdog() {
  common::MutexLock lock(&mu_);
  while (!stopping_) {
    if (stream_ != nullptr && clock_->Now() >= watch_deadline_) {
      common::LogWarning("watch sent nothing past its timeout; closing it to re-watch",
                         {{"watch", options_.description}});
      ++metrics_.watchdog_closes_total;
      stream_->Close();
      watch_deadline_ = absl::InfiniteFuture();
    }
    // Bounded wait: an infinite deadline overflows some condition-variable implementations.
    clock_->WaitWithDeadline(&mu_, &cv_, std::min(watch_deadline_, clock_->Now() + kWatchdogTick));
  }
}

bool Reflector::Backoff(const absl::Status& cause) {
  common::MutexLock lock(&mu_);
  if (stopping_) return false;
  const absl::Time now = clock_->Now();
  if (now - last_failure_ >= options_.backoff_reset_after) failures_ = 0;
  absl::Duration delay = options_.initial_backoff;
  for (int i = 0; i < failures_ && delay < options_.max_backoff; ++i) delay *= 2;
  delay = std::min(delay, options_.max_backoff);
  if (IsAccessDenied(cause.code())) delay = std::min(delay, options_.auth_max_backoff);
  const double jitter = std::clamp(options_.jitter, 0.0, 1.0);
  delay *= 1.0 - jitter * std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  ++failures_;
  last_failure_ = now;
  state_ = ReflectorState::kBackoff;
  RecordFailure(cause, now, delay);
  const absl::Time deadline = now + delay;
  // A scope change cuts the wait short: the new shard is listed at once.
  while (!stopping_ && !shard_wakeup_) {
    if (clock_->WaitWithDeadline(&mu_, &cv_, deadline)) break;
  }
  return !stopping_;
}

void Reflector::RecordFailure(const absl::Status& cause, absl::Time now, absl::Duration delay) {
  ++metrics_.errors_total;
  metrics_.last_error = cause.ToString();
  metrics_.last_error_code = cause.code();
  metrics_.last_error_message = std::string(cause.message());
  metrics_.last_backoff = delay;
  if (!metrics_.failing) {
    metrics_.failing = true;
    metrics_.failing_since = now;
    metrics_.consecutive_failures = 0;
  }
  ++metrics_.consecutive_failures;
  // First failure, a different error, or the interval passed: say so; otherwise count it.
  const std::string error = cause.ToString();
  if (metrics_.consecutive_failures > 1 && error == last_logged_error_ &&
      now - last_failure_log_ < options_.failure_log_interval) {
    ++unlogged_failures_;
    return;
  }
  last_failure_log_ = now;
  last_logged_error_ = error;
  const uint64_t unlogged = std::exchange(unlogged_failures_, 0);
  const absl::string_view message =
      cause.code() == absl::StatusCode::kPermissionDenied  ? "watch forbidden; retrying"
      : cause.code() == absl::StatusCode::kUnauthenticated ? "watch unauthorized; retrying"
                                                           : "watch failed; retrying";
  common::LogWarning(message, {{"watch", options_.description},
                               {"error", cause.message()},
                               {"code", absl::StatusCodeToString(cause.code())},
                               {"failing_for", now - metrics_.failing_since},
                               {"failures", metrics_.consecutive_failures},
                               {"not_logged", unlogged},
                               {"retry_in", delay}});
}

void Reflector::RecordSuccess(absl::string_view what) {
  common::MutexLock lock(&mu_);
  if (!metrics_.failing) return;
  metrics_.failing = false;
  common::LogInfo("watch recovered", {{"watch", options_.description},
                                      {"after", what},
                                      {"failed_for", clock_->Now() - metrics_.failing_since},
                                      {"failures", metrics_.consecutive_failures}});
  metrics_.consecutive_failures = 0;
  unlogged_failures_ = 0;
  last_logged_error_.clear();
}

void Reflector::RecordGone(const absl::Status& cause) {
  common::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (now - last_gone_log_ < options_.failure_log_interval) {
    ++unlogged_gones_;
    return;
  }
  last_gone_log_ = now;
  relist_after_gone_ = true;
  common::LogInfo("watch expired (410 Gone); relisting",
                  {{"watch", options_.description},
                   {"error", cause.message()},
                   {"resource_version", store_.ResourceVersion()},
                   {"not_logged", std::exchange(unlogged_gones_, 0)}});
}

Reflector::WatchEnd Reflector::WatchOnce(absl::Status* cause) {
  WatchOptions watch_options{
      label_selector_, options_.field_selector, store_.ResourceVersion(),
      std::max<int64_t>(1, absl::ToInt64Seconds(options_.watch_timeout)), true,
      // Recovered only once the server answers: a stream may connect after Watch() returns
      // (and fail to), and calling that a recovery would restart the stale clock each retry.
      [this] { RecordSuccess("watch"); }, shard_selector_};
  absl::StatusOr<std::unique_ptr<WatchStream>> stream = lister_watcher_->Watch(watch_options);
  if (!stream.ok()) {
    *cause = stream.status();
    if (kube::IsGone(*cause)) return WatchEnd::kRelistNow;
    // A resource that disappeared (CRD deleted) is relisted once it is back.
    if (kube::IsNotFound(*cause)) return WatchEnd::kRelistAfterBackoff;
    return WatchEnd::kBackoff;
  }
  {
    common::MutexLock lock(&mu_);
    if (stopping_) return WatchEnd::kStopped;
    stream_ = stream->get();
    watch_deadline_ = clock_->Now() + options_.watch_timeout + options_.watch_grace;
    ++metrics_.watches_total;
    cv_.SignalAll();  // the watchdog picks up the new deadline
  }
  // A scope change before stream_ was set found no stream to close: end this watch now.
  WatchEnd end = ShardMoved() ? WatchEnd::kRewatch : WatchEnd::kContinue;
  while (end == WatchEnd::kContinue) {
    absl::StatusOr<std::optional<WatchEvent>> event = (*stream)->Next();
    if (!event.ok()) {
      *cause = event.status();
      if (kube::IsGone(*cause)) {
        end = WatchEnd::kRelistNow;
      } else if (kube::IsNotFound(*cause)) {
        end = WatchEnd::kRelistAfterBackoff;  // the resource went away (CRD deleted)
      } else if (cause->code() == absl::StatusCode::kDataLoss) {
        common::MutexLock lock(&mu_);
        ++metrics_.parse_errors_total;
        end = WatchEnd::kRelistAfterBackoff;
      } else {
        end = WatchEnd::kBackoff;
      }
      break;
    }
    if (!event->has_value()) {
      end = Stopping() ? WatchEnd::kStopped : WatchEnd::kRewatch;
      break;
    }
    {
      common::MutexLock lock(&mu_);
      watch_deadline_ = clock_->Now() + options_.watch_timeout + options_.watch_grace;
    }
    end = HandleEvent(**event, cause);
  }
  {
    common::MutexLock lock(&mu_);
    stream_ = nullptr;
    watch_deadline_ = absl::InfiniteFuture();
  }
  stream->reset();
  return end;
}

Reflector::WatchEnd Reflector::HandleEvent(const WatchEvent& event, absl::Status* cause) {
  auto malformed = [&](const absl::Status& status) {
    *cause = absl::DataLossError(
        absl::StrCat("malformed ", EventTypeName(event.type), " event: ", status.message()));
    common::LogError("malformed watch event; relisting",
                     {{"watch", options_.description}, {"error", *cause}});
    common::MutexLock lock(&mu_);
    ++metrics_.parse_errors_total;
    return WatchEnd::kRelistAfterBackoff;
  };
  switch (event.type) {
    case EventType::kAdded:
    case EventType::kModified:
    case EventType::kDeleted: {
      absl::StatusOr<cache::ObjectPtr> object = parser_.Parse(event.object);
      if (!object.ok()) return malformed(object.status());
      {
        // Counted before the store and the handlers see the event, so whoever observes its
        // effect also observes it counted.
        common::MutexLock lock(&mu_);
        CountEvent();
      }
      const bool mislabeled = label_mode_.has_value() && !HasShardLabel(**object, *label_mode_);
      // Back in the selector (or deleted): its events come again.
      if (label_mode_.has_value() && !mislabeled) outside_selector_.erase((*object)->key());
      if (mislabeled && event.type == EventType::kDeleted) {
        HandleMislabeledDelete(*object);
        return WatchEnd::kContinue;
      }
      if (label_mode_.has_value() && event.type == EventType::kDeleted) {
        absl::StatusOr<bool> kept = KeptAfterDelete(*object);
        if (!kept.ok()) {
          *cause = kept.status();
          return WatchEnd::kRelistAfterBackoff;  // the relist confirms what is gone
        }
        if (*kept) return WatchEnd::kContinue;
      }
      const bool in_scope =
          options_.shard == nullptr ||
          RangesContain(listed_shard_.ranges, ShardHashOf(**object, options_.shard_by));
      bool dropped = false;
      {
        common::MutexLock dispatch(&dispatch_mu_);
        store_.SetResourceVersion(std::string((*object)->resource_version()));
        if (event.type == EventType::kDeleted) {
          cache::ObjectPtr old = store_.Delete((*object)->key());
          if (old != nullptr) {
            for (const auto& [id, handler] : handlers_) handler->OnDelete(*object);
          }
          dropped = !in_scope && old == nullptr;
        } else if (!in_scope) {
          // Out of scope: not cached; one cached before (its controller owner changed) leaves.
          dropped = true;
          cache::ObjectPtr old = store_.Delete((*object)->key());
          if (old != nullptr) {
            for (const auto& [id, handler] : handlers_) handler->OnDelete(old);
          }
        } else {
          cache::ObjectPtr old = store_.Upsert(*object);
          const bool same = old != nullptr &&
                            old->resource_version() == (*object)->resource_version() &&
                            old->json() == (*object)->json();
          if (!same) {
            for (const auto& [id, handler] : handlers_) {
              if (old == nullptr) {
                handler->OnAdd(*object, false);
              } else {
                handler->OnUpdate(old, *object);
              }
            }
          }
        }
      }
      if (dropped) {
        common::MutexLock lock(&mu_);
        ++metrics_.shard_filtered_total;
      }
      if (mislabeled) ReportMislabeled(**object);
      return WatchEnd::kContinue;
    }
    case EventType::kBookmark: {
      absl::StatusOr<std::string> rv = parser_.ParseResourceVersion(event.object);
      if (!rv.ok()) return malformed(rv.status());
      store_.SetResourceVersion(*std::move(rv));
      common::MutexLock lock(&mu_);
      ++metrics_.bookmarks_total;
      return WatchEnd::kContinue;
    }
    case EventType::kError:
      break;
  }
  *cause = StatusFromErrorEvent(event.object);
  if (kube::IsGone(*cause)) return WatchEnd::kRelistNow;  // logged by Run
  return WatchEnd::kBackoff;
}

}  // namespace ctrlhost::watch
