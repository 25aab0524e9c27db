// Session against the in-process test plugin over a real Unix socket.
#include "runtime/plugin/session.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/handshake.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::plugin {
namespace {

using testing::TestPlugin;
using testing::TestPluginOptions;

// Unix socket paths are limited to 107 bytes: use TEST_TMPDIR only when it is short.
std::string MakeSocketDir() {
  std::string base = "/tmp";
  if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
    base = t;
  }
  std::string tmpl = base + "/ss-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

// Collects callback results in completion order. Thread-safe.
class Results {
 public:
  controller::ReconcileCallback Callback(std::string tag) {
    return [this, tag](controller::DispatchResult r) {
      common::MutexLock lock(&mu_);
      tags_.push_back(tag);
      results_.push_back(std::move(r.response));
      capabilities_.push_back(std::move(r.capabilities));
      cv_.SignalAll();
    };
  }
  // Waits (real time, bounded) until `n` results arrived.
  bool WaitFor(size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    common::MutexLock lock(&mu_);
    while (results_.size() < n) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) return results_.size() >= n;
    }
    return true;
  }
  size_t size() {
    common::MutexLock lock(&mu_);
    return results_.size();
  }
  absl::StatusOr<pluginpb::ReconcileResponse> result(size_t i) {
    common::MutexLock lock(&mu_);
    return results_.at(i);
  }
  std::optional<controller::Capabilities> capabilities(size_t i) {
    common::MutexLock lock(&mu_);
    return capabilities_.at(i);
  }
  std::vector<std::string> tags() {
    common::MutexLock lock(&mu_);
    return tags_;
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<std::string> tags_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::StatusOr<pluginpb::ReconcileResponse>> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<controller::Capabilities>> capabilities_ ABSL_GUARDED_BY(mu_);
};

pluginpb::ReconcileCall Call(const std::string& name, std::string object = "{}") {
  pluginpb::ReconcileCall call;
  call.set_controller("echo");
  call.set_namespace_("default");
  call.set_name(name);
  call.set_object(std::move(object));
  return call;
}

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeSocketDir();
    ASSERT_FALSE(dir_.empty());
    address_ = absl::StrCat("unix://", dir_, "/p.sock");
  }
  void TearDown() override {
    session_.reset();
    plugin_.reset();
    unlink((dir_ + "/p.sock").c_str());
    rmdir(dir_.c_str());
  }

  void StartPlugin(TestPluginOptions options = {}) {
    auto plugin = TestPlugin::Start(address_, options);
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    plugin_ = std::move(*plugin);
  }

  void OpenSession(SessionOptions options, uint32_t channel_limit = kDefaultMaxMessageBytes) {
    options.clock = &clock_;
    options.instance_name = "test-1";
    options.on_broken = [this](const absl::Status& s) {
      common::MutexLock lock(&mu_);
      broken_.push_back(s);
    };
    auto session = Session::Open(MakeChannel(address_, channel_limit), std::move(options));
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
  }

  std::vector<absl::Status> broken() {
    common::MutexLock lock(&mu_);
    return broken_;
  }

  absl::Time Later() { return clock_.Now() + absl::Seconds(60); }

  std::string dir_;
  std::string address_;
  common::FakeClock clock_;
  Results results_;  // outlives the session, whose teardown may still call back
  std::unique_ptr<TestPlugin> plugin_;
  std::unique_ptr<Session> session_;
  common::Mutex mu_;
  std::vector<absl::Status> broken_ ABSL_GUARDED_BY(mu_);
};

TEST_F(SessionTest, EchoRoundTrip) {
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  session_->Dispatch(Call("a"), Later(), results.Callback("a"));
  ASSERT_TRUE(results.WaitFor(1));
  ASSERT_TRUE(results.result(0).ok()) << results.result(0).status();
  EXPECT_EQ(results.result(0)->status(), R"({"seen":"a"})");
  EXPECT_EQ(results.result(0)->request_id(), 1u);
  EXPECT_EQ(session_->in_flight(), 0u);
  EXPECT_TRUE(session_->health().ok());
}

