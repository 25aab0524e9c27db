// TaskRunner: the background tasks started on one Reconcile stream (internal to the SDK's
// server; see tasks.h for the behaviour).
//
// Thread-safety: thread-safe; `mu_` guards the running set. Start and Stop never block on a
// task; the destructor stops every task and joins their threads.
#ifndef CTRLHOST_SDK_CPP_TASK_RUNNER_H_
#define CTRLHOST_SDK_CPP_TASK_RUNNER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/mutex.h"
#include "sdk/cpp/tasks.h"

namespace ctrlhost::sdk::internal {

class TaskRunner {
 public:
  // The tasks (name, function) of a controller; empty for an unknown one.
  using TasksOf = std::function<std::vector<std::pair<std::string, TaskFn>>(const std::string&)>;

  TaskRunner(TasksOf tasks_of, TaskSendFn send, absl::Duration initial_backoff,
             absl::Duration max_backoff);
  ~TaskRunner();  // StopAll + join
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Starts the controller's tasks unless they run already (idempotent).
  void Start(const std::string& controller);
  // Stops the tasks of `controller` ("" = all); their threads are joined later (destructor).
  void Stop(const std::string& controller, absl::string_view reason);
  // Controllers whose tasks run, sorted.
  std::vector<std::string> Running() const;

 private:
  struct RunningTasks {
    std::vector<std::shared_ptr<TaskContext>> contexts;
  };
  void Run(std::shared_ptr<TaskContext> ctx, TaskFn fn);
  void Status(const TaskContext& ctx, pluginpb::TaskState state, uint32_t restarts,
              const std::string& error);

  // Constant after construction.
  const TasksOf tasks_of_;
  const TaskSendFn send_;
  const absl::Duration initial_backoff_;
  const absl::Duration max_backoff_;

  mutable common::Mutex mu_;
  std::map<std::string, RunningTasks> running_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);  // every task thread, joined at the end
};

}  // namespace ctrlhost::sdk::internal

#endif  // CTRLHOST_SDK_CPP_TASK_RUNNER_H_
