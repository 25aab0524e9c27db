#include "runtime/watch/fake_lister_watcher.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/api_status.h"
#include "runtime/kube/selector.h"

namespace ctrlhost::watch {

struct FakeListerWatcher::Filter {
  std::shared_ptr<const kube::ShardSelector> shard;  // null: none (or not supported)
  std::optional<kube::LabelSelector> labels;
  std::optional<kube::FieldSelector> fields;

  // Whether `object` (JSON) is selected. An object without metadata (an injected malformed
  // one) passes, so the client sees it; one without a uid passes the shard selector.
  bool Matches(const std::string& object) const {
    if (shard == nullptr && !labels.has_value() && !fields.has_value()) return true;
    nlohmann::json j = nlohmann::json::parse(object, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) return true;
    const nlohmann::json& meta = j["metadata"];
    if (labels.has_value() && !labels->Matches(kube::LabelsOf(j))) return false;
    if (fields.has_value()) {
      kube::Fields values;
      values["metadata.name"] = meta.value("name", "");
      values["metadata.namespace"] = meta.value("namespace", "");
      if (!fields->Matches(values)) return false;
    }
    auto uid = meta.find("uid");
    if (shard == nullptr || uid == meta.end() || !uid->is_string()) return true;
    return shard->Matches(uid->get<std::string>());
  }
};

struct FakeListerWatcher::StreamState {
  // Constant after construction: what the watch selects.
  std::shared_ptr<const Filter> filter;
  common::Mutex mu;
  common::CondVar cv;
  std::deque<absl::StatusOr<std::optional<WatchEvent>>> queue ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;  // by the client or after a terminal item
  bool silent ABSL_GUARDED_BY(mu) = false;

  void Push(absl::StatusOr<std::optional<WatchEvent>> item) {
    common::MutexLock lock(&mu);
    if (closed || silent) return;
    queue.push_back(std::move(item));
    cv.SignalAll();
  }
  bool Open() {
    common::MutexLock lock(&mu);
    return !closed;
  }
};

namespace {

class FakeStream : public WatchStream {
 public:
  explicit FakeStream(std::shared_ptr<FakeListerWatcher::StreamState> state)
      : state_(std::move(state)) {}
  ~FakeStream() override { Close(); }

  absl::StatusOr<std::optional<WatchEvent>> Next() override {
    common::MutexLock lock(&state_->mu);
    while (state_->queue.empty() && !state_->closed) state_->cv.Wait(&state_->mu);
    if (state_->queue.empty()) return std::optional<WatchEvent>();
    absl::StatusOr<std::optional<WatchEvent>> item = std::move(state_->queue.front());
    state_->queue.pop_front();
    // An error or a clean end is the last thing a stream says.
    if (!item.ok() || !item->has_value()) {
      if (item.status().code() != absl::StatusCode::kDataLoss) {
        state_->closed = true;
        state_->queue.clear();
      }
    }
    return item;
  }

  void Close() override {
    common::MutexLock lock(&state_->mu);
    state_->closed = true;
    state_->queue.clear();
    state_->cv.SignalAll();
  }

