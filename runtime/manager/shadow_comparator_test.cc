#include "runtime/manager/shadow_comparator.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/apply/testing/test_controllers.h"

namespace ctrlhost::manager {
namespace {

using ::testing::HasSubstr;

constexpr char kWebApp[] = R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
    "metadata":{"name":"web","namespace":"team","uid":"u-web","generation":3,
                "resourceVersion":"10"},"status":{}})";

pluginpb::ReconcileCall Call(const std::string& name = "web") {
  pluginpb::ReconcileCall call;
  call.set_controller("webapp");
  call.set_namespace_("team");
  call.set_name(name);
  std::string object = kWebApp;
  if (name != "web") object.replace(object.find("\"web\""), 5, "\"" + name + "\"");
  call.set_object(object);
  return call;
}

pluginpb::ReconcileResponse Port(int port) {
  pluginpb::ReconcileResponse r;
  r.add_desired_objects(absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"web-config"},"data":{"port":")",
                                     port, R"("}})"));
  return r;
}

class ShadowComparatorTest : public ::testing::Test {
 protected:
  ShadowComparator::ControllerLookup Lookup() {
    return [this](absl::string_view name) -> std::optional<controller::ControllerInfo> {
      if (name == webapp_.name) return webapp_;
      return std::nullopt;
    };
  }

  controller::ControllerInfo webapp_ = controller::apply::testing::WebAppController();
};

TEST_F(ShadowComparatorTest, CountsSameDifferentAndShadowErrorsPerController) {
  ShadowComparator comparator(Lookup(), {});
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), Port(80)));
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), Port(8080)));
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), absl::DeadlineExceededError("late")));
  // Both failed the same way: the same behaviour.
  ASSERT_TRUE(
      comparator.Submit(Call(), absl::UnavailableError("down"), absl::UnavailableError("down")));
  comparator.WaitIdle();
  const ShadowComparator::Figures figures = comparator.Snapshot();
  const ShadowComparator::ControllerFigures& f = figures.controllers.at("webapp");
  EXPECT_EQ(f.compared, 4u);
  EXPECT_EQ(f.same, 2u);
  EXPECT_EQ(f.different, 1u);
  EXPECT_EQ(f.shadow_errors, 1u);
  EXPECT_EQ(f.dropped, 0u);
  EXPECT_DOUBLE_EQ(f.agreement(), 0.5);
  ASSERT_EQ(figures.differences.size(), 1u);
  const ShadowComparator::Difference& d = figures.differences[0];
  EXPECT_EQ(d.controller, "webapp");
  EXPECT_EQ(d.key, "team/web");
  EXPECT_EQ(d.summary, "applies");
  EXPECT_EQ(nlohmann::json::parse(d.patch), nlohmann::json::parse(R"([{"op":"replace",
      "path":"/applies/ConfigMap team~1web-config/data/port","value":"8080"}])"));
}

// Threads of this process running under SCHED_IDLE (policy 5 in /proc's stat, field 41).
int IdleThreads() {
  int idle = 0;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t end = stat.rfind(')');
    if (end == std::string::npos) continue;
    std::istringstream fields(stat.substr(end + 2));
    std::string field;
    // Field 3 (state) is the first after the name; the policy is field 41.
    for (int i = 3; i <= 41 && fields >> field; ++i) {
      if (i == 41 && field == "5") ++idle;
    }
  }
  return idle;
}

// An idle comparator compares on a thread of its own under SCHED_IDLE, and still compares
// everything when the machine has CPU time to spare.
TEST_F(ShadowComparatorTest, AnIdleComparatorComparesOnAnIdleThread) {
  const int before = IdleThreads();
  ShadowComparator comparator(Lookup(), {.idle_cpu = true});
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), Port(80)));
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), Port(8080)));
  comparator.WaitIdle();
  const ShadowComparator::ControllerFigures f = comparator.Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.same, 1u);
  EXPECT_EQ(f.different, 1u);
  EXPECT_EQ(IdleThreads(), before + 1);
}

TEST_F(ShadowComparatorTest, EachNewKindOfDifferenceIsLoggedOnce) {
  common::Mutex mu;
  std::vector<std::string> lines;
  common::SetLogSink([&](absl::string_view line) {
    common::MutexLock lock(&mu);
    if (absl::StrContains(line, "the shadow answered differently")) lines.emplace_back(line);
  });
  {
    ShadowComparator comparator(Lookup(), {.plugin = "shop/web"});
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(comparator.Submit(Call(), Port(80), Port(81)));
    pluginpb::ReconcileResponse with_status = Port(80);
    with_status.set_status(R"({"phase":"Ready"})");
    ASSERT_TRUE(comparator.Submit(Call(), Port(80), with_status));
    comparator.WaitIdle();
  }
  common::SetLogSink(nullptr);
  common::MutexLock lock(&mu);
  ASSERT_EQ(lines.size(), 2u);  // "applies" once, then "status"
  EXPECT_THAT(lines[0], HasSubstr("differs=applies"));
  EXPECT_THAT(lines[0], HasSubstr("plugin=shop/web"));
  EXPECT_THAT(lines[0], HasSubstr("/data/port"));
  EXPECT_THAT(lines[1], HasSubstr("differs=status"));
}

