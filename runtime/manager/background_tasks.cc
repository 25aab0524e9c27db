#include "runtime/manager/background_tasks.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/cache/object.h"
#include "runtime/common/logging.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::manager {
namespace {

// Quotes untrusted text for an error message, bounded.
std::string Quote(absl::string_view s) {
  if (s.size() > 80) return absl::StrCat("\"", s.substr(0, 80), "\"...");
  return absl::StrCat("\"", s, "\"");
}

const char* TaskStateName(int state) {
  switch (state) {
    case pluginpb::TASK_STATE_RUNNING:
      return "running";
    case pluginpb::TASK_STATE_BACKOFF:
      return "backoff";
    case pluginpb::TASK_STATE_FINISHED:
      return "finished";
    case pluginpb::TASK_STATE_STOPPED:
      return "stopped";
    default:
      return nullptr;
  }
}

}  // namespace

BackgroundTasks::BackgroundTasks(BackgroundTasksOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()) {}

absl::StatusOr<std::string> BackgroundTasks::KeyFor(absl::string_view namespace_,
                                                    absl::string_view name, bool namespaced) {
  if (!kube::IsDns1123Subdomain(name).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("name ", Quote(name),
                     " is not a valid object name (RFC 1123 subdomain: [a-z0-9.-], at most 253 "
                     "characters, starting and ending with [a-z0-9])"));
  }
  if (!namespaced) {
    if (!namespace_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("namespace ", Quote(namespace_),
                       " given for a cluster-scoped primary kind (leave it empty)"));
    }
    return std::string(name);
  }
  if (namespace_.empty()) {
    return absl::InvalidArgumentError("namespace missing: the primary kind is namespaced");
  }
  if (!kube::IsDns1123Label(namespace_).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace ", Quote(namespace_),
                     " is not a valid namespace (RFC 1123 label: [a-z0-9-], at most 63 "
                     "characters, starting and ending with [a-z0-9])"));
  }
  return cache::ObjectKey(namespace_, name);
}

void BackgroundTasks::Sync(InstanceId instance, const std::vector<Wanted>& wanted,
                           absl::string_view stop_reason) {
  common::MutexLock sync_lock(&sync_mu_);
  std::vector<pluginpb::ReconcileRequest> notices;
  {
    common::MutexLock lock(&mu_);
    if (instance != instance_) {
      // A new stream: nothing runs on it yet. Tasks of the old one stop with its stream (and
      // the slot told a swapped-out instance to stop them).
      instance_ = instance;
      for (auto& [name, c] : controllers_) {
        c.started = false;
        c.report.running = false;
        for (auto& [task, report] : c.tasks) {
          if (report.state != "finished") report.state = "stopped";
        }
      }
    }
    for (auto& [name, c] : controllers_) c.wanted = false;
    for (const Wanted& w : wanted) {
      Controller& c = controllers_[w.controller];
      c.wanted = true;
      c.namespaced = w.namespaced;
      c.report.controller = w.controller;
      const double qps = w.enqueues_per_second.value_or(options_.enqueues_per_second);
      const int burst = w.enqueue_burst.value_or(options_.enqueue_burst);
      if (c.bucket == nullptr || qps != c.report.enqueues_per_second ||
          burst != c.report.enqueue_burst) {
        // New, or the operator file changed the limit: a full bucket at the new rate.
        c.bucket = std::make_unique<queue::TokenBucket>(qps, burst, clock_->Now());
        c.report.enqueues_per_second = qps;
        c.report.enqueue_burst = burst;
      }
      for (const std::string& task : w.tasks) {
        TaskReport& t = c.tasks[task];
        if (t.task.empty()) {
          t.controller = w.controller;
          t.task = task;
          t.state = "starting";
        }
      }
    }
    if (instance_.first == 0) {
      for (auto& [name, c] : controllers_) {
        c.started = false;
        c.report.running = false;
      }
      return;
    }
    for (auto& [name, c] : controllers_) {
      if (c.wanted && !c.started) {
        pluginpb::ReconcileRequest start;
        start.mutable_start_tasks()->set_controller(name);
        notices.push_back(std::move(start));
        // Started before the notice leaves: a task may enqueue before `send` returns, and
        // that enqueue must not be refused as "not started" (it would be lost). An unsent
        // notice takes it back below.
        c.started = true;
        c.report.running = true;
      } else if (!c.wanted && c.started) {
        pluginpb::ReconcileRequest stop;
        stop.mutable_stop_tasks()->set_controller(name);
        stop.mutable_stop_tasks()->set_reason(std::string(stop_reason));
        notices.push_back(std::move(stop));
        // From now on its enqueues are refused, whether the notice arrives or not.
        c.started = false;
        c.report.running = false;
      }
    }
  }
  for (pluginpb::ReconcileRequest& notice : notices) {
    const bool start = notice.has_start_tasks();
    const std::string controller =
        start ? notice.start_tasks().controller() : notice.stop_tasks().controller();
    absl::Status sent = options_.send ? options_.send(notice) : absl::UnavailableError("no sender");
    common::LogInfo(
        start ? "background tasks started" : "background tasks stopped",
        {{"operator", options_.operator_name},
         {"plugin", options_.plugin},
         {"controller", controller},
         {"generation", instance.first},
         {"reason", start ? std::string("controller running") : std::string(stop_reason)},
         {"sent", sent}});
    if (!start || sent.ok()) continue;
    // An unsent start is retried at the next Sync; until then the controller's enqueues are
    // refused.
    common::MutexLock lock(&mu_);
    auto it = controllers_.find(controller);
    if (it != controllers_.end() && instance_ == instance) {
      it->second.started = false;
      it->second.report.running = false;
    }
  }
}

