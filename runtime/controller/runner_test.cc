// The runner: request contents, concurrency, exclusivity and every outcome kind.
#include "runtime/controller/runner.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/testing/runner_fixture.h"

namespace ctrlhost::controller {
namespace {

using ::ctrlhost::controller::testing::FakeApplier;
using ::ctrlhost::controller::testing::FakeDispatcher;
using ::ctrlhost::controller::testing::Obj;
using ::ctrlhost::controller::testing::RunnerTest;
using ::ctrlhost::controller::testing::WebApp;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST_F(RunnerTest, BuildsTheCallFromTheCache) {
  options_.include_children = true;
  Build();
  children_.Upsert(Obj(R"({"metadata":{"name":"web-cm","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"uid-web","controller":true}]}})"));
  children_.Upsert(Obj(R"({"metadata":{"name":"other","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"uid-web"}]}})"));
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  std::vector<pluginpb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 1u);
  const pluginpb::ReconcileCall& call = calls[0];
  EXPECT_EQ(call.controller(), "webapps");
  EXPECT_EQ(call.namespace_(), "ns");
  EXPECT_EQ(call.name(), "web");
  EXPECT_EQ(call.uid(), "uid-web");
  EXPECT_EQ(call.reason(), pluginpb::REASON_PRIMARY_CHANGED);
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

// Capabilities belong to the connection that answered: the applier gets the set the dispatcher
// reported with each answer, call by call (a swap or a canary can change it between two).
TEST_F(RunnerTest, ApplierSeesTheCapabilitiesOfTheAnsweringConnection) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  dispatcher_.SetCapabilities(Capabilities{pluginpb::CAPABILITY_CONDITIONS});
  AddPrimary(WebApp("a"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  dispatcher_.SetCapabilities(Capabilities{pluginpb::CAPABILITY_SERVER_SIDE_APPLY});
  AddPrimary(WebApp("b"));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  dispatcher_.SetCapabilities(std::nullopt);
  AddPrimary(WebApp("c"));
  ASSERT_TRUE(applier_.WaitForApplied(3));
  std::vector<std::optional<Capabilities>> seen = applier_.capabilities();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], Capabilities{pluginpb::CAPABILITY_CONDITIONS});
  EXPECT_EQ(seen[1], Capabilities{pluginpb::CAPABILITY_SERVER_SIDE_APPLY});
  EXPECT_FALSE(seen[2].has_value());
}

