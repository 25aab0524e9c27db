#include "sdk/cpp/tasks.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/task_runner.h"

namespace ctrlhost::sdk {
namespace {

using ::testing::HasSubstr;

// Collects what the tasks send; Next waits (bounded, real time) for a matching message.
class Outbox {
 public:
  void Put(const pluginpb::ReconcileResponse& m) {
    common::MutexLock lock(&mu_);
    messages_.push_back(m);
    cv_.SignalAll();
  }
  // The first message from position `*from` on that matches; advances `*from` past it.
  std::optional<pluginpb::ReconcileResponse> Next(
      size_t* from, const std::function<bool(const pluginpb::ReconcileResponse&)>& match) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    common::MutexLock lock(&mu_);
    while (true) {
      for (; *from < messages_.size(); ++*from) {
        if (match(messages_[*from])) return messages_[(*from)++];
      }
      if (absl::Now() > deadline) return std::nullopt;
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
    }
  }
  size_t Count(const std::function<bool(const pluginpb::ReconcileResponse&)>& match) {
    common::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& m : messages_) n += match(m) ? 1 : 0;
    return n;
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<pluginpb::ReconcileResponse> messages_ ABSL_GUARDED_BY(mu_);
};

bool IsEnqueue(const pluginpb::ReconcileResponse& m) { return m.has_task_enqueue(); }
std::function<bool(const pluginpb::ReconcileResponse&)> StateIs(pluginpb::TaskState s) {
  return [s](const pluginpb::ReconcileResponse& m) {
    return m.has_task_status() && m.task_status().state() == s;
  };
}

struct Fixture {
  Outbox out;
  std::vector<std::pair<std::string, TaskFn>> tasks;
  std::unique_ptr<internal::TaskRunner> runner = std::make_unique<internal::TaskRunner>(
      [this](const std::string& c) {
        return c == "web" ? tasks : std::vector<std::pair<std::string, TaskFn>>{};
      },
      [this](const pluginpb::ReconcileResponse& m) { out.Put(m); }, absl::Milliseconds(10),
      absl::Milliseconds(50));
};

TEST(TasksTest, TaskEnqueuesUntilStoppedWithTheReason) {
  Fixture f;
  std::string reason;
  f.tasks.emplace_back("poll", [&reason](TaskContext& ctx) {
    EXPECT_TRUE(ctx.Enqueue("default", "a").ok());
    while (!ctx.Wait(absl::Milliseconds(5))) {
    }
    reason = ctx.stop_reason();
    return absl::OkStatus();
  });
  f.runner->Start("web");
  f.runner->Start("web");  // idempotent
  size_t at = 0;
  auto enqueue = f.out.Next(&at, IsEnqueue);
  ASSERT_TRUE(enqueue.has_value());
  EXPECT_EQ(enqueue->task_enqueue().controller(), "web");
  EXPECT_EQ(enqueue->task_enqueue().task(), "poll");
  EXPECT_EQ(enqueue->task_enqueue().namespace_(), "default");
  EXPECT_EQ(enqueue->task_enqueue().name(), "a");
  EXPECT_EQ(f.runner->Running(), std::vector<std::string>{"web"});
  f.runner->Stop("web", "plugin swapped out");
  at = 0;
  ASSERT_TRUE(f.out.Next(&at, StateIs(pluginpb::TASK_STATE_STOPPED)).has_value());
  f.runner.reset();  // joins
  EXPECT_EQ(reason, "plugin swapped out");
  EXPECT_EQ(f.out.Count(IsEnqueue), 1u);
  EXPECT_EQ(f.out.Count(StateIs(pluginpb::TASK_STATE_RUNNING)), 1u);  // one thread despite 2 starts
}

TEST(TasksTest, FailingOrThrowingTaskIsReportedAndRestarted) {
  Fixture f;
  int runs = 0;
  f.tasks.emplace_back("flaky", [&runs](TaskContext& ctx) -> absl::Status {
    ++runs;
    if (runs == 1) return absl::UnavailableError("remote down");
    if (runs == 2) throw std::runtime_error("boom");
    ctx.Wait(absl::Seconds(30));
    return absl::OkStatus();
  });
  f.runner->Start("web");
  size_t at = 0;
  auto first = f.out.Next(&at, StateIs(pluginpb::TASK_STATE_BACKOFF));
  auto second = f.out.Next(&at, StateIs(pluginpb::TASK_STATE_BACKOFF));
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(first->task_status().restarts(), 1u);
  EXPECT_THAT(first->task_status().last_error(), HasSubstr("remote down"));
  EXPECT_EQ(second->task_status().restarts(), 2u);
  EXPECT_THAT(second->task_status().last_error(), HasSubstr("boom"));
  auto running = f.out.Next(&at, StateIs(pluginpb::TASK_STATE_RUNNING));
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->task_status().restarts(), 2u);
  EXPECT_THAT(running->task_status().last_error(), HasSubstr("boom"));  // why it restarted
}

