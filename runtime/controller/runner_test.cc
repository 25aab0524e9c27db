#include "runtime/controller/runner.h"

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/cache/object.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/type_meta.h"

namespace ctrlhost::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::shared_ptr<const cache::Object> Obj(const std::string& json) {
  cache::ObjectParser parser;
  absl::StatusOr<std::shared_ptr<const cache::Object>> object = parser.Parse(json);
  EXPECT_TRUE(object.ok()) << object.status() << " for " << json;
  return object.ok() ? *object : nullptr;
}

// A WebApp as a list item (no apiVersion/kind).
std::shared_ptr<const cache::Object> WebApp(const std::string& name, const std::string& rv = "1",
                                            const std::string& meta_extra = "",
                                            const std::string& status = "{}") {
  return Obj(R"({"metadata":{"name":")" + name + R"(","namespace":"ns","uid":"uid-)" + name +
             R"(","generation":1,"resourceVersion":")" + rv + "\"" + meta_extra +
             R"(},"spec":{},"status":)" + status + "}");
}

// Blocks in tests wait on conditions with a bounded real-time deadline.
bool WaitUntil(common::Mutex* mu, common::CondVar* cv, const std::function<bool()>& condition)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!condition()) {
    if (cv->WaitWithDeadline(mu, deadline) && !condition()) return false;
  }
  return true;
}

// Answers calls at once (with the next scripted result) or holds them until released.
class FakeDispatcher : public Dispatcher {
 public:
  void Dispatch(pb::ReconcileCall call, absl::Time, ReconcileCallback done) override {
    const std::string key = cache::ObjectKey(call.namespace_(), call.name());
    absl::StatusOr<pb::ReconcileResponse> result = pb::ReconcileResponse();
    {
      common::MutexLock lock(&mu_);
      calls_.push_back(call);
      if (!in_flight_keys_.insert(key).second) overlap_ = true;
      max_in_flight_ = std::max(max_in_flight_, in_flight_keys_.size());
      if (hold_) {
        held_.push_back({key, std::move(done)});
        cv_.SignalAll();
        return;
      }
      if (!errors_.empty()) {
        result = errors_.front();
        errors_.pop_front();
      }
      in_flight_keys_.erase(key);
      cv_.SignalAll();
    }
    done(std::move(result));
  }

  void Hold(bool hold) {
    common::MutexLock lock(&mu_);
    hold_ = hold;
  }
  void FailNext(absl::Status status) {
    common::MutexLock lock(&mu_);
    errors_.push_back(std::move(status));
  }
  // Answers every held call.
  void ReleaseAll() {
    std::vector<std::pair<std::string, ReconcileCallback>> held;
    {
      common::MutexLock lock(&mu_);
      held.swap(held_);
      for (const auto& h : held) in_flight_keys_.erase(h.first);
    }
    for (auto& h : held) h.second(pb::ReconcileResponse());
  }
  bool WaitForCalls(size_t n) {
    common::MutexLock lock(&mu_);
    return WaitUntil(&mu_, &cv_, [&] { return calls_.size() >= n; });
  }
  bool WaitForHeld(size_t n) {
    common::MutexLock lock(&mu_);
    return WaitUntil(&mu_, &cv_, [&] { return held_.size() >= n; });
  }
  std::vector<pb::ReconcileCall> calls() const {
    common::MutexLock lock(&mu_);
    return calls_;
  }
  size_t call_count() const {
    common::MutexLock lock(&mu_);
    return calls_.size();
  }
  size_t max_in_flight() const {
    common::MutexLock lock(&mu_);
    return max_in_flight_;
  }
  bool overlap() const {
    common::MutexLock lock(&mu_);
    return overlap_;
  }

 private:
  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::vector<pb::ReconcileCall> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, ReconcileCallback>> held_ ABSL_GUARDED_BY(mu_);
  std::deque<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> in_flight_keys_ ABSL_GUARDED_BY(mu_);
  size_t max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool overlap_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
};