// Collects what a runner reports (RunnerOptions::recorder). Thread-safe: `mu` guards `seen`.
class CollectingRecorder : public ReconcileRecorder {
 public:
  struct Seen {
    pluginpb::ReconcileCall call;
    bool answered = false;
    std::optional<Capabilities> capabilities;
    OutcomeKind kind = OutcomeKind::kDone;
  };
  std::string Capture(const pluginpb::ReconcileCall& call) override {
    return call.SerializeAsString();
  }
  void Record(std::string captured_call, DispatchResult answer, const ApplyOutcome& outcome,
              absl::Duration took) override {
    pluginpb::ReconcileCall call;
    EXPECT_TRUE(call.ParseFromString(captured_call));
    common::MutexLock lock(&mu_);
    seen_.push_back({std::move(call), answer.response.ok(), answer.capabilities, outcome.kind});
    EXPECT_GE(took, absl::ZeroDuration());
  }
  std::vector<Seen> seen() {
    common::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  common::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
};

// Every reconcile reaches the recorder with the call as it was sent (the dispatcher got the
// same), the answer's capabilities and what became of it; a failed dispatch too.
TEST_F(RunnerTest, TheRecorderSeesEachCallItsAnswerAndTheOutcome) {
  CollectingRecorder recorder;
  options_.recorder = &recorder;
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  dispatcher_.SetCapabilities(Capabilities{pluginpb::CAPABILITY_CONDITIONS});
  AddPrimary(WebApp("a"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  dispatcher_.FailNext(absl::UnavailableError("plugin down"));
  AddPrimary(WebApp("b"));
  ASSERT_TRUE(dispatcher_.WaitForCalls(2));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(2));  // b's retry
  ASSERT_TRUE(WaitIdle());
  const std::vector<CollectingRecorder::Seen> seen = recorder.seen();
  ASSERT_EQ(seen.size(), 3u);
  const std::vector<pluginpb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 3u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].call.SerializeAsString(), calls[i].SerializeAsString()) << i;
  }
  EXPECT_TRUE(seen[0].answered);
  EXPECT_EQ(seen[0].capabilities, Capabilities{pluginpb::CAPABILITY_CONDITIONS});
  EXPECT_EQ(seen[1].call.name(), "b");
  EXPECT_FALSE(seen[1].answered);
  EXPECT_EQ(seen[1].kind, OutcomeKind::kRetry);
  EXPECT_EQ(seen[2].call.name(), "b");
  EXPECT_EQ(seen[2].call.attempt(), 2u);
  EXPECT_TRUE(seen[2].answered);
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
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  pluginpb::ReconcileCall call = dispatcher_.calls()[0];
  ASSERT_EQ(call.related_objects_size(), 1);
  EXPECT_EQ(call.related_objects(0).kind(), "Secret");
  EXPECT_EQ(nlohmann::json::parse(call.related_objects(0).object())["metadata"]["name"], "s");

  // An event of the watched kind maps back to the primary.
  runner_->WatchHandler(0)->OnUpdate(secrets.Get("ns/s"), secrets.Get("ns/s"));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_RELATED_CHANGED);
}

TEST_F(RunnerTest, MetadataOnlyKindsAndStrippedFields) {
  options_.include_children = true;
  pluginpb::GroupVersionKind configmaps;
  configmaps.set_version("v1");
  configmaps.set_kind("ConfigMap");
  options_.metadata_only_kinds = {configmaps};
  options_.strip_fields = {"metadata.annotations", "spec.secret"};
  Build();
  children_.Upsert(Obj(R"({"metadata":{"name":"c","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"uid-web","controller":true}]},
    "data":{"big":"x"}})"));
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(Obj(R"({"metadata":{"name":"web","namespace":"ns","uid":"uid-web",
    "annotations":{"a":"b"}},"spec":{"secret":"s","keep":1}})"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  pluginpb::ReconcileCall call = dispatcher_.calls()[0];
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
  ASSERT_TRUE(runner_->Start().ok());
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
  ASSERT_TRUE(runner_->Start().ok());
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
  ASSERT_TRUE(runner_->Start().ok());
  applier_.Script(OutcomeKind::kRequeueAfter, absl::Minutes(5));
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  EXPECT_EQ(runner_->Metrics().queue.delayed, 1u);
  clock_.Advance(absl::Minutes(5));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_REQUEUE);
  EXPECT_EQ(dispatcher_.calls()[1].attempt(), 1u);
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kRequeueAfter), 1u);
}

// Regression: requeue_after of 1 ns had one key reconciled ~2,300 times a second.
TEST_F(RunnerTest, RegressionATinyRequeueAfterIsRaisedToTheFloor) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  applier_.Script(OutcomeKind::kRequeueAfter, absl::Nanoseconds(1));
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().queue.delayed, 1u);
  clock_.Advance(absl::Milliseconds(99));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  EXPECT_EQ(runner_->Metrics().queue.delayed, 1u);
  clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_REQUEUE);
}

TEST_F(RunnerTest, RetryBacksOffAndCountsAttempts) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
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
  std::vector<pluginpb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].reason(), pluginpb::REASON_RETRY);
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

