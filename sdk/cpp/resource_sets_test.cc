#include "sdk/cpp/resource_sets.h"

#include <string>

#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::sdk {
namespace {

Request Make(const std::string& labels) {
  absl::StatusOr<Request> req = Request::FromCall(
      testing::RequestBuilder::FromYaml(
          "apiVersion: example.com/v1\nkind: App\nmetadata: {name: a, namespace: n, labels: " +
          labels + "}\n")
          ->Call());
  EXPECT_TRUE(req.ok()) << req.status();
  return *req;
}

bool LabelIs(const Request& r, const std::string& key, const std::string& value) {
  auto labels = r.labels();
  auto it = labels.find(key);
  return it != labels.end() && it->second == value;
}

class ResourceRouterTest : public ::testing::Test {
 protected:
  ResourceRouterTest() {
    auto reconcile_as = [](const Request&, const nlohmann::json& ctx) {
      Result r;
      r.Status()["context"] = ctx;
      return r;
    };
    EXPECT_TRUE(router_
                    .Add({"v1", [](const Request& r) { return !LabelIs(r, "version", "v2"); },
                          reconcile_as})
                    .ok());
    EXPECT_TRUE(
        router_
            .Add({"v2", [](const Request& r) { return LabelIs(r, "version", "v2"); }, reconcile_as,
                  [](const Request& r) -> absl::StatusOr<nlohmann::json> {
                    if (LabelIs(r, "broken", "yes")) {
                      return absl::FailedPreconditionError("no context");
                    }
                    return nlohmann::json{{"set", "v2"}, {"name", r.name()}};
                  }})
            .ok());
    EXPECT_TRUE(router_
                    .Add({"canary", [](const Request& r) { return LabelIs(r, "track", "canary"); },
                          reconcile_as})
                    .ok());
  }
  ResourceRouter router_;
};

TEST_F(ResourceRouterTest, ExactlyOneSetRunsWithItsContext) {
  Result v1 = router_.Route(Make("{}"));
  EXPECT_EQ((*v1.status())["context"], nlohmann::json::object());
  Result v2 = router_.Build()(Make("{version: v2}"));
  EXPECT_EQ((*v2.status())["context"], (nlohmann::json{{"set", "v2"}, {"name", "a"}}));
  EXPECT_EQ(router_.skipped(), 0u);
}

TEST_F(ResourceRouterTest, InitContextErrorIsTheAnswer) {
  Result r = router_.Route(Make("{version: v2, broken: 'yes'}"));
  ASSERT_TRUE(r.error().has_value());
  EXPECT_EQ(r.error()->kind, ErrorKind::kTerminal);
  EXPECT_FALSE(r.status().has_value());
}

TEST_F(ResourceRouterTest, SeveralSetsAreATerminalErrorNamingThem) {
  Result r = router_.Route(Make("{track: canary}"));
  const std::string message =
      "the object matches 2 resource sets: \"v1\", \"canary\"; exactly one must handle it";
  ASSERT_TRUE(r.error().has_value());
  EXPECT_EQ(r.error()->kind, ErrorKind::kTerminal);
  EXPECT_EQ(r.error()->message, message);
  ASSERT_EQ(r.conditions().size(), 1u);
  EXPECT_EQ(r.conditions()[0].type, "Reconciled");
  EXPECT_EQ(r.conditions()[0].status, ConditionStatus::kFalse);
  EXPECT_EQ(r.conditions()[0].reason, "AmbiguousRoute");
  ASSERT_EQ(r.events().size(), 1u);
  EXPECT_EQ(r.events()[0].type, EventType::kWarning);
  EXPECT_EQ(r.events()[0].reason, "AmbiguousRoute");
  EXPECT_FALSE(r.status().has_value());
}

TEST(ResourceRouterSkipTest, NoSetIsSkippedAndCountedGoneIsNot) {
  ResourceRouter router;
  ASSERT_TRUE(router
                  .Add({"v2", [](const Request& r) { return LabelIs(r, "version", "v2"); },
                        [](const Request&, const nlohmann::json&) {
                          return Result::TerminalError("must not run");
                        }})
                  .ok());
  ReconcileFn fn = router.Build();
  Result r = fn(Make("{version: v3}"));
  EXPECT_FALSE(r.error().has_value());
  EXPECT_FALSE(r.status().has_value());
  EXPECT_EQ(router.skipped(), 1u);  // the built function shares the count
  absl::StatusOr<Request> gone = Request::FromCall(testing::RequestBuilder::Gone("n", "a").Call());
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(fn(*gone).error().has_value());
  EXPECT_EQ(router.skipped(), 1u);
}

TEST(ResourceRouterAddTest, BadSetsAreRefused) {
  ResourceRouter router;
  auto handles = [](const Request&) { return true; };
  auto reconcile = [](const Request&, const nlohmann::json&) { return Result(); };
  EXPECT_EQ(router.Add({"", handles, reconcile}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(router.Add({"x", nullptr, reconcile}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(router.Add({"x", handles, reconcile}).ok());
  absl::Status dup = router.Add({"x", handles, reconcile});
  EXPECT_EQ(dup.message(), "resource set \"x\" is already defined");
}

}  // namespace
}  // namespace ctrlhost::sdk
