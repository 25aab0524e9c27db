// The applier against the embedded API server: status and conditions, events, finalizers,
// errors, scope and concurrency.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/apply/conditions.h"
#include "runtime/controller/apply/testing/applier_fixture.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::ApplierTest;
using testing::CachedObject;
using testing::ConfigMapJson;
using testing::ConfigMaps;
using testing::ContextFor;
using ::testing::HasSubstr;
using testing::Ref;
using testing::WebApps;

pluginpb::Condition MakeCondition(const std::string& type, pluginpb::ConditionStatus status,
                                  const std::string& reason, const std::string& message = "") {
  pluginpb::Condition c;
  c.set_type(type);
  c.set_status(status);
  c.set_reason(reason);
  c.set_message(message);
  return c;
}

TEST_F(ApplierTest, StatusAndConditionsMergeRules) {
  CreateWebApp("web");
  // Conditions set by someone else are kept.
  kube::ResourceRef status_ref = WebApps(ns_, "web");
  status_ref.subresource = "status";
  ASSERT_TRUE(client_
                  ->Patch(status_ref, kube::PatchType::kMerge,
                          R"({"status":{"conditions":[{"type":"External","status":"True",
                              "reason":"Set","lastTransitionTime":"2020-01-01T00:00:00Z"}]}})")
                  .ok());
  const std::string t0 = Rfc3339Time(clock_.Now());
  pluginpb::ReconcileResponse response;
  response.set_status(R"({"phase":"Pending"})");
  *response.add_conditions() = MakeCondition("Ready", pluginpb::CONDITION_STATUS_FALSE, "Waiting");
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 1u);  // one status write
  json live = Live("web");
  EXPECT_EQ(live["status"]["phase"], "Pending");
  EXPECT_EQ(live["status"]["observedGeneration"], live["metadata"]["generation"]);
  ASSERT_FALSE(Condition(live, "External").is_null());
  json ready = Condition(live, "Ready");
  ASSERT_FALSE(ready.is_null());
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["lastTransitionTime"], t0);
  EXPECT_EQ(ready["observedGeneration"], live["metadata"]["generation"]);

  // Same status, new reason, later: lastTransitionTime kept.
  clock_.Advance(absl::Minutes(5));
  pluginpb::ReconcileResponse same;
  *same.add_conditions() =
      MakeCondition("Ready", pluginpb::CONDITION_STATUS_FALSE, "StillWaiting", "m");
  ASSERT_EQ(applier_.Apply(Context("web"), same).kind, OutcomeKind::kDone);
  live = Live("web");
  EXPECT_EQ(Condition(live, "Ready")["lastTransitionTime"], t0);
  EXPECT_EQ(Condition(live, "Ready")["reason"], "StillWaiting");
  EXPECT_EQ(live["status"]["phase"], "Pending");  // a merge patch: other fields stay

  // Changed status: lastTransitionTime moves to now.
  clock_.Advance(absl::Minutes(5));
  pluginpb::ReconcileResponse changed;
  *changed.add_conditions() = MakeCondition("Ready", pluginpb::CONDITION_STATUS_TRUE, "Up");
  ASSERT_EQ(applier_.Apply(Context("web"), changed).kind, OutcomeKind::kDone);
  live = Live("web");
  EXPECT_EQ(Condition(live, "Ready")["lastTransitionTime"], Rfc3339Time(clock_.Now()));
  EXPECT_EQ(Condition(live, "Ready")["status"], "True");
  EXPECT_FALSE(Condition(live, "External").is_null());
}

