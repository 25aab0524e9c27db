#include "runtime/manager/fence.h"

#include <thread>
#include <utility>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"

namespace ctrlhost::manager {
namespace {

// Holds every call's callback, answers none by itself.
class HoldingDispatcher : public controller::Dispatcher {
 public:
  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override {
    held.push_back(std::move(done));
  }
  std::vector<controller::ReconcileCallback> held;
};

TEST(FenceTest, ClosedUntilOpenedThenUntilValidUntil) {
  common::FakeClock clock;
  Fence fence(&clock);
  absl::StatusOr<absl::Time> deadline = fence.WriteDeadline();
  ASSERT_FALSE(deadline.ok());
  EXPECT_EQ(deadline.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(deadline.status().message(), "not the leader: standby");

  const absl::Time until = clock.Now() + absl::Seconds(10);
  fence.Open(until);
  deadline = fence.WriteDeadline();
  ASSERT_TRUE(deadline.ok()) << deadline.status();
  EXPECT_EQ(*deadline, until);

  clock.Advance(absl::Seconds(9));
  EXPECT_TRUE(fence.open());
  fence.Extend(clock.Now() + absl::Seconds(10));  // a renewal
  clock.Advance(absl::Seconds(9));
  EXPECT_TRUE(fence.open());
  clock.Advance(absl::Seconds(1));  // renewDeadline passed without a renewal
  deadline = fence.WriteDeadline();
  ASSERT_FALSE(deadline.ok());
  EXPECT_NE(deadline.status().message().find("not renewed in time"), std::string::npos)
      << deadline.status();
}

TEST(FenceTest, TripIsPermanent) {
  common::FakeClock clock;
  Fence fence(&clock);
  fence.Open(clock.Now() + absl::Seconds(10));
  fence.Trip("lost the Lease");
  EXPECT_TRUE(fence.tripped());
  fence.Open(clock.Now() + absl::Seconds(10));
  absl::StatusOr<absl::Time> deadline = fence.WriteDeadline();
  ASSERT_FALSE(deadline.ok());
  EXPECT_EQ(deadline.status().message(), "not the leader: lost the Lease");
}

// A Lease handed over (operator_balance.h): closed and in-flight cancelled like a trip, but the
// next acquisition opens the fence again; a trip after that is still final.
TEST(FenceTest, CloseCancelsInFlightAndReopensAtTheNextOpen) {
  common::FakeClock clock;
  Fence fence(&clock);
  fence.Open(clock.Now() + absl::Seconds(10));
  HoldingDispatcher plugin;
  FencedDispatcher fenced(&plugin, &fence);
  std::vector<absl::Status> answers;
  fenced.Dispatch({}, clock.Now() + absl::Seconds(1),
                  [&](controller::DispatchResult r) { answers.push_back(r.response.status()); });
  ASSERT_EQ(plugin.held.size(), 1u);

  fence.Close("handed over to balance the hosts");
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].message(), "reconcile cancelled: handed over to balance the hosts");
  EXPECT_FALSE(fence.open());
  EXPECT_FALSE(fence.tripped());
  absl::StatusOr<absl::Time> deadline = fence.WriteDeadline();
  ASSERT_FALSE(deadline.ok());
  EXPECT_EQ(deadline.status().message(), "not the leader: handed over to balance the hosts");
  fenced.Dispatch({}, clock.Now() + absl::Seconds(1),
                  [&](controller::DispatchResult r) { answers.push_back(r.response.status()); });
  ASSERT_EQ(answers.size(), 2u);  // refused without reaching the plugin
  EXPECT_EQ(plugin.held.size(), 1u);

  clock.Advance(absl::Seconds(30));
  const absl::Time until = clock.Now() + absl::Seconds(10);
  fence.Open(until);  // acquired again
  deadline = fence.WriteDeadline();
  ASSERT_TRUE(deadline.ok()) << deadline.status();
  EXPECT_EQ(*deadline, until);