// Background tasks: notices go out unanswered (a fresh request id, nothing in flight), and
// plugin-to-host messages (request_id 0) reach on_plugin_message in order, not a caller.
TEST_F(SessionTest, NoticesAndPluginMessages) {
  StartPlugin();
  common::Mutex mu;
  common::CondVar cv;
  std::vector<pluginpb::ReconcileResponse> messages;  // guarded by mu
  SessionOptions options;
  options.capabilities = {pluginpb::CAPABILITY_BACKGROUND_TASKS};
  options.on_plugin_message = [&](pluginpb::ReconcileResponse m) {
    common::MutexLock lock(&mu);
    messages.push_back(std::move(m));
    cv.SignalAll();
  };
  OpenSession(std::move(options));
  pluginpb::ReconcileRequest start;
  start.mutable_start_tasks()->set_controller("echo");
  ASSERT_TRUE(session_->Notify(start).ok());
  EXPECT_TRUE(session_->WaitForWrites(clock_.Now() + absl::Seconds(20)));
  EXPECT_EQ(session_->in_flight(), 0u);
  {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    common::MutexLock lock(&mu);
    while (messages.empty() && !cv.WaitWithDeadline(&mu, deadline)) {
    }
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_EQ(messages[0].request_id(), 0u);
    EXPECT_EQ(messages[0].task_enqueue().controller(), "echo");
    EXPECT_EQ(messages[0].task_enqueue().name(), "from-echo");
  }
  // Reconciles still work beside notices, and take the ids after the notice's.
  Results& results = results_;
  session_->Dispatch(Call("a"), Later(), results.Callback("a"));
  ASSERT_TRUE(results.WaitFor(1));
  ASSERT_TRUE(results.result(0).ok()) << results.result(0).status();
  EXPECT_EQ(results.result(0)->request_id(), 2u);

  pluginpb::ReconcileRequest not_a_notice;
  *not_a_notice.mutable_reconcile() = Call("b");
  EXPECT_EQ(session_->Notify(not_a_notice).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Notify(pluginpb::ReconcileRequest()).code(),
            absl::StatusCode::kInvalidArgument);
  session_->Close();
  EXPECT_EQ(session_->Notify(start).code(), absl::StatusCode::kUnavailable);
}

// Without CAPABILITY_BACKGROUND_TASKS in effect, a plugin's task_enqueue (request_id 0) is
// dropped by the session: on_plugin_message never sees it (so nothing answers it either), and
// reconciles go on.
TEST_F(SessionTest, PluginMessagesWithoutBackgroundTasksAreDropped) {
  StartPlugin();
  common::Mutex mu;
  int messages = 0;  // guarded by mu
  SessionOptions options;
  options.capabilities = {pluginpb::CAPABILITY_CONDITIONS};
  options.on_plugin_message = [&](pluginpb::ReconcileResponse) {
    common::MutexLock lock(&mu);
    ++messages;
  };
  OpenSession(std::move(options));
  // The test plugin answers a StartTasks notice with a task_enqueue (request_id 0).
  pluginpb::ReconcileRequest start;
  start.mutable_start_tasks()->set_controller("echo");
  ASSERT_TRUE(session_->Notify(start).ok());
  // The plugin writes its message before the answers that follow on the stream, and the
  // session handles stream messages in order: once a later answer arrived, the message was
  // handled.
  Results& results = results_;
  session_->Dispatch(Call("a"), Later(), results.Callback("a"));
  ASSERT_TRUE(results.WaitFor(1));
  ASSERT_TRUE(results.result(0).ok()) << results.result(0).status();
  common::MutexLock lock(&mu);
  EXPECT_EQ(messages, 0);
}

// The applier checks each response against the capabilities in effect on the connection that
// carried it: the session hands them on with every response (not with its errors).
TEST_F(SessionTest, ResponsesCarryTheCapabilitiesInEffect) {
  StartPlugin();
  SessionOptions options;
  options.capabilities = {pluginpb::CAPABILITY_CHILDREN, pluginpb::CAPABILITY_CONDITIONS};
  OpenSession(options);
  Results& results = results_;
  session_->Dispatch(Call("a"), Later(), results.Callback("a"));
  ASSERT_TRUE(results.WaitFor(1));
  ASSERT_TRUE(results.result(0).ok()) << results.result(0).status();
  ASSERT_TRUE(results.capabilities(0).has_value());
  EXPECT_EQ(*results.capabilities(0), (controller::Capabilities{pluginpb::CAPABILITY_CHILDREN,
                                                                pluginpb::CAPABILITY_CONDITIONS}));
  session_->Close();
  session_->Dispatch(Call("b"), Later(), results.Callback("b"));
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_FALSE(results.result(1).ok());
  EXPECT_FALSE(results.capabilities(1).has_value());
}

