// The Operator document that `ctrlhost run -f` reads (apiVersion ctrlhost.dev/v1alpha1), as plain
// values, and Diff() between two sets of them (what a changed file means for the running host).
//
//   apiVersion: ctrlhost.dev/v1alpha1
//   kind: Operator
//   metadata:
//     name: web
//   spec:
//     plugins:
//       - name: webapp
//         exec:
//           command: bazel-bin/plugins/webapp/webapp
//     controllers:
//       - name: deployments
//         maxConcurrentReconciles: 4
//
//   ASSIGN_OR_RETURN(std::vector<config::OperatorSpec> ops, config::LoadOperators("operators/"));
//   config::OperatorSetDiff d = config::Diff(running, ops);
//   for (const config::OperatorChange& c : d.changed) ... c.changed_plugins ...
//
// The field reference is docs/operator-spec.md; the JSON Schema docs/operator-spec.schema.json.
// Values here are exactly what the document says: optional fields the document leaves out stay
// unset (std::nullopt / empty) so that the host applies its own defaults. Paths (commands with a
// '/', TLS files, working directories) are relative to the host's working directory, not to the
// file that names them (as the README's examples assume): LoadOperators makes them absolute;
// ParseOperators keeps them as written.
//
// Plain structs: thread-compatible.
#ifndef CTRLHOST_RUNTIME_CONFIG_OPERATOR_SPEC_H_
#define CTRLHOST_RUNTIME_CONFIG_OPERATOR_SPEC_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"

namespace ctrlhost::config {

inline constexpr char kApiVersion[] = "ctrlhost.dev/v1alpha1";
inline constexpr char kKind[] = "Operator";

// Where a value came from, for messages ("operators/web.yaml:12:7"). Not part of equality: an
// operator moved to another file or line is the same operator.
struct SourceLocation {
  std::string file;
  int line = 0;                  // 1-based; 0 when unknown
  int column = 0;                // 1-based; 0 when unknown
  std::string ToString() const;  // "file:line:column"
};

// A process the host starts and supervises (admin.proto ExecSource).
struct ExecSpec {
  std::string command;  // required: absolute, relative to the working directory, or in $PATH
  std::vector<std::string> args;
  // In document order; names unique. The document may give a map or a list of {name, value}.
  std::vector<std::pair<std::string, std::string>> env;
  std::string working_dir;  // empty: the host's default
  bool operator==(const ExecSpec& o) const {
    return command == o.command && args == o.args && env == o.env && working_dir == o.working_dir;
  }
};

// TLS to a plugin endpoint (admin.proto TlsSettings). cert_file and key_file: both or neither.
struct TlsSpec {
  std::string ca_file;      // empty: the system roots
  std::string cert_file;    // client certificate for mutual TLS
  std::string key_file;     // its key
  std::string server_name;  // empty: the host part of the address
  bool operator==(const TlsSpec& o) const {
    return ca_file == o.ca_file && cert_file == o.cert_file && key_file == o.key_file &&
           server_name == o.server_name;
  }
};

// A plugin the host dials (admin.proto EndpointSource). Without TLS only unix: addresses and
// loopback hosts are accepted.
struct EndpointSpec {
  std::string address;  // "host:port", "dns:///host:port" or "unix:///absolute/path"
  std::optional<TlsSpec> tls;
  bool operator==(const EndpointSpec& o) const { return address == o.address && tls == o.tls; }
};

// spec.plugins[].shadow: another release of the plugin run beside it, given the calls the serving
// instance gets, compared and never applied (docs/hot-swap.md, "Shadows"); as `ctrlhost plugin
// shadow` starts one.
struct ShadowSpec {
  std::variant<ExecSpec, EndpointSpec> source;
  std::optional<int> percent;        // 1..100; unset: 100 (every key)
  std::optional<int> max_in_flight;  // >= 1; unset: 64
  // `cpu`: false for "idle" (the default: an exec'd shadow runs under SCHED_IDLE), true for
  // "normal".
  bool normal_cpu = false;
  SourceLocation location;  // of the block
  bool operator==(const ShadowSpec& o) const {
    return source == o.source && percent == o.percent && max_in_flight == o.max_in_flight &&
           normal_cpu == o.normal_cpu;
  }
  bool operator!=(const ShadowSpec& o) const { return !(*this == o); }
};

struct PluginSpec {
  std::string name;  // DNS-1123 label, unique within the operator
  std::variant<ExecSpec, EndpointSpec> source;
  std::optional<absl::Duration> startup_timeout;        // > 0
  std::optional<absl::Duration> shutdown_grace_period;  // >= 0
  std::optional<absl::Duration> request_timeout;        // > 0
  std::optional<int> max_in_flight;                     // >= 1
  // How long the plugin may report NOT_SERVING before the host restarts it; 0: never.
  std::optional<absl::Duration> not_serving_timeout;  // >= 0
  // Cap on the heap of the caches this plugin's controllers read (each cache once, shared ones
  // in full); over it, the host stops the plugin's controllers (manager::Manager).
  std::optional<int64_t> max_cache_bytes;  // >= 1
  // How many controllers the plugin's Describe may declare (plugin::DescribeLimits); unset:
  // the host's default (100).
  std::optional<int> max_controllers;  // 1 .. 10000
  // Not part of operator==: a changed shadow restarts the shadow, never swaps the plugin
  // (OperatorChange::shadow_changed_plugins).
  std::optional<ShadowSpec> shadow;
  SourceLocation location;  // of the list item

