#include "runtime/exe/cmd_run.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/paths.h"
#include "runtime/config/load.h"
#include "runtime/exe/cmd_apiserver.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"
#include "runtime/kube/validation.h"
#include "runtime/manager/admin_backend.h"
#include "runtime/manager/host.h"
#include "runtime/plugin/process.h"
#include "runtime/plugin/sandbox.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;

// Why an exec'd plugin's command could not be started, or OK: the checks the supervisor's exec
// makes, done ahead for --preview. A relative command with a '/' is relative to the plugin's
// working directory when it has one; a bare name is looked up in $PATH.
absl::Status CheckCommand(const config::ExecSpec& exec) {
  std::vector<std::string> candidates;
  if (absl::StrContains(exec.command, '/')) {
    candidates.push_back(exec.command[0] != '/' && !exec.working_dir.empty()
                             ? absl::StrCat(exec.working_dir, "/", exec.command)
                             : exec.command);
  } else {
    const char* path = std::getenv("PATH");
    for (absl::string_view dir :
         absl::StrSplit(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
      candidates.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", exec.command));
    }
  }
  std::string why = absl::StrContains(exec.command, '/') ? "no such file" : "not found in $PATH";
  for (const std::string& candidate : candidates) {
    std::error_code error;
    const fs::file_status status = fs::status(candidate, error);
    if (error || !fs::exists(status)) continue;
    if (!fs::is_regular_file(status)) {
      why = "not a regular file";
      continue;
    }
    if (access(candidate.c_str(), X_OK) != 0) {
      why = "not executable";
      continue;
    }
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat("command \"", exec.command, "\": ", why));
}

// The user the `index`-th plugin (in start order) runs as, as the manager assigns it (see
// ManagerOptions::plugin_uid_per_plugin); unset: the host's.
std::optional<uid_t> PluginUid(const RunPlan& plan, uint32_t index) {
  if (!plan.plugin_uid.has_value()) return std::nullopt;
  return plan.plugin_uid_per_plugin ? *plan.plugin_uid + index : *plan.plugin_uid;
}

// What Process::Spawn would get for `exec` under `plan`, for plugin::CheckExecutable.
plugin::ProcessSpec PreviewProcessSpec(const RunPlan& plan, const config::ExecSpec& exec,
                                       const std::optional<uid_t>& uid) {
  plugin::ProcessSpec spec;
  spec.command = exec.command;
  spec.args = exec.args;
  spec.working_dir = exec.working_dir;
  spec.sandbox.uid = uid;
  if (uid.has_value()) {
    spec.sandbox.gid = plan.plugin_uid_per_plugin ? *uid : plan.plugin_gid.value_or(*uid);
  }
  return spec;
}

// The flags of the host itself (cluster, data, endpoints, plugins' limits and user).
void AddRunFlags(FlagSet& flags, RunFlags* values) {
  flags.AddString("file", &values->file, "Operator file, or a directory of .yaml/.yml files")
      .Short('f')
      .Required()
      .ValueName("PATH");
  flags
      .AddString("kubeconfig", &values->kubeconfig,
                 "Cluster to work against; $KUBECONFIG when unset; without either, the embedded "
                 "API server")
      .ValueName("PATH");
  flags
      .AddString("data-dir", &values->data_dir,
                 "Directory for the embedded API server's data and the admin socket")
      .ValueName("DIR");
  flags
      .AddString("admin-socket", &values->admin_socket,
                 "Unix socket of the admin API used by \"ctrlhost plugin\" and \"ctrlhost dump\"")
      .ValueName("PATH")
      .DefaultText("<data-dir>/admin.sock");
  flags
      .AddString("record", &values->record,
                 "Record every reconcile (the call, the answer, what the host did) of every "
                 "controller under DIR/<controller>/ for \"ctrlhost replay\"; an operator's "
                 "spec.record wins for its controllers (docs/recording.md)")
      .ValueName("DIR");
  flags
      .AddString("metrics-addr", &values->metrics_addr,
                 "Address of the Prometheus metrics and health endpoints")
      .ValueName("HOST:PORT");
  flags
      .AddString("apiserver-bind", &values->apiserver_bind,
                 "Address the embedded API server listens on")
      .ValueName("ADDRESS");
  flags
      .AddInt("apiserver-port", &values->apiserver_port, 0, 65535,
              "Port of the embedded API server; 0 picks a free port")
      .ValueName("PORT");
  flags
      .AddInt("apiserver-max-connections", &values->apiserver_max_connections, 1, 1000000,
              "Open connections of the embedded API server at most (lowered at start to fit "
              "the open-file limit; unauthenticated ones beyond 256 are closed oldest first)")
      .ValueName("INT");
  flags
      .AddString("kube-api-qps", &values->kube_api_qps,
                 "Client-side limit of requests per second to the API server (0: none); "
                 "overrides spec.apiClient.qps")
      .ValueName("QPS")
      .DefaultText("50 against a cluster, none against the embedded server");
  flags
      .AddInt("kube-api-burst", &values->kube_api_burst, 1, 1 << 20,
              "Burst of the client-side limit; overrides spec.apiClient.burst")
      .ValueName("N")
      .DefaultText("100");
  flags
      .AddDuration("watch-stale-after", &values->watch_stale_after,
                   "How long a watch may fail (API server down, network) before /readyz reports "
                   "its cache stale; a watch denied by RBAC fails /readyz at once")
      .ValueName("DURATION");
  flags
      .AddString("plugin-user", &values->plugin_user,
                 "User exec'd plugins run as: UID[:GID] for all, \"auto\" for one uid per plugin "
                 "(from 200000), or \"host\" for the host's own user")
      .ValueName("UID[:GID]|auto|host")
      .DefaultText("auto when the host runs as root, else host");
  flags.AddBool("plugin-landlock", &values->plugin_landlock,
                "Hide the data dir, kubeconfigs and admin socket from exec'd plugins with Landlock "
                "where the kernel has it (default true)");
  flags
      .AddInt("max-controllers", &values->max_controllers, 1, 100000,
              "Controllers all plugins together may declare; a plugin whose Describe would go "
              "past it is refused (per plugin: spec.plugins[].maxControllers, default 100)")
      .ValueName("INT");
  flags
      .AddInt("max-reconcile-workers", &values->max_reconcile_workers, 1, 1000000,
              "Reconcile worker threads all controllers together may take (the sum of their "
              "maxConcurrentReconciles); a plugin that would go past it is refused")
      .ValueName("INT");
}

// Leader election, the shard ring, --preview.
void AddLeaderElectionFlags(FlagSet& flags, RunFlags* values) {
  flags.AddBool("leader-elect", &values->leader_elect,
                "Run as one of several hosts of the same operators: only the holder of a "
                "coordination.k8s.io/v1 Lease dispatches and writes; the others are warm standbys "
                "(plugins started, caches synced); an operator document's spec.leaderElection "
                "turns it on too, and each --leader-elect* flag given wins over that block. See "
                "docs/operations.md");
  flags
      .AddDuration("leader-elect-lease-duration", &values->leader_elect_lease_duration,
                   "How long standbys wait after the last renewal they saw before taking over")
      .ValueName("DURATION");
  flags
      .AddDuration("leader-elect-renew-deadline", &values->leader_elect_renew_deadline,
                   "How long the leader may fail to renew before it stops dispatching and "
                   "writing (less than the lease duration)")
      .ValueName("DURATION");
  flags
      .AddDuration("leader-elect-retry-period", &values->leader_elect_retry_period,
                   "How often the leader renews and standbys try to acquire")
      .ValueName("DURATION");
  flags
      .AddString("leader-elect-resource-name", &values->leader_elect_resource_name,
                 "Name of the Lease")
      .ValueName("NAME");
  flags
      .AddString("leader-elect-resource-namespace", &values->leader_elect_resource_namespace,
                 "Namespace of the Lease")
      .ValueName("NAMESPACE")
      .DefaultText("$POD_NAMESPACE, else default");
  flags
      .AddString("leader-elect-identity", &values->leader_elect_identity,
                 "This host's name in the Lease; must differ between hosts")
      .ValueName("ID")
      .DefaultText("$POD_NAME or the host name, + _ + 8 random hex digits");
  flags
      .AddString("shard-ring", &values->shard_ring,
                 "Join this shard ring: controllers with sharding enabled reconcile only this "
                 "host's share of their keys (one Lease per host; namespace, identity and timings "
                 "from the --leader-elect-* flags; excludes --leader-elect). See "
                 "docs/operations.md")
      .ValueName("NAME");
  flags.AddBool("preview", &values->preview, "Print what would run and exit without starting it");
}

// What --preview checks of the exec'd plugins: the problems the host would refuse them for at
// start, and the user each runs as ("operator/plugin" -> "uid N").
struct PreviewUsers {
  std::vector<std::string> problems;
  std::map<std::string, std::string> users;
};

PreviewUsers CheckPreviewPlugins(const RunPlan& plan,
                                 const std::vector<config::OperatorSpec>& operators) {
  // What the host would refuse at start is refused here too: the command as the host sees it,
  // then as the user the plugin would run as (Bazel's output tree under a 0700 /root, say, is
  // out of reach of uid 200000).
  PreviewUsers result;
  uint32_t plugin_index = 0;  // the manager's start order: operators, then their plugins
  for (const config::OperatorSpec& op : operators) {
    for (const config::PluginSpec& plugin : op.plugins) {
      const std::optional<uid_t> uid = PluginUid(plan, plugin_index++);
      if (plugin.exec() == nullptr) continue;
      result.users[absl::StrCat(op.name, "/", plugin.name)] =
          uid.has_value() ? absl::StrCat("uid ", *uid) : "the host's user";
      absl::Status s = CheckCommand(*plugin.exec());
      if (s.ok()) s = plugin::CheckExecutable(PreviewProcessSpec(plan, *plugin.exec(), uid));
      if (!s.ok()) {
        result.problems.push_back(absl::StrCat(op.location.ToString(), ": operator ", op.name,
                                               ", plugin ", plugin.name, ": ", s.message()));
      }
    }
  }
  return result;
}

// `ctrlhost run --preview`: what would run, or why it could not; nothing is started.
int RunPreview(const RunFlags& values, const RunPlan& plan,
               const std::vector<config::OperatorSpec>& operators, std::ostream& out,
               std::ostream& err) {
  const PreviewUsers checked = CheckPreviewPlugins(plan, operators);
  if (!checked.problems.empty()) return Failure(absl::StrJoin(checked.problems, "\n"), err);
  const std::map<std::string, std::string>& users = checked.users;
  out << "ctrlhost run: preview (nothing is started)\n";
  if (plan.in_cluster) {
    out << "API server: in-cluster (the Pod's service account, $KUBERNETES_SERVICE_HOST)\n";
  } else if (plan.kubeconfigs.empty()) {
    out << "API server: embedded, data in " << plan.data_dir << "\n";
  } else {
    out << "API server: the cluster of kubeconfig " << absl::StrJoin(plan.kubeconfigs, ":")
        << " (from " << plan.kubeconfig_source << ")\n";
  }
  out << "operator files (" << plan.operator_files.size()
      << (plan.from_directory ? absl::StrCat(", from directory ", values.file) : "") << "):\n";
  for (const std::string& file : plan.operator_files) out << "  " << file << "\n";
  for (const config::OperatorSpec& op : operators) {
    out << "operator " << op.name << " (" << op.location.ToString() << "):\n";
    for (const config::PluginSpec& plugin : op.plugins) {
      out << "  plugin " << plugin.name << ": "
          << (plugin.exec() != nullptr ? absl::StrCat("exec ", plugin.exec()->command, " ",
                                                      absl::StrJoin(plugin.exec()->args, " "))
                                       : absl::StrCat("endpoint ", plugin.endpoint()->address))
          << "\n";
      if (auto it = users.find(absl::StrCat(op.name, "/", plugin.name)); it != users.end()) {
        out << "    runs as " << it->second << "\n";
      }
    }
  }
  std::error_code error;
  const fs::path socket = fs::absolute(plan.admin_socket, error);
  const config::ApiClientSpec api_client = ResolveApiClient(plan, operators);
  out << "API client limit: "
      << (api_client.qps.has_value()
              ? (*api_client.qps == 0 ? std::string("no QPS limit")
                                      : absl::StrCat(*api_client.qps, " QPS"))
              : std::string("default QPS"))
      << ", burst "
      << (api_client.burst.has_value() ? absl::StrCat(*api_client.burst) : std::string("default"))
      << "\n";
  out << "admin API: unix://" << (error ? plan.admin_socket : socket.string()) << "\n"
      << "metrics: http://" << plan.metrics_addr << "/metrics\n";
  if (plan.leader_election.has_value()) {
    const manager::LeaderElectionOptions& le = *plan.leader_election;
    out << "leader election: Lease " << le.lease_namespace << "/" << le.lease_name << ", identity "
        << le.identity << ", lease " << absl::FormatDuration(le.lease_duration)
        << ", renew deadline " << absl::FormatDuration(le.renew_deadline) << ", retry "
        << absl::FormatDuration(le.retry_period) << "\n";
  }
  for (const auto& [op, le] : plan.operator_leases) {
    out << "leader election of operator " << op << ": Lease " << le.lease_namespace << "/"
        << le.lease_name << ", identity " << le.identity << ", lease "
        << absl::FormatDuration(le.lease_duration) << ", renew deadline "
        << absl::FormatDuration(le.renew_deadline) << ", retry "
        << absl::FormatDuration(le.retry_period) << "\n";
  }
  if (plan.shard_ring.has_value()) {
    const manager::ShardRingOptions& ring = *plan.shard_ring;
    out << "shard ring: " << ring.ring << ", Lease " << ring.lease_namespace << "/"
        << manager::ShardLeaseName(ring.ring, ring.identity) << ", identity " << ring.identity
        << "\n";
  }
  return kExitOk;
}

manager::HostOptions HostOptionsFor(const RunFlags& values, const RunPlan& plan,
                                    std::vector<config::OperatorSpec> operators) {
  manager::HostOptions options;
  options.operators = std::move(operators);
  options.operator_path = values.file;  // watched: edits are applied live
  options.plugin_hidden_paths = manager::AdminSocketFiles(plan.admin_socket);
  options.kubeconfigs = plan.kubeconfigs;
  options.in_cluster = plan.in_cluster;
  options.data_dir = plan.data_dir;
  options.record_dir = plan.record_dir;
  // Recordings hold what plugins were sent and answered (Secret values too, with secretData:
  // include): no plugin reads them.
  if (!plan.record_dir.empty()) options.plugin_hidden_paths.push_back(plan.record_dir);
  options.apiserver.bind = values.apiserver_bind;
  options.apiserver.port = static_cast<int>(values.apiserver_port);
  options.apiserver.max_connections = static_cast<size_t>(values.apiserver_max_connections);
  options.watch_stale_after = plan.watch_stale_after;
  options.plugin_uid = plan.plugin_uid;
  options.plugin_gid = plan.plugin_gid;
  options.plugin_uid_per_plugin = plan.plugin_uid_per_plugin;
  options.plugin_landlock = values.plugin_landlock;
  options.max_controllers = static_cast<int>(values.max_controllers);
  options.max_reconcile_workers = static_cast<int>(values.max_reconcile_workers);
  const size_t colon = plan.metrics_addr.rfind(':');
  options.metrics_bind = plan.metrics_addr.substr(0, colon);
  options.metrics_port = std::atoi(plan.metrics_addr.c_str() + colon + 1);
  const config::ApiClientSpec api_client = ResolveApiClient(plan, options.operators);
  options.api_qps = api_client.qps;
  options.api_burst = api_client.burst;
  options.leader_election = plan.leader_election;
  options.operator_leases = plan.operator_leases;
  options.shard_ring = plan.shard_ring;
  return options;
}

// The lines that tell the user what started (scripts read them; see docs/cli.md).
void PrintStarted(manager::Host& host, const RunPlan& plan, std::ostream& out) {
  if (host.embedded()) {
    out << "API server listening on " << host.api_url() << std::endl
        << "kubeconfig: " << host.kubeconfig_path() << std::endl;
  } else {
    // Said twice (stdout and the log) so a $KUBECONFIG left set never goes unnoticed.
    out << "API server: " << host.api_url() << std::endl
        << ClusterOriginLine(plan, host.api_url()) << std::endl;
    common::LogInfo("working against a cluster",
                    {{"api_server", host.api_url()},
                     {"kubeconfig", absl::StrJoin(plan.kubeconfigs, ":")},
                     {"from", plan.kubeconfig_source}});
  }
  out << "metrics: " << host.metrics_url() << std::endl;
  if (plan.leader_election.has_value()) {
    out << "leader election: Lease " << plan.leader_election->lease_namespace << "/"
        << plan.leader_election->lease_name << ", identity " << plan.leader_election->identity
        << " (standby until it holds the Lease)" << std::endl;
  }
  for (const auto& [op, le] : plan.operator_leases) {
    out << "leader election of operator " << op << ": Lease " << le.lease_namespace << "/"
        << le.lease_name << ", identity " << le.identity
        << " (the operator stands by until this host holds its Lease)" << std::endl;
  }
  if (plan.shard_ring.has_value()) {
    out << "shard ring: " << plan.shard_ring->ring << ", identity " << plan.shard_ring->identity
        << std::endl;
  }
}

// The "ready" line once the host is ready (refused plugins and pending controllers named in
// it; refusals also logged at error level), or nothing yet.
std::optional<std::string> ReadyLine(manager::Host& host) {
  std::vector<std::string> pending;
  std::vector<std::string> refused;
  // Not before the API server answered discovery (its controllers would all be pending).
  if (!host.ApiServerCheck().ok() || !host.manager().Started(&pending, &refused).ok()) {
    return std::nullopt;
  }
  std::string line = "ready";
  if (!refused.empty()) {
    common::LogError(
        "ready without the refused plugins: the other plugins and operators run; fix these and "
        "edit the operator file (or swap the plugin) to start them",
        {{"refused", absl::StrJoin(refused, "; ")}});
    absl::StrAppend(&line, " (refused: ", absl::StrJoin(refused, "; "), ")");
  }
  if (!pending.empty()) absl::StrAppend(&line, " (waiting: ", absl::StrJoin(pending, "; "), ")");
  return line;
}

// Serves until a stop signal, the loss of a Lease, or every plugin refused; then stops the admin
// API and the host. The exit code.
int RunUntilStopped(manager::Host& host, std::unique_ptr<manager::HostAdmin> admin,
                    const sigset_t& stop_signals, std::ostream& out, std::ostream& err) {
  // "ready" once every plugin passed its handshake or was refused (FAILED, never restarted
  // without an edit: a command that cannot be executed, a handshake refused) and every
  // controller whose kinds are served runs with synced caches (scripts and tests wait for this
  // line; refused plugins and controllers waiting for a CRD are named in it, and the refusals
  // logged at error level; /readyz keeps failing while a plugin is refused); the host keeps
  // running either way, so no script waits for ever for an operator that cannot start. Unless
  // every plugin was refused: then nothing could ever run, and the host stops and fails.
  common::Mutex ready_mu;
  common::CondVar ready_cv;
  bool stopping = false;
  std::vector<std::string> refused;  // guarded by ready_mu
  std::thread ready_thread([&] {
    manager::Manager& manager = host.manager();
    common::MutexLock lock(&ready_mu);
    while (!stopping) {
      refused = manager.AllPluginsRefused();
      if (!refused.empty()) return;
      std::optional<std::string> line = ReadyLine(host);
      if (line.has_value()) {
        out << *line << std::endl;
        return;
      }
      common::Clock::Real()->WaitWithDeadline(&ready_mu, &ready_cv,
                                              absl::Now() + absl::Milliseconds(100));
    }
  });
  // Wait for a stop signal, or for the loss of the Lease: a leader that lost it exits (like
  // client-go's OnStoppedLeading in controller-runtime) and is restarted as a standby.
  int signal = 0;
  std::string lost;
  while (true) {
    const timespec poll{0, 200 * 1000 * 1000};
    const int got = sigtimedwait(&stop_signals, nullptr, &poll);
    if (got > 0) {
      signal = got;
      break;
    }
    lost = host.leadership_lost();
    if (!lost.empty()) break;
    common::MutexLock lock(&ready_mu);
    if (!refused.empty()) break;
  }
  std::vector<std::string> failed_plugins;
  {
    common::MutexLock lock(&ready_mu);
    failed_plugins = refused;
  }
  if (!failed_plugins.empty()) {
    common::LogError("every plugin was refused; stopping",
                     {{"plugins", absl::StrJoin(failed_plugins, "; ")}});
  } else if (!lost.empty()) {
    common::LogError("leadership lost: stopping (restart the host to stand by again)",
                     {{"reason", lost}});
  } else {
    common::LogInfo("stopping", {{"signal", signal}});
  }
  {
    common::MutexLock lock(&ready_mu);
    stopping = true;
    ready_cv.SignalAll();
  }
  ready_thread.join();
  admin.reset();  // it borrows the host
  host.Stop();
  if (!failed_plugins.empty()) {
    err << "error: every plugin was refused and none is restarted, so nothing can run:\n";
    for (const std::string& why : failed_plugins) err << "  " << why << "\n";
    err << "fix the plugins (ctrlhost run --preview checks their commands) and run again"
        << std::endl;
    return kExitFailure;
  }
  if (!lost.empty()) {
    err << "error: leadership lost: " << lost << std::endl;
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

int RunRunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags("ctrlhost run",
                "Runs the operators described by the Operator documents (apiVersion "
                "ctrlhost.dev/v1alpha1) in --file: starts their controller plugins, watches the "
                "objects they reconcile and applies what the plugins answer. Without a "
                "kubeconfig the embedded API server runs in-process with its data in "
                "--data-dir; with one, the host works against that cluster.");
  RunFlags values;
  AddRunFlags(flags, &values);
  AddLeaderElectionFlags(flags, &values);
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
  for (absl::string_view name : {"leader-elect", "leader-elect-lease-duration",
                                 "leader-elect-renew-deadline", "leader-elect-retry-period",
                                 "leader-elect-resource-name", "leader-elect-resource-namespace"}) {
    if (flags.IsSet(name)) values.leader_elect_given.emplace(name);
  }

  std::optional<std::string> kubeconfig_env;
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr) kubeconfig_env = env;
  std::optional<std::string> service_host_env;
  if (const char* env = std::getenv("KUBERNETES_SERVICE_HOST"); env != nullptr) {
    service_host_env = env;
  }
  std::optional<std::string> pod_namespace;
  if (const char* env = std::getenv("POD_NAMESPACE"); env != nullptr) pod_namespace = env;
  absl::StatusOr<RunPlan> plan = PlanRun(values, kubeconfig_env, service_host_env, pod_namespace);
  if (!plan.ok()) return UsageError(flags.command(), plan.status().message(), err);
  if (values.apiserver_bind.empty()) {
    return UsageError(flags.command(), "--apiserver-bind must not be empty", err);
  }

  // The operator files are parsed and validated before anything starts: an error names the
  // file, line, column and field, and nothing runs.
  absl::StatusOr<std::vector<config::OperatorSpec>> operators = config::LoadOperators(values.file);
  if (!operators.ok()) return Failure(std::string(operators.status().message()), err);
  if (absl::Status s = ResolveLeaderElection(values, *operators, pod_namespace, &*plan); !s.ok()) {
    return Failure(std::string(s.message()), err);
  }
  if (values.preview) return RunPreview(values, *plan, *operators, out, err);

  // Block the stop signals before any thread starts, then wait for them on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Non-dumpable: a plugin under the host's uid cannot read the host's memory, environment or
  // open files through /proc (ptrace access needs CAP_SYS_PTRACE then; plugins have none).
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

  absl::StatusOr<std::unique_ptr<manager::Host>> host =
      manager::Host::Start(HostOptionsFor(values, *plan, *std::move(operators)));
  if (!host.ok()) return Failure(host.status().ToString(), err);
  // The executable wires the host to its admin API (the host does not know it).
  absl::StatusOr<std::unique_ptr<manager::HostAdmin>> admin =
      manager::ServeHostAdmin(host->get(), plan->admin_socket);
  if (!admin.ok()) {
    (*host)->Stop();
    return Failure(admin.status().ToString(), err);
  }
  PrintStarted(**host, *plan, out);
  return RunUntilStopped(**host, *std::move(admin), stop_signals, out, err);
}

}  // namespace ctrlhost::exe