// Returns scripted outcomes (kDone when the script is empty) and counts calls.
class FakeApplier : public ResponseApplier {
 public:
  ApplyOutcome Apply(const ReconcileContext& context, const pb::ReconcileResponse&) override {
    common::MutexLock lock(&mu_);
    applied_.push_back(cache::ObjectKey(context.namespace_, context.name));
    attempts_.push_back(context.attempt);
    cv_.SignalAll();
    if (outcomes_.empty()) return ApplyOutcome();
    ApplyOutcome outcome = outcomes_.front();
    outcomes_.pop_front();
    return outcome;
  }
  absl::Status EnsureFinalizer(const ReconcileContext& context) override {
    common::MutexLock lock(&mu_);
    ensured_.push_back(cache::ObjectKey(context.namespace_, context.name));
    return ensure_status_;
  }
  void RecordTerminal(const ReconcileContext&, const absl::Status&) override {}

  void Script(OutcomeKind kind, absl::Duration after = absl::ZeroDuration()) {
    common::MutexLock lock(&mu_);
    ApplyOutcome outcome;
    outcome.kind = kind;
    outcome.requeue_after = after;
    if (kind == OutcomeKind::kRetry || kind == OutcomeKind::kTerminal) {
      outcome.status = absl::InternalError("scripted");
    }
    outcomes_.push_back(outcome);
  }
  void SetEnsureStatus(absl::Status s) {
    common::MutexLock lock(&mu_);
    ensure_status_ = std::move(s);
  }
  bool WaitForApplied(size_t n) {
    common::MutexLock lock(&mu_);
    return WaitUntil(&mu_, &cv_, [&] { return applied_.size() >= n; });
  }
  std::vector<std::string> applied() const {
    common::MutexLock lock(&mu_);
    return applied_;
  }
  std::vector<uint32_t> attempts() const {
    common::MutexLock lock(&mu_);
    return attempts_;
  }
  std::vector<std::string> ensured() const {
    common::MutexLock lock(&mu_);
    return ensured_;
  }

 private:
  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::deque<ApplyOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> applied_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> attempts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> ensured_ ABSL_GUARDED_BY(mu_);
  absl::Status ensure_status_ ABSL_GUARDED_BY(mu_);
};

class RunnerTest : public ::testing::Test {
 protected:
  RunnerTest() {
    info_.name = "webapps";
    info_.primary.group = "example.com";
    info_.primary.version = "v1";
    info_.primary.kind = "WebApp";
    info_.primary.resource = "webapps";
    info_.primary.namespaced = true;
    OwnedResource owned;
    owned.mapping.version = "v1";
    owned.mapping.kind = "ConfigMap";
    owned.mapping.resource = "configmaps";
    owned.mapping.namespaced = true;
    info_.owns.push_back(owned);
    options_.clock = &clock_;
    options_.queue.qps = 0;  // backoff only, so a FakeClock step releases a retry exactly
  }
  ~RunnerTest() override {
    if (runner_ != nullptr) runner_->Shutdown(absl::Seconds(5));
  }

  void Build(std::vector<WatchSource> watches = {}) {
    RunnerSources sources;
    sources.primary = &primaries_;
    sources.owned = {&children_};
    sources.watches = std::move(watches);
    auto runner = Runner::Create(&info_, std::move(sources), &dispatcher_, &applier_, options_);
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
  }

  // Stores a primary and delivers its add event.
  void AddPrimary(const std::shared_ptr<const cache::Object>& object) {
    primaries_.Upsert(object);
    runner_->PrimaryHandler()->OnAdd(object, false);
  }

  // Waits until the runner is idle: nothing queued, processing or in a worker.
  bool WaitIdle() {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      RunnerMetrics m = runner_->Metrics();
      if (m.active_workers == 0 && m.queue.depth == 0 && m.queue.processing == 0) return true;
      absl::SleepFor(absl::Milliseconds(1));  // polling a condition, not waiting for time
    }
    return false;
  }

  common::FakeClock clock_;
  ControllerInfo info_;
  RunnerOptions options_;
  cache::Store primaries_;
  cache::Store children_;
  FakeDispatcher dispatcher_;
  FakeApplier applier_;
  std::unique_ptr<Runner> runner_;
};

