#include "runtime/manager/background_tasks.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"

namespace ctrlhost::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records what BackgroundTasks sends and enqueues. Single-threaded tests: no locking needed.
struct Recorder {
  std::vector<pluginpb::ReconcileRequest> sent;
  std::vector<std::pair<std::string, std::string>> enqueued;
  bool send_ok = true;
};

BackgroundTasksOptions OptionsFor(Recorder* r, common::Clock* clock) {
  BackgroundTasksOptions o;
  o.operator_name = "shop";
  o.plugin = "webapp";
  o.enqueues_per_second = 1;
  o.enqueue_burst = 2;
  o.clock = clock;
  o.send = [r](pluginpb::ReconcileRequest notice) {
    if (!r->send_ok) return absl::UnavailableError("gone");
    r->sent.push_back(std::move(notice));
    return absl::OkStatus();
  };
  o.enqueue = [r](const std::string& controller, const std::string& key) {
    r->enqueued.emplace_back(controller, key);
    return true;
  };
  return o;
}

pluginpb::ReconcileResponse Enqueue(const std::string& controller, const std::string& ns,
                                    const std::string& name, uint64_t id = 7) {
  pluginpb::ReconcileResponse m;
  pluginpb::TaskEnqueue* e = m.mutable_task_enqueue();
  e->set_controller(controller);
  e->set_task("poller");
  e->set_namespace_(ns);
  e->set_name(name);
  e->set_enqueue_id(id);
  return m;
}

BackgroundTasks::Wanted Web() { return {"web", true, {"poller"}}; }

TEST(BackgroundTasksTest, StartsOnceAndStopsWhenNoLongerWanted) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web()}, "controller stopped");
  tasks.Sync({1, 0}, {Web()}, "controller stopped");  // idempotent: no second start
  ASSERT_EQ(r.sent.size(), 1u);
  EXPECT_EQ(r.sent[0].start_tasks().controller(), "web");
  tasks.Sync({1, 0}, {}, "leadership lost");
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_EQ(r.sent[1].stop_tasks().controller(), "web");
  EXPECT_EQ(r.sent[1].stop_tasks().reason(), "leadership lost");
}

TEST(BackgroundTasksTest, NewInstanceGetsItsOwnStartAndOldOneIsRefused) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web()}, "");
  tasks.Sync({2, 0}, {Web()}, "");  // swapped: generation 2 serves
  ASSERT_EQ(r.sent.size(), 2u);
  EXPECT_TRUE(r.sent[1].has_start_tasks());
  absl::Status old = tasks.OnPluginMessage(1, Enqueue("web", "default", "a"));
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.message(), HasSubstr("instance 1"));
  EXPECT_TRUE(tasks.OnPluginMessage(2, Enqueue("web", "default", "a")).ok());
  EXPECT_THAT(r.enqueued,
              ElementsAre(std::make_pair(std::string("web"), std::string("default/a"))));
}

TEST(BackgroundTasksTest, UnsentStartIsRetriedAndEnqueuesBeforeItAreRefused) {
  common::FakeClock clock;
  Recorder r;
  r.send_ok = false;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web()}, "");
  EXPECT_EQ(tasks.OnPluginMessage(1, Enqueue("web", "default", "a")).code(),
            absl::StatusCode::kFailedPrecondition);
  r.send_ok = true;
  tasks.Sync({1, 0}, {Web()}, "");
  ASSERT_EQ(r.sent.size(), 1u);
  EXPECT_TRUE(r.sent[0].has_start_tasks());
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "a")).ok());
}

// Regression: the start was recorded only after `send` returned, so a task that enqueued at
// once (its plugin answering before the host's thread got back) was refused "not started" and
// its key lost (seen in e2e/conformance's task case after a swap).
TEST(BackgroundTasksTest, EnqueueArrivingBeforeTheStartNoticeReturnsIsAccepted) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasksOptions options = OptionsFor(&r, &clock);
  BackgroundTasks* self = nullptr;
  std::vector<absl::Status> answers;
  options.send = [&](pluginpb::ReconcileRequest notice) {
    r.sent.push_back(notice);
    if (notice.has_start_tasks()) {
      answers.push_back(self->OnPluginMessage(1, Enqueue("web", "default", "a")));
    }
    return absl::OkStatus();
  };
  BackgroundTasks tasks(options);
  self = &tasks;
  tasks.Sync({1, 0}, {Web()}, "");
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok()) << answers[0];
  EXPECT_THAT(r.enqueued,
              ElementsAre(std::make_pair(std::string("web"), std::string("default/a"))));
}

TEST(BackgroundTasksTest, StoppedControllerCannotEnqueue) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web()}, "");
  tasks.StopAll("operator removed");
  absl::Status s = tasks.OnPluginMessage(1, Enqueue("web", "default", "a", 42));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(r.enqueued.empty());
  // The refusal is answered on the stream with the plugin's enqueue id.
  ASSERT_FALSE(r.sent.empty());
  const pluginpb::ReconcileRequest& last = r.sent.back();
  ASSERT_TRUE(last.has_enqueue_refused());
  EXPECT_EQ(last.enqueue_refused().enqueue_id(), 42u);
  EXPECT_EQ(last.enqueue_refused().code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
}

