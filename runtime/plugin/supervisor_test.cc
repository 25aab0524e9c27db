// Supervisor with the real test plugin process (testing/test_plugin_main) over Unix sockets,
// and with an in-process plugin over TCP 127.0.0.1 for remote endpoints.
#include "runtime/plugin/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/pki/pki.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::plugin {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

std::string TestPluginPath() {
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return "";
  return absl::StrCat(cwd, "/runtime/plugin/testing/test_plugin_main");
}

// Collects log lines. Thread-safe.
class LogCapture {
 public:
  LogCapture() {
    common::SetLogSink([this](absl::string_view line) {
      common::MutexLock lock(&mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { common::SetLogSink(nullptr); }
  bool Contains(absl::string_view a, absl::string_view b = "") {
    common::MutexLock lock(&mu_);
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, a) && absl::StrContains(line, b)) return true;
    }
    return false;
  }
  // Waits (real time, bounded) for a line containing both strings.
  bool WaitFor(absl::string_view a, absl::string_view b = "") {
    for (int i = 0; i < 4000; ++i) {
      if (Contains(a, b)) return true;
      usleep(5000);
    }
    return false;
  }

 private:
  common::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

// Waits for a callback result. Thread-safe.
class OneResult {
 public:
  controller::ReconcileCallback Callback() {
    return [this](controller::DispatchResult r) {
      common::MutexLock lock(&mu_);
      results_.push_back(std::move(r.response));
      cv_.SignalAll();
    };
  }
  bool WaitFor(size_t n) {
    const absl::Time deadline = absl::Now() + kWait;
    common::MutexLock lock(&mu_);
    while (results_.size() < n) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) return results_.size() >= n;
    }
    return true;
  }
  absl::StatusOr<pluginpb::ReconcileResponse> at(size_t i) {
    common::MutexLock lock(&mu_);
    return results_.at(i);
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<absl::StatusOr<pluginpb::ReconcileResponse>> results_ ABSL_GUARDED_BY(mu_);
};

pluginpb::ReconcileCall Call(const std::string& name) {
  pluginpb::ReconcileCall call;
  call.set_controller("echo");
  call.set_name(name);
  return call;
}

bool HasState(const PluginStatus& s, PluginState state) { return s.state == state; }

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 60) {
      base = t;
    }
    root_ = base + "/sv-XXXXXX";
    ASSERT_NE(mkdtemp(root_.data()), nullptr);
    socket_dir_ = root_ + "/sockets";
  }
  void TearDown() override {
    supervisor_.reset();
    rmdir(socket_dir_.c_str());
    rmdir(root_.c_str());
  }

  SupervisorOptions ExecOptions(std::vector<std::string> args) {
    SupervisorOptions options;
    options.name = "test";
    options.source.exec.command = TestPluginPath();
    options.source.exec.args = std::move(args);
    options.socket_dir = socket_dir_;
    options.handshake.deadline = kWait;
    options.clock = &clock_;
    return options;
  }

  void StartSupervisor(SupervisorOptions options) {
    auto supervisor = Supervisor::Start(std::move(options));
    ASSERT_TRUE(supervisor.ok()) << supervisor.status();
    supervisor_ = std::move(*supervisor);
  }

  bool WaitState(PluginState state) {
    return supervisor_->WaitFor([state](const PluginStatus& s) { return HasState(s, state); },
                                kWait);
  }

  // Stops on another thread while moving the fake clock, so that grace periods pass.
  void StopAdvancing(absl::Duration grace) {
    std::thread stopper([&] { supervisor_->Stop(grace); });
    for (int i = 0; i < 4000 && supervisor_->status().state != PluginState::kStopped; ++i) {
      clock_.Advance(absl::Seconds(1));
      usleep(5000);
    }
    stopper.join();
  }

  std::string root_;
  std::string socket_dir_;
  common::FakeClock clock_;
  LogCapture logs_;
  std::unique_ptr<Supervisor> supervisor_;
};

