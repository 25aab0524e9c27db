#include "runtime/config/operator_spec.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace ctrlhost::config {
namespace {

template <typename T>
absl::flat_hash_map<std::string, const T*> ByName(const std::vector<T>& items) {
  absl::flat_hash_map<std::string, const T*> out;
  for (const T& item : items) out[item.name] = &item;
  return out;
}

}  // namespace

std::string SourceLocation::ToString() const {
  if (line <= 0) return file;
  return absl::StrCat(file, ":", line, ":", column);
}

bool PluginSpec::operator==(const PluginSpec& o) const {
  return name == o.name && source == o.source && startup_timeout == o.startup_timeout &&
         shutdown_grace_period == o.shutdown_grace_period && request_timeout == o.request_timeout &&
         max_in_flight == o.max_in_flight && max_cache_bytes == o.max_cache_bytes &&
         max_controllers == o.max_controllers && not_serving_timeout == o.not_serving_timeout;
}

bool ControllerSpec::operator==(const ControllerSpec& o) const {
  return name == o.name && plugin == o.plugin &&
         max_concurrent_reconciles == o.max_concurrent_reconciles && namespaces == o.namespaces &&
         label_selector == o.label_selector && resync_period == o.resync_period &&
         disabled == o.disabled && rate_limit == o.rate_limit && sharded == o.sharded &&
         host_status == o.host_status && task_enqueue_qps == o.task_enqueue_qps &&
         task_enqueue_burst == o.task_enqueue_burst && priorities == o.priorities &&
         max_wait == o.max_wait && api_weight == o.api_weight;
}

const PluginSpec* OperatorSpec::FindPlugin(const std::string& plugin_name) const {
  for (const PluginSpec& p : plugins) {
    if (p.name == plugin_name) return &p;
  }
  return nullptr;
}

const RouteSpec* OperatorSpec::FindRoute(const std::string& controller) const {
  for (const RouteSpec& r : routes) {
    if (r.controller == controller) return &r;
  }
  return nullptr;
}

namespace {

// The plugins' shadows in order (PluginSpec::operator== leaves them out).
std::vector<std::optional<ShadowSpec>> ShadowsOf(const std::vector<PluginSpec>& plugins) {
  std::vector<std::optional<ShadowSpec>> out;
  for (const PluginSpec& p : plugins) out.push_back(p.shadow);
  return out;
}

}  // namespace

bool RecordSpec::Records(const std::string& controller) const {
  return controllers.empty() ||
         std::find(controllers.begin(), controllers.end(), controller) != controllers.end();
}

bool OperatorSpec::operator==(const OperatorSpec& o) const {
  return name == o.name && labels == o.labels && annotations == o.annotations &&
         plugins == o.plugins && controllers == o.controllers && routes == o.routes &&
         api_weight == o.api_weight && record == o.record &&
         ShadowsOf(plugins) == ShadowsOf(o.plugins);
}

OperatorSetDiff Diff(const std::vector<OperatorSpec>& before,
                     const std::vector<OperatorSpec>& after) {
  OperatorSetDiff diff;
  const auto old_ops = ByName(before);
  const auto new_ops = ByName(after);
  for (const auto& [name, op] : old_ops) {
    if (!new_ops.contains(name)) diff.removed.push_back(name);
  }
  for (const auto& [name, now] : new_ops) {
    auto it = old_ops.find(name);
    if (it == old_ops.end()) {
      diff.added.push_back(name);
      continue;
    }
    const OperatorSpec& was = *it->second;
    if (was == *now) continue;
    OperatorChange change;
    change.name = name;
    const auto old_plugins = ByName(was.plugins);
    const auto new_plugins = ByName(now->plugins);
    for (const auto& [plugin, spec] : old_plugins) {
      if (!new_plugins.contains(plugin)) change.removed_plugins.push_back(plugin);
    }
    for (const auto& [plugin, spec] : new_plugins) {
      auto p = old_plugins.find(plugin);
      if (p == old_plugins.end()) {
        change.added_plugins.push_back(plugin);
      } else {
        if (*p->second != *spec) change.changed_plugins.push_back(plugin);
        if (p->second->shadow != spec->shadow) change.shadow_changed_plugins.push_back(plugin);
      }
    }
    std::sort(change.added_plugins.begin(), change.added_plugins.end());
    std::sort(change.removed_plugins.begin(), change.removed_plugins.end());
    std::sort(change.changed_plugins.begin(), change.changed_plugins.end());
    std::sort(change.shadow_changed_plugins.begin(), change.shadow_changed_plugins.end());
    change.controllers_changed = was.controllers != now->controllers;
    change.routes_changed = was.routes != now->routes;
    change.metadata_changed = was.labels != now->labels || was.annotations != now->annotations;
    change.api_weight_changed = was.api_weight != now->api_weight;
    change.record_changed = was.record != now->record;
    // Plugins only listed in another order: nothing to restart.
    if (change.added_plugins.empty() && change.removed_plugins.empty() &&
        change.changed_plugins.empty() && change.shadow_changed_plugins.empty() &&
        !change.controllers_changed && !change.routes_changed && !change.metadata_changed &&
        !change.api_weight_changed && !change.record_changed) {
      continue;
    }
    diff.changed.push_back(std::move(change));
  }
  std::sort(diff.added.begin(), diff.added.end());
  std::sort(diff.removed.begin(), diff.removed.end());
  std::sort(diff.changed.begin(), diff.changed.end(),
            [](const OperatorChange& a, const OperatorChange& b) { return a.name < b.name; });
  return diff;
}

}  // namespace ctrlhost::config