 private:
  std::shared_ptr<FakeListerWatcher::StreamState> state_;
};

std::string GoneStatusJson(absl::string_view message) {
  return kube::ToHttpResponse(kube::GoneError(message)).second;
}

// The event a watch with `filter` sees for a change, as a real server's watch cache sends it:
// an object that comes into the selectors is ADDED, one that leaves them is DELETED (with its
// new state, or with `exit_previous` its previous one, as Kubernetes 1.20 does); none when it
// is selected neither before nor after.
std::optional<WatchEvent> AsSeenBy(const FakeListerWatcher::Filter& filter, const WatchEvent& event,
                                   const std::string& previous, bool exit_previous) {
  const bool now = filter.Matches(event.object);
  if (event.type != EventType::kModified) {
    return now ? std::optional<WatchEvent>(event) : std::nullopt;
  }
  const bool before = filter.Matches(previous);
  if (now) return WatchEvent{before ? EventType::kModified : EventType::kAdded, event.object};
  if (before) return WatchEvent{EventType::kDeleted, exit_previous ? previous : event.object};
  return std::nullopt;
}

}  // namespace

FakeListerWatcher::~FakeListerWatcher() {
  common::MutexLock lock(&mu_);
  for (auto& stream : streams_) stream->Push(std::optional<WatchEvent>());
}

absl::Status FakeListerWatcher::TakeInjectedFailure() {
  if (failures_left_ > 0) {
    --failures_left_;
    return failure_;
  }
  if (missing_) return kube::NotFoundError("", "configmaps", "");
  return absl::OkStatus();
}

void FakeListerWatcher::PruneStreams() {
  streams_.erase(
      std::remove_if(streams_.begin(), streams_.end(), [](const auto& s) { return !s->Open(); }),
      streams_.end());
}

absl::StatusOr<std::shared_ptr<const FakeListerWatcher::Filter>> FakeListerWatcher::MakeFilter(
    const std::string& label_selector, const std::string& field_selector,
    const std::string& shard_selector) const {
  auto filter = std::make_shared<Filter>();
  if (!label_selector.empty()) {
    absl::StatusOr<kube::LabelSelector> labels = kube::LabelSelector::Parse(label_selector);
    if (!labels.ok()) return labels.status();
    filter->labels = *std::move(labels);
  }
  if (!field_selector.empty()) {
    absl::StatusOr<kube::FieldSelector> fields = kube::FieldSelector::Parse(field_selector);
    if (!fields.ok()) return fields.status();
    absl::Status supported = fields->ValidateFields({"metadata.name", "metadata.namespace"});
    if (!supported.ok()) return supported;
    filter->fields = *std::move(fields);
  }
  if (shard_support_ && !shard_selector.empty()) {
    absl::StatusOr<kube::ShardSelector> parsed = kube::ShardSelector::Parse(shard_selector);
    if (!parsed.ok()) {
      return kube::InvalidError(
          "meta.k8s.io", "ListOptions", "",
          {{"FieldValueInvalid", std::string(parsed.status().message()), "shardSelector"}});
    }
    filter->shard = std::make_shared<const kube::ShardSelector>(*std::move(parsed));
  }
  return std::shared_ptr<const Filter>(std::move(filter));
}

absl::StatusOr<ListPage> FakeListerWatcher::List(const ListOptions& options) {
  std::function<void()> hook;
  {
    common::MutexLock lock(&mu_);
    hook = std::exchange(next_list_hook_, nullptr);
  }
  if (hook) hook();
  common::MutexLock lock(&mu_);
  ++list_calls_;
  last_list_options_ = options;
  absl::Status failure = TakeInjectedFailure();
  if (!failure.ok()) return failure;
  absl::StatusOr<std::shared_ptr<const Filter>> filter =
      MakeFilter(options.label_selector, options.field_selector, options.shard_selector);
  if (!filter.ok()) return filter.status();
  int64_t id = 0;
  size_t offset = 0;
  if (options.continue_token.empty()) {
    std::vector<std::string> items;
    for (const auto& [key, json] : objects_) {
      if ((*filter)->Matches(json)) items.push_back(json);
    }
    id = next_snapshot_++;
    snapshots_[id] = {absl::StrCat(rv_), std::move(items)};
  } else {
    std::vector<std::string> parts = absl::StrSplit(options.continue_token, ':');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id) ||
        !absl::SimpleAtoi(parts[1], &offset)) {
      return kube::BadRequestError("invalid continue token");
    }
    if (expire_next_token_) {
      expire_next_token_ = false;
      snapshots_.erase(id);
    }
    if (snapshots_.count(id) == 0) {
      return kube::GoneError("The provided continue parameter is too old");
    }
  }
  const auto& [rv, items] = snapshots_[id];
  ListPage page;
  page.resource_version = rv;
  page.shard_applied = (*filter)->shard != nullptr;
  size_t end = items.size();
  if (options.limit > 0) end = std::min(end, offset + static_cast<size_t>(options.limit));
  for (size_t i = std::min(offset, items.size()); i < end; ++i) page.items.push_back(items[i]);
  if (end < items.size()) {
    page.continue_token = absl::StrCat(id, ":", end);
  } else {
    snapshots_.erase(id);
  }
  return page;
}

absl::StatusOr<std::unique_ptr<WatchStream>> FakeListerWatcher::Watch(const WatchOptions& options) {
  bool established = false;
  absl::StatusOr<std::unique_ptr<WatchStream>> stream = OpenStream(options, &established);
  // As a server that answered 200 (a 410 in the stream comes after that).
  if (established && options.on_established) options.on_established();
  return stream;
}