TEST_F(SupervisorTest, StartsServesAndStops) {
  StartSupervisor(ExecOptions({}));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  const PluginStatus status = supervisor_->status();
  EXPECT_EQ(status.instance_name, "test-1");
  EXPECT_GT(status.pid, 0);
  EXPECT_EQ(status.restarts, 0u);
  ASSERT_NE(status.describe, nullptr);
  EXPECT_EQ(status.describe->controllers_size(), 2);
  struct stat st;
  ASSERT_EQ(stat(socket_dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // <socket_dir>/<32 random hex digits, the instance's own 0700 directory>/test-1.sock
  const std::string instance_dir =
      supervisor_->socket_path().substr(0, supervisor_->socket_path().rfind('/'));
  EXPECT_EQ(supervisor_->socket_path(), instance_dir + "/test-1.sock");
  EXPECT_EQ(instance_dir.substr(0, socket_dir_.size() + 1), socket_dir_ + "/");
  EXPECT_EQ(instance_dir.size(), socket_dir_.size() + 33);
  ASSERT_EQ(stat(instance_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  OneResult result;
  supervisor_->Dispatch(Call("a"), clock_.Now() + absl::Seconds(30), result.Callback());
  ASSERT_TRUE(result.WaitFor(1));
  ASSERT_TRUE(result.at(0).ok()) << result.at(0).status();
  EXPECT_EQ(result.at(0)->status(), R"({"seen":"a"})");

  supervisor_->Stop(absl::Seconds(10));  // the plugin exits on SIGTERM
  EXPECT_EQ(supervisor_->status().state, PluginState::kStopped);
  EXPECT_EQ(supervisor_->status().pid, 0);
  EXPECT_NE(stat(supervisor_->socket_path().c_str(), &st), 0);  // socket removed
  EXPECT_NE(stat(instance_dir.c_str(), &st), 0);                // and its directory
  EXPECT_EQ(kill(status.pid, 0), -1);                           // reaped: no zombie
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(logs_.Contains("plugin killed"));
}

TEST_F(SupervisorTest, NotReadyDispatchIsUnavailable) {
  StartSupervisor(ExecOptions({"--exit-at-start=3"}));
  OneResult result;
  supervisor_->Dispatch(Call("a"), clock_.Now() + absl::Seconds(30), result.Callback());
  ASSERT_TRUE(result.WaitFor(1));
  EXPECT_EQ(result.at(0).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SupervisorTest, CrashFailsInFlightThenRestartsAndServes) {
  StartSupervisor(ExecOptions({"--crash-after=3"}));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  const pid_t first_pid = supervisor_->status().pid;
  OneResult results;
  const absl::Time deadline = clock_.Now() + absl::Seconds(30);
  supervisor_->Dispatch(Call("hang"), deadline, results.Callback());
  supervisor_->Dispatch(Call("hang"), deadline, results.Callback());
  supervisor_->Dispatch(Call("crash"), deadline, results.Callback());  // the third: exit 42
  ASSERT_TRUE(results.WaitFor(3));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(results.at(i).status().code(), absl::StatusCode::kUnavailable)
        << results.at(i).status();
  }
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  EXPECT_THAT(supervisor_->status().last_error.message(), HasSubstr("exited with code 42"));
  clock_.Advance(absl::Seconds(1));  // the first backoff
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  EXPECT_EQ(supervisor_->status().restarts, 1u);
  EXPECT_NE(supervisor_->status().pid, first_pid);
  supervisor_->Dispatch(Call("again"), clock_.Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(4));
  EXPECT_TRUE(results.at(3).ok()) << results.at(3).status();
  StopAdvancing(absl::Seconds(10));
}

TEST_F(SupervisorTest, ExitAtStartBacksOffAndRetries) {
  StartSupervisor(ExecOptions({"--exit-at-start=3"}));
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  EXPECT_THAT(supervisor_->status().last_error.message(),
              HasSubstr("exited before listening: exited with code 3"));
  EXPECT_EQ(supervisor_->status().restarts, 0u);
  clock_.Advance(absl::Seconds(1));
  // The second backoff is 2 s: after 2 more seconds a second restart happens.
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return s.restarts == 1 && s.state == PluginState::kBackoff; },
      kWait));
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(supervisor_->WaitFor([](const PluginStatus& s) { return s.restarts == 2; }, kWait));
  StopAdvancing(absl::Seconds(1));
  EXPECT_EQ(supervisor_->status().state, PluginState::kStopped);
}

TEST_F(SupervisorTest, BadProtocolVersionFails) {
  StartSupervisor(ExecOptions({"--describe=bad-version"}));
  ASSERT_TRUE(WaitState(PluginState::kFailed));
  const PluginStatus status = supervisor_->status();
  EXPECT_EQ(status.last_error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.last_error.message(), HasSubstr("protocol version"));
  OneResult result;
  supervisor_->Dispatch(Call("a"), clock_.Now() + absl::Seconds(30), result.Callback());
  ASSERT_TRUE(result.WaitFor(1));
  EXPECT_EQ(result.at(0).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SupervisorTest, MalformedDescribeFails) {
  StartSupervisor(ExecOptions({"--describe=duplicate"}));
  ASSERT_TRUE(WaitState(PluginState::kFailed));
  EXPECT_EQ(supervisor_->status().last_error.code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SupervisorTest, SigkillAfterGraceForPluginIgnoringSigterm) {
  StartSupervisor(ExecOptions({"--ignore-sigterm"}));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  const pid_t pid = supervisor_->status().pid;
  StopAdvancing(absl::Seconds(10));
  EXPECT_EQ(supervisor_->status().state, PluginState::kStopped);
  EXPECT_TRUE(logs_.Contains("plugin killed", "plugin=test-1"));
  EXPECT_TRUE(logs_.Contains("ignoring SIGTERM", "stream=stdout"));
  EXPECT_EQ(kill(pid, 0), -1);
}

TEST_F(SupervisorTest, CapturesOutputLineByLine) {
  StartSupervisor(
      ExecOptions({"--stdout=hello\\nworld-partial", "--stderr=oops\\n", "--stdout-bytes=20000"}));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  EXPECT_TRUE(logs_.WaitFor("line=hello", "stream=stdout"));
  EXPECT_TRUE(logs_.WaitFor("line=oops", "stream=stderr"));
  EXPECT_TRUE(logs_.WaitFor("truncated=true", "plugin=test-1"));
  supervisor_->Stop(absl::Seconds(10));
  // The partial last line is flushed at exit (it was followed by the 'y' line, so it is a line
  // of its own only if the plugin wrote it first; either way it appears).
  EXPECT_TRUE(logs_.Contains("world-partial", "stream=stdout"));
}

TEST_F(SupervisorTest, FloodingOutputIsRateLimited) {
  std::string flood = "--stdout=";
  for (int i = 0; i < 3000; ++i) absl::StrAppend(&flood, "flood-", i, "\\n");
  StartSupervisor(ExecOptions({flood}));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  EXPECT_TRUE(logs_.WaitFor("line=flood-0", "stream=stdout"));
  supervisor_->Stop(absl::Seconds(10));
  // 3000 lines at once: the burst (2000) is logged, the rest is counted, not logged.
  EXPECT_TRUE(logs_.Contains("plugin output dropped (rate limited)", "plugin=test"));
  EXPECT_FALSE(logs_.Contains("line=flood-2999", "stream=stdout"));
}

TEST_F(SupervisorTest, PassesEnvironmentAndWorkingDirectory) {
  SupervisorOptions options = ExecOptions(
      {"--print-env=PLUGIN_MODE", "--print-env=CTRLHOST_PLUGIN_ADDRESS", "--print-cwd"});
  options.source.exec.env.emplace_back("PLUGIN_MODE", "fast");
  options.source.exec.working_dir = root_;
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  EXPECT_TRUE(logs_.WaitFor("env PLUGIN_MODE=fast"));
  EXPECT_TRUE(logs_.WaitFor(
      absl::StrCat("env CTRLHOST_PLUGIN_ADDRESS=unix://", supervisor_->socket_path())));
  EXPECT_TRUE(logs_.WaitFor(absl::StrCat("cwd=", root_)));
  supervisor_->Stop(absl::Seconds(10));
}

TEST_F(SupervisorTest, RemoteEndpointOverTcp) {
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", {});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  SupervisorOptions options;
  options.name = "remote";
  options.source.endpoint = absl::StrCat("127.0.0.1:", (*plugin)->port());
  options.handshake.deadline = kWait;
  options.clock = &clock_;
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  EXPECT_EQ(supervisor_->status().pid, 0);
  OneResult results;
  supervisor_->Dispatch(Call("hang"), clock_.Now() + absl::Seconds(30), results.Callback());
  supervisor_->Dispatch(Call("r"), clock_.Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_TRUE(results.at(0).ok());
  plugin->reset();  // the remote goes away with a request in flight
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_EQ(results.at(1).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  supervisor_->Stop(absl::Seconds(1));
}

// Starts a supervisor for an in-process plugin on 127.0.0.1 (whose health the test flips).
std::unique_ptr<testing::TestPlugin> StartRemote(const std::string& health) {
  testing::TestPluginOptions options;
  options.health = health;
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", options);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  return plugin.ok() ? std::move(*plugin) : nullptr;
}

bool HealthIs(const PluginStatus& s, HealthStatus health) {
  return s.state == PluginState::kReady && s.health == health;
}

// The plugin reports NOT_SERVING (Watch, or Check when it has no Watch): a new request waits in
// the supervisor and is never sent; SERVING again sends it. Nothing is failed or lost.
void HoldsWhileNotServing(const std::string& health_mode, std::unique_ptr<Supervisor>* supervisor,
                          common::FakeClock* clock, LogCapture* logs) {
  std::unique_ptr<testing::TestPlugin> plugin = StartRemote(health_mode);
  ASSERT_NE(plugin, nullptr);
  SupervisorOptions options;
  options.name = "remote";
  options.source.endpoint = absl::StrCat("127.0.0.1:", plugin->port());
  options.handshake.deadline = kWait;
  options.health_check_interval = absl::Milliseconds(100);
  options.clock = clock;
  auto started = Supervisor::Start(std::move(options));
  ASSERT_TRUE(started.ok()) << started.status();
  *supervisor = std::move(*started);
  Supervisor* sv = supervisor->get();
  ASSERT_TRUE(sv->WaitFor([](const PluginStatus& s) { return HealthIs(s, HealthStatus::kServing); },
                          kWait));
  OneResult results;
  sv->Dispatch(Call("a"), clock->Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(1));
  ASSERT_TRUE(results.at(0).ok()) << results.at(0).status();

  plugin->SetServing(false);
  ASSERT_TRUE(sv->WaitFor(
      [](const PluginStatus& s) { return HealthIs(s, HealthStatus::kNotServing); }, kWait));
  ASSERT_TRUE(logs->WaitFor("plugin not serving", "NOT_SERVING"));
  sv->Dispatch(Call("b"), clock->Now() + absl::Seconds(30), results.Callback());
  sv->Dispatch(Call("c"), clock->Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(sv->WaitFor([](const PluginStatus& s) { return s.held == 2; }, kWait));
  EXPECT_EQ(plugin->received(), 1);  // held, not sent
  EXPECT_EQ(sv->status().state, PluginState::kReady);

  plugin->SetServing(true);
  ASSERT_TRUE(results.WaitFor(3));
  for (size_t i = 1; i < 3; ++i) ASSERT_TRUE(results.at(i).ok()) << results.at(i).status();
  // Released together, they run concurrently: the answers come in either order.
  EXPECT_THAT((std::vector<std::string>{results.at(1)->status(), results.at(2)->status()}),
              ::testing::UnorderedElementsAre(R"({"seen":"b"})", R"({"seen":"c"})"));
  EXPECT_EQ(plugin->received(), 3);
  EXPECT_EQ(sv->status().held, 0u);
  EXPECT_EQ(sv->status().health, HealthStatus::kServing);
  EXPECT_EQ(sv->status().restarts, 0u);
  EXPECT_TRUE(logs->WaitFor("plugin serving again"));
  sv->Stop(absl::Seconds(1));
}

TEST_F(SupervisorTest, NotServingHoldsRequestsUntilServingAgainWatch) {
  HoldsWhileNotServing("serving", &supervisor_, &clock_, &logs_);
}

TEST_F(SupervisorTest, NotServingHoldsRequestsUntilServingAgainCheckFallback) {
  HoldsWhileNotServing("check-only", &supervisor_, &clock_, &logs_);
  EXPECT_TRUE(logs_.Contains("does not implement grpc.health.v1.Health/Watch"));
}

TEST_F(SupervisorTest, HeldRequestFailsAtItsDeadlineWithoutBeingSent) {
  std::unique_ptr<testing::TestPlugin> plugin = StartRemote("serving");
  ASSERT_NE(plugin, nullptr);
  SupervisorOptions options;
  options.name = "remote";
  options.source.endpoint = absl::StrCat("127.0.0.1:", plugin->port());
  options.handshake.deadline = kWait;
  options.clock = &clock_;
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  plugin->SetServing(false);
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return HealthIs(s, HealthStatus::kNotServing); }, kWait));
  OneResult results;
  supervisor_->Dispatch(Call("late"), clock_.Now() + absl::Seconds(5), results.Callback());
  ASSERT_TRUE(supervisor_->WaitFor([](const PluginStatus& s) { return s.held == 1; }, kWait));
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.at(0).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(results.at(0).status().message(), HasSubstr("it was not sent"));
  EXPECT_EQ(plugin->received(), 0);
  EXPECT_EQ(supervisor_->status().held, 0u);
  EXPECT_EQ(supervisor_->status().state, PluginState::kReady);  // 5 s is under the restart period
  supervisor_->Stop(absl::Seconds(1));
}

TEST_F(SupervisorTest, NotServingLongerThanTheRestartPeriodRestartsThePlugin) {
  SupervisorOptions options = ExecOptions({});
  options.not_serving_restart_after = absl::Seconds(30);
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  const pid_t first_pid = supervisor_->status().pid;
  ASSERT_EQ(kill(first_pid, SIGUSR1), 0);  // the test plugin reports NOT_SERVING
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return HealthIs(s, HealthStatus::kNotServing); }, kWait));
  OneResult results;
  supervisor_->Dispatch(Call("waits"), clock_.Now() + absl::Seconds(120), results.Callback());
  ASSERT_TRUE(supervisor_->WaitFor([](const PluginStatus& s) { return s.held == 1; }, kWait));
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ(supervisor_->status().state, PluginState::kReady);
  clock_.Advance(absl::Seconds(1));
  // The held request is failed retryably when the instance ends; the runner requeues it.
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.at(0).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  EXPECT_THAT(supervisor_->status().last_error.message(),
              HasSubstr("reported NOT_SERVING for 30s"));
  EXPECT_TRUE(logs_.Contains("plugin not serving for too long"));
  clock_.Advance(absl::Seconds(1));  // the first backoff
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return HealthIs(s, HealthStatus::kServing); }, kWait));
  EXPECT_EQ(supervisor_->status().restarts, 1u);
  EXPECT_NE(supervisor_->status().pid, first_pid);
  EXPECT_FALSE(logs_.Contains("plugin killed"));  // it exited on SIGTERM
  supervisor_->Dispatch(Call("again"), clock_.Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_TRUE(results.at(1).ok()) << results.at(1).status();
  StopAdvancing(absl::Seconds(10));
}