TEST(TasksTest, ReturningTaskIsFinishedNotRestarted) {
  Fixture f;
  f.tasks.emplace_back("once", [](TaskContext&) { return absl::OkStatus(); });
  f.runner->Start("web");
  size_t at = 0;
  ASSERT_TRUE(f.out.Next(&at, StateIs(pluginpb::TASK_STATE_FINISHED)).has_value());
  f.runner.reset();
  EXPECT_EQ(f.out.Count(StateIs(pluginpb::TASK_STATE_RUNNING)), 1u);
}

TEST(TasksTest, EnqueueChecksKeysAndSendsNothingOnceStopped) {
  Outbox out;
  TaskContext ctx("web", "poll", [&out](const pluginpb::ReconcileResponse& m) { out.Put(m); });
  for (const auto& [ns, name] :
       std::vector<std::pair<std::string, std::string>>{{"default", ""},
                                                        {"default", "A"},
                                                        {"default", "a/b"},
                                                        {"a.b", "x"},
                                                        {"default", "-a"},
                                                        {"default", std::string(254, 'a')}}) {
    EXPECT_EQ(ctx.Enqueue(ns, name).code(), absl::StatusCode::kInvalidArgument)
        << ns << "/" << name;
  }
  EXPECT_TRUE(ctx.Enqueue("", "node-1.example.com").ok());
  ctx.Cancel("controller stopped");
  EXPECT_TRUE(ctx.cancelled());
  EXPECT_TRUE(ctx.Wait(absl::Seconds(30)));  // at once
  EXPECT_TRUE(ctx.Enqueue("default", "late").ok());
  EXPECT_EQ(out.Count(IsEnqueue), 1u);
}

TEST(TasksTest, BuilderDeclaresTasksAndNeedsTheCapability) {
  auto built = ControllerBuilder("web")
                   .For("", "v1", "ConfigMap")
                   .Reconcile([](const Request&) { return Result(); })
                   .BackgroundTask("poll", [](TaskContext&) { return absl::OkStatus(); })
                   .Build();
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ((*built)->spec().background_tasks_size(), 1);
  EXPECT_EQ((*built)->spec().background_tasks(0).name(), "poll");
  EXPECT_EQ((*built)->tasks().size(), 1u);
  const auto caps = (*built)->RequiredCapabilities();
  EXPECT_NE(std::find(caps.begin(), caps.end(), pluginpb::CAPABILITY_BACKGROUND_TASKS), caps.end());

  auto twice = ControllerBuilder("web")
                   .For("", "v1", "ConfigMap")
                   .Reconcile([](const Request&) { return Result(); })
                   .BackgroundTask("poll", [](TaskContext&) { return absl::OkStatus(); })
                   .BackgroundTask("poll", [](TaskContext&) { return absl::OkStatus(); })
                   .Build();
  EXPECT_THAT(twice.status().message(), HasSubstr("declared twice"));
  auto bad = ControllerBuilder("web")
                 .For("", "v1", "ConfigMap")
                 .Reconcile([](const Request&) { return Result(); })
                 .BackgroundTask("Bad_Name", [](TaskContext&) { return absl::OkStatus(); })
                 .Build();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ctrlhost::sdk