  const ExecSpec* exec() const { return std::get_if<ExecSpec>(&source); }
  const EndpointSpec* endpoint() const { return std::get_if<EndpointSpec>(&source); }
  // Equal ignoring `location`.
  bool operator==(const PluginSpec& o) const;
  bool operator!=(const PluginSpec& o) const { return !(*this == o); }
};

// Work-queue rate limiting of one controller (per-key exponential backoff plus a token bucket).
struct RateLimitSpec {
  std::optional<double> qps;                 // > 0
  std::optional<int> burst;                  // >= 1
  std::optional<absl::Duration> base_delay;  // > 0
  std::optional<absl::Duration> max_delay;   // > 0, >= base_delay
  bool operator==(const RateLimitSpec& o) const {
    return qps == o.qps && burst == o.burst && base_delay == o.base_delay &&
           max_delay == o.max_delay;
  }
};

// The host's Kubernetes API client (one for every operator): client-side rate limit, like
// controller-runtime's / kubelet's --kube-api-qps and --kube-api-burst.
struct ApiClientSpec {
  std::optional<double> qps;  // >= 0; 0: no client-side limit
  std::optional<int> burst;   // >= 1
  bool operator==(const ApiClientSpec& o) const { return qps == o.qps && burst == o.burst; }
};

// spec.leaderElection: the host's one Lease (manager::LeaderElectionOptions). Present, it turns
// leader election on like `ctrlhost run --leader-elect`; the --leader-elect-* flags win field by
// field (exe/cmd_run.h ResolveLeaderElection). The relations the flags must satisfy
// (leaseDuration > renewDeadline > 1.2 x retryPeriod > 0) are checked here between the fields the
// block sets, and again on the merged values.
// With `per_operator` the block is this operator's own Lease instead (default name
// "ctrlhost-<operator>"): several hosts then spread operators among themselves; such blocks are
// not merged with the others (exe/cmd_run.h ResolveLeaderElection).
struct LeaderElectionSpec {
  std::optional<absl::Duration> lease_duration;  // > 0
  std::optional<absl::Duration> renew_deadline;  // > 0
  std::optional<absl::Duration> retry_period;    // > 0
  std::string lease_name;                        // empty: unset; else a DNS-1123 subdomain
  std::string lease_namespace;                   // empty: unset; else a DNS-1123 label
  bool per_operator = false;                     // perOperator: this operator's own Lease
  SourceLocation location;                       // of the block
  bool operator==(const LeaderElectionSpec& o) const {
    return lease_duration == o.lease_duration && renew_deadline == o.renew_deadline &&
           retry_period == o.retry_period && lease_name == o.lease_name &&
           lease_namespace == o.lease_namespace && per_operator == o.per_operator;
  }
  bool operator!=(const LeaderElectionSpec& o) const { return !(*this == o); }
};

// Overrides for the controller `name` that a plugin registers. With `plugin` empty it applies to
// the controller of that name in whichever of the operator's plugins registers it.
struct ControllerSpec {
  std::string name;    // required
  std::string plugin;  // empty, or the name of one of the operator's plugins
  std::optional<int> max_concurrent_reconciles;  // >= 1
  std::vector<std::string> namespaces;           // empty: what the plugin asks for (all namespaces)
  std::string label_selector;                    // empty: none
  std::optional<absl::Duration> resync_period;   // >= 0; 0 turns periodic resync off
  bool disabled = false;
  std::optional<RateLimitSpec> rate_limit;
  // sharding.enabled: this controller's keys are split across the live hosts of the shard ring
  // (manager/shard_ring.h); each host reconciles only its own.
  bool sharded = false;
  // status.conditions: host. The host writes the primary's standard status (conditions
  // Available, Progressing, Degraded, Ready, Reconciling, Stalled and observedGeneration) from
  // the reconcile outcomes and the children's readiness (controller/apply/host_status.h);
  // "plugin" (the default) leaves the status to the plugin.
  bool host_status = false;
  // backgroundTasks.enqueueQps / enqueueBurst: the token bucket that limits the TaskEnqueue
  // messages of this controller's background tasks (manager/background_tasks.h); unset: the
  // host's default (20/s, burst 50).
  std::optional<double> task_enqueue_qps;  // > 0
  std::optional<int> task_enqueue_burst;   // >= 1
  // scheduling.priorities: false queues every key at one priority (plain FIFO); unset or true:
  // catching up (initial list, resync, plugin start, shard hand-over) is low priority.
  std::optional<bool> priorities;
  // scheduling.maxWait: the aging bound of the controller's queue (queue::WorkQueue); unset:
  // 5 min.
  std::optional<absl::Duration> max_wait;  // > 0
  // scheduling.apiWeight: the controller's share of its operator's API budget, relative to
  // the operator's other controllers (kube::FairLimiter); unset: 1.
  std::optional<double> api_weight;  // > 0
  SourceLocation location;