// A remote plugin still NOT_SERVING when dialled (draining, say) is retried with backoff, not
// refused for good, and becomes READY once it serves.
TEST_F(SupervisorTest, RemotePluginNotServingAtTheHandshakeIsRetried) {
  std::unique_ptr<testing::TestPlugin> plugin = StartRemote("not-serving");
  ASSERT_NE(plugin, nullptr);
  SupervisorOptions options;
  options.name = "remote";
  options.source.endpoint = absl::StrCat("127.0.0.1:", plugin->port());
  options.handshake.deadline = kWait;
  options.clock = &clock_;
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kBackoff)) << supervisor_->status().last_error;
  EXPECT_THAT(supervisor_->status().last_error.message(), HasSubstr("NOT_SERVING"));
  plugin->SetServing(true);
  clock_.Advance(absl::Seconds(1));  // the first backoff
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return HealthIs(s, HealthStatus::kServing); }, kWait))
      << supervisor_->status().last_error;
  supervisor_->Stop(absl::Seconds(1));
}

// True once every thread of `pid` is stopped (state T in /proc/PID/task/*/stat); bounded.
bool StoppedWithin(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  while (absl::Now() < deadline) {
    bool all = true;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
      std::ifstream stat(task.path() / "stat");
      std::string line;
      std::getline(stat, line);
      const size_t paren = line.rfind(')');
      if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') {
        all = false;
      }
    }
    if (!ec && all) return true;
    usleep(5000);
  }
  return false;
}

