// `ctrlhost run`: runs the operators described by Operator documents in a file or a directory,
// against the embedded API server or a cluster given by a kubeconfig.
//
//   $ ctrlhost run -f operators/
//   $ ctrlhost run -f operator.yaml --kubeconfig ~/.kube/config
//
// PlanRun() turns the flags into what the host would start, validating every path first, so the
// command line is checked before anything runs (and can be tested without running anything).
//
// RunRunCommand is the composition root of a running host, in steps: flag parsing, the plan
// (PlanRun, then the operator files and ResolveLeaderElection: cmd_run_plan.cc), --preview, then
// manager::Host::Start with the plan's HostOptions, the admin API served over the host
// (manager::ServeHostAdmin: the host does not know the admin backend), and the run loop until a
// stop signal, a lost Lease or every plugin refused; the admin API stops before the host.
//
// Thread-compatible.
#ifndef CTRLHOST_RUNTIME_EXE_CMD_RUN_H_
#define CTRLHOST_RUNTIME_EXE_CMD_RUN_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/config/operator_spec.h"
#include "runtime/manager/leader_elector.h"
#include "runtime/manager/shard_ring.h"
#include "runtime/manager/watch_readiness.h"

namespace ctrlhost::exe {

struct RunFlags {
  std::string file;        // -f/--file: an operator file or a directory of them
  std::string kubeconfig;  // --kubeconfig; empty: $KUBECONFIG, else the embedded API server
  std::string data_dir = ".ctrlhost";
  std::string admin_socket;  // empty: <data-dir>/admin.sock
  // --record DIR: every reconcile of every controller (of operators without spec.record)
  // recorded under DIR/<controller>/. Empty: off.
  std::string record;
  std::string metrics_addr = "127.0.0.1:9090";
  // Where the embedded API server listens (when no kubeconfig is used).
  std::string apiserver_bind = "127.0.0.1";
  int64_t apiserver_port = 6443;
  // Its connection limit (`ctrlhost apiserver --max-connections`).
  int64_t apiserver_max_connections = 8192;
  // Print what would run and exit without starting anything.
  bool preview = false;
  // The API client's rate limit (--kube-api-qps, a number >= 0, 0: no limit; --kube-api-burst,
  // >= 1). Empty / 0: unset (spec.apiClient of the operator documents, else the defaults).
  std::string kube_api_qps;
  int64_t kube_api_burst = 0;
  // Readiness fails when a watch has been failing this long (--watch-stale-after).
  absl::Duration watch_stale_after = manager::kDefaultWatchStaleAfter;
  // --plugin-user: "UID[:GID]" (every plugin), "auto" (each plugin its own uid = gid from
  // kAutoPluginUidBase), "host" (the host's own user), or empty: "auto" when the host may switch
  // users (root), else "host". --plugin-landlock: Landlock on.
  std::string plugin_user;
  bool plugin_landlock = true;
  int64_t max_controllers = 1000;
  int64_t max_reconcile_workers = 4096;
  // Leader election (--leader-elect and --leader-elect-*); client-go's defaults.
  bool leader_elect = false;
  absl::Duration leader_elect_lease_duration = absl::Seconds(15);
  absl::Duration leader_elect_renew_deadline = absl::Seconds(10);
  absl::Duration leader_elect_retry_period = absl::Seconds(2);
  std::string leader_elect_resource_name = "ctrlhost";
  std::string leader_elect_resource_namespace;  // empty: $POD_NAMESPACE, else "default"
  std::string leader_elect_identity;            // empty: manager::DefaultIdentity()
  // Which of --leader-elect and --leader-elect-{lease-duration,renew-deadline,retry-period,
  // resource-name,resource-namespace} the command line gave (flag names without dashes): those
  // win over spec.leaderElection of the operator documents, the others yield to it.
  std::set<std::string> leader_elect_given;
  // Sharding: join this shard ring (the Lease namespace, identity and timings come from the
  // leader-elect flags). Empty: no ring.
  std::string shard_ring;
};

// The first uid (and gid) of `--plugin-user auto`: above the ranges /etc/subuid and systemd
// usually hand out (100000-165535, 61184-65519), in no /etc/passwd.
inline constexpr uid_t kAutoPluginUidBase = 200000;

// What `ctrlhost run` starts, resolved from RunFlags.
struct RunPlan {
  // The operator files to load, sorted; one entry when --file names a file.
  std::vector<std::string> operator_files;
  bool from_directory = false;
  // Empty: the embedded API server, or the cluster the host runs in when `in_cluster`.
  // Otherwise the kubeconfig path(s) to use, and where they came from ("--kubeconfig" or
  // "$KUBECONFIG").
  std::vector<std::string> kubeconfigs;
  std::string kubeconfig_source;
  // No kubeconfig and $KUBERNETES_SERVICE_HOST set (a Pod): in-cluster configuration, as
  // client-go's and kubectl's order has it.
  bool in_cluster = false;
  std::string data_dir;
  std::string admin_socket;
  std::string record_dir;  // --record, absolute; empty: off
  std::string metrics_addr;
  std::optional<double> api_qps;  // from the flags
  std::optional<int> api_burst;
  absl::Duration watch_stale_after;
  std::optional<uid_t> plugin_uid;  // unset: the host's user
  std::optional<gid_t> plugin_gid;
  bool plugin_uid_per_plugin = false;  // "auto": plugin_uid is the first of a range
  // Set with --leader-elect (identity and namespace resolved); PlanRun() resolves the flags
  // alone, ResolveLeaderElection() again with the operator documents' spec.leaderElection.
  std::optional<manager::LeaderElectionOptions> leader_election;
  // Per-operator Leases (spec.leaderElection.perOperator), by operator name: set by
  // ResolveLeaderElection; excludes leader_election and shard_ring.
  std::map<std::string, manager::LeaderElectionOptions> operator_leases;
  std::optional<manager::ShardRingOptions> shard_ring;
};

// The API client's rate limit: each value from the flags when given, else the largest value any
// operator document sets in spec.apiClient (one client serves every operator; a qps of 0, no
// limit, counts as the largest), else unset (the host's defaults).
config::ApiClientSpec ResolveApiClient(const RunPlan& plan,
                                       const std::vector<config::OperatorSpec>& operators);

// Where the cluster `plan` works against comes from, as the line `ctrlhost run` prints after
// "API server: URL" (so a $KUBECONFIG left set is never used silently), e.g.
//   cluster: https://10.0.0.1:6443 from $KUBECONFIG=/home/me/.kube/config (not the embedded API
//   server; unset KUBECONFIG to use it)
// "" for the embedded API server.
std::string ClusterOriginLine(const RunPlan& plan, const std::string& api_url);

// Validates `flags`; `kubeconfig_env` is the value of $KUBECONFIG, `service_host_env` that of
// $KUBERNETES_SERVICE_HOST, `pod_namespace` that of $POD_NAMESPACE (the Lease's namespace
// without --leader-elect-resource-namespace), each if set. Every error is InvalidArgument with
// a message naming the flag and the path.
absl::StatusOr<RunPlan> PlanRun(const RunFlags& flags,
                                const std::optional<std::string>& kubeconfig_env,
                                const std::optional<std::string>& service_host_env = std::nullopt,
                                const std::optional<std::string>& pod_namespace = std::nullopt);

// Resolves leader election from `flags` and the spec.leaderElection blocks of `operators` into
// plan->leader_election (and re-checks that it excludes plan->shard_ring). A block turns leader
// election on as --leader-elect does (an explicit --leader-elect=false turns it off); each field
// comes from its flag when the command line gave it, else from the documents (all documents that
// set a field must agree: the host has one Lease), else from the flag's default. The merged
// values must pass manager::ValidateLeaderElection. Errors are InvalidArgument naming the flags
// and the file:line:column of the blocks involved.
// A block with perOperator: true is that operator's own Lease instead (plan->operator_leases):
// each field from the block, else from its flag (given or default); the name defaults to
// "ctrlhost-<operator>". Once one operator has its own Lease, every operator must (one without
// would run on every host), and neither the host-wide election nor a shard ring may be on; an
// explicit --leader-elect=false turns the per-operator Leases off too.
absl::Status ResolveLeaderElection(const RunFlags& flags,
                                   const std::vector<config::OperatorSpec>& operators,
                                   const std::optional<std::string>& pod_namespace, RunPlan* plan);

int RunRunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_RUN_H_