TEST_F(RunnerTest, BuildsTheCallFromTheCache) {
  options_.include_children = true;
  Build();
  children_.Upsert(Obj(R"({"metadata":{"name":"web-cm","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"uid-web","controller":true}]}})"));
  children_.Upsert(Obj(R"({"metadata":{"name":"other","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"uid-web"}]}})"));
  runner_->Start();
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  std::vector<pb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 1u);
  const pb::ReconcileCall& call = calls[0];
  EXPECT_EQ(call.controller(), "webapps");
  EXPECT_EQ(call.namespace_(), "ns");
  EXPECT_EQ(call.name(), "web");
  EXPECT_EQ(call.uid(), "uid-web");
  EXPECT_EQ(call.reason(), pb::REASON_PRIMARY_CHANGED);
  EXPECT_EQ(call.attempt(), 1u);
  EXPECT_FALSE(call.finalizing());
  EXPECT_EQ(call.trace_id().size(), 32u);
  EXPECT_EQ(call.deadline().seconds(), absl::ToUnixSeconds(clock_.Now() + absl::Seconds(30)));
  nlohmann::json object = nlohmann::json::parse(call.object());
  EXPECT_EQ(object["apiVersion"], "example.com/v1");
  EXPECT_EQ(object["kind"], "WebApp");
  EXPECT_EQ(object["metadata"]["name"], "web");
  ASSERT_EQ(call.children_size(), 1);  // only the controller reference counts
  EXPECT_EQ(call.children(0).api_version(), "v1");
  EXPECT_EQ(call.children(0).kind(), "ConfigMap");
  EXPECT_EQ(nlohmann::json::parse(call.children(0).object())["kind"], "ConfigMap");
  ASSERT_TRUE(WaitIdle());
  RunnerMetrics m = runner_->Metrics();
  EXPECT_EQ(m.reconciles_for(ReconcileResult::kSuccess), 1u);
  EXPECT_EQ(m.reconcile_time.count, 1u);
  EXPECT_EQ(m.controller, "webapps");
}

TEST_F(RunnerTest, RelatedObjectsFromWatchesThatIncludeThem) {
  options_.include_related = true;
  cache::Store secrets;
  secrets.Upsert(Obj(R"({"metadata":{"name":"s","namespace":"ns","labels":{"app":"web"}}})"));
  secrets.Upsert(Obj(R"({"metadata":{"name":"t","namespace":"ns"}})"));
  WatchSource watch;
  watch.spec.mutable_label()->set_name_label("app");
  watch.spec.set_include_in_requests(true);
  watch.mapping.version = "v1";
  watch.mapping.kind = "Secret";
  watch.store = &secrets;
  Build({watch});
  runner_->Start();
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  pb::ReconcileCall call = dispatcher_.calls()[0];
  ASSERT_EQ(call.related_objects_size(), 1);
  EXPECT_EQ(call.related_objects(0).kind(), "Secret");
  EXPECT_EQ(nlohmann::json::parse(call.related_objects(0).object())["metadata"]["name"], "s");

  // An event of the watched kind maps back to the primary.
  runner_->WatchHandler(0)->OnUpdate(secrets.Get("ns/s"), secrets.Get("ns/s"));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pb::REASON_RELATED_CHANGED);
}