// Issue 19: a remote plugin's clock may be skewed, so the request carries its budget relative
// to when it was sent beside the absolute deadline.
TEST_F(SessionTest, RequestCarriesItsRelativeTimeout) {
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  session_->Dispatch(Call("budget"), clock_.Now() + absl::Seconds(42), results.Callback("b"));
  ASSERT_TRUE(results.WaitFor(1));
  ASSERT_TRUE(results.result(0).ok()) << results.result(0).status();
  EXPECT_EQ(results.result(0)->status(), R"({"timeout_ms":42000})");
}

// Issue 19: capabilities belong to a connection; a plugin dialled by two hosts reads the set in
// effect for each stream from its metadata.
TEST_F(SessionTest, StreamMetadataCarriesTheCapabilitiesInEffect) {
  StartPlugin();
  SessionOptions options;
  options.capabilities = {pluginpb::CAPABILITY_SERVER_SIDE_APPLY, pluginpb::CAPABILITY_CONDITIONS};
  OpenSession(options);
  Results& results = results_;
  session_->Dispatch(Call("a"), Later(), results.Callback("a"));  // the stream is open
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(plugin_->last_stream_capabilities(),
            "CAPABILITY_SERVER_SIDE_APPLY,CAPABILITY_CONDITIONS");
}

TEST_F(SessionTest, OutOfOrderAnswersReachTheirCallers) {
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  for (const char* tag : {"h1", "h2", "h3"}) {
    pluginpb::ReconcileCall call = Call("hold");
    call.set_uid(tag);
    session_->Dispatch(std::move(call), Later(), results.Callback(tag));
  }
  session_->Dispatch(Call("release"), Later(), results.Callback("release"));
  ASSERT_TRUE(results.WaitFor(4));
  // The plugin answered "release" first and the held ones in reverse; callbacks may run on
  // different gRPC threads, so only the matching is checked: each caller got its own answer.
  std::map<std::string, uint64_t> ids;
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(results.result(i).ok()) << results.result(i).status();
    ids[results.tags()[i]] = results.result(i)->request_id();
  }
  EXPECT_EQ(ids,
            (std::map<std::string, uint64_t>{{"h1", 1}, {"h2", 2}, {"h3", 3}, {"release", 4}}));
}

TEST_F(SessionTest, InFlightCapFailsAtOnce) {
  StartPlugin();
  SessionOptions options;
  options.max_in_flight = 2;
  OpenSession(options);
  Results& results = results_;
  session_->Dispatch(Call("hang"), Later(), results.Callback("1"));
  session_->Dispatch(Call("hang"), Later(), results.Callback("2"));
  session_->Dispatch(Call("hang"), Later(), results.Callback("3"));
  // The third fails inline, before Dispatch returns.
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results.tags()[0], "3");
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(session_->in_flight(), 2u);
}

TEST_F(SessionTest, DeadlineExpiresAndCancelsInThePlugin) {
  StartPlugin();
  SessionOptions options;
  options.cancellation = true;
  OpenSession(options);
  Results& results = results_;
  session_->Dispatch(Call("hang"), clock_.Now() + absl::Seconds(5), results.Callback("hang"));
  session_->Dispatch(Call("hold"), clock_.Now() + absl::Seconds(50), results.Callback("hold"));
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.tags()[0], "hang");
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kDeadlineExceeded);
  // The plugin hears about it (bounded wait on a condition).
  for (int i = 0; i < 2000 && plugin_->cancelled().empty(); ++i) usleep(5000);
  EXPECT_EQ(plugin_->cancelled(), std::vector<uint64_t>{1});
  // The other request is still outstanding and is answered normally.
  session_->Dispatch(Call("release"), Later(), results.Callback("release"));
  ASSERT_TRUE(results.WaitFor(3));
  EXPECT_TRUE(results.result(2).ok());
}

TEST_F(SessionTest, NoCancelNoticeWithoutTheCapability) {
  StartPlugin();
  OpenSession({});  // cancellation not negotiated
  Results& results = results_;
  session_->Dispatch(Call("hang"), clock_.Now() + absl::Seconds(1), results.Callback("hang"));
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kDeadlineExceeded);
  // A later round trip proves the stream went on; nothing was cancelled.
  session_->Dispatch(Call("x"), Later(), results.Callback("x"));
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_TRUE(plugin_->cancelled().empty());
}

