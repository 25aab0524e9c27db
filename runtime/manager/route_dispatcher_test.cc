#include "runtime/manager/route_dispatcher.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records the keys it was sent and answers each with an empty response.
class RecordingDispatcher : public controller::Dispatcher {
 public:
  void Dispatch(pluginpb::ReconcileCall call, absl::Time,
                controller::ReconcileCallback done) override {
    keys.push_back(call.name());
    done(pluginpb::ReconcileResponse());
  }
  std::vector<std::string> keys;
};

pluginpb::ReconcileCall Call(const std::string& name, const std::string& labels_json,
                             bool deleting = false) {
  pluginpb::ReconcileCall call;
  call.set_controller("web");
  call.set_namespace_("default");
  call.set_name(name);
  call.set_object(absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name, R"(","labels":)",
      labels_json, deleting ? R"(,"deletionTimestamp":"2026-01-01T00:00:00Z")" : "", "}}"));
  return call;
}

pluginpb::ReconcileCall Gone(const std::string& name) {
  pluginpb::ReconcileCall call;
  call.set_namespace_("default");
  call.set_name(name);
  return call;
}

class RouteDispatcherTest : public ::testing::Test {
 protected:
  RouteDispatcherTest() {
    std::vector<Route> routes;
    routes.push_back({"legacy", "web-v1", *kube::LabelSelector::Parse("version!=v2"), v1_});
    routes.push_back({"v2", "web-v2", *kube::LabelSelector::Parse("version=v2"), v2_});
    routes.push_back({"web", "web-v2", *kube::LabelSelector::Parse("tier=web"), v2_});
    routes_ = std::make_unique<RouteDispatcher>("web", std::move(routes), nullptr);
  }

  absl::StatusOr<pluginpb::ReconcileResponse> Send(pluginpb::ReconcileCall call) {
    absl::StatusOr<pluginpb::ReconcileResponse> answer = absl::UnknownError("not answered");
    routes_->Dispatch(std::move(call), absl::InfiniteFuture(),
                      [&](controller::DispatchResult r) { answer = std::move(r.response); });
    return answer;
  }

  std::shared_ptr<RecordingDispatcher> v1_ = std::make_shared<RecordingDispatcher>();
  std::shared_ptr<RecordingDispatcher> v2_ = std::make_shared<RecordingDispatcher>();
  std::unique_ptr<RouteDispatcher> routes_;
};

TEST_F(RouteDispatcherTest, EachObjectGoesToTheRouteItsLabelsMatch) {
  ASSERT_TRUE(Send(Call("a", "{}")).ok());  // no label: version!=v2 matches
  ASSERT_TRUE(Send(Call("b", R"({"version":"v2"})")).ok());
  ASSERT_TRUE(Send(Call("c", R"({"version":"v1"})")).ok());
  EXPECT_THAT(v1_->keys, ElementsAre("a", "c"));
  EXPECT_THAT(v2_->keys, ElementsAre("b"));
  // Relabelled: the next request goes to the other plugin, and the move is counted.
  ASSERT_TRUE(Send(Call("a", R"({"version":"v2"})")).ok());
  EXPECT_THAT(v2_->keys, ElementsAre("b", "a"));
  const RouteFigures figures = routes_->Figures();
  EXPECT_EQ(figures.moved, 1u);
  EXPECT_EQ(figures.routed.at("legacy"), 2u);
  EXPECT_EQ(figures.routed.at("v2"), 2u);
}

TEST_F(RouteDispatcherTest, AmbiguousObjectIsNotSentAndGetsATerminalErrorNamingTheRoutes) {
  absl::StatusOr<pluginpb::ReconcileResponse> answer = Send(Call("x", R"({"tier":"web"})"));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(v1_->keys.empty());
  EXPECT_TRUE(v2_->keys.empty());
  EXPECT_EQ(answer->error().kind(), pluginpb::ERROR_KIND_TERMINAL);
  EXPECT_THAT(answer->error().message(), HasSubstr("\"legacy\" (plugin web-v1"));
  EXPECT_THAT(answer->error().message(), HasSubstr("\"web\" (plugin web-v2, labelSelector "
                                                   "\"tier=web\")"));
  ASSERT_EQ(answer->conditions_size(), 1);
  EXPECT_EQ(answer->conditions(0).type(), "Reconciled");
  EXPECT_EQ(answer->conditions(0).status(), pluginpb::CONDITION_STATUS_FALSE);
  EXPECT_EQ(answer->conditions(0).reason(), "AmbiguousRoute");
  ASSERT_EQ(answer->events_size(), 1);
  EXPECT_EQ(answer->events(0).type(), pluginpb::EVENT_TYPE_WARNING);
  EXPECT_EQ(answer->events(0).reason(), "AmbiguousRoute");
  EXPECT_EQ(answer->events(0).message(), answer->error().message());
  EXPECT_EQ(routes_->Figures().ambiguous, 1u);
}

TEST_F(RouteDispatcherTest, UnroutedObjectIsSkippedAndCounted) {
  std::vector<Route> routes;
  routes.push_back({"v2", "web-v2", *kube::LabelSelector::Parse("version=v2"), v2_});
  RouteDispatcher only_v2("web", std::move(routes), nullptr);
  absl::StatusOr<pluginpb::ReconcileResponse> answer = absl::UnknownError("not answered");
  auto send = [&](pluginpb::ReconcileCall call) {
    only_v2.Dispatch(std::move(call), absl::InfiniteFuture(),
                     [&](controller::DispatchResult r) { answer = std::move(r.response); });
  };
  send(Call("a", "{}"));
  ASSERT_TRUE(answer.ok());
  EXPECT_FALSE(answer->has_error());
  EXPECT_EQ(answer->conditions_size(), 0);
  EXPECT_TRUE(v2_->keys.empty());
  EXPECT_EQ(only_v2.Figures().unrouted, 1u);
  // Reconciled once on v2, then relabelled away while being deleted: v2 still gets it, so that
  // its finalizer can be released.
  send(Call("b", R"({"version":"v2"})"));
  send(Call("b", "{}", /*deleting=*/true));
  EXPECT_THAT(v2_->keys, ElementsAre("b", "b"));
  EXPECT_EQ(only_v2.Figures().unrouted, 1u);
  // Being deleted and never reconciled here (e.g. the host restarted): the first route.
  send(Call("c", "{}", /*deleting=*/true));
  EXPECT_THAT(v2_->keys, ElementsAre("b", "b", "c"));
  EXPECT_EQ(only_v2.Figures().unrouted, 1u);
}

TEST_F(RouteDispatcherTest, GoneObjectGoesToItsLastRouteWhichForgetsIt) {
  ASSERT_TRUE(Send(Call("a", R"({"version":"v2"})")).ok());
  ASSERT_TRUE(Send(Gone("a")).ok());
  EXPECT_THAT(v2_->keys, ElementsAre("a", "a"));
  // Forgotten: a key never seen goes to the first route.
  ASSERT_TRUE(Send(Gone("a")).ok());
  EXPECT_THAT(v1_->keys, ElementsAre("a"));
}

TEST_F(RouteDispatcherTest, ObjectThatIsNotJsonIsAnError) {
  pluginpb::ReconcileCall call = Call("a", "{}");
  call.set_object("{not json");
  absl::StatusOr<pluginpb::ReconcileResponse> answer = Send(std::move(call));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(v1_->keys.empty());
}

}  // namespace
}  // namespace ctrlhost::manager