// A plugin that stops reading (its process is SIGSTOPped): the request's deadline fails the
// request, HTTP/2 keepalive (session.h) breaks the connection, and the supervisor restarts the
// plugin, which then serves. Only a hang guard is asserted; the detection time is logged.
TEST_F(SupervisorTest, StoppedPluginIsNoticedAndRestarted) {
  StartSupervisor(ExecOptions({}));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  const pid_t first_pid = supervisor_->status().pid;
  ASSERT_EQ(kill(first_pid, SIGSTOP), 0);
  // kill() only queues the signal: wait (bounded) until every thread is stopped, or a thread
  // still running could answer the next request.
  ASSERT_TRUE(StoppedWithin(first_pid, kWait));
  const absl::Time stopped_at = absl::Now();
  OneResult results;
  supervisor_->Dispatch(Call("unread"), clock_.Now() + absl::Seconds(10), results.Callback());
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(results.WaitFor(1));
  // Timed out on its deadline, or failed by the broken stream if keepalive came first.
  EXPECT_TRUE(results.at(0).status().code() == absl::StatusCode::kDeadlineExceeded ||
              results.at(0).status().code() == absl::StatusCode::kUnavailable)
      << results.at(0).status();
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return s.state == PluginState::kBackoff; }, absl::Seconds(60)))
      << "hang guard: the stopped plugin was not noticed within 60 s";
  const absl::Duration noticed = absl::Now() - stopped_at;
  std::fprintf(stderr, "figure: SIGSTOPped plugin noticed after %s (last error: %s)\n",
               absl::FormatDuration(noticed).c_str(),
               std::string(supervisor_->status().last_error.message()).c_str());
  clock_.Advance(absl::Seconds(1));  // the first backoff
  ASSERT_TRUE(supervisor_->WaitFor(
      [](const PluginStatus& s) { return HealthIs(s, HealthStatus::kServing); }, kWait));
  EXPECT_EQ(supervisor_->status().restarts, 1u);
  EXPECT_NE(supervisor_->status().pid, first_pid);
  EXPECT_EQ(kill(first_pid, 0), -1);  // the stopped process was killed and reaped
  supervisor_->Dispatch(Call("unread"), clock_.Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_TRUE(results.at(1).ok()) << results.at(1).status();
  StopAdvancing(absl::Seconds(10));
}

