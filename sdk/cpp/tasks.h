// Background tasks: long-running functions of a controller that the host starts and stops
// (CAPABILITY_BACKGROUND_TASKS; docs/protocol.md, "Background tasks").
//
//   plugin.Add(sdk::ControllerBuilder("poller")
//                  .For("", "v1", "ConfigMap")
//                  .BackgroundTask("watch-file", [](sdk::TaskContext& ctx) -> absl::Status {
//                    while (!ctx.Wait(absl::Seconds(1))) {       // true once stopped
//                      for (const auto& [ns, name] : ReadChanges()) {
//                        if (absl::Status s = ctx.Enqueue(ns, name); !s.ok()) return s;
//                      }
//                    }
//                    return absl::OkStatus();
//                  })
//                  .Reconcile(Reconcile));
//
// The host sends StartTasks when the controller starts on this plugin instance and StopTasks
// when it stops (operator removed, plugin swapped out, leadership lost, host shutting down); the
// tasks of a Reconcile stream also stop when that stream ends. A task that returns an error or
// throws is logged, reported to the host (shown in /debug/dump with its restarts and last
// error) and started again after a backoff (PluginOptions::task_backoff, doubling up to
// task_max_backoff); it never takes the plugin down. A task that returns OK while not stopped is
// finished and not restarted. A task must return promptly once stopped (Wait returns true,
// cancelled() turns true): the stream waits for its tasks when it ends.
//
// Thread-safety: each task runs on its own thread; TaskContext is thread-safe.
#ifndef CTRLHOST_SDK_CPP_TASKS_H_
#define CTRLHOST_SDK_CPP_TASKS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::sdk {

// Sends a plugin-to-host message on the stream the task was started on. Thread-safe.
using TaskSendFn = std::function<void(const pluginpb::ReconcileResponse&)>;

// InvalidArgument when (namespace, name) is not a well-formed key, by the host's rules (name an
// RFC 1123 subdomain of at most 253 characters, namespace "" or an RFC 1123 label).
absl::Status CheckTaskKey(absl::string_view namespace_, absl::string_view name);

// What a task function gets. Thread-safe.
class TaskContext {
 public:
  TaskContext(std::string controller, std::string task, TaskSendFn send);
  TaskContext(const TaskContext&) = delete;
  TaskContext& operator=(const TaskContext&) = delete;

  const std::string& controller() const { return controller_; }
  const std::string& task() const { return task_; }

  // True once the host stopped the task (or its stream ended).
  bool cancelled() const;
  // Sleeps up to `timeout` (real time); true as soon as the task is stopped.
  bool Wait(absl::Duration timeout);
  // Why it was stopped, once cancelled: "plugin swapped out", "stream ended", ...
  std::string stop_reason() const;

  // Asks the host to reconcile the primary (namespace, name) of this controller.
  // InvalidArgument for a malformed key; OK and nothing sent once the task is stopped. The host
  // may still refuse it (controller stopped, over its enqueue rate); the SDK logs refusals.
  absl::Status Enqueue(absl::string_view namespace_, absl::string_view name);

  // Stops the task (the SDK's runner calls it).
  void Cancel(absl::string_view reason);

 private:
  // Constant after construction.
  const std::string controller_;
  const std::string task_;
  const TaskSendFn send_;

  mutable common::Mutex mu_;
  common::CondVar cv_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

// A task: OK when it is done (or stopped); an error (or an exception) means it failed and is
// restarted after a backoff.
using TaskFn = std::function<absl::Status(TaskContext&)>;

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_TASKS_H_