TEST_F(RunnerTest, MetadataOnlyKindsAndStrippedFields) {
  options_.include_children = true;
  pb::GroupVersionKind configmaps;
  configmaps.set_version("v1");
  configmaps.set_kind("ConfigMap");
  options_.metadata_only_kinds = {configmaps};
  options_.strip_fields = {"metadata.annotations", "spec.secret"};
  Build();
  children_.Upsert(Obj(R"({"metadata":{"name":"c","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"uid-web","controller":true}]},
    "data":{"big":"x"}})"));
  runner_->Start();
  AddPrimary(Obj(R"({"metadata":{"name":"web","namespace":"ns","uid":"uid-web",
    "annotations":{"a":"b"}},"spec":{"secret":"s","keep":1}})"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  pb::ReconcileCall call = dispatcher_.calls()[0];
  nlohmann::json primary = nlohmann::json::parse(call.object());
  EXPECT_EQ(primary["kind"], "WebApp");
  EXPECT_FALSE(primary["metadata"].contains("annotations"));
  EXPECT_FALSE(primary["spec"].contains("secret"));
  EXPECT_EQ(primary["spec"]["keep"], 1);
  ASSERT_EQ(call.children_size(), 1);
  nlohmann::json child = nlohmann::json::parse(call.children(0).object());
  EXPECT_FALSE(child.contains("data"));
  EXPECT_EQ(child["kind"], "ConfigMap");
  EXPECT_EQ(child["metadata"]["name"], "c");
}

TEST_F(RunnerTest, InvalidStripFieldIsRefused) {
  options_.strip_fields = {"spec..x"};
  RunnerSources sources;
  sources.primary = &primaries_;
  sources.owned = {&children_};
  EXPECT_EQ(Runner::Create(&info_, sources, &dispatcher_, &applier_, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RunnerTest, InvalidWatchIsRefused) {
  WatchSource watch;
  watch.store = &children_;
  RunnerSources sources;
  sources.primary = &primaries_;
  sources.owned = {&children_};
  sources.watches = {watch};
  EXPECT_EQ(Runner::Create(&info_, sources, &dispatcher_, &applier_, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
  sources.watches.clear();
  sources.owned.clear();
  EXPECT_FALSE(Runner::Create(&info_, sources, &dispatcher_, &applier_, options_).ok());
}

TEST_F(RunnerTest, ConcurrencyIsCapped) {
  options_.max_concurrent_reconciles = 3;
  Build();
  dispatcher_.Hold(true);
  runner_->Start();
  for (int i = 0; i < 10; ++i) AddPrimary(WebApp(absl::StrCat("w", i)));
  ASSERT_TRUE(dispatcher_.WaitForHeld(3));
  EXPECT_EQ(runner_->Metrics().active_workers, 3);
  dispatcher_.Hold(false);
  dispatcher_.ReleaseAll();
  ASSERT_TRUE(applier_.WaitForApplied(10));
  EXPECT_EQ(dispatcher_.max_in_flight(), 3u);
  EXPECT_FALSE(dispatcher_.overlap());
}

TEST_F(RunnerTest, NeverTwoReconcilesOfOneKey) {
  options_.max_concurrent_reconciles = 4;
  Build();
  runner_->Start();
  auto object = WebApp("web");
  primaries_.Upsert(object);
  for (int i = 0; i < 500; ++i) {
    runner_->PrimaryHandler()->OnAdd(object, false);
    if (i % 7 == 0) runner_->PrimaryHandler()->OnAdd(WebApp("other"), false);
  }
  ASSERT_TRUE(WaitIdle());
  EXPECT_FALSE(dispatcher_.overlap());
  EXPECT_GE(dispatcher_.call_count(), 1u);
}

TEST_F(RunnerTest, RequeueAfterRunsAgainAfterTheDelay) {
  Build();
  runner_->Start();
  applier_.Script(OutcomeKind::kRequeueAfter, absl::Minutes(5));
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  EXPECT_EQ(runner_->Metrics().queue.delayed, 1u);
  clock_.Advance(absl::Minutes(5));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pb::REASON_REQUEUE);
  EXPECT_EQ(dispatcher_.calls()[1].attempt(), 1u);
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kRequeueAfter), 1u);
}

TEST_F(RunnerTest, RetryBacksOffAndCountsAttempts) {
  Build();
  runner_->Start();
  applier_.Script(OutcomeKind::kRetry);
  applier_.Script(OutcomeKind::kRetry);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(1));  // past the first backoff
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(3));
  std::vector<pb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].reason(), pb::REASON_RETRY);
  EXPECT_EQ(calls[1].attempt(), 2u);
  EXPECT_EQ(calls[2].attempt(), 3u);
  EXPECT_THAT(applier_.attempts(), ElementsAre(0, 1, 2));
  ASSERT_TRUE(WaitIdle());
  RunnerMetrics m = runner_->Metrics();
  EXPECT_EQ(m.reconciles_for(ReconcileResult::kError), 2u);
  EXPECT_EQ(m.reconciles_for(ReconcileResult::kSuccess), 1u);
  EXPECT_EQ(m.last_error_key, "ns/web");
  EXPECT_THAT(m.last_error, ::testing::HasSubstr("scripted"));
}

