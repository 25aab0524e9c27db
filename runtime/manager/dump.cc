#include "runtime/manager/dump.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::manager {

namespace {

std::string Time(absl::Time t) {
  if (t == absl::InfinitePast()) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

void EmitController(YAML::Emitter& out, const ControllerStatus& c) {
  const controller::RunnerMetrics& m = c.metrics;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.name;
  out << YAML::Key << "primary" << YAML::Value << c.primary;
  out << YAML::Key << "state" << YAML::Value << c.state;
  if (!c.pending_reason.empty()) {
    out << YAML::Key << "pendingReason" << YAML::Value << c.pending_reason;
  }
  out << YAML::Key << "synced" << YAML::Value << c.synced;
  if (c.sharded) out << YAML::Key << "shardKeysOwned" << YAML::Value << c.keys_owned;
  if (c.recording.has_value()) {
    const controller::record::Recorder::Figures& r = *c.recording;
    out << YAML::Key << "recording" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "dir" << YAML::Value << r.dir;
    out << YAML::Key << "currentFile" << YAML::Value << r.current_file;
    out << YAML::Key << "recorded" << YAML::Value << r.recorded;
    out << YAML::Key << "dropped" << YAML::Value << r.dropped;
    out << YAML::Key << "files" << YAML::Value << r.files;
    out << YAML::Key << "directoryBytes" << YAML::Value << r.directory_bytes;
    if (!r.last_error.empty()) out << YAML::Key << "lastError" << YAML::Value << r.last_error;
    out << YAML::EndMap;
  }
  out << YAML::Key << "watches" << YAML::Value << YAML::BeginSeq;
  for (const std::string& w : c.watches) out << w;
  out << YAML::EndSeq;
  out << YAML::Key << "workers" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "active" << YAML::Value << m.active_workers;
  out << YAML::Key << "max" << YAML::Value << m.max_workers;
  out << YAML::EndMap;
  out << YAML::Key << "queue" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "depth" << YAML::Value << m.queue.depth;
  out << YAML::Key << "delayed" << YAML::Value << m.queue.delayed;
  out << YAML::Key << "processing" << YAML::Value << m.queue.processing;
  // Interned keys (idle ones kept for reuse too) and the slot table they sit in.
  out << YAML::Key << "keys" << YAML::Value << m.queue.keys;
  out << YAML::Key << "slots" << YAML::Value << m.queue.slots;
  out << YAML::Key << "addsTotal" << YAML::Value << m.queue.adds_total;
  out << YAML::Key << "retriesTotal" << YAML::Value << m.queue.retries_total;
  out << YAML::Key << "longestRunningSeconds" << YAML::Value << Seconds(m.queue.longest_running);
  // By priority, each with its oldest waiting key; the aging bound and what it did.
  for (const queue::Priority p : {queue::Priority::kHigh, queue::Priority::kLow}) {
    const int i = static_cast<int>(p);
    out << YAML::Key << queue::PriorityName(p) << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "depth" << YAML::Value << m.queue.depth_by_priority[i];
    if (!m.queue.oldest_key[i].empty()) {
      out << YAML::Key << "oldestKey" << YAML::Value << m.queue.oldest_key[i];
      out << YAML::Key << "oldestWaitingSeconds" << YAML::Value
          << Seconds(m.queue.oldest_waiting[i]);
    }
    out << YAML::EndMap;
  }
  if (m.queue.max_wait != absl::InfiniteDuration()) {
    out << YAML::Key << "maxWaitSeconds" << YAML::Value << Seconds(m.queue.max_wait);
  }
  out << YAML::Key << "agedTotal" << YAML::Value << m.queue.aged_total;
  out << YAML::Key << "waitedPastMaxTotal" << YAML::Value << m.queue.waited_past_max_total;
  out << YAML::EndMap;
  out << YAML::Key << "terminalKeys" << YAML::Value << m.terminal_keys;
  if (m.blocked_keys > 0) out << YAML::Key << "blockedKeys" << YAML::Value << m.blocked_keys;
  out << YAML::Key << "reconciles" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (int r = 0; r < controller::kReconcileResults; ++r) {
    out << YAML::Key
        << std::string(
               controller::ReconcileResultLabel(static_cast<controller::ReconcileResult>(r)))
        << YAML::Value << m.reconciles[r];
  }
  out << YAML::EndMap;
  if (!m.last_error.empty()) {
    out << YAML::Key << "lastError" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "message" << YAML::Value << m.last_error;
    // The reason the Warning event and Reconciled=False carry (NotControlled, the plugin's own,
    // ...): the message's code alone (FAILED_PRECONDITION) does not say why.
    if (!m.last_error_reason.empty()) {
      out << YAML::Key << "reason" << YAML::Value << m.last_error_reason;
    }
    out << YAML::Key << "key" << YAML::Value << m.last_error_key;
    out << YAML::Key << "time" << YAML::Value << Time(m.last_error_time);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

}  // namespace

uint64_t CacheBytes(const std::vector<ControllerStatus>& controllers) {
  absl::flat_hash_set<std::string> seen;
  uint64_t total = 0;
  for (const ControllerStatus& c : controllers) {
    for (const watch::ReflectorMetrics& w : c.watch_metrics) {
      if (seen.insert(w.description).second) total += w.memory_bytes;
    }
  }
  return total;
}

// backgroundTasks: per controller whose tasks ran here, what they enqueued and were refused,
// and each task's last reported state.
void EmitTasks(YAML::Emitter& out, const std::vector<TaskControllerReport>& tasks) {
  out << YAML::Key << "backgroundTasks" << YAML::Value << YAML::BeginSeq;
  for (const TaskControllerReport& c : tasks) {
    out << YAML::BeginMap;
    out << YAML::Key << "controller" << YAML::Value << c.controller;
    out << YAML::Key << "running" << YAML::Value << c.running;
    out << YAML::Key << "enqueueLimit" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "perSecond" << YAML::Value << c.enqueues_per_second;
    out << YAML::Key << "burst" << YAML::Value << c.enqueue_burst;
    out << YAML::EndMap;
    out << YAML::Key << "enqueued" << YAML::Value << c.enqueued;
    out << YAML::Key << "refused" << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "invalid" << YAML::Value << c.refused_invalid;
    out << YAML::Key << "notRunning" << YAML::Value << c.refused_not_running;
    out << YAML::Key << "rateLimited" << YAML::Value << c.refused_rate_limited;
    out << YAML::EndMap;
    if (!c.last_refusal.empty()) {
      out << YAML::Key << "lastRefusal" << YAML::Value << c.last_refusal;
    }
    out << YAML::Key << "tasks" << YAML::Value << YAML::BeginSeq;
    for (const TaskReport& t : c.tasks) {
      out << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << t.task;
      out << YAML::Key << "state" << YAML::Value << t.state;
      out << YAML::Key << "restarts" << YAML::Value << t.restarts;
      if (!t.last_error.empty()) out << YAML::Key << "lastError" << YAML::Value << t.last_error;
      if (t.updated != absl::InfinitePast()) {
        out << YAML::Key << "updated" << YAML::Value << Time(t.updated);
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

namespace {

// A plugin's running shadow: its instance, the comparison per controller, the last differences.
void RenderShadow(const DumpPlugin& p, YAML::Emitter& out) {
  out << YAML::Key << "shadow" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "instance" << YAML::Value << p.shadow;
  out << YAML::Key << "controllers" << YAML::Value << YAML::BeginSeq;
  for (const auto& [name, f] : p.shadow_figures.controllers) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "controller" << YAML::Value << name;
    out << YAML::Key << "compared" << YAML::Value << f.compared;
    out << YAML::Key << "same" << YAML::Value << f.same;
    out << YAML::Key << "different" << YAML::Value << f.different;
    out << YAML::Key << "shadowErrors" << YAML::Value << f.shadow_errors;
    out << YAML::Key << "dropped" << YAML::Value << f.dropped;
    out << YAML::Key << "agreement" << YAML::Value << f.agreement();
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "lastDifferences" << YAML::Value << YAML::BeginSeq;
  for (const ShadowComparator::Difference& d : p.shadow_figures.differences) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "controller" << YAML::Value << d.controller;
    out << YAML::Key << "key" << YAML::Value << d.key;
    out << YAML::Key << "at" << YAML::Value << Time(d.at);
    out << YAML::Key << "differs" << YAML::Value << d.summary;
    out << YAML::Key << "patch" << YAML::Value << d.patch;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
}

}  // namespace

std::string RenderDump(const DumpInput& input) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (input.now != absl::InfinitePast())
    out << YAML::Key << "time" << YAML::Value << Time(input.now);
  out << YAML::Key << "plugins" << YAML::Value << YAML::BeginSeq;
  for (const DumpPlugin& p : input.plugins) {
    out << YAML::BeginMap;
    out << YAML::Key << "operator" << YAML::Value << p.operator_name;
    out << YAML::Key << "plugin" << YAML::Value << p.plugin;
    out << YAML::Key << "state" << YAML::Value << p.state;
    if (p.pid != 0) out << YAML::Key << "pid" << YAML::Value << p.pid;
    out << YAML::Key << "generation" << YAML::Value << p.generation;
    out << YAML::Key << "swaps" << YAML::Value << p.swaps;
    if (!p.last_swap_error.empty()) {
      out << YAML::Key << "lastSwapError" << YAML::Value << p.last_swap_error;
    }
    if (!p.canary.empty()) out << YAML::Key << "canary" << YAML::Value << p.canary;
    if (!p.shadow.empty()) RenderShadow(p, out);
    if (!p.address.empty()) out << YAML::Key << "address" << YAML::Value << p.address;
    out << YAML::Key << "restarts" << YAML::Value << p.restarts;
    if (!p.health.empty()) {
      out << YAML::Key << "health" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "status" << YAML::Value << p.health;
      if (p.health_since != absl::InfinitePast()) {
        out << YAML::Key << "since" << YAML::Value << Time(p.health_since);
      }
      out << YAML::Key << "waitingRequests" << YAML::Value << p.held;
      out << YAML::EndMap;
    }
    out << YAML::Key << "cacheBytes" << YAML::Value << CacheBytes(p.controllers);
    if (!p.reported_name.empty()) {
      out << YAML::Key << "reported" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "name" << YAML::Value << p.reported_name;
      out << YAML::Key << "version" << YAML::Value << p.reported_version;
      out << YAML::EndMap;
    }
    if (!p.last_error.empty()) {
      out << YAML::Key << "lastError" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "message" << YAML::Value << p.last_error;
      out << YAML::Key << "time" << YAML::Value << Time(p.last_error_time);
      out << YAML::EndMap;
    }
    if (!p.cache_error.empty()) {
      out << YAML::Key << "cacheError" << YAML::Value << p.cache_error;
    }
    if (!p.group_error.empty()) {
      out << YAML::Key << "configError" << YAML::Value << p.group_error;
    }
    out << YAML::Key << "controllers" << YAML::Value << YAML::BeginSeq;
    for (const ControllerStatus& c : p.controllers) EmitController(out, c);
    out << YAML::EndSeq;
    if (!p.routes.empty()) {
      out << YAML::Key << "routes" << YAML::Value << YAML::BeginSeq;
      for (const DumpRoutes& r : p.routes) {
        out << YAML::BeginMap;
        out << YAML::Key << "controller" << YAML::Value << r.controller;
        out << YAML::Key << "requests" << YAML::Value << YAML::BeginMap;
        for (const auto& [route, n] : r.requests) out << YAML::Key << route << YAML::Value << n;
        out << YAML::EndMap;
        out << YAML::Key << "unrouted" << YAML::Value << r.unrouted;
        out << YAML::Key << "ambiguous" << YAML::Value << r.ambiguous;
        out << YAML::Key << "moved" << YAML::Value << r.moved;
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    if (!p.tasks.empty()) EmitTasks(out, p.tasks);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "watches" << YAML::Value << YAML::BeginSeq;
  for (const watch::ReflectorMetrics& w : input.watches) {
    out << YAML::BeginMap;
    out << YAML::Key << "watch" << YAML::Value << w.description;
    out << YAML::Key << "state" << YAML::Value << std::string(watch::ReflectorStateName(w.state));
    out << YAML::Key << "synced" << YAML::Value << w.synced;
    out << YAML::Key << "resourceVersion" << YAML::Value << w.resource_version;
    out << YAML::Key << "objects" << YAML::Value << w.objects;
    out << YAML::Key << "bytes" << YAML::Value << w.bytes;
    out << YAML::Key << "memoryBytes" << YAML::Value << w.memory_bytes;
    out << YAML::Key << "eventsTotal" << YAML::Value << w.events_total;
    out << YAML::Key << "eventsPerSecond" << YAML::Value << w.events_per_second;
    out << YAML::Key << "listsTotal" << YAML::Value << w.lists_total;
    out << YAML::Key << "relistsTotal" << YAML::Value << w.relists_total;
    out << YAML::Key << "errorsTotal" << YAML::Value << w.errors_total;
    if (!w.shard_mode.empty()) {
      // A sharded controller's cache: this host's shard only, filtered by the server (KEP-5866)
      // or by the host (a server without it).
      out << YAML::Key << "shard" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "mode" << YAML::Value << w.shard_mode;
      out << YAML::Key << "generation" << YAML::Value << w.shard_generation;
      out << YAML::Key << "filteredTotal" << YAML::Value << w.shard_filtered_total;
      out << YAML::Key << "relistsTotal" << YAML::Value << w.shard_relists_total;
      out << YAML::EndMap;
    }
    if (!w.last_error.empty()) out << YAML::Key << "lastError" << YAML::Value << w.last_error;
    if (w.failing) {
      out << YAML::Key << "failingSince" << YAML::Value << Time(w.failing_since);
      out << YAML::Key << "consecutiveFailures" << YAML::Value << w.consecutive_failures;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace ctrlhost::manager
