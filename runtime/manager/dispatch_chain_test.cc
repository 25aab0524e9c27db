#include "runtime/manager/dispatch_chain.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/manager/fence.h"

namespace ctrlhost::manager {
namespace {

using ::testing::HasSubstr;

// Stands for a plugin: keeps each request's callback until the test answers it.
class HoldingPlugin : public controller::Dispatcher {
 public:
  void Dispatch(pluginpb::ReconcileCall call, absl::Time,
                controller::ReconcileCallback done) override {
    names.push_back(call.name());
    held.push_back(std::move(done));
  }
  void AnswerAll() {
    std::vector<controller::ReconcileCallback> answering;
    answering.swap(held);
    for (auto& done : answering) done(pluginpb::ReconcileResponse());
  }
  std::vector<std::string> names;
  std::vector<controller::ReconcileCallback> held;
};

pluginpb::ReconcileCall Call(const std::string& name, const std::string& version = "v1") {
  pluginpb::ReconcileCall call;
  call.set_controller("web");
  call.set_namespace_("default");
  call.set_name(name);
  call.set_object(absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
                               name, R"(","labels":{"version":")", version, R"("}}})"));
  return call;
}

// Every answer `dispatcher` gave, in order.
struct Answers {
  std::vector<absl::Status> statuses;
  controller::ReconcileCallback Callback() {
    return [this](controller::DispatchResult r) { statuses.push_back(r.response.status()); };
  }
};

uint64_t Count(const PluginRequestFigures& f, const std::string& result) {
  auto it = f.requests_total.find(result);
  return it == f.requests_total.end() ? 0 : it->second;
}

TEST(DispatchChainTest, WithoutAFenceEveryRequestReachesThePluginAndIsCounted) {
  HoldingPlugin plugin;
  DispatchChain chain(&plugin, nullptr, nullptr);
  EXPECT_FALSE(chain.fenced());
  Answers answers;
  chain.dispatcher()->Dispatch(Call("a"), absl::InfiniteFuture(), answers.Callback());
  EXPECT_EQ(chain.Figures().in_flight, 1);
  plugin.AnswerAll();
  ASSERT_EQ(answers.statuses.size(), 1u);
  EXPECT_TRUE(answers.statuses[0].ok());
  EXPECT_EQ(Count(chain.Figures(), "ok"), 1u);
  EXPECT_EQ(chain.Figures().in_flight, 0);
}

TEST(DispatchChainTest, AClosedFenceRefusesBeforeThePluginAndItsCounter) {
  HoldingPlugin plugin;
  Fence fence(common::Clock::Real());  // closed: a standby
  DispatchChain chain(&plugin, &fence, nullptr);
  EXPECT_TRUE(chain.fenced());
  Answers answers;
  chain.dispatcher()->Dispatch(Call("a"), absl::InfiniteFuture(), answers.Callback());
  ASSERT_EQ(answers.statuses.size(), 1u);
  EXPECT_EQ(answers.statuses[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answers.statuses[0].message(), HasSubstr("not the leader"));
  // The fence is outside the counter: a refused reconcile is no plugin request.
  EXPECT_TRUE(plugin.names.empty());
  EXPECT_TRUE(chain.Figures().requests_total.empty());
  EXPECT_EQ(chain.Figures().in_flight, 0);
}

TEST(DispatchChainTest, ATripAnswersInFlightReconcilesAtOnceAndTheCounterWaitsForThePlugin) {
  HoldingPlugin plugin;
  Fence fence(common::Clock::Real());
  fence.Open(absl::Now() + absl::Hours(1));
  DispatchChain chain(&plugin, &fence, nullptr);
  Answers answers;
  chain.dispatcher()->Dispatch(Call("a"), absl::InfiniteFuture(), answers.Callback());
  ASSERT_EQ(plugin.names.size(), 1u);

  fence.Trip("lost the Lease");
  ASSERT_EQ(answers.statuses.size(), 1u);
  EXPECT_EQ(answers.statuses[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answers.statuses[0].message(), HasSubstr("lost the Lease"));
  EXPECT_EQ(chain.Figures().in_flight, 1);  // the plugin has not answered yet

  plugin.AnswerAll();
  EXPECT_EQ(answers.statuses.size(), 1u);  // the late answer is dropped
  EXPECT_EQ(Count(chain.Figures(), "ok"), 1u);
  EXPECT_EQ(chain.Figures().in_flight, 0);

  chain.dispatcher()->Dispatch(Call("b"), absl::InfiniteFuture(), answers.Callback());
  ASSERT_EQ(answers.statuses.size(), 2u);
  EXPECT_EQ(answers.statuses[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(plugin.names.size(), 1u);
}

TEST(DispatchChainTest, ARouteSendsEachObjectThroughItsPluginsWholeChain) {
  HoldingPlugin v1_plugin, v2_plugin;
  Fence v2_fence(common::Clock::Real());
  v2_fence.Open(absl::Now() + absl::Hours(1));
  auto v1 = std::make_shared<DispatchChain>(&v1_plugin, nullptr, nullptr);
  auto v2 = std::make_shared<DispatchChain>(&v2_plugin, &v2_fence, nullptr);
  std::vector<DispatchChain::RouteTarget> targets;
  targets.push_back({"legacy", "web-v1", *kube::LabelSelector::Parse("version!=v2"), v1});
  targets.push_back({"v2", "web-v2", *kube::LabelSelector::Parse("version=v2"), v2});
  std::shared_ptr<RouteDispatcher> routed = DispatchChain::RouteTo("web", targets, nullptr);
  EXPECT_EQ(routed->controller(), "web");

  Answers answers;
  routed->Dispatch(Call("old", "v1"), absl::InfiniteFuture(), answers.Callback());
  routed->Dispatch(Call("new", "v2"), absl::InfiniteFuture(), answers.Callback());
  EXPECT_EQ(v1_plugin.names, std::vector<std::string>{"old"});
  EXPECT_EQ(v2_plugin.names, std::vector<std::string>{"new"});
  EXPECT_EQ(v1->Figures().in_flight, 1);
  EXPECT_EQ(v2->Figures().in_flight, 1);

  // The route goes through the target's fence: tripping v2's cancels only v2's reconcile.
  v2_fence.Trip("operator fenced");
  ASSERT_EQ(answers.statuses.size(), 1u);
  EXPECT_THAT(answers.statuses[0].message(), HasSubstr("operator fenced"));
  routed->Dispatch(Call("newer", "v2"), absl::InfiniteFuture(), answers.Callback());
  ASSERT_EQ(answers.statuses.size(), 2u);
  EXPECT_EQ(answers.statuses[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(v2_plugin.names.size(), 1u);

  v1_plugin.AnswerAll();
  v2_plugin.AnswerAll();
  ASSERT_EQ(answers.statuses.size(), 3u);
  EXPECT_TRUE(answers.statuses[2].ok());
  EXPECT_EQ(routed->Figures().routed["legacy"], 1u);
}

}  // namespace
}  // namespace ctrlhost::manager
