// Manager::Apply: makes the running operators equal a loaded operator set.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/logging.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/manager_internal.h"
#include "runtime/manager/plugin_slot.h"

namespace ctrlhost::manager {

absl::StatusOr<config::OperatorSetDiff> Manager::Apply(
    const std::vector<config::OperatorSpec>& operators, bool dry_run,
    std::vector<std::string>* errors) {
  common::MutexLock apply_lock(&apply_mu_);
  std::vector<config::OperatorSpec> current;
  {
    common::MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("the manager is stopped");
    for (const auto& op : operators_) current.push_back(op->spec);
  }
  config::OperatorSetDiff diff = config::Diff(current, operators);
  if (dry_run || diff.empty()) return diff;
  NoteRecordDirs(operators);
  auto find_new = [&](const std::string& name) -> const config::OperatorSpec* {
    for (const config::OperatorSpec& op : operators) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  const ApplyReport report = [errors](absl::string_view message) {
    common::LogError("operator change not applied", {{"error", message}});
    if (errors != nullptr) errors->push_back(std::string(message));
  };

  // Removed operators: their controllers and plugins stop; the others are untouched.
  for (const std::string& name : diff.removed) RemoveOperator(name);
  // Added operators.
  std::vector<config::OperatorSpec> added;
  for (const std::string& name : diff.added) added.push_back(*find_new(name));
  if (!added.empty()) {
    if (absl::Status s = Start(added); !s.ok()) report(s.message());
  }
  // Changed operators: plugins added, removed, swapped; controller overrides re-applied.
  for (const config::OperatorChange& change : diff.changed) {
    if (const config::OperatorSpec* spec = find_new(change.name); spec != nullptr) {
      ApplyChange(change, *spec, report);
    }
  }
  Wake();
  return diff;
}

void Manager::RemoveOperator(const std::string& name) {
  std::unique_ptr<Operator> gone;
  {
    common::MutexLock lock(&mu_);
    for (auto it = operators_.begin(); it != operators_.end(); ++it) {
      if ((*it)->spec.name == name) {
        gone = std::move(*it);
        operators_.erase(it);
        break;
      }
    }
  }
  if (gone == nullptr) return;
  for (auto& p : gone->plugins) StopPlugin(p);
  if (options_.api_budget != nullptr) options_.api_budget->RemoveOperator(name);
  common::LogInfo("operator deleted", {{"operator", name}});
}

void Manager::ApplyChange(const config::OperatorChange& change, const config::OperatorSpec& spec,
                          const ApplyReport& report) {
  Operator* op = nullptr;
  {
    common::MutexLock lock(&mu_);
    for (auto& candidate : operators_) {
      if (candidate->spec.name == change.name) op = candidate.get();
    }
  }
  if (op == nullptr) return;
  SetApiWeight(spec);
  for (const std::string& name : change.removed_plugins) {
    std::shared_ptr<Plugin> gone;
    {
      common::MutexLock lock(&mu_);
      for (auto it = op->plugins.begin(); it != op->plugins.end(); ++it) {
        if ((*it)->name == name) {
          gone = *it;
          op->plugins.erase(it);
          break;
        }
      }
    }
    if (gone != nullptr) StopPlugin(gone);
  }
  for (const std::string& name : change.added_plugins) {
    const config::PluginSpec* plugin_spec = spec.FindPlugin(name);
    if (plugin_spec == nullptr) continue;
    absl::StatusOr<std::shared_ptr<Plugin>> p = NewPlugin(spec, *plugin_spec);
    if (!p.ok()) {
      report(p.status().message());
      continue;
    }
    common::MutexLock lock(&mu_);
    op->plugins.push_back(*std::move(p));
  }
  for (const std::string& name : change.changed_plugins) {
    const config::PluginSpec* plugin_spec = spec.FindPlugin(name);
    if (plugin_spec == nullptr) continue;
    SwapOptions swap;
    if (plugin_spec->startup_timeout.has_value())
      swap.ready_timeout = *plugin_spec->startup_timeout;
    SwapResult result = SwapPlugin(change.name, name, *plugin_spec, swap);
    if (!result.status.ok()) {
      report(absl::StrCat(
          plugin_spec->location.ToString(), ": plugin ", name,
          ": swap refused, the running instance keeps serving: ", result.status.message()));
    }
  }
  for (const std::string& name : change.shadow_changed_plugins) {
    const config::PluginSpec* plugin_spec = spec.FindPlugin(name);
    if (plugin_spec == nullptr) continue;
    common::MutexLock lock(&mu_);
    for (auto& p : op->plugins) {
      if (p->name != name) continue;
      p->spec.shadow = plugin_spec->shadow;
      p->file_shadow_pending = true;
      p->file_shadow_failures = 0;
      p->file_shadow_retry_at = absl::InfinitePast();
    }
    wake_ = true;  // the loop queues it at its next tick
    cv_.SignalAll();
  }
  if (change.controllers_changed || change.routes_changed || change.record_changed) {
    ReapplyOverrides(op, spec);
  }
  {
    common::MutexLock lock(&mu_);
    op->spec = spec;
  }
  common::LogInfo("operator updated", {{"operator", change.name}});
}

void Manager::ReapplyOverrides(Operator* op, const config::OperatorSpec& spec) {
  std::vector<std::shared_ptr<Plugin>> plugins;
  {
    common::MutexLock lock(&mu_);
    plugins = op->plugins;
    for (auto& p : plugins) {
      p->overrides = spec.controllers;
      p->routes = spec.routes;
      p->record = spec.record;
    }
  }
  // Plugins that run no routed controller are replaced first: one that ran a controller
  // which a route now gives to another plugin stops it before that plugin starts it.
  auto leads = [&](const std::shared_ptr<Plugin>& p) {
    for (const config::RouteSpec& r : spec.routes) {
      if (!r.to.empty() && r.to[0].plugin == p->name) return true;
    }
    return false;
  };
  std::stable_partition(plugins.begin(), plugins.end(),
                        [&](const std::shared_ptr<Plugin>& p) { return !leads(p); });
  for (auto& p : plugins) {
    absl::StatusOr<PluginView> view = FindPlugin(spec.name, p->name);
    if (view.ok() && view->group != nullptr) {
      ReplaceGroup(*view, view->group->describe(), /*force=*/true);
    }
  }
}

void Manager::SetApiWeight(const config::OperatorSpec& spec) {
  if (options_.api_budget == nullptr) return;
  // Checked by the parser (> 0, finite), so this cannot fail.
  options_.api_budget->SetOperatorWeight(spec.name, spec.api_weight.value_or(1)).IgnoreError();
}

}  // namespace ctrlhost::manager