TEST(BackgroundTasksTest, UnknownControllerIsRefused) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web()}, "");
  EXPECT_EQ(tasks.OnPluginMessage(1, Enqueue("other", "default", "a")).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(BackgroundTasksTest, MalformedKeysAreInvalidArgument) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web(), {"nodes", false, {"poller"}}}, "");
  for (const auto& [ns, name] : std::vector<std::pair<std::string, std::string>>{
           {"", "a"},           // namespaced kind without namespace
           {"default", ""},     // no name
           {"Default", "a"},    // upper case
           {"default", "a/b"},  // slash
           {"default", "-a"},   // leading dash
           {"a.b", "a"},        // dots in a namespace
           {"default", std::string(254, 'a')},
           {"default", std::string("a\0b", 3)}}) {
    absl::Status s = tasks.OnPluginMessage(1, Enqueue("web", ns, name));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << ns << "/" << name;
  }
  EXPECT_EQ(tasks.OnPluginMessage(1, Enqueue("nodes", "default", "n1")).code(),
            absl::StatusCode::kInvalidArgument);  // namespace for a cluster-scoped kind
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("nodes", "", "n1.example.com")).ok());
  EXPECT_TRUE(r.enqueued.size() == 1 && r.enqueued[0].second == "n1.example.com");
  std::vector<TaskControllerReport> report = tasks.Report();
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[1].controller, "web");
  EXPECT_EQ(report[1].refused_invalid, 8u);
}

// The key check is kube's (runtime/kube/validation.h): what the API server would refuse as a
// name or namespace is refused here, and nothing else.
TEST(BackgroundTasksTest, KeyForFollowsKubeNameRules) {
  EXPECT_EQ(*BackgroundTasks::KeyFor("default", "a.b-c.d", true), "default/a.b-c.d");
  EXPECT_EQ(*BackgroundTasks::KeyFor("", std::string(253, 'a'), false), std::string(253, 'a'));
  EXPECT_TRUE(BackgroundTasks::KeyFor(std::string(63, 'n'), "a", true).ok());
  for (const char* name : {"a..b", "a.-b", "a-.b", ".a", "a.", "a_b", "A"}) {
    EXPECT_EQ(BackgroundTasks::KeyFor("default", name, true).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
  EXPECT_EQ(BackgroundTasks::KeyFor(std::string(64, 'n'), "a", true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BackgroundTasks::KeyFor("a-", "a", true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BackgroundTasksTest, TokenBucketRefusesTheExcessAndRefills) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));  // 1/s, burst 2
  tasks.Sync({1, 0}, {Web()}, "");
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "a")).ok());
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "b")).ok());
  absl::Status third = tasks.OnPluginMessage(1, Enqueue("web", "default", "c"));
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.message(), HasSubstr("enqueue rate"));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "c")).ok());
  std::vector<TaskControllerReport> report = tasks.Report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].enqueued, 3u);
  EXPECT_EQ(report[0].refused_rate_limited, 1u);
}

TEST(BackgroundTasksTest, EachControllerHasTheLimitItsOperatorFileSets) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));  // default 1/s, burst 2
  BackgroundTasks::Wanted fast = Web();
  fast.enqueue_burst = 4;  // rate left to the default
  BackgroundTasks::Wanted slow{"audit", true, {"poller"}, 0.5, 1};
  tasks.Sync({1, 0}, {fast, slow}, "");
  for (const char* name : {"a", "b", "c", "d"}) {
    EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", name)).ok()) << name;
  }
  absl::Status over = tasks.OnPluginMessage(1, Enqueue("web", "default", "e"));
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("enqueue rate of 1/s (burst 4;"));
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("audit", "default", "a")).ok());
  absl::Status audit = tasks.OnPluginMessage(1, Enqueue("audit", "default", "b"));
  EXPECT_THAT(audit.message(), HasSubstr("enqueue rate of 0.5/s (burst 1;"));
  clock.Advance(absl::Seconds(1));  // half a token for audit, one for web
  EXPECT_EQ(tasks.OnPluginMessage(1, Enqueue("audit", "default", "b")).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "e")).ok());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("audit", "default", "b")).ok());

  std::vector<TaskControllerReport> report = tasks.Report();
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0].controller, "audit");
  EXPECT_EQ(report[0].enqueues_per_second, 0.5);
  EXPECT_EQ(report[0].enqueue_burst, 1);
  EXPECT_EQ(report[0].enqueued, 2u);
  EXPECT_EQ(report[0].refused_rate_limited, 2u);
  EXPECT_EQ(report[1].enqueues_per_second, 1);
  EXPECT_EQ(report[1].enqueue_burst, 4);
  EXPECT_EQ(report[1].enqueued, 5u);
  EXPECT_EQ(report[1].refused_rate_limited, 1u);
  // Every refusal went back to the plugin with its id.
  int refused = 0;
  for (const pluginpb::ReconcileRequest& m : r.sent) refused += m.has_enqueue_refused();
  EXPECT_EQ(refused, 3);
}