// Issue 13 item 4: a key whose write got 403 waited out a 49 s backoff after the permission was
// granted. Forbidden/unauthorized failures retry at least every access_denied_max_backoff.
TEST_F(RunnerTest, ForbiddenWritesRetryWithinTheAccessDeniedCap) {
  options_.queue.base_delay = absl::Minutes(1);  // any other failure waits a minute or more
  options_.access_denied_max_backoff = absl::Seconds(10);
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  const absl::Status forbidden = absl::PermissionDeniedError(
      "apply ConfigMap ns/web-config: configmaps \"web-config\" is forbidden: User \"op\" cannot "
      "patch resource \"configmaps\" in API group \"\" in the namespace \"ns\"");
  applier_.ScriptRetry(forbidden);
  applier_.ScriptRetry(absl::UnauthenticatedError("Unauthorized"));
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(applier_.WaitForApplied(3));  // granted: succeeds
  EXPECT_THAT(applier_.attempts(), ElementsAre(0, 1, 2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kError), 2u);
  EXPECT_THAT(runner_->Metrics().last_error, ::testing::HasSubstr("Unauthorized"));
}

// Issue 19: a retryable error's retry_after is the least wait before the retry; the key's
// backoff still grows underneath and a success resets it.
TEST_F(RunnerTest, RetryAfterIsWaitedOutAndTheFailureStillCounts) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  applier_.ScriptRetry(absl::UnavailableError("quota used up"), absl::Seconds(30));
  applier_.ScriptRetry(absl::UnavailableError("quota used up"), absl::Hours(2));
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().queue.delayed, 1u);
  clock_.Advance(absl::Seconds(29));  // well past the 5 ms backoff, not past the hint
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  // Two hours is capped at the maximum backoff (1000 s by default).
  clock_.Advance(absl::Seconds(999));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 2u);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(3));
  EXPECT_THAT(applier_.attempts(), ElementsAre(0, 1, 2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kError), 2u);
}

TEST_F(RunnerTest, DispatchErrorsAreRetried) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
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
  ASSERT_TRUE(runner_->Start().ok());
  applier_.Script(OutcomeKind::kRequeueNow);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kRequeue), 1u);
  EXPECT_EQ(dispatcher_.calls()[1].attempt(), 1u);
}

TEST_F(RunnerTest, RepeatedConflictsBackOff) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  for (int i = 0; i < kMaxImmediateConflicts; ++i) applier_.Script(OutcomeKind::kRequeueNow);
  AddPrimary(WebApp("web"));
  // The first conflicts in a row requeue at once; the last scripted one backs off, so nothing
  // runs until the (fake) clock moves.
  ASSERT_TRUE(applier_.WaitForApplied(kMaxImmediateConflicts));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), static_cast<size_t>(kMaxImmediateConflicts));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(applier_.WaitForApplied(kMaxImmediateConflicts + 1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().reconciles_for(ReconcileResult::kSuccess), 1u);
}

TEST_F(RunnerTest, TerminalUntilTheObjectChanges) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  applier_.Script(OutcomeKind::kTerminal);
  auto v1 = WebApp("web", "1", R"(,"labels":{"a":"1"})");
  AddPrimary(v1);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().terminal_keys, 1u);
  // Not retried, not resynced, not re-run by a status-only change.
  clock_.Advance(absl::Hours(1));
  EXPECT_FALSE(runner_->Enqueue("ns/web", pluginpb::REASON_RESYNC));
  EXPECT_EQ(runner_->EnqueueAll(pluginpb::REASON_RESYNC), 0u);
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
  EXPECT_TRUE(runner_->Enqueue("ns/web", pluginpb::REASON_RESYNC));
}