TEST_F(RunnerTest, DispatchErrorsAreRetried) {
  Build();
  runner_->Start();
  dispatcher_.FailNext(absl::UnavailableError("no plugin instance"));
  dispatcher_.FailNext(absl::InvalidArgumentError("malformed response"));
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(dispatcher_.WaitForCalls(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_THAT(applier_.applied(), IsEmpty());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(dispatcher_.WaitForCalls(2));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  EXPECT_EQ(dispatcher_.calls()[2].attempt(), 3u);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kError), 2u);
}

TEST_F(RunnerTest, RequeueNowRunsAgainAtOnce) {
  Build();
  runner_->Start();
  applier_.Script(OutcomeKind::kRequeueNow);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kRequeue), 1u);
  EXPECT_EQ(dispatcher_.calls()[1].attempt(), 1u);
}

TEST_F(RunnerTest, TerminalUntilTheObjectChanges) {
  Build();
  runner_->Start();
  applier_.Script(OutcomeKind::kTerminal);
  auto v1 = WebApp("web", "1", R"(,"labels":{"a":"1"})");
  AddPrimary(v1);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().terminal_keys, 1u);
  // Not retried, not resynced, not re-run by a status-only change.
  clock_.Advance(absl::Hours(1));
  EXPECT_FALSE(runner_->Enqueue("ns/web", pb::REASON_RESYNC));
  EXPECT_EQ(runner_->EnqueueAll(pb::REASON_RESYNC), 0u);
  auto status_only = WebApp("web", "2", R"(,"labels":{"a":"1"})", R"({"failed":true})");
  primaries_.Upsert(status_only);
  runner_->PrimaryHandler()->OnUpdate(v1, status_only);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  // A real change clears it.
  auto v3 = WebApp("web", "3", R"(,"labels":{"a":"2"})");
  primaries_.Upsert(v3);
  runner_->PrimaryHandler()->OnUpdate(status_only, v3);
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  RunnerMetrics m = runner_->Metrics();
  EXPECT_EQ(m.terminal_keys, 0u);
  EXPECT_EQ(m.reconciles_for(ReconcileResult::kTerminal), 1u);
  EXPECT_TRUE(runner_->Enqueue("ns/web", pb::REASON_RESYNC));
}

TEST_F(RunnerTest, PluginStartUnparksTerminalKeys) {
  Build();
  runner_->Start();
  applier_.Script(OutcomeKind::kTerminal);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->EnqueueAll(pb::REASON_SCHEDULE), 0u);
  EXPECT_EQ(runner_->EnqueueAll(pb::REASON_PLUGIN_STARTED), 1u);
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pb::REASON_PLUGIN_STARTED);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().terminal_keys, 0u);
}

