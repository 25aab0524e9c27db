// Private to the manager's own files (manager*.cc): the records the Manager keeps per operator
// and per plugin, and small helpers they share. Not a public header.
#ifndef CTRLHOST_RUNTIME_MANAGER_MANAGER_INTERNAL_H_
#define CTRLHOST_RUNTIME_MANAGER_MANAGER_INTERNAL_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "google/protobuf/util/message_differencer.h"
#include "runtime/common/mutex.h"
#include "runtime/manager/background_tasks.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/dispatch_chain.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/manager/route_dispatcher.h"
#include "runtime/plugin/supervisor.h"

namespace ctrlhost::manager {
namespace internal {

// Whether two Describes declare the same controllers (same specs, same order).
inline bool SameControllers(const pluginpb::DescribeResponse& a,
                            const pluginpb::DescribeResponse& b) {
  if (a.controllers_size() != b.controllers_size()) return false;
  for (int i = 0; i < a.controllers_size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(a.controllers(i), b.controllers(i))) {
      return false;
    }
  }
  return true;
}

inline std::string StateName(plugin::PluginState state) { return plugin::PluginStateName(state); }

}  // namespace internal

struct Manager::Plugin {
  std::string operator_name;  // constant
  std::string name;           // constant: the plugin's name in the operator
  // Guarded by the manager's mu_ once the plugin is shared (a swap or an operator update
  // changes them); readers use PluginView's copies.
  config::PluginSpec spec;
  config::PluginSpec shadow_spec;  // the running shadow's source (PluginSlot has the instance)
  // spec.shadow of the operator file, guarded by the manager's mu_: pending (set at creation and
  // by a live edit of the block) until ShadowLoop applied it; retried after a failure from
  // file_shadow_retry_at. file_shadow_running: the running shadow is the file's (a shadow
  // started with `ctrlhost plugin shadow` is left alone by a file without one).
  bool file_shadow_pending = false;
  bool file_shadow_running = false;
  int file_shadow_failures = 0;
  absl::Time file_shadow_retry_at = absl::InfinitePast();
  std::vector<config::ControllerSpec> overrides;
  std::vector<config::RouteSpec> routes;     // the operator's spec.routes
  std::optional<config::RecordSpec> record;  // the operator's spec.record
  // The RouteDispatchers of the routed controllers of its latest group (for the dump); set by
  // DepsFor, guarded by the manager's mu_.
  std::vector<std::shared_ptr<RouteDispatcher>> route_dispatchers;
  // Its background tasks (set before the slot starts, destroyed after it: the instances'
  // sessions call into it). `slot_for_tasks` is `slot` once set, for its notices.
  std::unique_ptr<BackgroundTasks> tasks;
  std::atomic<PluginSlot*> slot_for_tasks{nullptr};
  std::unique_ptr<PluginSlot> slot;  // set before the plugin is shared
  // Its dispatch chain over `slot` (dispatch_chain.h); set with `slot`, constant after.
  std::unique_ptr<DispatchChain> chain;
  // Set by the loop once the plugin was first ready; guarded by the manager's mu_.
  std::shared_ptr<ControllerGroup> group;
  std::string group_error;  // why some overrides did not apply; guarded by mu_
  // Set when the caches its controllers read went over spec.max_cache_bytes and the loop
  // stopped its controllers (until a new group replaces the stopped one); guarded by mu_.
  std::string cache_error;
  // The serving instance the group last saw ready: {generation, restarts}. A new one (a swap,
  // a crash restart, a remote plugin's reconnect) re-enqueues every object of the group's
  // controllers with REASON_PLUGIN_STARTED. Guarded by the manager's mu_.
  std::pair<uint64_t, uint64_t> ready_instance{0, 0};
  // Held while its controllers are being replaced (ReplaceGroup): the loop (a crash restart
  // that brought another Describe, a cache cap) and an admin thread (a swap) may both want to,
  // for the same new instance; one at a time, each against the group current then. Taken
  // before the manager's mu_, never while holding it.
  common::Mutex replace_mu;
};

struct Manager::Operator {
  config::OperatorSpec spec;
  std::vector<std::shared_ptr<Plugin>> plugins;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_MANAGER_INTERNAL_H_
