#include "runtime/config/operator_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::config {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

PluginSpec Exec(const std::string& name, const std::string& command) {
  PluginSpec p;
  p.name = name;
  p.source = ExecSpec{command, {}, {}, ""};
  return p;
}

OperatorSpec Op(const std::string& name, std::vector<PluginSpec> plugins) {
  OperatorSpec op;
  op.name = name;
  op.plugins = std::move(plugins);
  return op;
}

TEST(DiffTest, IdenticalSetsAreEmptyEvenWhenMoved) {
  OperatorSpec a = Op("a", {Exec("p", "bin/p")});
  OperatorSpec moved = a;
  moved.location = {"other.yaml", 40, 1};
  moved.plugins[0].location = {"other.yaml", 45, 5};
  EXPECT_TRUE(Diff({a}, {moved}).empty());
  EXPECT_TRUE(Diff({}, {}).empty());
}

TEST(DiffTest, PluginOrderIsNotAChange) {
  EXPECT_TRUE(
      Diff({Op("o", {Exec("a", "a"), Exec("b", "b")})}, {Op("o", {Exec("b", "b"), Exec("a", "a")})})
          .empty());
}

TEST(DiffTest, AddedRemovedChanged) {
  OperatorSpec keep = Op("keep", {Exec("p", "bin/p")});
  OperatorSpec change_before =
      Op("change", {Exec("same", "s"), Exec("edited", "e1"), Exec("dropped", "d")});
  OperatorSpec change_after =
      Op("change", {Exec("new", "n"), Exec("edited", "e2"), Exec("same", "s")});
  change_after.controllers.push_back(ControllerSpec{});
  change_after.controllers[0].name = "x";
  OperatorSetDiff d = Diff({keep, change_before, Op("gone", {})},
                           {Op("zeta", {}), change_after, keep, Op("alpha", {})});
  EXPECT_THAT(d.added, ElementsAre("alpha", "zeta"));
  EXPECT_THAT(d.removed, ElementsAre("gone"));
  ASSERT_EQ(d.changed.size(), 1u);
  const OperatorChange& c = d.changed[0];
  EXPECT_EQ(c.name, "change");
  EXPECT_THAT(c.added_plugins, ElementsAre("new"));
  EXPECT_THAT(c.removed_plugins, ElementsAre("dropped"));
  EXPECT_THAT(c.changed_plugins, ElementsAre("edited"));
  EXPECT_TRUE(c.controllers_changed);
  EXPECT_FALSE(c.metadata_changed);
  EXPECT_FALSE(d.empty());
}

TEST(DiffTest, EveryPluginFieldCounts) {
  const OperatorSpec base = Op("o", {Exec("p", "bin/p")});
  std::vector<std::function<void(PluginSpec&)>> edits = {
      [](PluginSpec& p) { std::get<ExecSpec>(p.source).args = {"-v"}; },
      [](PluginSpec& p) {
        std::get<ExecSpec>(p.source).env = {{"A", "1"}};
      },
      [](PluginSpec& p) { std::get<ExecSpec>(p.source).working_dir = "/tmp"; },
      [](PluginSpec& p) {
        p.source = EndpointSpec{"unix:///s", std::nullopt};
      },
      [](PluginSpec& p) { p.startup_timeout = absl::Seconds(1); },
      [](PluginSpec& p) { p.shutdown_grace_period = absl::Seconds(1); },
      [](PluginSpec& p) { p.request_timeout = absl::Seconds(1); },
      [](PluginSpec& p) { p.max_in_flight = 3; },
      [](PluginSpec& p) { p.not_serving_timeout = absl::Seconds(5); },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    OperatorSpec after = base;
    edits[i](after.plugins[0]);
    OperatorSetDiff d = Diff({base}, {after});
    ASSERT_EQ(d.changed.size(), 1u) << i;
    EXPECT_THAT(d.changed[0].changed_plugins, ElementsAre("p")) << i;
    EXPECT_FALSE(d.changed[0].controllers_changed) << i;
  }
}

TEST(DiffTest, EndpointTlsAndMetadataAndControllers) {
  PluginSpec remote;
  remote.name = "r";
  remote.source = EndpointSpec{"h:1", TlsSpec{"ca", "", "", ""}};
  OperatorSpec before = Op("o", {remote});
  OperatorSpec after = before;
  std::get<EndpointSpec>(after.plugins[0].source).tls->server_name = "x";
  after.labels["team"] = "a";
  OperatorSetDiff d = Diff({before}, {after});
  ASSERT_EQ(d.changed.size(), 1u);
  EXPECT_THAT(d.changed[0].changed_plugins, ElementsAre("r"));
  EXPECT_TRUE(d.changed[0].metadata_changed);

  OperatorSpec with_limit = before;
  with_limit.controllers.push_back(ControllerSpec{});
  with_limit.controllers[0].name = "c";
  OperatorSpec other_limit = with_limit;
  other_limit.controllers[0].rate_limit = RateLimitSpec{2.0, 3, std::nullopt, std::nullopt};
  d = Diff({with_limit}, {other_limit});
  ASSERT_EQ(d.changed.size(), 1u);
  EXPECT_THAT(d.changed[0].changed_plugins, IsEmpty());
  EXPECT_TRUE(d.changed[0].controllers_changed);
}

TEST(SourceLocationTest, ToString) {
  EXPECT_EQ((SourceLocation{"a.yaml", 3, 7}).ToString(), "a.yaml:3:7");
  EXPECT_EQ((SourceLocation{"a.yaml", 0, 0}).ToString(), "a.yaml");
}

}  // namespace
}  // namespace ctrlhost::config
