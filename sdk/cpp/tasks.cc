#include "sdk/cpp/tasks.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "sdk/cpp/task_runner.h"

namespace ctrlhost::sdk {
namespace {

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsDnsName(absl::string_view s, size_t max, bool allow_dots) {
  if (s.empty() || s.size() > max || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (IsAlnum(c) || c == '-') continue;
    if (c == '.' && allow_dots && IsAlnum(s[i - 1]) && IsAlnum(s[i + 1])) continue;
    return false;
  }
  return true;
}

std::atomic<uint64_t> next_enqueue_id{1};

}  // namespace

absl::Status CheckTaskKey(absl::string_view namespace_, absl::string_view name) {
  if (!IsDnsName(name, 253, /*allow_dots=*/true)) {
    return absl::InvalidArgumentError(
        absl::StrCat("name \"", name, "\" is not a valid object name (RFC 1123 subdomain)"));
  }
  if (!namespace_.empty() && !IsDnsName(namespace_, 63, /*allow_dots=*/false)) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace \"", namespace_, "\" is not a valid namespace (RFC 1123 label)"));
  }
  return absl::OkStatus();
}

TaskContext::TaskContext(std::string controller, std::string task, TaskSendFn send)
    : controller_(std::move(controller)), task_(std::move(task)), send_(std::move(send)) {}

bool TaskContext::cancelled() const {
  common::MutexLock lock(&mu_);
  return cancelled_;
}

bool TaskContext::Wait(absl::Duration timeout) {
  common::Clock* clock = common::Clock::Real();
  const absl::Time deadline = clock->Now() + timeout;
  common::MutexLock lock(&mu_);
  while (!cancelled_ && !clock->WaitWithDeadline(&mu_, &cv_, deadline)) {
  }
  return cancelled_;
}

std::string TaskContext::stop_reason() const {
  common::MutexLock lock(&mu_);
  return reason_;
}

void TaskContext::Cancel(absl::string_view reason) {
  common::MutexLock lock(&mu_);
  if (cancelled_) return;
  cancelled_ = true;
  reason_ = std::string(reason);
  cv_.SignalAll();
}

absl::Status TaskContext::Enqueue(absl::string_view namespace_, absl::string_view name) {
  if (absl::Status s = CheckTaskKey(namespace_, name); !s.ok()) return s;
  if (cancelled()) return absl::OkStatus();
  pluginpb::ReconcileResponse message;
  pluginpb::TaskEnqueue* enqueue = message.mutable_task_enqueue();
  enqueue->set_controller(controller_);
  enqueue->set_task(task_);
  enqueue->set_namespace_(std::string(namespace_));
  enqueue->set_name(std::string(name));
  enqueue->set_enqueue_id(next_enqueue_id.fetch_add(1));
  send_(message);
  return absl::OkStatus();
}

namespace internal {

TaskRunner::TaskRunner(TasksOf tasks_of, TaskSendFn send, absl::Duration initial_backoff,
                       absl::Duration max_backoff)
    : tasks_of_(std::move(tasks_of)),
      send_(std::move(send)),
      initial_backoff_(initial_backoff),
      max_backoff_(max_backoff) {}

TaskRunner::~TaskRunner() {
  Stop("", "stream ended");
  std::vector<std::thread> threads;
  {
    common::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void TaskRunner::Start(const std::string& controller) {
  std::vector<std::pair<std::string, TaskFn>> tasks = tasks_of_(controller);
  if (tasks.empty()) {
    common::LogWarning("StartTasks for a controller without background tasks",
                       {{"controller", controller}});
    return;
  }
  common::MutexLock lock(&mu_);
  if (running_.count(controller) > 0) return;  // idempotent
  RunningTasks& r = running_[controller];
  for (auto& [name, fn] : tasks) {
    auto ctx = std::make_shared<TaskContext>(controller, name, send_);
    r.contexts.push_back(ctx);
    threads_.emplace_back([this, ctx, fn = std::move(fn)] { Run(ctx, fn); });
  }
  common::LogInfo("background tasks started",
                  {{"controller", controller}, {"tasks", r.contexts.size()}});
}

void TaskRunner::Stop(const std::string& controller, absl::string_view reason) {
  std::vector<std::shared_ptr<TaskContext>> stopping;
  {
    common::MutexLock lock(&mu_);
    for (auto it = running_.begin(); it != running_.end();) {
      if (!controller.empty() && it->first != controller) {
        ++it;
        continue;
      }
      for (auto& ctx : it->second.contexts) stopping.push_back(ctx);
      it = running_.erase(it);
    }
  }
  for (auto& ctx : stopping) ctx->Cancel(reason);
  if (!stopping.empty()) {
    common::LogInfo("background tasks stopped",
                    {{"controller", controller.empty() ? std::string("*") : controller},
                     {"reason", std::string(reason)}});
  }
}

std::vector<std::string> TaskRunner::Running() const {
  common::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, r] : running_) out.push_back(name);
  return out;
}

void TaskRunner::Status(const TaskContext& ctx, pluginpb::TaskState state, uint32_t restarts,
                        const std::string& error) {
  pluginpb::ReconcileResponse message;
  pluginpb::TaskStatus* status = message.mutable_task_status();
  status->set_controller(ctx.controller());
  status->set_task(ctx.task());
  status->set_state(state);
  status->set_restarts(restarts);
  status->set_last_error(error.substr(0, 1024));
  send_(message);
}

void TaskRunner::Run(std::shared_ptr<TaskContext> ctx, TaskFn fn) {
  uint32_t restarts = 0;
  std::string last_error;  // reported with every state: the last failure's message
  absl::Duration delay = initial_backoff_;
  while (!ctx->cancelled()) {
    Status(*ctx, pluginpb::TASK_STATE_RUNNING, restarts, last_error);
    absl::Status result;
    try {
      result = fn(*ctx);
    } catch (const std::exception& e) {
      result = absl::InternalError(absl::StrCat("exception: ", e.what()));
    } catch (...) {
      result = absl::InternalError("exception of unknown type");
    }
    if (ctx->cancelled()) break;
    if (result.ok()) {
      common::LogInfo("background task finished",
                      {{"controller", ctx->controller()}, {"task", ctx->task()}});
      Status(*ctx, pluginpb::TASK_STATE_FINISHED, restarts, last_error);
      return;
    }
    ++restarts;
    common::LogError("background task failed; restarting after backoff",
                     {{"controller", ctx->controller()},
                      {"task", ctx->task()},
                      {"restarts", restarts},
                      {"backoff", absl::FormatDuration(delay)},
                      {"error", result}});
    last_error = result.ToString();
    Status(*ctx, pluginpb::TASK_STATE_BACKOFF, restarts, last_error);
    if (ctx->Wait(delay)) break;
    delay = std::min(delay * 2, max_backoff_);
  }
  Status(*ctx, pluginpb::TASK_STATE_STOPPED, restarts, last_error);
}

}  // namespace internal
}  // namespace ctrlhost::sdk
