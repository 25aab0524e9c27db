// /debug/dump: a YAML snapshot of plugins, controllers, queues and caches, with last errors.
//
// The manager gathers plain snapshots (no locks held) and RenderDump turns them into YAML, so the
// format is tested without running anything. Field names are stable: scripts may read them.
//
//   plugins:
//   - operator: shop
//     plugin: webapp
//     state: READY
//     pid: 4242
//     restarts: 0
//     cacheBytes: 52144      # heap of the shared caches its controllers read (each cache once)
//     controllers:
//     - name: webapp
//       state: running
//       queue: {depth: 0, delayed: 0, processing: 1, ...}
//       reconciles: {success: 12, error: 0, ...}
//     backgroundTasks:     # only for plugins whose controllers declare background tasks
//     - controller: webapp
//       running: true
//       enqueued: 3
//       refused: {invalid: 0, notRunning: 0, rateLimited: 0}
//       tasks:
//       - {name: poller, state: backoff, restarts: 2, lastError: "...", updated: ...}
//   watches:
//   - watch: apps.ctrlhost.dev/v1alpha1 WebApp
//     objects: 3
//     ...
#ifndef CTRLHOST_RUNTIME_MANAGER_DUMP_H_
#define CTRLHOST_RUNTIME_MANAGER_DUMP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "runtime/manager/background_tasks.h"
#include "runtime/manager/controller_group.h"
#include "runtime/manager/shadow_comparator.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::manager {

// A routed controller the plugin runs (spec.routes): its RouteDispatcher's counts.
struct DumpRoutes {
  std::string controller;
  std::map<std::string, uint64_t> requests;  // sent, by route name
  uint64_t unrouted = 0;                     // objects no route matched (not reconciled)
  uint64_t ambiguous = 0;                    // objects several routes matched (not reconciled)
  uint64_t moved = 0;                        // keys sent to another route than the last time
};

struct DumpPlugin {
  std::string operator_name;
  std::string plugin;
  std::string state;        // PLUGIN_STATE_* without the prefix: READY, STARTING, BACKOFF, ...
  int pid = 0;              // 0 for remote plugins and while not running
  uint64_t generation = 0;  // the serving instance's
  uint64_t swaps = 0;       // successful cut-overs so far
  std::string last_swap_error;
  std::string canary;                        // "generation 3 READY 10%" while a canary runs
  std::string shadow;                        // "generation 4 READY 100%" while a shadow runs
  ShadowComparator::Figures shadow_figures;  // its comparisons (when `shadow` is set)
  std::string address;
  uint64_t restarts = 0;
  // grpc.health.v1 status of the READY instance (SERVING, NOT_SERVING, ...); "" when none is
  // READY. Since when, and the requests waiting because it is not serving.
  std::string health;
  absl::Time health_since = absl::InfinitePast();
  uint64_t held = 0;
  std::string reported_name;
  std::string reported_version;
  std::string last_error;
  absl::Time last_error_time = absl::InfinitePast();
  std::string group_error;  // operator-file overrides that did not apply
  std::string cache_error;  // its controllers were stopped over maxCacheBytes
  std::vector<ControllerStatus> controllers;
  std::vector<DumpRoutes> routes;
  std::vector<TaskControllerReport> tasks;  // background tasks (empty: none declared)
};

struct DumpInput {
  absl::Time now = absl::InfinitePast();
  std::vector<DumpPlugin> plugins;
  std::vector<watch::ReflectorMetrics> watches;
};

std::string RenderDump(const DumpInput& input);

// Heap bytes of the caches `controllers` read: each distinct watch's memory_bytes once (a
// plugin's controllers may share one), for ctrlhost_plugin_cache_bytes and the dump's
// `cacheBytes`.
uint64_t CacheBytes(const std::vector<ControllerStatus>& controllers);

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_DUMP_H_