  // Equal ignoring `location`.
  bool operator==(const ControllerSpec& o) const;
  bool operator!=(const ControllerSpec& o) const { return !(*this == o); }
};

// One route of a routed controller: the objects its label selector matches go to `plugin`.
struct RouteTargetSpec {
  std::string name;            // unique among the controller's routes; defaults to `plugin`
  std::string plugin;          // required: one of the operator's plugins
  std::string label_selector;  // "": every object (a catch-all, allowed only as the sole route)
  SourceLocation location;
  bool operator==(const RouteTargetSpec& o) const {
    return name == o.name && plugin == o.plugin && label_selector == o.label_selector;
  }
};

// spec.routes[]: the objects of the controller `controller` (a name every target plugin's
// Describe declares, for the same kind) are split between plugins by label selector. One runner
// (one queue, per-key exclusivity) serves the controller; each request goes to the plugin of the
// route its object matches, so a key is never at two plugins at once. See
// docs/operator-spec.md#routes.
struct RouteSpec {
  std::string controller;           // required, unique among the operator's routes
  std::vector<RouteTargetSpec> to;  // at least one; the first one's plugin runs the controller
  SourceLocation location;
  bool operator==(const RouteSpec& o) const { return controller == o.controller && to == o.to; }
  bool operator!=(const RouteSpec& o) const { return !(*this == o); }
};

// spec.record: every reconcile of the chosen controllers written to files under `dir`, one
// subdirectory per controller (runtime/controller/record, docs/recording.md).
struct RecordSpec {
  std::string dir;                       // required; LoadOperators makes it absolute
  std::vector<std::string> controllers;  // empty: every controller of the operator
  std::optional<int64_t> max_bytes;      // per controller directory, >= 1 MiB
  bool secret_data = false;              // secretData: include (true) or digest (default)
  bool normal_cpu = false;               // cpu: normal (true) or idle (default), for the writer
  SourceLocation location;               // of the block
  bool operator==(const RecordSpec& o) const {
    return dir == o.dir && controllers == o.controllers && max_bytes == o.max_bytes &&
           secret_data == o.secret_data && normal_cpu == o.normal_cpu;
  }
  bool operator!=(const RecordSpec& o) const { return !(*this == o); }
  // Whether `controller` is recorded.
  bool Records(const std::string& controller) const;
};

struct OperatorSpec {
  std::string name;  // metadata.name, a DNS-1123 label, unique across the loaded set
  std::map<std::string, std::string> labels;       // metadata.labels
  std::map<std::string, std::string> annotations;  // metadata.annotations
  std::vector<PluginSpec> plugins;                 // in document order
  std::vector<ControllerSpec> controllers;         // in document order
  std::vector<RouteSpec> routes;                   // in document order
  // spec.apiClient. Host-wide and read when the host starts (the client is shared by every
  // operator; see manager::HostOptions): not part of equality, an edit takes effect at the
  // next start.
  std::optional<ApiClientSpec> api_client;
  // spec.leaderElection. Host-wide like api_client (one Lease for the host): read at start,
  // not part of equality.
  std::optional<LeaderElectionSpec> leader_election;
  // spec.scheduling.apiWeight: the operator's share of the host's API budget, relative to the
  // other operators that want requests at the same time (kube::FairLimiter); unset: 1.
  std::optional<double> api_weight;  // > 0
  std::optional<RecordSpec> record;
  SourceLocation location;  // of the document

