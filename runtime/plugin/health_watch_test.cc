// HealthWatcher against the in-process test plugin over 127.0.0.1.
#include "runtime/plugin/health_watch.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/handshake.h"
#include "runtime/plugin/session.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::plugin {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

// Statuses reported by a watcher. Thread-safe.
class Reports {
 public:
  void Add(HealthStatus s) {
    common::MutexLock lock(&mu_);
    seen_.push_back(s);
    cv_.SignalAll();
  }
  // Waits (bounded) until the last report is `s`.
  bool WaitLast(HealthStatus s) {
    const absl::Time deadline = absl::Now() + kWait;
    common::MutexLock lock(&mu_);
    while (seen_.empty() || seen_.back() != s) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) return !seen_.empty() && seen_.back() == s;
    }
    return true;
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<HealthStatus> seen_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<HealthWatcher> Watch(testing::TestPlugin& plugin, const std::string& service,
                                     Reports* reports) {
  HealthWatcherOptions options;
  options.service = service;
  options.check_interval = absl::Milliseconds(50);
  options.on_status = [reports](HealthStatus s) { reports->Add(s); };
  return HealthWatcher::Start(
      MakeChannel(absl::StrCat("127.0.0.1:", plugin.port()), kDefaultMaxMessageBytes), options);
}

void FollowsFlips(const std::string& mode, bool expect_polling) {
  testing::TestPluginOptions options;
  options.health = mode;
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", options);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  Reports reports;
  auto watcher = Watch(**plugin, kPluginServiceName, &reports);
  ASSERT_TRUE(reports.WaitLast(HealthStatus::kServing));
  (*plugin)->SetServing(false);
  ASSERT_TRUE(reports.WaitLast(HealthStatus::kNotServing));
  (*plugin)->SetServing(true);
  ASSERT_TRUE(reports.WaitLast(HealthStatus::kServing));
  EXPECT_EQ(watcher->polling(), expect_polling);
  watcher->Stop();
}

TEST(HealthWatcherTest, FollowsWatch) { FollowsFlips("serving", false); }

TEST(HealthWatcherTest, FallsBackToCheckWhenWatchIsUnimplemented) {
  FollowsFlips("check-only", true);
}

TEST(HealthWatcherTest, UnknownServiceIsReported) {
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", {});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  Reports reports;
  auto watcher = Watch(**plugin, "no.such.Service", &reports);
  ASSERT_TRUE(reports.WaitLast(HealthStatus::kServiceUnknown));
}

TEST(HealthWatcherTest, PluginGoneIsNoStatusAndStopReturns) {
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", {});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  Reports reports;
  auto watcher = Watch(**plugin, kPluginServiceName, &reports);
  ASSERT_TRUE(reports.WaitLast(HealthStatus::kServing));
  plugin->reset();  // the server goes away: the Watch fails, nothing new is reported
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_TRUE(reports.WaitLast(HealthStatus::kServing));
  watcher->Stop();  // returns although the plugin is gone (bounded by the test's timeout)
  watcher->Stop();  // idempotent
}

}  // namespace
}  // namespace ctrlhost::plugin