// First contact (a Go plugin's author): the NotControlled refusal says "delete it or rename the
// child", but after deleting the object in the way the key stayed parked until the primary was
// edited (the object's owner reference does not map it to the primary). Its delete event now
// queues the key; an unrelated delete does not, and the reason shows in the metrics.
TEST_F(RunnerTest, RegressionDeletingTheObjectInTheWayReconcilesAgain) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  cache::ObjectPtr stray =
      Obj(R"({"metadata":{"name":"web-cm","namespace":"ns","uid":"u-stray"}})");
  cache::ObjectPtr other = Obj(R"({"metadata":{"name":"other","namespace":"ns","uid":"u-other"}})");
  children_.Upsert(stray);
  children_.Upsert(other);
  ApplyOutcome refused;
  refused.kind = OutcomeKind::kTerminal;
  refused.status = absl::FailedPreconditionError("desired_objects[0]: ... has no controller");
  refused.reason = "NotControlled";
  refused.blocked_by.push_back({0, "ns", "web-cm"});
  applier_.ScriptOutcome(refused);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  RunnerMetrics m = runner_->Metrics();
  EXPECT_EQ(m.terminal_keys, 1u);
  EXPECT_EQ(m.blocked_keys, 1u);
  EXPECT_EQ(m.last_error_reason, "NotControlled");
  EXPECT_EQ(m.last_error_key, "ns/web");
  // Another object of the kind goes: still parked.
  children_.Delete("ns/other");
  runner_->OwnedHandler(0)->OnDelete(other);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 1u);
  // The one in the way goes: reconciled again, as a child change.
  children_.Delete("ns/web-cm");
  runner_->OwnedHandler(0)->OnDelete(stray);
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_CHILD_CHANGED);
  m = runner_->Metrics();
  EXPECT_EQ(m.terminal_keys, 0u);
  EXPECT_EQ(m.blocked_keys, 0u);
}

// The object in the way may be deleted between the applier's check and the runner's record of
// the refusal: then the key is queued at once instead of waiting for an event that came already.
TEST_F(RunnerTest, ObjectInTheWayGoneBeforeTheRefusalWasRecorded) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  ApplyOutcome refused;
  refused.kind = OutcomeKind::kTerminal;
  refused.status = absl::FailedPreconditionError("not controlled");
  refused.reason = "NotControlled";
  refused.blocked_by.push_back({0, "ns", "gone-already"});  // not in the owned store
  applier_.ScriptOutcome(refused);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().blocked_keys, 0u);
  EXPECT_EQ(runner_->Metrics().terminal_keys, 0u);
}

TEST_F(RunnerTest, PluginStartUnparksTerminalKeys) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  applier_.Script(OutcomeKind::kTerminal);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->EnqueueAll(pluginpb::REASON_SCHEDULE), 0u);
  EXPECT_EQ(runner_->EnqueueAll(pluginpb::REASON_PLUGIN_STARTED), 1u);
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_PLUGIN_STARTED);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().terminal_keys, 0u);
}

// Regression: an exception from applying a plugin's answer ended the host.
TEST_F(RunnerTest, RegressionApplierExceptionIsTerminalNotACrash) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  applier_.ScriptThrow();
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  RunnerMetrics m = runner_->Metrics();
  EXPECT_EQ(m.terminal_keys, 1u);
  EXPECT_EQ(m.reconciles_for(ReconcileResult::kTerminal), 1u);
}

// Sharding's seam: a gate that owns ns/mine and ns/later (by their uids' shard hashes), and
// lets ns/later start only once allowed (its previous owner draining, in the real ring).
class ScriptedGate : public KeyGate {
 public:
  bool Owns(uint64_t hash) const override {
    return hash == ShardHash("uid-mine") || hash == ShardHash("uid-later");
  }
  Verdict Begin(absl::string_view key, uint64_t hash) override {
    common::MutexLock lock(&mu_);
    EXPECT_EQ(hash, ShardHash(absl::StrCat("uid-", key.substr(3))));
    if (!Owns(hash) || (key == "ns/mine" && moved_)) return kNotMine;
    if (key == "ns/later" && !allowed_) return kWait;
    ++begun_;
    return kRun;
  }
  void End(absl::string_view) override {
    common::MutexLock lock(&mu_);
    ++ended_;
  }
  absl::Duration retry_after() const override { return absl::Milliseconds(100); }
  void Allow() {
    common::MutexLock lock(&mu_);
    allowed_ = true;
  }
  void MoveMine() {
    common::MutexLock lock(&mu_);
    moved_ = true;
  }
  std::pair<int, int> counts() const {
    common::MutexLock lock(&mu_);
    return {begun_, ended_};
  }