  const PluginSpec* FindPlugin(const std::string& plugin_name) const;
  const RouteSpec* FindRoute(const std::string& controller) const;
  // Equal ignoring `location`s, `api_client` and `leader_election`.
  bool operator==(const OperatorSpec& o) const;
  bool operator!=(const OperatorSpec& o) const { return !(*this == o); }
};

// An operator present before and after whose spec differs.
struct OperatorChange {
  std::string name;
  std::vector<std::string> added_plugins;    // by name, sorted
  std::vector<std::string> removed_plugins;  // by name, sorted
  std::vector<std::string> changed_plugins;  // same name, different spec; sorted
  // Same name, different (or added, or removed) shadow; sorted. A plugin can be in both lists.
  std::vector<std::string> shadow_changed_plugins;
  bool controllers_changed = false;  // spec.controllers differ
  bool routes_changed = false;       // spec.routes differ
  bool api_weight_changed = false;   // spec.scheduling.apiWeight differs (no restart)
  bool record_changed = false;    // spec.record differs (the controllers restart, as for overrides)
  bool metadata_changed = false;  // labels or annotations differ
};

struct OperatorSetDiff {
  std::vector<std::string> added;       // operator names, sorted
  std::vector<std::string> removed;     // operator names, sorted
  std::vector<OperatorChange> changed;  // sorted by name
  bool empty() const { return added.empty() && removed.empty() && changed.empty(); }
};

// What turns `before` into `after`, operators matched by name (names are unique in a loaded
// set; with duplicates the last one counts), plugins by name within an operator. Source
// locations and the order of plugins are ignored (the order of controller overrides is not).
OperatorSetDiff Diff(const std::vector<OperatorSpec>& before,
                     const std::vector<OperatorSpec>& after);

}  // namespace ctrlhost::config

#endif  // CTRLHOST_RUNTIME_CONFIG_OPERATOR_SPEC_H_