TEST_F(ApplierTest, EventsAreRecordedAndAggregated) {
  const json primary = json::parse(CreateWebApp("web"));
  pluginpb::ReconcileResponse response;
  pluginpb::Event* event = response.add_events();
  event->set_type(pluginpb::EVENT_TYPE_NORMAL);
  event->set_reason("Scaled");
  event->set_message("scaled to 2");
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  clock_.Advance(absl::Minutes(1));
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  std::vector<json> events = EventsWithReason("Scaled");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 2);
  EXPECT_EQ(events[0]["type"], "Normal");
  EXPECT_EQ(events[0]["message"], "scaled to 2");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "WebApp");
  EXPECT_EQ(events[0]["involvedObject"]["apiVersion"], "ctrlhost.dev/v1");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "web");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], primary["metadata"]["uid"]);
  EXPECT_EQ(events[0]["lastTimestamp"], Rfc3339Time(clock_.Now()));
  EXPECT_NE(events[0]["firstTimestamp"], events[0]["lastTimestamp"]);

  // A different message is another event; the same one after the window is a new event.
  response.mutable_events(0)->set_message("scaled to 3");
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  EXPECT_EQ(EventsWithReason("Scaled").size(), 2u);
  clock_.Advance(absl::Minutes(11));
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  EXPECT_EQ(EventsWithReason("Scaled").size(), 3u);

  // An aggregated event deleted meanwhile is created again.
  for (const json& e : EventsWithReason("Scaled")) {
    ASSERT_TRUE(client_->Delete(Ref("", "v1", "events", ns_, e["metadata"]["name"])).ok());
  }
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  events = EventsWithReason("Scaled");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 1);
}

// Regression (attack run, item 2): control characters in a plugin's error message, event
// reason and message, and condition message reached Events and status.conditions verbatim:
// `kubectl describe` then printed a forged line and ran the terminal escape. They are escaped
// where plugin text enters them (\n, \x1b, \u009b visible), and the rest is kept as written.
TEST_F(ApplierTest, RegressionControlCharactersInPluginTextAreEscaped) {
  CreateWebApp("web");
  const std::string forged =
      "db down\nNormal  Healthy  all good\x1b[2J\xc2\x9b"
      "31m";
  const std::string shown = "db down\\nNormal  Healthy  all good\\x1b[2J\\u009b31m";
  pluginpb::ReconcileResponse response;
  pluginpb::Event* event = response.add_events();
  event->set_type(pluginpb::EVENT_TYPE_WARNING);
  event->set_reason("Fail\x1b[0m\r");
  event->set_message(forged);
  *response.add_conditions() =
      MakeCondition("Ready", pluginpb::CONDITION_STATUS_FALSE, "Down", forged);
  response.mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
  response.mutable_error()->set_reason("BackendDown");
  response.mutable_error()->set_message(absl::StrCat("terminal: ", forged));
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kTerminal) << outcome.status;

  std::vector<json> events = EventsWithReason("Fail\\x1b[0m\\r");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["message"], shown);
  events = EventsWithReason("BackendDown");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["message"], absl::StrCat("terminal: ", shown));

  json live = Live("web");
  EXPECT_EQ(Condition(live, "Ready")["message"], shown);
  EXPECT_EQ(Condition(live, "Reconciled")["message"], absl::StrCat("terminal: ", shown));
  EXPECT_EQ(Condition(live, "Reconciled")["reason"], "BackendDown");
}

TEST_F(ApplierTest, FinalizerAddAndRelease) {
  CreateWebApp("web");
  ASSERT_TRUE(applier_.EnsureFinalizer(Context("web")).ok());
  json live = Live("web");
  EXPECT_EQ(live["metadata"]["finalizers"], json::array({"ctrlhost.dev/cleanup"}));
  const std::string rv = live["metadata"]["resourceVersion"];
  ASSERT_TRUE(applier_.EnsureFinalizer(Context("web")).ok());  // idempotent: no write
  EXPECT_EQ(Live("web")["metadata"]["resourceVersion"], rv);

  // Another finalizer already there: ours is appended.
  CreateWebApp("two", {{"finalizers", {"example.com/first"}}});
  ASSERT_TRUE(applier_.EnsureFinalizer(Context("two")).ok());
  EXPECT_EQ(Live("two")["metadata"]["finalizers"],
            json::array({"example.com/first", "ctrlhost.dev/cleanup"}));

  // Deletion waits for the finalizer; finalized releases it and the object goes.
  ASSERT_TRUE(client_->Delete(WebApps(ns_, "web")).ok());
  ReconcileContext finalizing = Context("web");
  ASSERT_FALSE(finalizing.primary->deletion_timestamp().empty());
  pluginpb::ReconcileResponse done;
  done.set_finalized(true);
  ApplyOutcome outcome = applier_.Apply(finalizing, done);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_TRUE(outcome.finalizer_released);
  EXPECT_TRUE(kube::IsNotFound(client_->Get(WebApps(ns_, "web")).status()));

  // The finalizers changed since the request was built: conflict, requeue, nothing removed.
  ASSERT_TRUE(client_->Delete(WebApps(ns_, "two")).ok());
  ReconcileContext stale = Context("two");
  ASSERT_TRUE(client_
                  ->Patch(WebApps(ns_, "two"), kube::PatchType::kJson,
                          R"([{"op":"remove","path":"/metadata/finalizers/0"}])")
                  .ok());
  outcome = applier_.Apply(stale, done);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRequeueNow) << outcome.status;
  EXPECT_FALSE(outcome.finalizer_released);
  EXPECT_EQ(Live("two")["metadata"]["finalizers"], json::array({"ctrlhost.dev/cleanup"}));
  outcome = applier_.Apply(Context("two"), done);
  EXPECT_TRUE(outcome.finalizer_released);
  EXPECT_TRUE(kube::IsNotFound(client_->Get(WebApps(ns_, "two")).status()));
}

