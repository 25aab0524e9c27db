// The scheduler: a controller's periodic resync and cron schedules, driven by a common::Clock.
//
// At each resync period the scheduler calls `fire(REASON_RESYNC, spread)` with spread =
// period * resync_jitter, and the runner re-queues every primary after a random delay within
// that spread, so keys arrive spread out rather than as one burst. At each cron firing it calls
// `fire(REASON_SCHEDULE, 0)`. Firings missed while the clock jumped (or the host was busy) are
// collapsed into one.
//
//   ASSIGN_OR_RETURN(SchedulerOptions options, SchedulerOptionsFromSpec(controller_spec));
//   options.clock = clock;
//   Scheduler scheduler(options, [runner](pb::Reason reason, absl::Duration spread) {
//     runner->EnqueueAll(reason, spread);
//   });
//   scheduler.Start();
//   ...
//   scheduler.Stop();
#ifndef CTRLHOST_RUNTIME_CONTROLLER_SCHEDULE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_SCHEDULE_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/cron.h"

namespace ctrlhost::controller {

struct SchedulerOptions {
  absl::Duration resync_period = absl::ZeroDuration();  // <= 0: no resync
  double resync_jitter = 0.1;  // keys spread over this fraction of the period
  std::vector<CronSchedule> schedules;
  common::Clock* clock = nullptr;  // borrowed; nullptr: Clock::Real()
};

// The resync period and parsed schedules of a ControllerSpec. Errors: kInvalidArgument for a
// negative resync period or an invalid cron expression or time zone (the message names the
// schedule's index).
absl::StatusOr<SchedulerOptions> SchedulerOptionsFromSpec(const pluginpb::ControllerSpec& spec);

// Thread-safe. Runs one thread between Start and Stop; `fire` is called on it, without any
// lock held, one call at a time (it should only queue keys). mu_ guards the stop flag.
class Scheduler {
 public:
  using Fire = std::function<void(pluginpb::Reason, absl::Duration spread)>;

  Scheduler(SchedulerOptions options, Fire fire);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  ~Scheduler();  // Stop()s

  // Starts the thread; the first resync is one period after Start. No-op when there is
  // nothing to schedule or it was started already. RESOURCE_EXHAUSTED when the system refuses
  // the thread.
  absl::Status Start();
  // Stops the thread and waits for a `fire` call in progress. Idempotent.
  void Stop();

  // The next firing time computed from `now` (InfiniteFuture when nothing is scheduled);
  // exposed for tests and the admin dump.
  absl::Time NextFiring(absl::Time now) const;

 private:
  void Loop(absl::Time start);

  // Constant after construction.
  const SchedulerOptions options_;
  const Fire fire_;
  common::Clock* const clock_;

  mutable common::Mutex mu_;
  common::CondVar cv_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;     // written by Start, joined by Stop (never concurrently: see Stop)
  common::Mutex join_mu_;  // serialises Start and Stop
};

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_SCHEDULE_H_