 private:
  mutable common::Mutex mu_;
  bool allowed_ ABSL_GUARDED_BY(mu_) = false;
  bool moved_ ABSL_GUARDED_BY(mu_) = false;
  int begun_ ABSL_GUARDED_BY(mu_) = 0;
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(RunnerTest, KeyGateDecidesWhichKeysRunAndWhen) {
  ScriptedGate gate;
  options_.key_gate = &gate;
  Build();
  EXPECT_TRUE(runner_->sharded());
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(WebApp("other"));  // another host's: never queued
  AddPrimary(WebApp("later"));  // ours, but waits
  AddPrimary(WebApp("mine"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  EXPECT_EQ(applier_.applied(), std::vector<std::string>{"ns/mine"});
  EXPECT_EQ(runner_->CountOwned(), 2u);
  // ns/later is kept (delayed by retry_after), not dropped: once allowed it runs.
  gate.Allow();
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(applier_.WaitForApplied(2));
  EXPECT_EQ(applier_.applied(), (std::vector<std::string>{"ns/mine", "ns/later"}));
  ASSERT_TRUE(WaitIdle());
  // Queued again after it moved away: dropped at Begin, without a reconcile.
  gate.MoveMine();
  EXPECT_EQ(runner_->EnqueueMatching(pluginpb::REASON_RESYNC, absl::ZeroDuration(),
                                     [](const cache::Object& o) { return o.name() == "mine"; }),
            1u);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(applier_.applied().size(), 2u);
  EXPECT_EQ(gate.counts(), std::make_pair(2, 2));  // every Begin that ran got its End
}

// A gate whose keys move away and come back, as a shard's do when the ring changes twice.
class MovableGate : public KeyGate {
 public:
  bool Owns(uint64_t) const override {
    common::MutexLock lock(&mu_);
    return owned_;
  }
  Verdict Begin(absl::string_view, uint64_t hash) override { return Owns(hash) ? kRun : kNotMine; }
  void End(absl::string_view) override {}
  absl::Duration retry_after() const override { return absl::Milliseconds(100); }
  void Set(bool owned) {
    common::MutexLock lock(&mu_);
    owned_ = owned;
  }

 private:
  mutable common::Mutex mu_;
  bool owned_ ABSL_GUARDED_BY(mu_) = true;
};

// A key parked as terminal on a shard host stayed parked after its shard moved away and came
// back: the ring's enqueue of the keys this host newly owns skipped it, so it was never retried
// although another host may have reconciled it, and the object may have changed, meanwhile. A
// re-acquired key is retried once, as a new owner would; a periodic resync still skips it.
TEST_F(RunnerTest, RegressionAParkedKeyReacquiredByTheShardIsRetried) {
  MovableGate gate;
  options_.key_gate = &gate;
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  applier_.Script(OutcomeKind::kTerminal);
  AddPrimary(WebApp("web"));
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().terminal_keys, 1u);
  gate.Set(false);  // the shard moves to another host ...
  gate.Set(true);   // ... and back
  const auto all = [](const cache::Object&) { return true; };
  EXPECT_EQ(runner_->EnqueueAcquired(pluginpb::REASON_RESYNC, all), 1u);
  ASSERT_TRUE(applier_.WaitForApplied(2));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_RESYNC);
  EXPECT_EQ(runner_->Metrics().terminal_keys, 0u);
  // Parked again (the default outcome is success, so park it once more), a periodic resync of
  // the same keys does not lift it.
  applier_.Script(OutcomeKind::kTerminal);
  EXPECT_TRUE(runner_->Enqueue("ns/web", pluginpb::REASON_PLUGIN_STARTED));
  ASSERT_TRUE(applier_.WaitForApplied(3));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(runner_->Metrics().terminal_keys, 1u);
  EXPECT_EQ(runner_->EnqueueMatching(pluginpb::REASON_RESYNC, absl::ZeroDuration(), all), 0u);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 3u);
}