  fence.Trip("lost the Lease");
  fence.Open(clock.Now() + absl::Seconds(10));
  EXPECT_TRUE(fence.tripped());
  EXPECT_FALSE(fence.open());
}

TEST(FencedDispatcherTest, RefusesWhileClosedWithoutReachingThePlugin) {
  common::FakeClock clock;
  Fence fence(&clock);
  HoldingDispatcher plugin;
  FencedDispatcher fenced(&plugin, &fence);
  absl::Status got = absl::OkStatus();
  int calls = 0;
  fenced.Dispatch({}, clock.Now() + absl::Seconds(1), [&](controller::DispatchResult r) {
    ++calls;
    got = r.response.status();
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(plugin.held.empty());
}

TEST(FencedDispatcherTest, TripCancelsInFlightAndDropsTheLateAnswer) {
  common::FakeClock clock;
  Fence fence(&clock);
  fence.Open(clock.Now() + absl::Seconds(10));
  HoldingDispatcher plugin;
  FencedDispatcher fenced(&plugin, &fence);
  std::vector<absl::Status> answers;
  for (int i = 0; i < 2; ++i) {
    fenced.Dispatch({}, clock.Now() + absl::Seconds(1),
                    [&](controller::DispatchResult r) { answers.push_back(r.response.status()); });
  }
  ASSERT_EQ(plugin.held.size(), 2u);
  plugin.held[0](pluginpb::ReconcileResponse());  // answered before the fence tripped
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok());

  fence.Trip("leadership lost");
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(answers[1].message(), "reconcile cancelled: leadership lost");
  plugin.held[1](pluginpb::ReconcileResponse());  // the plugin answers late: dropped
  EXPECT_EQ(answers.size(), 2u);
}

// Records, for each call, the write deadline the API client would see on this thread.
class RecordingApplier : public controller::ResponseApplier {
 public:
  controller::ApplyOutcome Apply(const controller::ReconcileContext&,
                                 const pluginpb::ReconcileResponse&) override {
    seen.push_back(CurrentWriteDeadline());
    return {};
  }
  absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(const controller::ReconcileContext&) override {
    seen.push_back(CurrentWriteDeadline());
    return cache::ObjectPtr();
  }
  void RecordTerminal(const controller::ReconcileContext&, const absl::Status&) override {
    seen.push_back(CurrentWriteDeadline());
  }
  std::vector<absl::StatusOr<absl::Time>> seen;
};

TEST(FencedApplierTest, RefusesWhileClosedAndFencesTheWritesOfItsThread) {
  common::FakeClock clock;
  Fence fence(&clock);
  RecordingApplier target;
  FencedApplier applier(&target, &fence);
  controller::ReconcileContext context;

  // A standby's operator: nothing reaches the applier, the runner retries.
  controller::ApplyOutcome outcome = applier.Apply(context, pluginpb::ReconcileResponse());
  EXPECT_EQ(outcome.kind, controller::OutcomeKind::kRetry);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcome.status.message(), "nothing of the answer written: not the leader: standby");
  EXPECT_EQ(applier.EnsureFinalizer(context).status().code(), absl::StatusCode::kUnavailable);
  applier.RecordTerminal(context, absl::InternalError("x"));
  EXPECT_TRUE(target.seen.empty());

  // Leading: the applier's writes see the fence's deadline; outside it, no fence.
  const absl::Time until = clock.Now() + absl::Seconds(10);
  fence.Open(until);
  EXPECT_EQ(applier.Apply(context, pluginpb::ReconcileResponse()).kind,
            controller::OutcomeKind::kDone);
  ASSERT_TRUE(applier.EnsureFinalizer(context).ok());
  applier.RecordTerminal(context, absl::InternalError("x"));
  ASSERT_EQ(target.seen.size(), 3u);
  for (const auto& deadline : target.seen) {
    ASSERT_TRUE(deadline.ok()) << deadline.status();
    EXPECT_EQ(*deadline, until);
  }
  EXPECT_EQ(ScopedWriteFence::Current(), nullptr);
  ASSERT_TRUE(CurrentWriteDeadline().ok());
  EXPECT_EQ(*CurrentWriteDeadline(), absl::InfiniteFuture());

  // The fence closes while a write is under way: the client sees it closed at once.
  {
    ScopedWriteFence scope(&fence);
    clock.Advance(absl::Seconds(10));
    absl::StatusOr<absl::Time> deadline = CurrentWriteDeadline();
    ASSERT_FALSE(deadline.ok());
    EXPECT_NE(deadline.status().message().find("not renewed in time"), std::string::npos);
  }
  EXPECT_EQ(applier.Apply(context, pluginpb::ReconcileResponse()).kind,
            controller::OutcomeKind::kRetry);
  EXPECT_EQ(target.seen.size(), 3u);
}

TEST(ScopedWriteFenceTest, NestsAndIsPerThread) {
  common::FakeClock clock;
  Fence outer(&clock);
  Fence inner(&clock);
  ScopedWriteFence a(&outer);
  {
    ScopedWriteFence b(&inner);
    EXPECT_EQ(ScopedWriteFence::Current(), &inner);
    const Fence* other_thread = &inner;
    std::thread([&other_thread] { other_thread = ScopedWriteFence::Current(); }).join();
    EXPECT_EQ(other_thread, nullptr);
  }
  EXPECT_EQ(ScopedWriteFence::Current(), &outer);
}

}  // namespace
}  // namespace ctrlhost::manager