absl::StatusOr<std::unique_ptr<WatchStream>> FakeListerWatcher::OpenStream(
    const WatchOptions& options, bool* established) {
  common::MutexLock lock(&mu_);
  absl::Status failure = TakeInjectedFailure();
  if (!failure.ok() && lazy_connect_) {
    // The client connects in the stream: the failure is its first and last item.
    auto state = std::make_shared<StreamState>();
    state->Push(failure);
    return std::unique_ptr<WatchStream>(std::make_unique<FakeStream>(std::move(state)));
  }
  if (!failure.ok()) return failure;
  int64_t from = rv_;
  if (!options.resource_version.empty() && options.resource_version != "0" &&
      !absl::SimpleAtoi(options.resource_version, &from)) {
    return kube::BadRequestError("invalid resourceVersion");
  }
  absl::StatusOr<std::shared_ptr<const Filter>> filter =
      MakeFilter(options.label_selector, options.field_selector, options.shard_selector);
  if (!filter.ok()) return filter.status();
  auto state = std::make_shared<StreamState>();
  state->filter = *std::move(filter);
  if (from < compacted_rv_) {
    if (gone_as_http_) return kube::GoneError("too old resource version");
    state->Push(WatchEvent{EventType::kError, GoneStatusJson("too old resource version")});
  } else {
    for (const Change& change : history_) {
      if (change.rv <= from) continue;
      std::optional<WatchEvent> seen =
          AsSeenBy(*state->filter, change.event, change.previous, exit_previous_);
      if (seen.has_value()) state->Push(*std::move(seen));
    }
  }
  PruneStreams();
  streams_.push_back(state);
  ++watch_calls_;
  last_watch_options_ = options;
  watch_cv_.SignalAll();
  *established = true;
  return std::unique_ptr<WatchStream>(std::make_unique<FakeStream>(std::move(state)));
}

void FakeListerWatcher::Publish(EventType type, const std::string& object,
                                const std::string& previous) {
  history_.push_back(Change{rv_, WatchEvent{type, object}, previous});
  const Change& change = history_.back();
  for (auto& stream : streams_) {
    std::optional<WatchEvent> seen =
        AsSeenBy(*stream->filter, change.event, change.previous, exit_previous_);
    if (seen.has_value()) stream->Push(*std::move(seen));
  }
}

std::string FakeListerWatcher::Set(const std::string& ns, const std::string& name,
                                   const std::string& value,
                                   const std::map<std::string, std::string>& labels) {
  common::MutexLock lock(&mu_);
  const std::string key = absl::StrCat(ns, "/", name);
  ++rv_;
  auto it = objects_.find(key);
  std::string uid = absl::StrCat(uid_prefix_, key);
  if (it != objects_.end()) {
    // An update keeps the object's uid.
    uid = nlohmann::json::parse(it->second)["metadata"]["uid"].get<std::string>();
  }
  std::string label_json;
  if (!labels.empty()) label_json = absl::StrCat(R"(,"labels":)", nlohmann::json(labels).dump());
  std::string json =
      absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{)", R"("name":")", name,
                   R"(","namespace":")", ns, R"(","uid":")", uid, R"(","resourceVersion":")", rv_,
                   R"(")", label_json, R"(},"data":{"value":")", value, R"("}})");
  std::string previous;
  if (it != objects_.end())
    previous = std::exchange(it->second, json);
  else
    objects_[key] = json;
  Publish(previous.empty() ? EventType::kAdded : EventType::kModified, json, previous);
  return json;
}

void FakeListerWatcher::SetUidPrefix(const std::string& prefix) {
  common::MutexLock lock(&mu_);
  uid_prefix_ = prefix;
}

void FakeListerWatcher::Delete(const std::string& ns, const std::string& name) {
  common::MutexLock lock(&mu_);
  auto it = objects_.find(absl::StrCat(ns, "/", name));
  if (it == objects_.end()) return;
  ++rv_;
  // The DELETED event carries the last state (with the deletion's resourceVersion, as the
  // real server does; the fake keeps the old one, which consumers must not depend on either).
  std::string json = std::move(it->second);
  objects_.erase(it);
  Publish(EventType::kDeleted, json, "");
}

std::map<std::string, std::string> FakeListerWatcher::Snapshot() const {
  common::MutexLock lock(&mu_);
  return objects_;
}

int64_t FakeListerWatcher::resource_version() const {
  common::MutexLock lock(&mu_);
  return rv_;
}