TEST_F(ApplierTest, PrimaryGone) {
  CreateWebApp("web");
  ReconcileContext stale = Context("web");
  ASSERT_TRUE(client_->Delete(WebApps(ns_, "web")).ok());
  pluginpb::ReconcileResponse status;
  status.set_status(R"({"phase":"Ready"})");
  ApplyOutcome outcome = applier_.Apply(stale, status);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(applier_.EnsureFinalizer(stale).status().code(), absl::StatusCode::kNotFound);

  // The answer to a PRIMARY_DELETED request: events and requeue only.
  ReconcileContext gone = ContextFor(&webapp_, nullptr, ns_, "web");
  pluginpb::ReconcileResponse forget;
  pluginpb::Event* event = forget.add_events();
  event->set_type(pluginpb::EVENT_TYPE_NORMAL);
  event->set_reason("Forgotten");
  outcome = applier_.Apply(gone, forget);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(EventsWithReason("Forgotten").size(), 1u);
}

TEST_F(ApplierTest, ErrorKinds) {
  CreateWebApp("web");
  // Retryable: the rest is still written, a Warning event, retry.
  pluginpb::ReconcileResponse retryable;
  retryable.set_status(R"({"phase":"Degraded"})");
  retryable.add_desired_objects(ConfigMapJson("cfg"));
  retryable.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  retryable.mutable_error()->set_message("database unreachable");
  retryable.mutable_requeue_after()->set_seconds(30);  // ignored with an error
  ApplyOutcome outcome = applier_.Apply(Context("web"), retryable);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry);
  EXPECT_EQ(outcome.status.message(), "database unreachable");
  EXPECT_EQ(outcome.retry_after, absl::ZeroDuration());
  EXPECT_EQ(Live("web")["status"]["phase"], "Degraded");
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "cfg")).ok());
  ASSERT_EQ(EventsWithReason("ReconcileError").size(), 1u);
  EXPECT_TRUE(Condition(Live("web"), "Reconciled").is_null());

  // Terminal: Reconciled=False (TerminalError) and a Warning event.
  pluginpb::ReconcileResponse terminal;
  terminal.mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
  terminal.mutable_error()->set_message("spec.image is not allowed");
  outcome = applier_.Apply(Context("web"), terminal);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition);
  json reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["status"], "False");
  EXPECT_EQ(reconciled["reason"], "TerminalError");
  EXPECT_EQ(reconciled["message"], "spec.image is not allowed");
  EXPECT_EQ(EventsWithReason("ReconcileError").size(), 2u);

  // The next response without error sets it back to True.
  pluginpb::ReconcileResponse fine;
  fine.mutable_requeue_after()->set_seconds(30);
  outcome = applier_.Apply(Context("web"), fine);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRequeueAfter);
  EXPECT_EQ(outcome.requeue_after, absl::Seconds(30));
  reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["status"], "True");
  EXPECT_EQ(reconciled["reason"], "Succeeded");
  // And once True, a clean response writes nothing.
  outcome = applier_.Apply(Context("web"), pluginpb::ReconcileResponse());
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone);
  EXPECT_EQ(outcome.writes, 0u);
}