void BackgroundTasks::StopAll(absl::string_view reason) {
  InstanceId instance;
  {
    common::MutexLock lock(&mu_);
    instance = instance_;
  }
  Sync(instance, {}, reason);
}

absl::Status BackgroundTasks::Refuse(const pluginpb::TaskEnqueue& enqueue, absl::Status why) {
  uint64_t suppressed = 0;
  if (refused_log_.Allow(&suppressed)) {
    common::LogWarning("background task enqueue refused",
                       {{"operator", options_.operator_name},
                        {"plugin", options_.plugin},
                        {"controller", enqueue.controller().substr(0, 80)},
                        {"task", enqueue.task().substr(0, 80)},
                        {"error", why},
                        {"suppressed", suppressed}});
  }
  if (options_.send) {
    pluginpb::ReconcileRequest notice;
    pluginpb::TaskEnqueueRefused* refused = notice.mutable_enqueue_refused();
    refused->set_enqueue_id(enqueue.enqueue_id());
    refused->set_code(static_cast<int32_t>(why.code()));
    refused->set_message(std::string(why.message()));
    (void)options_.send(std::move(notice));  // best effort: the plugin may be gone
  }
  return why;
}

absl::Status BackgroundTasks::OnPluginMessage(uint64_t generation,
                                              const pluginpb::ReconcileResponse& message) {
  if (message.has_task_status()) {
    const pluginpb::TaskStatus& s = message.task_status();
    const char* state = TaskStateName(s.state());
    if (state == nullptr) {
      return absl::InvalidArgumentError("task_status with an unspecified or unknown state");
    }
    bool log_failure = false;
    {
      common::MutexLock lock(&mu_);
      if (generation != instance_.first) {
        return absl::FailedPreconditionError("task_status from an instance that does not serve");
      }
      auto it = controllers_.find(s.controller());
      if (it == controllers_.end()) {
        return absl::NotFoundError(
            absl::StrCat("task_status for unknown controller ", Quote(s.controller())));
      }
      auto t = it->second.tasks.find(s.task());
      if (t == it->second.tasks.end()) {
        return absl::NotFoundError(absl::StrCat("task_status for unknown task ", Quote(s.task())));
      }
      TaskReport& report = t->second;
      log_failure = s.state() == pluginpb::TASK_STATE_BACKOFF && s.restarts() != report.restarts;
      report.state = state;
      report.restarts = s.restarts();
      report.last_error = s.last_error().substr(0, 1024);
      report.updated = clock_->Now();
    }
    if (log_failure) {
      uint64_t suppressed = 0;
      if (refused_log_.Allow(&suppressed)) {
        common::LogWarning("background task failed; the plugin restarts it with backoff",
                           {{"operator", options_.operator_name},
                            {"plugin", options_.plugin},
                            {"controller", s.controller()},
                            {"task", s.task()},
                            {"restarts", s.restarts()},
                            {"error", s.last_error().substr(0, 1024)},
                            {"suppressed", suppressed}});
      }
    }
    return absl::OkStatus();
  }
  if (!message.has_task_enqueue()) {
    return absl::InvalidArgumentError("not a plugin-to-host message");
  }
  const pluginpb::TaskEnqueue& enqueue = message.task_enqueue();
  std::string key;
  absl::Status refusal;
  {
    common::MutexLock lock(&mu_);
    auto it = controllers_.find(enqueue.controller());
    if (it == controllers_.end() || !it->second.started || generation != instance_.first) {
      refusal = absl::FailedPreconditionError(absl::StrCat(
          "the background tasks of controller ", Quote(enqueue.controller()),
          generation != instance_.first
              ? absl::StrCat(" do not run on instance ", generation, " (it does not serve)")
              : std::string(" do not run (not started, stopped, or not this plugin's)")));
      if (it != controllers_.end()) {
        ++it->second.report.refused_not_running;
        it->second.report.last_refusal = std::string(refusal.message());
      }
    } else {
      Controller& c = it->second;
      absl::StatusOr<std::string> k = KeyFor(enqueue.namespace_(), enqueue.name(), c.namespaced);
      const absl::Time now = clock_->Now();
      if (!k.ok()) {
        ++c.report.refused_invalid;
        refusal = k.status();
      } else if (c.bucket->Tokens(now) < 1) {
        ++c.report.refused_rate_limited;
        refusal = absl::ResourceExhaustedError(absl::StrCat(
            "controller ", Quote(enqueue.controller()), " is over its enqueue rate of ",
            c.report.enqueues_per_second, "/s (burst ", c.report.enqueue_burst,
            "; spec.controllers[].backgroundTasks in the operator file)"));
      } else {
        c.bucket->Reserve(now);
        ++c.report.enqueued;
        key = *std::move(k);
      }
      if (!refusal.ok()) c.report.last_refusal = std::string(refusal.message());
    }
  }
  if (!refusal.ok()) return Refuse(enqueue, std::move(refusal));
  // False when the controller stopped meanwhile or the key is outside its namespaces: the key
  // is then not queued, which is what a stopped controller means.
  if (options_.enqueue) (void)options_.enqueue(enqueue.controller(), key);
  return absl::OkStatus();
}

std::vector<TaskControllerReport> BackgroundTasks::Report() const {
  common::MutexLock lock(&mu_);
  std::vector<TaskControllerReport> out;
  for (const auto& [name, c] : controllers_) {
    TaskControllerReport r = c.report;
    r.running = c.started;
    for (const auto& [task, t] : c.tasks) r.tasks.push_back(t);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ctrlhost::manager
