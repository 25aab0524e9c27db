// BackgroundTasks: the host side of one plugin's background tasks (CAPABILITY_BACKGROUND_TASKS,
// docs/protocol.md section 4).
//
// A plugin declares tasks per controller (ControllerSpec.background_tasks); they run in the
// plugin. The host decides when: a controller's tasks run on the serving instance while the
// controller runs and dispatches there (this host leads, the controller's kinds are served, the
// operator is loaded). `Sync` is told that wanted set and the serving instance, and sends
// StartTasks / StopTasks on the instance's stream for the difference. A new instance (a swap,
// a crash restart) starts from nothing: its stream is new, and the plugin stops the tasks of a
// stream when that stream ends. A swapped-out instance gets StopTasks from the plugin slot
// before it drains (plugin_slot.cc).
//
// Tasks enqueue keys with TaskEnqueue messages. `OnPluginMessage` accepts one only when
//   - it comes from the serving instance and the controller's tasks were started there and not
//     stopped (FAILED_PRECONDITION otherwise: a stopped task cannot enqueue),
//   - namespace and name are well-formed (a DNS-1123 subdomain name; a DNS-1123 label
//     namespace, present exactly when the primary kind is namespaced: INVALID_ARGUMENT),
//   - the controller's token bucket has a token (RESOURCE_EXHAUSTED otherwise; the bucket's
//     rate and burst are the controller's `Wanted` limits, from the operator file's
//     spec.controllers[].backgroundTasks, else the options' defaults; a changed limit replaces
//     the bucket at the next Sync),
// and then enqueues the controller's own primary key (reason REASON_BACKGROUND_TASK): a task
// can only ever enqueue its own controller's primaries. A refusal is counted, logged (rate
// limited: the warning "background task enqueue refused") and sent back to the plugin as
// TaskEnqueueRefused; Report() carries the counters for /debug/dump and /metrics. TaskStatus
// messages (a task ran, failed, restarts with backoff, stopped) are kept per task for /debug/dump
// and logged on failure.
//
// Example (the manager's wiring):
//   BackgroundTasks tasks({.operator_name = "shop", .plugin = "webapp", .send = send,
//                          .enqueue = enqueue});
//   supervisor_options.on_plugin_message = [&](pluginpb::ReconcileResponse m) {
//     tasks.OnPluginMessage(generation, m);
//   };
//   tasks.Sync({generation, restarts}, {{"webapp", true, {"poller"}}}, "controller stopped");
//
// Thread-safety: thread-safe. `mu_` guards the state; it is never held while a notice is sent
// or a key enqueued. `sync_mu_` serialises Sync so that notices leave in decision order.
#ifndef CTRLHOST_RUNTIME_MANAGER_BACKGROUND_TASKS_H_
#define CTRLHOST_RUNTIME_MANAGER_BACKGROUND_TASKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/queue/rate_limit.h"

namespace ctrlhost::manager {

struct BackgroundTasksOptions {
  std::string operator_name;
  std::string plugin;
  // Each controller's default enqueue budget (a Wanted may set its own): a token bucket of
  // `enqueue_burst` refilled at `enqueues_per_second`.
  double enqueues_per_second = 20;
  int enqueue_burst = 50;
  common::Clock* clock = nullptr;  // null: Clock::Real()
  // Sends a notice on the serving instance's stream (PluginSlot::SendNotice). Must not block.
  std::function<absl::Status(pluginpb::ReconcileRequest)> send;
  // Queues `key` ("namespace/name" or "name") on `controller`'s runner with
  // REASON_BACKGROUND_TASK; false when the controller does not run (the key is then refused).
  std::function<bool(const std::string& controller, const std::string& key)> enqueue;
};

// One task's last reported state, for /debug/dump.
struct TaskReport {
  std::string controller;
  std::string task;
  std::string state;  // "running", "backoff", "finished", "stopped"; "starting" before a report
  uint32_t restarts = 0;
  std::string last_error;
  absl::Time updated = absl::InfinitePast();
};

// Per controller whose tasks ran on this host: what the tasks enqueued and what was refused.
struct TaskControllerReport {
  std::string controller;
  bool running = false;            // started on the serving instance and not stopped
  double enqueues_per_second = 0;  // the token bucket in effect
  int enqueue_burst = 0;
  uint64_t enqueued = 0;
  uint64_t refused_invalid = 0;       // malformed namespace/name
  uint64_t refused_not_running = 0;   // tasks not started, stopped, or another instance's
  uint64_t refused_rate_limited = 0;  // over the token bucket
  std::string last_refusal;
  std::vector<TaskReport> tasks;
};

class BackgroundTasks {
 public:
  // A controller whose tasks should run now.
  struct Wanted {
    std::string controller;
    bool namespaced = true;  // its primary kind's scope
    std::vector<std::string> tasks;
    // The controller's enqueue budget; unset: the options' default.
    std::optional<double> enqueues_per_second;
    std::optional<int> enqueue_burst;
  };
  // The serving instance as {generation, restarts}; {0, 0}: none is READY.
  using InstanceId = std::pair<uint64_t, uint64_t>;

  explicit BackgroundTasks(BackgroundTasksOptions options);
  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;

  // Makes the tasks running on `instance` equal `wanted`: StartTasks for a controller not
  // started there yet, StopTasks (with `stop_reason`) for one started and no longer wanted. A
  // notice that cannot be sent (the instance just went away) is retried at the next Sync.
  void Sync(InstanceId instance, const std::vector<Wanted>& wanted, absl::string_view stop_reason);
  // Stops every task (Sync with nothing wanted), e.g. before the controllers stop.
  void StopAll(absl::string_view reason);

  // A plugin-to-host message of instance `generation` (task_enqueue or task_status). Returns
  // OK or why the enqueue was refused (already counted, logged and answered to the plugin).
  absl::Status OnPluginMessage(uint64_t generation, const pluginpb::ReconcileResponse& message);

  std::vector<TaskControllerReport> Report() const;

  // Validates a TaskEnqueue's key for a primary kind of scope `namespaced`; returns the
  // runner key. Exposed for tests.
  static absl::StatusOr<std::string> KeyFor(absl::string_view namespace_, absl::string_view name,
                                            bool namespaced);

 private:
  struct Controller {
    bool wanted = false;
    bool started = false;  // StartTasks sent on instance_
    bool namespaced = true;
    std::unique_ptr<queue::TokenBucket> bucket;  // at report.enqueues_per_second/enqueue_burst
    TaskControllerReport report;
    std::map<std::string, TaskReport> tasks;
  };
  absl::Status Refuse(const pluginpb::TaskEnqueue& enqueue, absl::Status why);

  // Constant after construction.
  const BackgroundTasksOptions options_;
  common::Clock* const clock_;
  // "enqueue refused" warnings: 1/s after a burst of 10. Thread-safe itself.
  common::LogLimiter refused_log_{{.per_second = 1, .burst = 10, .clock = clock_}};

  common::Mutex sync_mu_;  // serialises Sync; acquired before mu_

  mutable common::Mutex mu_;
  InstanceId instance_ ABSL_GUARDED_BY(mu_){0, 0};
  std::map<std::string, Controller> controllers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_BACKGROUND_TASKS_H_