// The reason names the Warning event and Reconciled=False; retry_after reaches the outcome.
TEST_F(ApplierTest, ErrorReasonAndRetryAfter) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse retryable;
  retryable.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  retryable.mutable_error()->set_message("the bucket quota is used up");
  retryable.mutable_error()->set_reason("QuotaExceeded");
  retryable.mutable_error()->mutable_retry_after()->set_seconds(45);
  ApplyOutcome outcome = applier_.Apply(Context("web"), retryable);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry);
  EXPECT_EQ(outcome.retry_after, absl::Seconds(45));
  std::vector<json> events = EventsWithReason("QuotaExceeded");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["message"], "the bucket quota is used up");
  EXPECT_TRUE(EventsWithReason("ReconcileError").empty());

  pluginpb::ReconcileResponse terminal;
  terminal.mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
  terminal.mutable_error()->set_message("spec.region names no region");
  terminal.mutable_error()->set_reason("UnknownRegion");
  outcome = applier_.Apply(Context("web"), terminal);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  json reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["status"], "False");
  EXPECT_EQ(reconciled["reason"], "UnknownRegion");
  EXPECT_EQ(reconciled["message"], "spec.region names no region");
  EXPECT_EQ(EventsWithReason("UnknownRegion").size(), 1u);

  // A bad reason is refused as a whole: nothing but the InvalidResponse records.
  pluginpb::ReconcileResponse invalid;
  invalid.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  invalid.mutable_error()->set_reason("not camel case");
  outcome = applier_.Apply(Context("web"), invalid);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(Condition(Live("web"), "Reconciled")["reason"], "InvalidResponse");
  EXPECT_EQ(EventsWithReason("InvalidResponse").size(), 1u);
}

TEST_F(ApplierTest, RecordTerminal) {
  CreateWebApp("web");
  applier_.RecordTerminal(Context("web"),
                          absl::InvalidArgumentError("the plugin's answers keep being malformed"));
  std::vector<json> events = EventsWithReason("ReconcileError");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  json reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["reason"], "TerminalError");
  EXPECT_EQ(reconciled["message"], "the plugin's answers keep being malformed");
}

TEST_F(ApplierTest, NamespacePrimaryOwnsObjectsInsideIt) {
  ControllerInfo tenant = testing::TenantController();
  const std::string ns_text = client_->Get(Ref("", "v1", "namespaces", "", ns_)).value();
  ReconcileContext context = ContextFor(&tenant, CachedObject(ns_text));
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("quota"));
  ApplyOutcome outcome = applier_.Apply(context, response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  json cm = Parse(client_->Get(ConfigMaps(ns_, "quota")));
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["kind"], "Namespace");
}

// Workers share one applier (and its event recorder); under TSan this checks the locking.
TEST_F(ApplierTest, ConcurrentAppliesShareOneApplier) {
  constexpr int kWorkers = 4;
  constexpr int kRounds = 5;
  for (int w = 0; w < kWorkers; ++w) CreateWebApp(absl::StrCat("app", w));
  std::vector<ReconcileContext> contexts;
  for (int w = 0; w < kWorkers; ++w) contexts.push_back(Context(absl::StrCat("app", w)));
  std::vector<std::thread> workers;
  std::vector<int> done(kWorkers, 0);
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      pluginpb::ReconcileResponse response;
      response.add_desired_objects(ConfigMapJson(absl::StrCat("app", w, "-config")));
      pluginpb::Event* event = response.add_events();
      event->set_type(pluginpb::EVENT_TYPE_NORMAL);
      event->set_reason("Synced");
      event->set_message("synced");
      for (int round = 0; round < kRounds; ++round) {
        if (applier_.Apply(contexts[w], response).kind == OutcomeKind::kDone) ++done[w];
      }
    });
  }
  for (std::thread& t : workers) t.join();
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(done[w], kRounds) << w;
  std::vector<json> events = EventsWithReason("Synced");
  ASSERT_EQ(events.size(), static_cast<size_t>(kWorkers));  // one aggregated event each
  for (const json& e : events) EXPECT_EQ(e["count"], kRounds);
}

}  // namespace
}  // namespace ctrlhost::controller::apply
