#include "runtime/controller/schedule.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::controller {

absl::StatusOr<SchedulerOptions> SchedulerOptionsFromSpec(const pluginpb::ControllerSpec& spec) {
  SchedulerOptions options;
  if (spec.has_resync_period()) {
    const absl::Duration period = absl::Seconds(spec.resync_period().seconds()) +
                                  absl::Nanoseconds(spec.resync_period().nanos());
    if (period < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("controller ", spec.name(), ": resync_period must not be negative"));
    }
    options.resync_period = period;
  }
  for (int i = 0; i < spec.schedules_size(); ++i) {
    absl::StatusOr<CronSchedule> cron =
        CronSchedule::Parse(spec.schedules(i).cron(), spec.schedules(i).time_zone());
    if (!cron.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("controller ", spec.name(), ": schedules[", i,
                                                     "]: ", cron.status().message()));
    }
    options.schedules.push_back(*std::move(cron));
  }
  return options;
}

Scheduler::Scheduler(SchedulerOptions options, Fire fire)
    : options_(std::move(options)),
      fire_(std::move(fire)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()) {}

Scheduler::~Scheduler() { Stop(); }

absl::Status Scheduler::Start() {
  common::MutexLock join_lock(&join_mu_);
  {
    common::MutexLock lock(&mu_);
    if (started_ || stopped_) return absl::OkStatus();
    if (options_.resync_period <= absl::ZeroDuration() && options_.schedules.empty()) {
      return absl::OkStatus();
    }
    started_ = true;
  }
  // Read the clock here, not on the new thread, so that time moving before the thread runs
  // counts towards the first firing.
  const absl::Time start = clock_->Now();
  try {
    thread_ = std::thread([this, start] { Loop(start); });
  } catch (const std::system_error& e) {
    common::MutexLock lock(&mu_);
    started_ = false;
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start the resync/schedule thread: ", e.what()));
  }
  return absl::OkStatus();
}

void Scheduler::Stop() {
  common::MutexLock join_lock(&join_mu_);
  {
    common::MutexLock lock(&mu_);
    stopped_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

absl::Time Scheduler::NextFiring(absl::Time now) const {
  absl::Time next = absl::InfiniteFuture();
  if (options_.resync_period > absl::ZeroDuration()) next = now + options_.resync_period;
  for (const CronSchedule& cron : options_.schedules) next = std::min(next, cron.Next(now));
  return next;
}

void Scheduler::Loop(absl::Time start) {
  absl::Time next_resync = options_.resync_period > absl::ZeroDuration()
                               ? start + options_.resync_period
                               : absl::InfiniteFuture();
  std::vector<absl::Time> next_cron;
  for (const CronSchedule& cron : options_.schedules) next_cron.push_back(cron.Next(start));

  common::MutexLock lock(&mu_);
  while (!stopped_) {
    absl::Time next = next_resync;
    for (absl::Time t : next_cron) next = std::min(next, t);
    if (next == absl::InfiniteFuture()) break;                  // nothing left to fire
    if (!clock_->WaitWithDeadline(&mu_, &cv_, next)) continue;  // signalled (or spurious)
    if (stopped_) break;
    const absl::Time now = clock_->Now();
    bool resync = false;
    bool scheduled = false;
    if (now >= next_resync) {
      resync = true;
      next_resync += options_.resync_period;
      if (next_resync <= now) next_resync = now + options_.resync_period;  // missed: collapse
    }
    for (size_t i = 0; i < next_cron.size(); ++i) {
      if (now >= next_cron[i]) {
        scheduled = true;
        next_cron[i] = options_.schedules[i].Next(now);
      }
    }
    mu_.Unlock();
    if (resync) fire_(pluginpb::REASON_RESYNC, options_.resync_period * options_.resync_jitter);
    if (scheduled) fire_(pluginpb::REASON_SCHEDULE, absl::ZeroDuration());
    mu_.Lock();
  }
}

}  // namespace ctrlhost::controller