TEST(BackgroundTasksTest, ChangedLimitTakesEffectAtTheNextSync) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));  // 1/s, burst 2
  tasks.Sync({1, 0}, {Web()}, "");
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "a")).ok());
  EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", "b")).ok());
  EXPECT_FALSE(tasks.OnPluginMessage(1, Enqueue("web", "default", "c")).ok());
  // The same limit again keeps the (empty) bucket: a Sync is no way around the limit.
  tasks.Sync({1, 0}, {Web()}, "");
  EXPECT_FALSE(tasks.OnPluginMessage(1, Enqueue("web", "default", "c")).ok());
  // The operator file raised it: a new, full bucket at the new limit.
  BackgroundTasks::Wanted raised = Web();
  raised.enqueues_per_second = 100;
  raised.enqueue_burst = 3;
  tasks.Sync({1, 0}, {raised}, "");
  for (const char* name : {"c", "d", "e"}) {
    EXPECT_TRUE(tasks.OnPluginMessage(1, Enqueue("web", "default", name)).ok()) << name;
  }
  EXPECT_FALSE(tasks.OnPluginMessage(1, Enqueue("web", "default", "f")).ok());
  std::vector<TaskControllerReport> report = tasks.Report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].enqueues_per_second, 100);
  EXPECT_EQ(report[0].enqueue_burst, 3);
  EXPECT_EQ(report[0].enqueued, 5u);
  EXPECT_EQ(report[0].refused_rate_limited, 3u);
}

TEST(BackgroundTasksTest, RefusalsAreLoggedRateLimited) {
  common::FakeClock clock;
  Recorder r;
  std::vector<std::string> lines;
  common::SetLogSink([&lines](absl::string_view line) {
    if (absl::StrContains(line, "background task enqueue refused")) lines.emplace_back(line);
  });
  {
    BackgroundTasks tasks(OptionsFor(&r, &clock));  // 1/s, burst 2
    tasks.Sync({1, 0}, {Web()}, "");
    for (int i = 0; i < 40; ++i) {
      (void)tasks.OnPluginMessage(1, Enqueue("web", "default", absl::StrCat("k", i)));
    }
    // 38 refusals: the log limiter's burst (10) is written, the rest suppressed ...
    ASSERT_EQ(lines.size(), 10u);
    EXPECT_THAT(lines[0], HasSubstr("controller=web"));
    EXPECT_THAT(lines[0], HasSubstr("enqueue rate"));
    clock.Advance(absl::Seconds(1));
    (void)tasks.OnPluginMessage(1, Enqueue("web", "default", "x"));  // accepted (refill)
    (void)tasks.OnPluginMessage(1, Enqueue("web", "default", "y"));  // refused, logged
    // ... and counted on the next line that is written.
    ASSERT_EQ(lines.size(), 11u);
    EXPECT_THAT(lines[10], HasSubstr("suppressed=28"));
  }
  common::SetLogSink(nullptr);
}

TEST(BackgroundTasksTest, TaskStatusIsKeptForTheDump) {
  common::FakeClock clock;
  Recorder r;
  BackgroundTasks tasks(OptionsFor(&r, &clock));
  tasks.Sync({1, 0}, {Web()}, "");
  pluginpb::ReconcileResponse m;
  m.mutable_task_status()->set_controller("web");
  m.mutable_task_status()->set_task("poller");
  m.mutable_task_status()->set_state(pluginpb::TASK_STATE_BACKOFF);
  m.mutable_task_status()->set_restarts(3);
  m.mutable_task_status()->set_last_error("ValueError: boom");
  EXPECT_TRUE(tasks.OnPluginMessage(1, m).ok());
  m.mutable_task_status()->set_task("nope");
  EXPECT_EQ(tasks.OnPluginMessage(1, m).code(), absl::StatusCode::kNotFound);
  m.mutable_task_status()->set_task("poller");
  m.mutable_task_status()->set_state(pluginpb::TASK_STATE_UNSPECIFIED);
  EXPECT_EQ(tasks.OnPluginMessage(1, m).code(), absl::StatusCode::kInvalidArgument);
  std::vector<TaskControllerReport> report = tasks.Report();
  ASSERT_EQ(report.size(), 1u);
  ASSERT_EQ(report[0].tasks.size(), 1u);
  EXPECT_EQ(report[0].tasks[0].state, "backoff");
  EXPECT_EQ(report[0].tasks[0].restarts, 3u);
  EXPECT_EQ(report[0].tasks[0].last_error, "ValueError: boom");
  EXPECT_TRUE(report[0].running);
}

}  // namespace
}  // namespace ctrlhost::manager
