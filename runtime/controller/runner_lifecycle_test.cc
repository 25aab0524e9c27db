// The runner: finalizers, deletes, event predicates, namespaces and shutdown.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/runner.h"
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

TEST_F(RunnerTest, FinalizerEnsuredOnceBeforeTheFirstReconcile) {
  info_.finalizer = "example.com/cleanup";
  Build();
  ASSERT_TRUE(runner_->Start().ok());
  auto object = WebApp("web");
  AddPrimary(object);
  ASSERT_TRUE(applier_.WaitForApplied(1));
  ASSERT_TRUE(WaitIdle());
  EXPECT_THAT(applier_.ensured(), ElementsAre("ns/web"));
  // The cache still shows the same version: no second call.
  EXPECT_TRUE(runner_->Enqueue("ns/web", pluginpb::REASON_RESYNC));
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
  std::vector<pluginpb::ReconcileCall> calls = dispatcher_.calls();
  EXPECT_FALSE(calls[2].finalizing());
  EXPECT_TRUE(calls[3].finalizing());
}

TEST_F(RunnerTest, FinalizerFailureIsRetriedWithoutDispatch) {
  info_.finalizer = "example.com/cleanup";
  Build();
  applier_.SetEnsureStatus(absl::UnavailableError("api down"));
  ASSERT_TRUE(runner_->Start().ok());
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
  ASSERT_TRUE(runner_->Start().ok());
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
  std::vector<pluginpb::ReconcileCall> calls = dispatcher_.calls();
  ASSERT_EQ(calls.size(), 3u);
  for (int i : {1, 2}) {
    EXPECT_EQ(calls[i].reason(), pluginpb::REASON_PRIMARY_DELETED);
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
  ASSERT_TRUE(runner_->Start().ok());
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
  EXPECT_EQ(dispatcher_.calls()[1].reason(), pluginpb::REASON_CHILD_CHANGED);
}

TEST_F(RunnerTest, StatusOnlyPrimaryUpdateIsFiltered) {
  Build();
  ASSERT_TRUE(runner_->Start().ok());
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
  ASSERT_TRUE(runner_->Start().ok());
  AddPrimary(WebApp("web"));
  EXPECT_FALSE(runner_->Enqueue("ns/web", pluginpb::REASON_RESYNC));
  EXPECT_EQ(runner_->EnqueueAll(pluginpb::REASON_RESYNC), 0u);
  ASSERT_TRUE(WaitIdle());
  EXPECT_EQ(dispatcher_.call_count(), 0u);
}

TEST_F(RunnerTest, ShutdownReturnsKeysThatNeverRan) {
  Build();
  AddPrimary(WebApp("a"));
  AddPrimary(WebApp("b"));
  runner_->EnqueueAll(pluginpb::REASON_RESYNC, absl::Minutes(1));  // already queued: no effect
  std::vector<std::string> unrun = runner_->Shutdown(absl::Seconds(5));
  EXPECT_THAT(unrun, ElementsAre("ns/a", "ns/b"));
  EXPECT_THAT(runner_->Shutdown(absl::Seconds(5)), IsEmpty());
  EXPECT_EQ(dispatcher_.call_count(), 0u);
}

TEST_F(RunnerTest, ShutdownWaitsForInFlightAndReportsLostRequeues) {
  Build();
  dispatcher_.Hold(true);
  ASSERT_TRUE(runner_->Start().ok());
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

}  // namespace
}  // namespace ctrlhost::controller