TEST_F(SupervisorTest, RemotePluginEndingItsStreamCleanlyIsNotACrash) {
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", {});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  SupervisorOptions options;
  options.name = "remote";
  options.source.endpoint = absl::StrCat("127.0.0.1:", (*plugin)->port());
  options.handshake.deadline = kWait;
  options.clock = &clock_;
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  // The plugin returns from its Reconcile handler with OK (a drain): redialled, not counted.
  OneResult results;
  supervisor_->Dispatch(Call("end-stream"), clock_.Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.at(0).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  EXPECT_THAT(supervisor_->status().last_error.message(),
              HasSubstr("ended the Reconcile stream cleanly"));
  clock_.Advance(absl::Seconds(1));  // the initial backoff
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  EXPECT_EQ(supervisor_->status().restarts, 0u);
  EXPECT_TRUE(logs_.Contains("remote plugin ended its stream cleanly"));
  // A stream that breaks is still a crash: counted when the supervisor starts again.
  supervisor_->Dispatch(Call("fail-stream"), clock_.Now() + absl::Seconds(30), results.Callback());
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_EQ(results.at(1).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  clock_.Advance(absl::Seconds(2));  // the backoff doubled after the first end
  EXPECT_TRUE(supervisor_->WaitFor([](const PluginStatus& s) { return s.restarts == 1; }, kWait))
      << supervisor_->status().restarts;
  EXPECT_TRUE(logs_.Contains("plugin instance ended; restarting after backoff", "fail-stream"));
  StopAdvancing(absl::Seconds(1));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST_F(SupervisorTest, RemoteEndpointOverTls) {
  // A CA and a serving certificate for "plugin.test" (and 127.0.0.1), from the host's own PKI.
  auto pki = apiserver::EnsurePki(root_ + "/pki", {"plugin.test"});
  ASSERT_TRUE(pki.ok()) << pki.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({ReadAll(pki->server_key_path), ReadAll(pki->server_cert_path)});
  testing::TestPluginOptions plugin_options;
  plugin_options.credentials = grpc::SslServerCredentials(ssl);
  auto plugin = testing::TestPlugin::Start("127.0.0.1:0", plugin_options);
  ASSERT_TRUE(plugin.ok()) << plugin.status();

  SupervisorOptions options;
  options.name = "tls";
  options.source.endpoint = absl::StrCat("127.0.0.1:", (*plugin)->port());
  options.source.tls.enabled = true;
  options.source.tls.ca_file = pki->ca_cert_path;
  options.source.tls.server_name = "plugin.test";
  options.handshake.deadline = kWait;
  options.clock = &clock_;
  StartSupervisor(options);
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  OneResult result;
  supervisor_->Dispatch(Call("secure"), clock_.Now() + absl::Seconds(30), result.Callback());
  ASSERT_TRUE(result.WaitFor(1));
  EXPECT_TRUE(result.at(0).ok()) << result.at(0).status();
  supervisor_->Stop(absl::Seconds(1));

  // A server name the certificate does not cover is not trusted: no READY, the handshake fails
  // and the supervisor backs off.
  options.source.tls.server_name = "other.test";
  options.handshake.deadline = absl::Seconds(2);
  StartSupervisor(options);
  ASSERT_TRUE(WaitState(PluginState::kBackoff));
  EXPECT_FALSE(supervisor_->status().last_error.ok());
  supervisor_->Stop(absl::Seconds(1));

  // Unreadable CA file: refused for good.
  options.source.tls.ca_file = root_ + "/missing-ca.crt";
  StartSupervisor(options);
  ASSERT_TRUE(WaitState(PluginState::kFailed));
  EXPECT_EQ(supervisor_->status().last_error.code(), absl::StatusCode::kNotFound);
}

TEST_F(SupervisorTest, StopAbortsAHandshakeInProgress) {
  // Nothing listens on the endpoint: the handshake would wait its whole (1 h) deadline.
  SupervisorOptions options;
  options.name = "unreachable";
  options.source.endpoint = absl::StrCat("unix://", root_, "/nobody.sock");
  options.handshake.deadline = absl::Hours(1);
  options.clock = &clock_;
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kStarting));
  supervisor_->Stop(absl::Seconds(1));
  EXPECT_EQ(supervisor_->status().state, PluginState::kStopped);
}

TEST_F(SupervisorTest, RefusesInvalidOptions) {
  SupervisorOptions options = ExecOptions({});
  options.source.endpoint = "127.0.0.1:1";
  EXPECT_EQ(Supervisor::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = ExecOptions({});
  options.socket_dir = "relative/dir";
  EXPECT_EQ(Supervisor::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SupervisorTest, CommandNotFoundFails) {
  SupervisorOptions options = ExecOptions({});
  options.source.exec.command = root_ + "/no-such-plugin";
  StartSupervisor(std::move(options));
  ASSERT_TRUE(WaitState(PluginState::kFailed));
  EXPECT_EQ(supervisor_->status().last_error.code(), absl::StatusCode::kNotFound);
}

// Regression: every instance gets its own directory with an unguessable name, so a plugin
// cannot derive another's socket path, and a restarted host never meets a socket an earlier
// host (or a plugin that outlived it) left.
TEST_F(SupervisorTest, RegressionEachInstanceHasItsOwnUnguessableDirectory) {
  StartSupervisor(ExecOptions({}));
  SupervisorOptions second_options = ExecOptions({});
  second_options.generation = 2;
  absl::StatusOr<std::unique_ptr<Supervisor>> second = Supervisor::Start(second_options);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(WaitState(PluginState::kReady)) << supervisor_->status().last_error;
  ASSERT_TRUE((*second)->WaitFor(
      [](const PluginStatus& s) { return s.state == PluginState::kReady; }, absl::Seconds(30)));
  const std::string first_path = supervisor_->socket_path();
  const std::string second_path = (*second)->socket_path();
  EXPECT_NE(first_path.substr(0, first_path.rfind('/')),
            second_path.substr(0, second_path.rfind('/')));
  EXPECT_THAT(second_path, ::testing::EndsWith("/test-2.sock"));
  (*second)->Stop(absl::Seconds(10));
  StopAdvancing(absl::Seconds(5));
}

// Regression: a command that cannot be executed fails the plugin with the reason at once
// instead of being retried forever.
TEST_F(SupervisorTest, RegressionNonExecutableCommandFails) {
  const std::string not_executable = root_ + "/plugin.txt";
  const std::string no_interpreter = root_ + "/plugin.bin";
  std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";
  std::ofstream(no_interpreter) << "garbage, no #! line";
  chmod(not_executable.c_str(), 0644);
  chmod(no_interpreter.c_str(), 0755);
  for (const auto& [command, code] :
       {std::make_pair(not_executable, absl::StatusCode::kPermissionDenied),
        std::make_pair(no_interpreter, absl::StatusCode::kFailedPrecondition)}) {
    SupervisorOptions options = ExecOptions({});
    options.source.exec.command = command;
    StartSupervisor(std::move(options));
    ASSERT_TRUE(WaitState(PluginState::kFailed)) << command;
    EXPECT_EQ(supervisor_->status().last_error.code(), code) << supervisor_->status().last_error;
    EXPECT_THAT(std::string(supervisor_->status().last_error.message()), HasSubstr(command));
    EXPECT_EQ(supervisor_->status().restarts, 0u);
    supervisor_.reset();
  }
  unlink(not_executable.c_str());
  unlink(no_interpreter.c_str());
}

TEST(EnsurePrivateDirTest, CreatesAndChecks) {
  std::string base = "/tmp";
  if (const char* t = std::getenv("TEST_TMPDIR")) base = t;
  std::string root = base + "/pd-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  const std::string dir = root + "/a/b";
  ASSERT_TRUE(EnsurePrivateDir(dir).ok());
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  EXPECT_EQ(EnsurePrivateDir(dir).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(chmod(dir.c_str(), 0711), 0);  // others may traverse, not list: plugins of other uids
  EXPECT_TRUE(EnsurePrivateDir(dir).ok());
  const std::string link = root + "/link";
  ASSERT_EQ(symlink(dir.c_str(), link.c_str()), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  EXPECT_EQ(EnsurePrivateDir(link).code(), absl::StatusCode::kFailedPrecondition);
  unlink(link.c_str());
  rmdir(dir.c_str());
  rmdir((root + "/a").c_str());
  rmdir(root.c_str());
}

}  // namespace
}  // namespace ctrlhost::plugin