TEST_F(SessionTest, ResponseForUnknownIdIsDropped) {
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  session_->Dispatch(Call("wrong-id"), clock_.Now() + absl::Seconds(1), results.Callback("w"));
  session_->Dispatch(Call("ok"), Later(), results.Callback("ok"));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.tags()[0], "ok");
  EXPECT_TRUE(results.result(0).ok());
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_EQ(results.result(1).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(session_->health().ok());
}

// Regression: a plugin flooding answers to requests never sent wrote one warning each
// (226,115 lines in 30 s).
TEST_F(SessionTest, RegressionGarbageFloodIsLoggedRateLimited) {
  common::Mutex log_mu;
  int dropped_lines = 0;
  std::string last_line;
  common::SetLogSink([&](absl::string_view line) {
    if (line.find("unknown or expired request dropped") == absl::string_view::npos) return;
    common::MutexLock lock(&log_mu);
    ++dropped_lines;
    last_line = std::string(line);
  });
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  // The real answer comes after the 5000 garbage ones on the same stream: when it arrived,
  // every garbage answer had been handled.
  session_->Dispatch(Call("flood-5000"), Later(), results.Callback("flood"));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_TRUE(results.result(0).ok());
  {
    common::MutexLock lock(&log_mu);
    EXPECT_EQ(dropped_lines, 10);  // the burst; the clock did not move
  }
  clock_.Advance(absl::Seconds(1));
  session_->Dispatch(Call("flood-1"), Later(), results.Callback("one"));
  ASSERT_TRUE(results.WaitFor(2));
  common::SetLogSink(nullptr);
  common::MutexLock lock(&log_mu);
  EXPECT_EQ(dropped_lines, 11);
  EXPECT_NE(last_line.find("suppressed=4990"), std::string::npos) << last_line;
}

TEST_F(SessionTest, BrokenStreamFailsEveryRequestWithUnavailable) {
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  session_->Dispatch(Call("hang"), Later(), results.Callback("1"));
  session_->Dispatch(Call("hang"), Later(), results.Callback("2"));
  for (int i = 0; i < 2000 && plugin_->received() < 2; ++i) usleep(5000);
  plugin_.reset();  // the plugin goes away with both requests in flight
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(results.result(1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(session_->broken());
  ASSERT_EQ(broken().size(), 1u);
  EXPECT_EQ(broken()[0].code(), absl::StatusCode::kUnavailable);
  session_->Dispatch(Call("late"), Later(), results.Callback("late"));
  ASSERT_EQ(results.size(), 3u);  // inline
  EXPECT_EQ(results.result(2).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SessionTest, OversizedResponseIsResourceExhausted) {
  StartPlugin();
  SessionOptions options;
  options.max_message_bytes = 1 << 20;
  OpenSession(options, 1 << 20);
  Results& results = results_;
  session_->Dispatch(Call("huge-2000000"), Later(), results.Callback("huge"));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kResourceExhausted)
      << results.result(0).status();
  EXPECT_TRUE(session_->broken());
}

TEST_F(SessionTest, OversizedRequestIsRefusedBeforeSending) {
  StartPlugin();
  SessionOptions options;
  options.max_message_bytes = 1000;
  OpenSession(options);
  Results& results = results_;
  session_->Dispatch(Call("big", std::string(2000, 'o')), Later(), results.Callback("big"));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(session_->in_flight(), 0u);
  EXPECT_TRUE(session_->health().ok());
}

TEST_F(SessionTest, CloseFailsOutstandingWithoutReportingBroken) {
  StartPlugin();
  OpenSession({});
  Results& results = results_;
  session_->Dispatch(Call("hang"), Later(), results.Callback("1"));
  session_->Close();
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kUnavailable);
  session_.reset();
  EXPECT_TRUE(broken().empty());
}

TEST_F(SessionTest, PluginThatNeverListensBreaksTheSession) {
  // No plugin at all: the stream cannot start and breaks with UNAVAILABLE; no hang, no crash.
  OpenSession({});
  Results& results = results_;
  session_->Dispatch(Call("a"), Later(), results.Callback("a"));
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.result(0).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SessionTest, ConcurrentCallersAllAnswered) {
  StartPlugin();
  SessionOptions options;
  options.max_in_flight = 1000;
  OpenSession(options);
  Results& results = results_;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        session_->Dispatch(Call(absl::StrCat("k", t, "-", i)), Later(), results.Callback("c"));
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(results.WaitFor(kThreads * kPerThread));
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results.result(i).ok()) << results.result(i).status();
  }
}

}  // namespace
}  // namespace ctrlhost::plugin