void FakeListerWatcher::FailNextCalls(int n, absl::Status status) {
  common::MutexLock lock(&mu_);
  failures_left_ = n;
  failure_ = std::move(status);
}

void FakeListerWatcher::SetResourceMissing(bool missing) {
  common::MutexLock lock(&mu_);
  missing_ = missing;
}

void FakeListerWatcher::Compact() {
  common::MutexLock lock(&mu_);
  compacted_rv_ = rv_;
  history_.clear();
}

void FakeListerWatcher::SetLazyConnect(bool lazy) {
  common::MutexLock lock(&mu_);
  lazy_connect_ = lazy;
}

void FakeListerWatcher::SetGoneAsHttpError(bool http_error) {
  common::MutexLock lock(&mu_);
  gone_as_http_ = http_error;
}

void FakeListerWatcher::ExpireContinueTokens() {
  common::MutexLock lock(&mu_);
  snapshots_.clear();
}

void FakeListerWatcher::ExpireNextContinueToken() {
  common::MutexLock lock(&mu_);
  expire_next_token_ = true;
}

void FakeListerWatcher::BreakWatches(absl::Status status) {
  common::MutexLock lock(&mu_);
  for (auto& stream : streams_) {
    {
      common::MutexLock stream_lock(&stream->mu);
      stream->queue.clear();  // whatever was in flight is lost
      stream->silent = false;
    }
    stream->Push(status);
  }
  streams_.clear();
}

void FakeListerWatcher::EndWatches() {
  common::MutexLock lock(&mu_);
  for (auto& stream : streams_) stream->Push(std::optional<WatchEvent>());
  streams_.clear();
}

void FakeListerWatcher::InjectEvent(WatchEvent event) {
  common::MutexLock lock(&mu_);
  for (auto& stream : streams_) stream->Push(event);
}

void FakeListerWatcher::InjectStreamError(absl::Status status) {
  common::MutexLock lock(&mu_);
  for (auto& stream : streams_) stream->Push(status);
}

void FakeListerWatcher::HangWatches() {
  common::MutexLock lock(&mu_);
  for (auto& stream : streams_) {
    common::MutexLock stream_lock(&stream->mu);
    stream->queue.clear();
    stream->silent = true;
  }
}

void FakeListerWatcher::SetShardSelectorSupport(bool supported) {
  common::MutexLock lock(&mu_);
  shard_support_ = supported;
}

void FakeListerWatcher::SetSelectorExitSendsPreviousState(bool previous) {
  common::MutexLock lock(&mu_);
  exit_previous_ = previous;
}

void FakeListerWatcher::OnNextList(std::function<void()> hook) {
  common::MutexLock lock(&mu_);
  next_list_hook_ = std::move(hook);
}

void FakeListerWatcher::SendBookmark() {
  common::MutexLock lock(&mu_);
  WatchEvent event{EventType::kBookmark,
                   absl::StrCat(R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{)",
                                R"("resourceVersion":")", rv_, R"("}})")};
  for (auto& stream : streams_) stream->Push(event);
}

void FakeListerWatcher::Restart(int failures, bool lose_history) {
  BreakWatches(absl::UnavailableError("connection reset by peer (server restart)"));
  FailNextCalls(failures, absl::UnavailableError("connection refused (server restarting)"));
  if (lose_history) Compact();
}

int FakeListerWatcher::list_calls() const {
  common::MutexLock lock(&mu_);
  return list_calls_;
}

int FakeListerWatcher::watch_calls() const {
  common::MutexLock lock(&mu_);
  return watch_calls_;
}

int FakeListerWatcher::open_watches() const {
  common::MutexLock lock(&mu_);
  int open = 0;
  for (const auto& stream : streams_) open += stream->Open() ? 1 : 0;
  return open;
}

ListOptions FakeListerWatcher::last_list_options() const {
  common::MutexLock lock(&mu_);
  return last_list_options_;
}

WatchOptions FakeListerWatcher::last_watch_options() const {
  common::MutexLock lock(&mu_);
  return last_watch_options_;
}

bool FakeListerWatcher::WaitForWatchCalls(int n, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  common::MutexLock lock(&mu_);
  while (watch_calls_ < n) {
    if (watch_cv_.WaitWithDeadline(&mu_, deadline)) return watch_calls_ >= n;
  }
  return true;
}

}  // namespace ctrlhost::watch