TEST_F(RunnerTest, FinalizerEnsuredOnceBeforeTheFirstReconcile) {
  info_.finalizer = "example.com/cleanup";
  Build();
  runner_->Start();
  auto object = WebApp("web");
  AddPrimary(object);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_THAT(applier_.ensured(), ElementsAre("ns/web"));
  // The cache still shows the same version: no second call.
  EXPECT_TRUE(runner_->Enqueue("ns/web", pb::REASON_RESYNC));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(applier_.ensured().size(), 1u);
  // With the finalizer present nothing is ensured; a deletion request means finalizing.
  auto with = WebApp("web", "2", R"(,"finalizers":["example.com/cleanup"])");
  primaries_.Upsert(with);
  runner_->PrimaryHandler()->OnUpdate(object, with);
  ASSERT_TRUE(applier_.WaitForApplied(3));
  auto deleting = WebApp("web", "3",
                         R"(,"finalizers":["example.com/cleanup"],)"
                         R"("deletionTimestamp":"2026-01-01T00:00:00Z")");
  primaries_.Upsert(deleting);
  runner_->PrimaryHandler()->OnUpdate(with, deleting);
  ASSERT_TRUE(applier_.WaitForApplied(4));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(applier_.ensured().size(), 1u);
  std::vector<pb::ReconcileCall> calls = dispatcher_.calls();
  EXPECT_FALSE(calls[2].finalizing());
  EXPECT_TRUE(calls[3].finalizing());
}

TEST_F(RunnerTest, FinalizerFailureIsRetriedWithoutDispatch) {
  info_.finalizer = "example.com/cleanup";
  Build();
  applier_.SetEnsureStatus(absl::UnavailableError("api down"));
  runner_->Start();
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(applier_.ensured().size(), 1u);
  EXPECT_EQ(dispatcher_.call_count(), 0u);
  applier_.SetEnsureStatus(absl::OkStatus());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  EXPECT_EQ(applier_.ensured().size(), 2u);
}

TEST_F(RunnerTest, DeletedPrimaryGetsOneRequestThenIsForgotten) {
  Build();
  runner_->Start();
  auto object = WebApp("web");
  AddPrimary(object);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  primaries_.Delete("ns/web");
  dispatcher_.FailNext(absl::UnavailableError("plugin restarting"));
  runner_->PrimaryHandler()->OnDelete(object);
  ASSERT_TRUE(dispatcher_.WaitForCalls(2));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(1));  // the failed delivery is retried
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  std::vector<pb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 3u);
  for (int i : {1, 2}) {
    EXPECT_EQ(calls[i].reason(), pb::REASON_PRIMARY_DELETED);
    EXPECT_TRUE(calls[i].object().empty());
    EXPECT_EQ(calls[i].uid(), "uid-web");
  }
  // Forgotten: a child event for the gone primary sends nothing more.
  runner_->OwnedHandler(0)->OnAdd(Obj(R"({"metadata":{"name":"c","namespace":"ns",
    "ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"web",
    "uid":"uid-web","controller":true}]}})"),
                                  false);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 3u);
}

TEST_F(RunnerTest, ChildEventsMapToTheOwnerAndHonourPredicates) {
  options_.predicates.set_ignore_child_status_changes(true);
  Build();
  runner_->Start();
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  const std::string meta = R"("metadata":{"name":"c","namespace":"ns","generation":1,
    "ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"web",
    "uid":"uid-web","controller":true}]})";
  auto c1 = Obj("{" + meta + R"(,"status":{"ready":false}})");
  auto c2 = Obj("{" + meta + R"(,"status":{"ready":true}})");
  auto c3 = Obj("{" + meta + R"(,"spec":{"x":1},"status":{"ready":true}})");
  runner_->OwnedHandler(0)->OnUpdate(c1, c2);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  runner_->OwnedHandler(0)->OnUpdate(c2, c3);
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pb::REASON_CHILD_CHANGED);
}

TEST_F(RunnerTest, StatusOnlyPrimaryUpdateIsFiltered) {
  Build();
  runner_->Start();
  auto v1 = WebApp("web", "1");
  AddPrimary(v1);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  auto v2 = WebApp("web", "2", "", R"({"observed":1})");
  primaries_.Upsert(v2);
  runner_->PrimaryHandler()->OnUpdate(v1, v2);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
}