// A sharded runner reconciles only keys whose primary's uid it knows: one never in its cache
// (another host's shard, or not created yet) is no key of this host's. A deleted primary's uid
// comes from its delete event, so its owner still reconciles the deletion, once.
TEST_F(RunnerTest, AShardedRunnerQueuesOnlyKeysWithAKnownUid) {
  MovableGate gate;  // owns every hash
  options_.key_gate = &gate;
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  EXPECT_FALSE(runner_->Enqueue("ns/ghost", pluginpb::REASON_RESYNC));
  auto web = WebApp("web");
  AddPrimary(web);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  primaries_.Delete("ns/web");
  runner_->PrimaryHandler()->OnDelete(web);
  ASSERT_TRUE(WaitIdle());
  ASSERT_EQ(dispatcher_.call_count(), 2u);
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_PRIMARY_DELETED);
  EXPECT_EQ(dispatcher_.calls()[1].uid(), "uid-web");
  // Gone and told: its uid is forgotten, so the key is nobody's again.
  EXPECT_FALSE(runner_->Enqueue("ns/web", pluginpb::REASON_RESYNC));
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 2u);
}

// The worker is busy while keys arrive: two from the initial list, a plugin start's re-enqueue
// of everything, then a change after the sync. Catching up waits behind the change.
TEST_F(RunnerTest, ChangesAfterTheSyncGoBeforeCatchingUp) {
  options_.max_concurrent_reconciles = 1;
  Build();
  dispatcher_.Hold(true);
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(WebApp("busy"));
  ASSERT_TRUE(dispatcher_.WaitForHeld(1));
  for (const char* name : {"listed-1", "listed-2"}) {
    auto object = WebApp(name);
    primaries_.Upsert(object);
    runner_->PrimaryHandler()->OnAdd(object, /*initial=*/true);
  }
  primaries_.Upsert(WebApp("restarted"));
  runner_->Enqueue("ns/restarted", pluginpb::REASON_PLUGIN_STARTED);
  AddPrimary(WebApp("changed"));
  EXPECT_EQ(runner_->Metrics().queue.depth_by_priority[0], 3u);
  EXPECT_EQ(runner_->Metrics().queue.depth_by_priority[1], 1u);
  dispatcher_.Hold(false);
  dispatcher_.ReleaseAll();
  ASSERT_TRUE(applier_.WaitForApplied(5));
  std::vector<std::string> order;
  for (const pluginpb::ReconcileCall& call : dispatcher_.calls()) order.push_back(call.name());
  EXPECT_THAT(order, ElementsAre("busy", "changed", "listed-1", "listed-2", "restarted"));
}

TEST_F(RunnerTest, WithoutPrioritiesEveryKeyIsFifo) {
  options_.max_concurrent_reconciles = 1;
  options_.priorities = false;
  Build();
  dispatcher_.Hold(true);
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(WebApp("busy"));
  ASSERT_TRUE(dispatcher_.WaitForHeld(1));
  auto listed = WebApp("listed");
  primaries_.Upsert(listed);
  runner_->PrimaryHandler()->OnAdd(listed, /*initial=*/true);
  AddPrimary(WebApp("changed"));
  EXPECT_EQ(runner_->Metrics().queue.depth_by_priority[1], 2u);
  dispatcher_.Hold(false);
  dispatcher_.ReleaseAll();
  ASSERT_TRUE(applier_.WaitForApplied(3));
  std::vector<std::string> order;
  for (const pluginpb::ReconcileCall& call : dispatcher_.calls()) order.push_back(call.name());
  EXPECT_THAT(order, ElementsAre("busy", "listed", "changed"));
}

}  // namespace
}  // namespace ctrlhost::controller