TEST_F(ShadowComparatorTest, KeepsOnlyTheLastDifferences) {
  ShadowComparator comparator(Lookup(), {.keep_differences = 3});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(comparator.Submit(Call(absl::StrCat("web-", i)), Port(80), Port(81)));
  }
  comparator.WaitIdle();
  const ShadowComparator::Figures figures = comparator.Snapshot();
  EXPECT_EQ(figures.controllers.at("webapp").different, 10u);
  ASSERT_EQ(figures.differences.size(), 3u);
  EXPECT_EQ(figures.differences.front().key, "team/web-7");
  EXPECT_EQ(figures.differences.back().key, "team/web-9");
}

TEST_F(ShadowComparatorTest, AFullQueueDropsAndCountsNeverBlocks) {
  // The lookup blocks the comparator's thread on the first pair, so the queue fills up.
  absl::Notification release;
  absl::Notification entered;
  ShadowComparator comparator(
      [&](absl::string_view name) -> std::optional<controller::ControllerInfo> {
        if (!entered.HasBeenNotified()) entered.Notify();
        release.WaitForNotification();
        if (name == webapp_.name) return webapp_;
        return std::nullopt;
      },
      {.max_queued = 2});
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), Port(80)));
  entered.WaitForNotification();  // taken off the queue, being compared
  EXPECT_TRUE(comparator.Submit(Call(), Port(80), Port(80)));
  EXPECT_TRUE(comparator.Submit(Call(), Port(80), Port(80)));
  EXPECT_FALSE(comparator.Submit(Call(), Port(80), Port(80)));
  comparator.Drop("webapp");
  release.Notify();
  comparator.WaitIdle();
  const ShadowComparator::ControllerFigures f = comparator.Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.compared, 3u);
  EXPECT_EQ(f.same, 3u);
  EXPECT_EQ(f.dropped, 2u);
}

TEST_F(ShadowComparatorTest, AnUnknownControllerOrAGoneObjectIsHandled) {
  ShadowComparator comparator(Lookup(), {});
  pluginpb::ReconcileCall unknown = Call();
  unknown.set_controller("nobody");
  ASSERT_TRUE(comparator.Submit(unknown, Port(80), Port(81)));
  // The primary is gone: only events, error and requeue are valid; a desired object is refused
  // in both answers alike.
  pluginpb::ReconcileCall gone = Call();
  gone.clear_object();
  ASSERT_TRUE(comparator.Submit(gone, Port(80), Port(81)));
  comparator.WaitIdle();
  const ShadowComparator::Figures figures = comparator.Snapshot();
  EXPECT_EQ(figures.controllers.at("nobody").dropped, 1u);
  EXPECT_EQ(figures.controllers.at("nobody").compared, 0u);
  EXPECT_EQ(figures.controllers.at("webapp").compared, 1u);
}

TEST_F(ShadowComparatorTest, ALargeDifferenceIsKeptCut) {
  ShadowComparator comparator(Lookup(), {});
  pluginpb::ReconcileResponse big = Port(80);
  big.add_desired_objects(absl::StrCat(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"x":")",
      std::string(100000, 'x'), R"("}})"));
  ASSERT_TRUE(comparator.Submit(Call(), Port(80), big));
  comparator.WaitIdle();
  const ShadowComparator::Figures figures = comparator.Snapshot();
  ASSERT_EQ(figures.differences.size(), 1u);
  EXPECT_LT(figures.differences[0].patch.size(), 4200u);
  EXPECT_THAT(figures.differences[0].patch, HasSubstr("bytes in all)"));
}

TEST_F(ShadowComparatorTest, SubmitsFromManyThreads) {
  ShadowComparator comparator(Lookup(), {.max_queued = 100000});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&comparator] {
      for (int i = 0; i < 50; ++i) comparator.Submit(Call(), Port(80), Port(i % 2 ? 80 : 81));
    });
  }
  for (std::thread& t : threads) t.join();
  comparator.WaitIdle();
  const ShadowComparator::ControllerFigures f = comparator.Snapshot().controllers.at("webapp");
  EXPECT_EQ(f.compared, 200u);
  EXPECT_EQ(f.same, 100u);
  EXPECT_EQ(f.different, 100u);
}

}  // namespace
}  // namespace ctrlhost::manager