TEST_F(RunnerTest, NamespacesFilterKeys) {
  options_.namespaces = {"other"};
  Build();
  runner_->Start();
  AddPrimary(WebApp("web"));
  EXPECT_FALSE(runner_->Enqueue("ns/web", pb::REASON_RESYNC));
  EXPECT_EQ(runner_->EnqueueAll(pb::REASON_RESYNC), 0u);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 0u);
}

TEST_F(RunnerTest, ShutdownReturnsKeysThatNeverRan) {
  Build();
  AddPrimary(WebApp("a"));
  AddPrimary(WebApp("b"));
  runner_->EnqueueAll(pb::REASON_RESYNC, absl::Minutes(1));  // already queued: no effect
  std::vector<std::string> unrun = runner_->Shutdown(absl::Seconds(5));
  EXPECT_THAT(unrun, ElementsAre("ns/a", "ns/b"));
  EXPECT_THAT(runner_->Shutdown(absl::Seconds(5)), IsEmpty());
  EXPECT_EQ(dispatcher_.call_count(), 0u);
}

TEST_F(RunnerTest, ShutdownWaitsForInFlightAndReportsLostRequeues) {
  Build();
  dispatcher_.Hold(true);
  runner_->Start();
  applier_.Script(OutcomeKind::kRetry);
  AddPrimary(WebApp("a"));
  ASSERT_TRUE(dispatcher_.WaitForHeld(1));
  AddPrimary(WebApp("b"));  // queued behind the only worker
  std::vector<std::string> unrun;
  std::thread shutdown([&] { unrun = runner_->Shutdown(absl::Hours(1)); });
  // Shutdown waits for the in-flight reconcile; release it (its retry is refused).
  while (!runner_->ShuttingDown()) absl::SleepFor(absl::Milliseconds(1));
  dispatcher_.ReleaseAll();
  shutdown.join();
  EXPECT_THAT(unrun, ElementsAre("ns/a", "ns/b"));
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kError), 1u);
}

std::string WithTypeMetaForTest(const std::string& json) {
  return WithTypeMeta(json, "v1", "ConfigMap");
}

TEST(TypeMetaTest, AddsOnlyWhatIsMissing) {
  EXPECT_EQ(WithTypeMetaForTest(R"({"metadata":{}})"),
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{}})");
  EXPECT_EQ(WithTypeMetaForTest(R"( {"kind":"X","metadata":{}})"),
            R"( {"apiVersion":"v1","kind":"X","metadata":{}})");
  EXPECT_EQ(WithTypeMetaForTest(R"({"apiVersion":"a/b","kind":"X"})"),
            R"({"apiVersion":"a/b","kind":"X"})");
  EXPECT_EQ(WithTypeMetaForTest("{}"), R"({"apiVersion":"v1","kind":"ConfigMap"})");
  EXPECT_EQ(WithTypeMetaForTest("[1]"), "[1]");
  EXPECT_EQ(WithTypeMetaForTest("{broken"), "{broken");
}

TEST(TypeMetaTest, ShapeObject) {
  std::vector<FieldPath> strip = {*FieldPath::Parse("spec.items[].secret"),
                                  *FieldPath::Parse("status")};
  nlohmann::json shaped = nlohmann::json::parse(ShapeObject(
      R"({"metadata":{"name":"a"},"spec":{"items":[{"secret":1,"k":2},3]},"status":{}})", "v1", "X",
      false, strip));
  EXPECT_EQ(shaped, nlohmann::json::parse(R"({"apiVersion":"v1","kind":"X",
    "metadata":{"name":"a"},"spec":{"items":[{"k":2},3]}})"));
  EXPECT_EQ(nlohmann::json::parse(
                ShapeObject(R"({"metadata":{"name":"a"},"data":{}})", "v1", "X", true, {})),
            nlohmann::json::parse(R"({"apiVersion":"v1","kind":"X","metadata":{"name":"a"}})"));
  EXPECT_EQ(ShapeObject("[1]", "v1", "X", true, strip), "[1]");
  EXPECT_EQ(ShapeObject("{bad", "v1", "X", true, strip), "{bad");
}

}  // namespace
}  // namespace ctrlhost::controller
