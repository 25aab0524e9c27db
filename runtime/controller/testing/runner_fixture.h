// Test doubles and the fixture shared by the runner's tests: a dispatcher that answers at once
// or holds calls, an applier with scripted outcomes, and a runner over in-memory stores driven
// by a FakeClock.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_TESTING_RUNNER_FIXTURE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_TESTING_RUNNER_FIXTURE_H_

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "runtime/cache/object.h"
#include "runtime/cache/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/runner.h"

namespace ctrlhost::controller::testing {

inline std::shared_ptr<const cache::Object> Obj(const std::string& json) {
  cache::ObjectParser parser;
  absl::StatusOr<std::shared_ptr<const cache::Object>> object = parser.Parse(json);
  EXPECT_TRUE(object.ok()) << object.status() << " for " << json;
  return object.ok() ? *object : nullptr;
}

// A WebApp as a list item (no apiVersion/kind).
inline std::shared_ptr<const cache::Object> WebApp(const std::string& name,
                                                   const std::string& rv = "1",
                                                   const std::string& meta_extra = "",
                                                   const std::string& status = "{}") {
  return Obj(R"({"metadata":{"name":")" + name + R"(","namespace":"ns","uid":"uid-)" + name +
             R"(","generation":1,"resourceVersion":")" + rv + "\"" + meta_extra +
             R"(},"spec":{},"status":)" + status + "}");
}

// Blocks in tests wait on conditions with a bounded real-time deadline.
inline bool WaitUntil(common::Mutex* mu, common::CondVar* cv,
                      const std::function<bool()>& condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!condition()) {
    if (cv->WaitWithDeadline(mu, deadline) && !condition()) return false;
  }
  return true;
}

// Answers calls at once (with the next scripted result) or holds them until released.
class FakeDispatcher : public Dispatcher {
 public:
  void Dispatch(pluginpb::ReconcileCall call, absl::Time, ReconcileCallback done) override {
    const std::string key = cache::ObjectKey(call.namespace_(), call.name());
    absl::StatusOr<pluginpb::ReconcileResponse> result = pluginpb::ReconcileResponse();
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
    done(DispatchResult(std::move(result), capabilities()));
  }

  // The capabilities the answers say were in effect (nullopt, the default: unchecked).
  void SetCapabilities(std::optional<Capabilities> capabilities) {
    common::MutexLock lock(&mu_);
    capabilities_ = std::move(capabilities);
  }
  std::optional<Capabilities> capabilities() const {
    common::MutexLock lock(&mu_);
    return capabilities_;
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
    for (auto& h : held) h.second(pluginpb::ReconcileResponse());
  }
  bool WaitForCalls(size_t n) {
    common::MutexLock lock(&mu_);
    return WaitUntil(&mu_, &cv_, [&] { return calls_.size() >= n; });
  }
  bool WaitForHeld(size_t n) {
    common::MutexLock lock(&mu_);
    return WaitUntil(&mu_, &cv_, [&] { return held_.size() >= n; });
  }
  std::vector<pluginpb::ReconcileCall> calls() const {
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
  std::vector<pluginpb::ReconcileCall> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, ReconcileCallback>> held_ ABSL_GUARDED_BY(mu_);
  std::deque<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> in_flight_keys_ ABSL_GUARDED_BY(mu_);
  size_t max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool overlap_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Capabilities> capabilities_ ABSL_GUARDED_BY(mu_);
};

// Returns scripted outcomes (kDone when the script is empty) and counts calls.
class FakeApplier : public ResponseApplier {
 public:
  ApplyOutcome Apply(const ReconcileContext& context, const pluginpb::ReconcileResponse&) override {
    common::MutexLock lock(&mu_);
    applied_.push_back(cache::ObjectKey(context.namespace_, context.name));
    attempts_.push_back(context.attempt);
    capabilities_.push_back(context.capabilities);
    cv_.SignalAll();
    if (throw_next_) {
      throw_next_ = false;
      throw std::runtime_error("scripted exception");
    }
    if (outcomes_.empty()) return ApplyOutcome();
    ApplyOutcome outcome = outcomes_.front();
    outcomes_.pop_front();
    return outcome;
  }
  absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(const ReconcileContext& context) override {
    common::MutexLock lock(&mu_);
    ensured_.push_back(cache::ObjectKey(context.namespace_, context.name));
    if (!ensure_status_.ok()) return ensure_status_;
    return cache::ObjectPtr();
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
  // A retryable failure with `status` (e.g. the API server's 403 for a write) and the
  // plugin's retry_after hint (zero: none).
  void ScriptRetry(absl::Status status, absl::Duration retry_after = absl::ZeroDuration()) {
    common::MutexLock lock(&mu_);
    ApplyOutcome outcome;
    outcome.kind = OutcomeKind::kRetry;
    outcome.status = std::move(status);
    outcome.retry_after = retry_after;
    outcomes_.push_back(outcome);
  }
  // The next Apply throws, as a library working on plugin data might.
  // The next outcome exactly as given (e.g. a NotControlled refusal with blocked_by).
  void ScriptOutcome(ApplyOutcome outcome) {
    common::MutexLock lock(&mu_);
    outcomes_.push_back(std::move(outcome));
  }
  void ScriptThrow() {
    common::MutexLock lock(&mu_);
    throw_next_ = true;
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
  // ReconcileContext::capabilities of each Apply.
  std::vector<std::optional<Capabilities>> capabilities() const {
    common::MutexLock lock(&mu_);
    return capabilities_;
  }

 private:
  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::deque<ApplyOutcome> outcomes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> applied_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> attempts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<Capabilities>> capabilities_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> ensured_ ABSL_GUARDED_BY(mu_);
  absl::Status ensure_status_ ABSL_GUARDED_BY(mu_);
  bool throw_next_ ABSL_GUARDED_BY(mu_) = false;
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

}  // namespace ctrlhost::controller::testing

#endif  // CTRLHOST_RUNTIME_CONTROLLER_TESTING_RUNNER_FIXTURE_H_
