// What the manager shows: readiness (Ready, Started, AllPluginsRefused), the figures for
// /metrics (Collect), the admin API's snapshots (Report, Operators) and /debug/dump (DumpYaml).
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/dump.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/manager_internal.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/manager/watch_readiness.h"
#include "runtime/observe/adapters.h"

namespace ctrlhost::manager {

using internal::StateName;

absl::Status Manager::Ready() const { return Check(nullptr); }

absl::Status Manager::Started(std::vector<std::string>* pending,
                              std::vector<std::string>* refused) const {
  std::vector<std::string> ignored;
  return Check(pending != nullptr ? pending : &ignored, refused);
}

absl::Status Manager::Check(std::vector<std::string>* pending,
                            std::vector<std::string>* refused) const {
  std::vector<std::string> not_ready;
  const absl::Time now = clock_->Now();
  for (const PluginView& view : AllPlugins()) {
    const Plugin* p = view.plugin.get();
    const std::string name = absl::StrCat(p->operator_name, "/", p->name);
    plugin::PluginStatus status = p->slot->status();
    if (!view.cache_error.empty()) {
      not_ready.push_back(absl::StrCat("plugin ", name, ": ", view.cache_error));
    } else if (refused != nullptr && status.state == plugin::PluginState::kFailed) {
      refused->push_back(absl::StrCat("operator ", p->operator_name, ", plugin ", p->name, ": ",
                                      status.last_error.message()));
    } else if (status.state != plugin::PluginState::kReady) {
      not_ready.push_back(absl::StrCat(
          "plugin ", name, " is ", StateName(status.state),
          status.last_error.ok() ? "" : absl::StrCat(": ", status.last_error.message())));
    } else if (status.health != plugin::HealthStatus::kServing) {
      // It drains, say: its requests wait in the host (docs/protocol.md, "Liveness").
      not_ready.push_back(absl::StrCat(
          "plugin ", name, " is not serving: it reports ", plugin::HealthStatusName(status.health),
          " since ",
          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", status.health_since, absl::UTCTimeZone()), "; ",
          status.held, " request(s) wait for it"));
    } else if (view.group == nullptr) {
      not_ready.push_back(
          absl::StrCat("plugin ", name, ": controllers not started",
                       view.group_error.empty() ? " yet" : absl::StrCat(": ", view.group_error)));
    } else {
      for (const ControllerStatus& c : view.group->Status()) {
        if (c.state == "pending") {
          const std::string why =
              absl::StrCat("controller ", c.name, " pending: ", c.pending_reason);
          if (pending != nullptr) {
            pending->push_back(why);
          } else {
            not_ready.push_back(why);
          }
        } else {
          // A failing watch says why (403s at once, others after the grace period); a cache
          // that has not listed yet without a failure is just not synced yet.
          bool explained = false;
          for (const watch::ReflectorMetrics& w : c.watch_metrics) {
            if (!w.failing) continue;
            std::string problem = WatchReadinessProblem(w, now, options_.watch_stale_after);
            if (problem.empty()) continue;
            not_ready.push_back(absl::StrCat("controller ", c.name, ": ", problem));
            explained = true;
          }
          if (!c.synced && !explained) {
            not_ready.push_back(absl::StrCat("controller ", c.name, ": caches not synced"));
          }
        }
      }
    }
  }
  if (not_ready.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrJoin(not_ready, "; "));
}

std::vector<std::string> Manager::QueueWarnings() const {
  std::vector<std::string> warnings;
  for (const PluginView& view : AllPlugins()) {
    if (view.group == nullptr) continue;
    for (const ControllerStatus& c : view.group->Status()) {
      const queue::QueueMetrics& q = c.metrics.queue;
      if (q.max_wait == absl::InfiniteDuration()) continue;
      for (int p = queue::kPriorities - 1; p >= 0; --p) {
        if (q.oldest_key[p].empty() || q.oldest_waiting[p] <= q.max_wait) continue;
        warnings.push_back(
            absl::StrCat("controller ", view.plugin->operator_name, "/", c.name, ": key ",
                         q.oldest_key[p], " has waited ",
                         absl::FormatDuration(absl::Trunc(q.oldest_waiting[p], absl::Seconds(1))),
                         " at ", queue::PriorityName(static_cast<queue::Priority>(p)),
                         " priority (maxWait ", absl::FormatDuration(q.max_wait), ")"));
        break;
      }
    }
  }
  return warnings;
}

std::vector<std::string> Manager::AllPluginsRefused() const {
  std::vector<std::string> refused;
  for (const PluginView& view : AllPlugins()) {
    const plugin::PluginStatus status = view.plugin->slot->status();
    if (status.state != plugin::PluginState::kFailed) return {};
    refused.push_back(absl::StrCat("operator ", view.plugin->operator_name, ", plugin ",
                                   view.plugin->name, ": ", status.last_error.message()));
  }
  return refused;
}

absl::Status Manager::WaitReady(absl::Duration timeout) const {
  // Real time: this is a bounded wait for callers (the CLI, tests), not host logic.
  common::Clock* real = common::Clock::Real();
  const absl::Time deadline = real->Now() + timeout;
  absl::Status status = Ready();
  while (!status.ok() && real->Now() < deadline) {
    // A refused plugin is not restarted until the operators change, so Ready() cannot pass:
    // say so now rather than at the deadline.
    for (const PluginView& view : AllPlugins()) {
      const plugin::PluginStatus plugin_status = view.plugin->slot->status();
      if (plugin_status.state == plugin::PluginState::kFailed) {
        return absl::FailedPreconditionError(
            absl::StrCat("operator ", view.plugin->operator_name, ", plugin ", view.plugin->name,
                         " was refused: ", plugin_status.last_error.message()));
      }
    }
    real->SleepFor(absl::Milliseconds(50));
    status = Ready();
  }
  return status;
}
void Manager::Collect(observe::Figures& figures) const {
  for (const PluginView& view : AllPlugins()) {
    uint64_t cache_bytes = 0;
    if (view.group != nullptr) {
      view.group->Collect(figures);
      cache_bytes = CacheBytes(view.group->Status());
    }
    const Plugin& p = *view.plugin;
    const SlotStatus slot = p.slot->Snapshot();
    const plugin::PluginStatus& status = slot.serving;
    PluginRequestFigures requests = p.chain->Figures();
    observe::PluginFigures f;
    f.operator_name = p.operator_name;
    f.plugin = p.name;
    f.up = status.state == plugin::PluginState::kReady;
    f.restarts_total = status.restarts;
    f.swaps_total = slot.swaps;
    f.swap_failures_total = slot.failed_swaps;
    f.in_flight = static_cast<double>(requests.in_flight);
    f.requests_total = requests.requests_total;
    f.request_duration = observe::FromDurationHistogram(requests.duration);
    f.cache_bytes = static_cast<double>(cache_bytes);
    figures.plugins.push_back(std::move(f));
    if (std::shared_ptr<ShadowComparator> comparator = p.slot->shadow_comparator()) {
      for (const auto& [controller, c] : comparator->Snapshot().controllers) {
        observe::ShadowFigures s;
        s.operator_name = p.operator_name;
        s.plugin = p.name;
        s.controller = controller;
        s.same = c.same;
        s.different = c.different;
        s.shadow_errors = c.shadow_errors;
        s.dropped = c.dropped;
        figures.shadows.push_back(std::move(s));
      }
    }
    for (const TaskControllerReport& r : p.tasks->Report()) {
      observe::TaskEnqueueFigures t;
      t.operator_name = p.operator_name;
      t.plugin = p.name;
      t.controller = r.controller;
      t.accepted_total = r.enqueued;
      t.refused_rate_limited_total = r.refused_rate_limited;
      t.refused_invalid_total = r.refused_invalid;
      t.refused_not_running_total = r.refused_not_running;
      figures.task_enqueues.push_back(std::move(t));
    }
  }
  for (const watch::ReflectorMetrics& m : registry_->Metrics()) {
    figures.watches.push_back(observe::FromReflectorMetrics(m));
  }
}

std::vector<Manager::PluginReport> Manager::Report() const {
  std::vector<PluginReport> out;
  for (const PluginView& view : AllPlugins()) {
    PluginReport r;
    r.operator_name = view.plugin->operator_name;
    r.name = view.plugin->name;
    r.spec = view.spec;
    r.slot = view.plugin->slot->Snapshot();
    if (std::shared_ptr<ShadowComparator> comparator = view.plugin->slot->shadow_comparator()) {
      r.shadow_figures = comparator->Snapshot();
      common::MutexLock lock(&mu_);
      r.shadow_spec = view.plugin->shadow_spec;
    }
    r.group_error = view.group_error;
    if (view.group != nullptr) {
      r.controllers = view.group->Status();
      pluginpb::DescribeResponse describe = view.group->describe();
      r.controller_specs.assign(describe.controllers().begin(), describe.controllers().end());
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<config::OperatorSpec> Manager::Operators() const {
  std::vector<config::OperatorSpec> out;
  common::MutexLock lock(&mu_);
  for (const auto& op : operators_) out.push_back(op->spec);
  return out;
}

std::string Manager::DumpYaml() const {
  DumpInput input;
  for (const PluginView& view : AllPlugins()) {
    DumpPlugin dp;
    dp.operator_name = view.plugin->operator_name;
    dp.plugin = view.plugin->name;
    SlotStatus slot = view.plugin->slot->Snapshot();
    const plugin::PluginStatus& status = slot.serving;
    dp.state = StateName(status.state);
    dp.pid = static_cast<int>(status.pid);
    dp.generation = slot.serving_generation;
    dp.swaps = slot.swaps;
    dp.last_swap_error = slot.last_swap_error;
    if (slot.has_canary) {
      dp.canary = absl::StrCat("generation ", slot.canary_generation, " ",
                               StateName(slot.canary.state), " ", slot.canary_percent, "%");
    }
    if (slot.has_shadow) {
      dp.shadow = absl::StrCat("generation ", slot.shadow_generation, " ",
                               StateName(slot.shadow.state), " ", slot.shadow_percent, "%");
      if (std::shared_ptr<ShadowComparator> c = view.plugin->slot->shadow_comparator()) {
        dp.shadow_figures = c->Snapshot();
      }
    }
    dp.address = slot.serving_socket.empty()
                     ? (view.spec.endpoint() != nullptr ? view.spec.endpoint()->address : "")
                     : absl::StrCat("unix://", slot.serving_socket);
    dp.restarts = status.restarts;
    if (status.state == plugin::PluginState::kReady) {
      dp.health = plugin::HealthStatusName(status.health);
      dp.health_since = status.health_since;
      dp.held = status.held;
    }
    if (status.describe != nullptr) {
      dp.reported_name = status.describe->plugin_name();
      dp.reported_version = status.describe->plugin_version();
    }
    if (!status.last_error.ok()) dp.last_error = status.last_error.ToString();
    dp.group_error = view.group_error;
    dp.cache_error = view.cache_error;
    dp.tasks = view.plugin->tasks->Report();
    if (view.group != nullptr) dp.controllers = view.group->Status();
    for (const auto& routes : view.route_dispatchers) {
      const RouteFigures f = routes->Figures();
      dp.routes.push_back(
          DumpRoutes{routes->controller(), f.routed, f.unrouted, f.ambiguous, f.moved});
    }
    input.plugins.push_back(std::move(dp));
  }
  input.now = clock_->Now();
  input.watches = registry_->Metrics();
  return RenderDump(input);
}

}  // namespace ctrlhost::manager
