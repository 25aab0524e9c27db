#include "runtime/manager/host.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/common/paths.h"
#include "runtime/common/status_macros.h"
#include "runtime/config/load.h"
#include "runtime/kube/kubeconfig.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::manager {
namespace {

// Every operator's spec.leaderElection, one line each, sorted by operator ("" when none has one).
std::string LeaderElectionBlocks(const std::vector<config::OperatorSpec>& operators) {
  std::vector<std::string> lines;
  for (const config::OperatorSpec& op : operators) {
    if (!op.leader_election.has_value()) continue;
    const config::LeaderElectionSpec& le = *op.leader_election;
    auto duration = [](const std::optional<absl::Duration>& d) {
      return d.has_value() ? absl::FormatDuration(*d) : std::string("-");
    };
    lines.push_back(absl::StrCat(op.name, " ", duration(le.lease_duration), " ",
                                 duration(le.renew_deadline), " ", duration(le.retry_period), " ",
                                 le.lease_name, " ", le.lease_namespace,
                                 le.per_operator ? " perOperator" : ""));
  }
  std::sort(lines.begin(), lines.end());
  return absl::StrJoin(lines, "\n");
}

// The operators' names and spec.leaderElection blocks, for hosts with per-operator Leases.
std::string OperatorSet(const std::vector<config::OperatorSpec>& operators) {
  std::vector<std::string> names;
  for (const config::OperatorSpec& op : operators) names.push_back(op.name);
  std::sort(names.begin(), names.end());
  return absl::StrCat(absl::StrJoin(names, ","), "\n", LeaderElectionBlocks(operators));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Host>> Host::Start(HostOptions options) {
  // The data dir (admin socket, plugin state, and the embedded server's database) is created
  // here in every mode, before anything starts, so that a missing one is never an error after
  // the plugins ran.
  if (!options.data_dir.empty()) RETURN_IF_ERROR(common::CreatePrivateDirectory(options.data_dir));
  std::unique_ptr<Host> host(new Host());
  host->leader_blocks_at_start_ = LeaderElectionBlocks(options.operators);
  {
    common::MutexLock lock(&host->mu_);
    host->leader_blocks_seen_ = host->leader_blocks_at_start_;
  }
  kube::RestConfig rest_config;
  if (options.kubeconfigs.empty() && options.in_cluster) {
    ASSIGN_OR_RETURN(rest_config, kube::InClusterConfig());
    host->api_url_ = rest_config.host;
  } else if (options.kubeconfigs.empty()) {
    apiserver::ApiServerOptions server_options = options.apiserver;
    server_options.data_dir = options.data_dir;
    ASSIGN_OR_RETURN(host->apiserver_, apiserver::ApiServer::Start(server_options));
    host->api_url_ = host->apiserver_->url();
    ASSIGN_OR_RETURN(rest_config, kube::LoadKubeconfigFile(host->apiserver_->kubeconfig_path()));
    // The host's own token (memory only, never in the kubeconfig users and plugins may read):
    // its requests take seats of their own, so users cannot starve the host's informers,
    // leader election or writes (docs/apiserver.md, "Priority levels and seats").
    rest_config.bearer_token = host->apiserver_->system_token();
    rest_config.token_file.reset();
  } else {
    ASSIGN_OR_RETURN(rest_config, kube::LoadKubeconfigFiles(options.kubeconfigs, options.context));
    host->api_url_ = rest_config.host;
  }
  kube::RestClientOptions rest_options = options.rest;
  if (host->apiserver_ != nullptr) {
    // The embedded server is ours alone: no client-side rate limit unless one is configured (a
    // real cluster keeps the default 50 QPS / burst 100, like a well-behaved
    // controller-runtime manager).
    rest_options.qps = 0;
  }
  if (options.api_qps.has_value()) rest_options.qps = *options.api_qps;
  if (options.api_burst.has_value()) rest_options.burst = *options.api_burst;
  // One pooled connection per concurrent worker at least: a request that finds no idle
  // connection opens a new TLS connection, which costs far more than the request.
  rest_options.max_idle_connections = std::max<size_t>(rest_options.max_idle_connections, 64);
  if (!options.operator_leases.empty()) {
    if (options.leader_election.has_value() || options.shard_ring.has_value()) {
      return absl::InvalidArgumentError(
          "per-operator Leases exclude the host-wide Lease and a shard ring");
    }
    absl::Duration shortest_retry = absl::InfiniteDuration();
    for (auto& [op, le] : options.operator_leases) {
      if (absl::Status s = ValidateLeaderElection(le); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("operator ", op, ": ", s.message()));
      }
      auto lease = std::make_unique<OperatorLease>();
      lease->operator_name = op;
      lease->fence = std::make_unique<Fence>(le.clock);
      host->operator_leases_.push_back(std::move(lease));
      shortest_retry = std::min(shortest_retry, le.retry_period);
    }
    host->operator_set_at_start_ = OperatorSet(options.operators);
    // Writes are fenced per operator: the applier of an operator with a Lease installs its
    // fence on the writing thread (FencedApplier), which this check reads.
    rest_options.write_fence = [] { return CurrentWriteDeadline(); };
    kube::RestClientOptions elector_options;  // as for the host-wide elector, below
    elector_options.qps = 0;
    elector_options.timeout = shortest_retry;
    elector_options.max_idle_connections = 2 * options.operator_leases.size();
    elector_options.user_agent = absl::StrCat(rest_options.user_agent, "/leader-election");
    ASSIGN_OR_RETURN(host->elector_rest_, kube::RestClient::Create(rest_config, elector_options));
    host->elector_client_ = std::make_unique<kube::Client>(host->elector_rest_.get());
  }
  if (options.leader_election.has_value()) {
    RETURN_IF_ERROR(ValidateLeaderElection(*options.leader_election));
    host->fence_ = std::make_unique<Fence>(options.leader_election->clock);
    Fence* fence = host->fence_.get();
    rest_options.write_fence = [fence] { return fence->WriteDeadline(); };
    // The elector's own client: never throttled behind the controllers' requests, never
    // fenced, each request bounded near retryPeriod so that a hung connection cannot hold a
    // renewal past renewDeadline.
    kube::RestClientOptions elector_options;
    elector_options.qps = 0;
    elector_options.timeout = options.leader_election->retry_period;
    elector_options.max_idle_connections = 2;
    elector_options.user_agent = absl::StrCat(rest_options.user_agent, "/leader-election");
    ASSIGN_OR_RETURN(host->elector_rest_, kube::RestClient::Create(rest_config, elector_options));
    host->elector_client_ = std::make_unique<kube::Client>(host->elector_rest_.get());
  }
  if (options.shard_ring.has_value()) {
    if (options.leader_election.has_value()) {
      return absl::InvalidArgumentError("a shard ring and leader election exclude each other");
    }
    RETURN_IF_ERROR(ValidateShardRing(*options.shard_ring));
    // The ring's own client, for the same reasons as the elector's.
    kube::RestClientOptions ring_options;
    ring_options.qps = 0;
    ring_options.timeout = options.shard_ring->retry_period;
    ring_options.max_idle_connections = 2;
    ring_options.user_agent = absl::StrCat(rest_options.user_agent, "/shard-ring");
    ASSIGN_OR_RETURN(host->ring_rest_, kube::RestClient::Create(rest_config, ring_options));
    host->ring_client_ = std::make_unique<kube::Client>(host->ring_rest_.get());
    Host* raw = host.get();
    ASSIGN_OR_RETURN(host->ring_,
                     ShardRing::Create(host->ring_client_.get(), *options.shard_ring,
                                       [raw](const std::vector<std::string>& old_view,
                                             const std::vector<std::string>& new_view) {
                                         raw->OnShardViewChange(old_view, new_view);
                                       }));
  }
  ASSIGN_OR_RETURN(host->rest_, kube::RestClient::Create(std::move(rest_config), rest_options));
  host->client_ = std::make_unique<kube::Client>(host->rest_.get());
  host->discovery_ = std::make_unique<kube::Discovery>(host->rest_.get());
  // Health endpoints first: they answer while the first discovery waits on a slow server.
  host->metrics_ = std::make_unique<observe::MetricsRegistry>();
  observe::ObserveServerOptions observe_options;
  observe_options.bind = options.metrics_bind;
  observe_options.port = options.metrics_port;
  observe_options.metrics = host->metrics_.get();
  ASSIGN_OR_RETURN(host->observe_, observe::ObserveServer::Start(observe_options));
  Host* raw_host = host.get();
  {
    common::MutexLock lock(&host->mu_);
    host->api_error_ = absl::UnavailableError("first discovery in progress");
    host->api_failing_since_ = absl::Now();
  }
  host->observe_->SetReadyCheck("api-server", [raw_host] { return raw_host->ApiServerCheck(); });
  if (absl::Status s = host->discovery_->Refresh(); s.ok()) {
    common::MutexLock lock(&host->mu_);
    host->api_error_ = absl::OkStatus();
  } else {
    // Not fatal: the host serves its health endpoints and starts its controllers once the
    // server answers (a host started before its cluster, or during an outage, recovers alone).
    common::LogWarning(
        "API server unreachable at start; retrying discovery (controllers wait for it)",
        {{"api_server", host->api_url_}, {"error", s.message()}});
    common::MutexLock lock(&host->mu_);
    host->api_error_ = s;
  }

  ManagerOptions manager_options;
  manager_options.client = host->client_.get();
  manager_options.discovery = host->discovery_.get();
  manager_options.data_dir = options.data_dir;
  manager_options.host_version = options.host_version;
  manager_options.watch_stale_after = options.watch_stale_after;
  manager_options.plugin_uid = options.plugin_uid;
  manager_options.plugin_gid = options.plugin_gid;
  manager_options.plugin_uid_per_plugin = options.plugin_uid_per_plugin;
  manager_options.plugin_landlock = options.plugin_landlock;
  manager_options.max_controllers = options.max_controllers;
  manager_options.max_reconcile_workers = options.max_reconcile_workers;
  manager_options.plugin_hidden_paths = options.kubeconfigs;
  if (!options.admin_socket.empty()) {
    manager_options.plugin_hidden_paths.push_back(options.admin_socket);
    manager_options.plugin_hidden_paths.push_back(options.admin_socket + ".token");
  }
  manager_options.api_reachable = [raw_host] { return raw_host->ApiServerCheck().ok(); };
  manager_options.dispatching = !options.leader_election.has_value();
  manager_options.fence = host->fence_.get();
  for (const auto& lease : host->operator_leases_) {
    manager_options.operator_fences[lease->operator_name] = lease->fence.get();
  }
  manager_options.shard_gate = host->ring_.get();
  ASSIGN_OR_RETURN(host->manager_, Manager::Create(manager_options));
  Manager* manager = host->manager_.get();
  host->provider_ = host->metrics_->AddProvider([manager, raw_host](observe::Figures& figures) {
    manager->Collect(figures);
    raw_host->CollectConnections(figures);
  });
  host->observe_->SetReadyCheck("controllers", [manager] { return manager->Ready(); });
  host->observe_->SetDumpProvider([manager, raw_host]() -> absl::StatusOr<std::string> {
    return absl::StrCat(manager->DumpYaml(), raw_host->LeaderDump(), raw_host->OperatorLeasesDump(),
                        raw_host->ShardDump());
  });
  RETURN_IF_ERROR(host->manager_->Start(options.operators));
  if (options.leader_election.has_value()) {
    host->leader_gauge_ =
        &prometheus::BuildGauge()
             .Name("leader_election_master_status")
             .Help("1 while this host holds the leader-election Lease named by `name`, else 0")
             .Register(host->metrics_->registry())
             .Add({{"name", options.leader_election->lease_name}});
    LeaderCallbacks callbacks;
    callbacks.on_started_leading = [raw_host](absl::Time valid_until) {
      raw_host->OnStartedLeading(valid_until);
    };
    Fence* fence = host->fence_.get();
    callbacks.on_renewed = [fence](absl::Time valid_until) { fence->Extend(valid_until); };
    callbacks.on_stopped_leading = [raw_host](const std::string& reason) {
      raw_host->OnStoppedLeading(reason);
    };
    ASSIGN_OR_RETURN(host->elector_,
                     LeaderElector::Create(host->elector_client_.get(), *options.leader_election,
                                           std::move(callbacks)));
    host->observe_->SetReadyCheck("leader", [raw_host]() -> absl::Status {
      const std::string lost = raw_host->leadership_lost();
      if (lost.empty()) return absl::OkStatus();  // a standby is ready: it serves
      return absl::UnavailableError(absl::StrCat("leadership lost: ", lost));
    });
    const LeaderElector* elector = host->elector_.get();
    host->observe_->SetReadyDetail("leader", [elector]() -> std::string {
      const LeaderStatus status = elector->Status();
      if (status.leading) return absl::StrCat("leading (Lease ", status.lease, ")");
      return absl::StrCat("standby (Lease ", status.lease, ", leader ",
                          status.holder.empty() ? "none" : status.holder, ")");
    });
    host->elector_->Start();
  }
  if (!host->operator_leases_.empty()) {
    auto& family = prometheus::BuildGauge()
                       .Name("leader_election_master_status")
                       .Help(
                           "1 while this host holds the leader-election Lease named by `name`, "
                           "else 0")
                       .Register(host->metrics_->registry());
    for (const auto& lease : host->operator_leases_) {
      const LeaderElectionOptions& le = options.operator_leases.at(lease->operator_name);
      lease->gauge = &family.Add({{"name", le.lease_name}});
      OperatorLease* raw = lease.get();
      LeaderCallbacks callbacks;
      callbacks.on_started_leading = [raw_host, raw](absl::Time valid_until) {
        raw_host->OnOperatorStartedLeading(raw, valid_until);
      };
      Fence* fence = lease->fence.get();
      callbacks.on_renewed = [fence](absl::Time valid_until) { fence->Extend(valid_until); };
      callbacks.on_stopped_leading = [raw_host, raw](const std::string& reason) {
        raw_host->OnOperatorStoppedLeading(raw, reason);
      };
      ASSIGN_OR_RETURN(lease->elector, LeaderElector::Create(host->elector_client_.get(), le,
                                                             std::move(callbacks)));
    }
    host->observe_->SetReadyCheck("leader", [raw_host]() -> absl::Status {
      const std::string lost = raw_host->leadership_lost();
      if (lost.empty()) return absl::OkStatus();  // standing by for an operator is ready
      return absl::UnavailableError(absl::StrCat("leadership lost: ", lost));
    });
    host->observe_->SetReadyDetail("leader", [raw_host]() -> std::string {
      std::vector<std::string> parts;
      for (const auto& lease : raw_host->operator_leases_) {
        const LeaderStatus status = lease->elector->Status();
        parts.push_back(absl::StrCat(
            "operator ", lease->operator_name, ": ",
            status.leading ? absl::StrCat("leading (Lease ", status.lease, ")")
                           : absl::StrCat("standby (Lease ", status.lease, ", leader ",
                                          status.holder.empty() ? "none" : status.holder, ")")));
      }
      return absl::StrJoin(parts, "; ");
    });
    for (const auto& lease : host->operator_leases_) lease->elector->Start();
  }
  if (host->ring_ != nullptr) {
    const ShardRing* ring = host->ring_.get();
    host->observe_->SetReadyCheck("shard-ring", [ring]() -> absl::Status {
      const ShardRingStatus status = ring->Status();
      if (status.joined && status.active) return absl::OkStatus();
      return absl::UnavailableError(absl::StrCat(
          "shard ring ", status.ring, ": ",
          !status.joined ? "not joined yet" : "membership not renewed within renewDeadline",
          status.last_error.empty() ? "" : ": ", status.last_error));
    });
    host->observe_->SetReadyDetail("shard-ring", [ring]() -> std::string {
      const ShardRingStatus status = ring->Status();
      return absl::StrCat("member of shard ring ", status.ring, " (", status.view.size(),
                          " members, view generation ", status.generation, ")");
    });
    host->ring_->Start();
  }
  const std::string admin_path = common::AbsolutePath(options.admin_socket);
  if (admin_path.size() > 107) {
    // A Unix socket address holds 107 bytes: the host still does its job without the admin API.
    common::LogWarning(
        "admin API not served: its socket path is too long for a Unix socket (set "
        "--admin-socket to a shorter path)",
        {{"path", admin_path}});
  } else if (!admin_path.empty()) {
    host->admin_backend_ = std::make_unique<HostAdminBackend>(host.get());
    admin::AdminServerOptions admin_options;
    admin_options.socket_path = admin_path;
    admin_options.backend = host->admin_backend_.get();
    admin_options.require_token = true;  // plugins of the host's own user can connect()
    ASSIGN_OR_RETURN(host->admin_, admin::AdminServer::Start(admin_options));
  }
  if (!host->ApiServerCheck().ok()) {
    host->discoverer_ = std::thread(
        [raw_host, initial = options.discovery_backoff, max = options.discovery_max_backoff] {
          raw_host->DiscoveryLoop(initial, max);
        });
  }
  host->operator_path_ = options.operator_path;
  host->watch_interval_ = options.watch_interval;
  if (!host->operator_path_.empty()) {
    Host* raw = host.get();
    host->watcher_ = std::thread([raw] { raw->WatchLoop(); });
  }
  return host;
}

Host::~Host() { Stop(); }

std::string Host::kubeconfig_path() const {
  return apiserver_ != nullptr ? apiserver_->kubeconfig_path() : "";
}

std::string Host::admin_socket() const { return admin_ != nullptr ? admin_->socket_path() : ""; }

void Host::CollectConnections(observe::Figures& figures) const {
  auto add = [&figures](const char* server, const serving::ConnectionServer::Stats& stats) {
    observe::ConnectionFigures c;
    c.server = server;
    c.open = static_cast<double>(stats.open);
    c.unauthenticated = static_cast<double>(stats.unauthenticated);
    c.refused_total = stats.refused;
    c.evicted_total = stats.evicted;
    c.timed_out_total = stats.timed_out;
    c.evicted_idle_total = stats.evicted_idle;
    c.write_stalled_total = stats.write_stalled;
    figures.connections.push_back(std::move(c));
  };
  if (apiserver_ != nullptr) add("apiserver", apiserver_->connection_stats());
  if (observe_ != nullptr) add("observe", observe_->connection_stats());
}

std::string Host::metrics_url() const {
  return observe_ != nullptr ? absl::StrCat(observe_->url(), "/metrics") : "";
}

std::string Host::Fingerprint() const {
  absl::StatusOr<std::vector<std::string>> files = config::ResolveOperatorFiles(operator_path_);
  if (!files.ok()) return absl::StrCat("error: ", files.status().message());
  std::string out;
  for (const std::string& file : *files) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream contents;
    contents << in.rdbuf();
    absl::StrAppend(&out, file, "\n", contents.str().size(), "\n", contents.str(), "\n");
  }
  return out;
}

absl::StatusOr<config::OperatorSetDiff> Host::Reload(bool dry_run) {
  if (operator_path_.empty()) {
    return absl::FailedPreconditionError("the host was not started from operator files");
  }
  absl::StatusOr<std::vector<config::OperatorSpec>> operators =
      config::LoadOperators(operator_path_);
  if (!operators.ok()) {
    common::LogError("operator files refused; the running operators are unchanged",
                     {{"path", operator_path_}, {"error", operators.status().message()}});
    common::MutexLock lock(&mu_);
    last_reload_error_ = std::string(operators.status().message());
    return operators.status();
  }
  if (operators->empty() && !manager_->Operators().empty()) {
    // An empty file is far more often a file being rewritten or a mistake than a wish to stop
    // every operator; that is what stopping the host is for.
    const absl::Status refused = absl::FailedPreconditionError(
        absl::StrCat(operator_path_,
                     ": no Operator documents; refusing to delete every running operator "
                     "(delete them one by one, or stop the host)"));
    common::LogError("operator files refused; the running operators are unchanged",
                     {{"path", operator_path_}, {"error", refused.message()}});
    common::MutexLock lock(&mu_);
    last_reload_error_ = std::string(refused.message());
    return refused;
  }
  if (!operator_leases_.empty() && OperatorSet(*operators) != operator_set_at_start_) {
    // Each operator's Lease (its elector, fence and dispatch gate) is set up at start.
    const absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
        operator_path_,
        ": this host runs operators with Leases of their own (spec.leaderElection.perOperator): "
        "they are fixed at start; adding or removing an operator or changing its "
        "spec.leaderElection needs a restart (nothing was applied)"));
    common::LogError("operator files refused; the running operators are unchanged",
                     {{"path", operator_path_}, {"error", refused.message()}});
    common::MutexLock lock(&mu_);
    last_reload_error_ = std::string(refused.message());
    return refused;
  }
  std::vector<std::string> errors;
  absl::StatusOr<config::OperatorSetDiff> diff = manager_->Apply(*operators, dry_run, &errors);
  common::MutexLock lock(&mu_);
  if (!dry_run) {
    // spec.leaderElection is read at start only (exe::ResolveLeaderElection): said once per
    // change, so an edit that seems ignored is explained where the operator looks.
    std::string blocks = LeaderElectionBlocks(*operators);
    if (blocks != leader_blocks_seen_) {
      if (blocks != leader_blocks_at_start_) {
        common::LogWarning(
            "spec.leaderElection changed in the operator files: the host keeps the leader "
            "election it started with; the change takes effect at the next start",
            {{"path", operator_path_}});
      }
      leader_blocks_seen_ = std::move(blocks);
    }
  }
  if (!diff.ok()) {
    last_reload_error_ = std::string(diff.status().message());
  } else if (!dry_run) {
    last_reload_error_ = absl::StrJoin(errors, "; ");
  }
  return diff;
}

std::string Host::last_reload_error() const {
  common::MutexLock lock(&mu_);
  return last_reload_error_;
}

absl::Status Host::ApiServerCheck() const {
  common::MutexLock lock(&mu_);
  if (api_error_.ok()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "API server ", api_url_, " unreachable for ",
      absl::FormatDuration(absl::Trunc(absl::Now() - api_failing_since_, absl::Seconds(1))), ": ",
      api_error_.message(), "; retrying discovery"));
}

void Host::DiscoveryLoop(absl::Duration initial, absl::Duration max) {
  common::Clock* clock = common::Clock::Real();
  absl::Duration delay = initial;
  absl::Time last_log = clock->Now();
  while (true) {
    {
      common::MutexLock lock(&mu_);
      const absl::Time deadline = clock->Now() + delay;
      while (!stopping_ && !clock->WaitWithDeadline(&mu_, &cv_, deadline)) {
      }
      if (stopping_) return;
    }
    absl::Status s = discovery_->Refresh();
    common::MutexLock lock(&mu_);
    if (s.ok()) {
      common::LogInfo(
          "API server answers; discovery done, pending controllers start",
          {{"api_server", api_url_}, {"unreachable_for", clock->Now() - api_failing_since_}});
      api_error_ = absl::OkStatus();
      return;
    }
    api_error_ = s;
    if (clock->Now() - last_log >= absl::Minutes(1)) {
      last_log = clock->Now();
      common::LogWarning("API server still unreachable; retrying discovery",
                         {{"api_server", api_url_},
                          {"error", s.message()},
                          {"unreachable_for", clock->Now() - api_failing_since_}});
    }
    delay = std::min(delay * 2, max);
  }
}

void Host::WatchLoop() {
  std::string seen = Fingerprint();
  common::Clock* clock = common::Clock::Real();
  while (true) {
    {
      common::MutexLock lock(&mu_);
      const absl::Time deadline = clock->Now() + watch_interval_;
      while (!stopping_ && !clock->WaitWithDeadline(&mu_, &cv_, deadline)) {
      }
      if (stopping_) return;
    }
    std::string now = Fingerprint();
    if (now == seen) continue;
    // An editor may be half-way through writing (truncated, then written): apply only contents
    // that stayed the same for one more interval.
    {
      common::MutexLock lock(&mu_);
      const absl::Time deadline = clock->Now() + watch_interval_;
      while (!stopping_ && !clock->WaitWithDeadline(&mu_, &cv_, deadline)) {
      }
      if (stopping_) return;
    }
    if (Fingerprint() != now) continue;  // still changing: look again next time
    seen = std::move(now);
    common::LogInfo("operator files changed: reloading", {{"path", operator_path_}});
    (void)Reload(/*dry_run=*/false);
  }
}

void Host::OnStartedLeading(absl::Time valid_until) {
  fence_->Open(valid_until);
  leader_gauge_->Set(1);
  manager_->StartDispatching();
}

void Host::OnStoppedLeading(const std::string& reason) {
  // Fence first: nothing this host still has in flight may write once it is not the leader.
  fence_->Trip(reason == "released" ? "the host is stopping: Lease released" : reason);
  leader_gauge_->Set(0);
  if (reason == "released") return;
  common::MutexLock lock(&mu_);
  leadership_lost_ = reason;
  cv_.SignalAll();
}

void Host::OnOperatorStartedLeading(OperatorLease* lease, absl::Time valid_until) {
  lease->fence->Open(valid_until);
  lease->gauge->Set(1);
  manager_->StartDispatching(lease->operator_name);
}

void Host::OnOperatorStoppedLeading(OperatorLease* lease, const std::string& reason) {
  // Fence first: nothing of this operator still in flight may write once it is not the leader.
  lease->fence->Trip(reason == "released" ? "the host is stopping: Lease released" : reason);
  lease->gauge->Set(0);
  if (reason == "released") return;
  common::MutexLock lock(&mu_);
  if (leadership_lost_.empty()) {
    leadership_lost_ = absl::StrCat("operator ", lease->operator_name, " (Lease ",
                                    lease->elector->Status().lease, "): ", reason);
  }
  cv_.SignalAll();
}

const LeaderElector* Host::operator_elector(const std::string& operator_name) const {
  for (const auto& lease : operator_leases_) {
    if (lease->operator_name == operator_name) return lease->elector.get();
  }
  return nullptr;
}

std::string Host::OperatorLeasesDump() const {
  if (operator_leases_.empty()) return "";
  const std::string lost = leadership_lost();
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "operatorLeases" << YAML::Value << YAML::BeginSeq;
  for (const auto& lease : operator_leases_) {
    const LeaderStatus status = lease->elector->Status();
    out << YAML::BeginMap;
    out << YAML::Key << "operator" << YAML::Value << lease->operator_name;
    out << YAML::Key << "lease" << YAML::Value << status.lease;
    out << YAML::Key << "identity" << YAML::Value << status.identity;
    out << YAML::Key << "state" << YAML::Value
        << (lease->fence->tripped() && !lost.empty() ? "lost"
            : status.leading                         ? "leader"
                                                     : "standby");
    out << YAML::Key << "holder" << YAML::Value << status.holder;
    out << YAML::Key << "leaseTransitions" << YAML::Value << status.transitions;
    out << YAML::Key << "acquireTime" << YAML::Value << status.acquire_time;
    out << YAML::Key << "renewTime" << YAML::Value << status.renew_time;
    out << YAML::Key << "dispatching" << YAML::Value << manager_->dispatching(lease->operator_name);
    out << YAML::Key << "writesAllowed" << YAML::Value << lease->fence->open();
    if (!status.last_error.empty()) {
      out << YAML::Key << "lastError" << YAML::Value << status.last_error;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

std::string Host::leadership_lost() const {
  common::MutexLock lock(&mu_);
  return leadership_lost_;
}

std::string Host::WaitLeadershipLost(absl::Duration timeout) const {
  common::Clock* clock = common::Clock::Real();
  const absl::Time deadline = clock->Now() + timeout;
  common::MutexLock lock(&mu_);
  while (leadership_lost_.empty() && !stopping_ && !clock->WaitWithDeadline(&mu_, &cv_, deadline)) {
  }
  return leadership_lost_;
}

std::string Host::LeaderDump() const {
  if (elector_ == nullptr) return "";
  const LeaderStatus status = elector_->Status();
  const std::string lost = leadership_lost();
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "leaderElection" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "lease" << YAML::Value << status.lease;
  out << YAML::Key << "identity" << YAML::Value << status.identity;
  out << YAML::Key << "state" << YAML::Value
      << (!lost.empty()    ? "lost"
          : status.leading ? "leader"
                           : "standby");
  out << YAML::Key << "holder" << YAML::Value << status.holder;
  out << YAML::Key << "leaseTransitions" << YAML::Value << status.transitions;
  out << YAML::Key << "acquireTime" << YAML::Value << status.acquire_time;
  out << YAML::Key << "renewTime" << YAML::Value << status.renew_time;
  out << YAML::Key << "dispatching" << YAML::Value << manager_->dispatching();
  out << YAML::Key << "writesAllowed" << YAML::Value << fence_->open();
  if (!status.last_error.empty())
    out << YAML::Key << "lastError" << YAML::Value << status.last_error;
  if (!lost.empty()) out << YAML::Key << "lostReason" << YAML::Value << lost;
  out << YAML::EndMap << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

void Host::OnShardViewChange(const std::vector<std::string>& old_view,
                             const std::vector<std::string>& new_view) {
  if (manager_ == nullptr) return;
  const ShardRing* ring = ring_.get();
  const size_t queued = manager_->EnqueueSharded([&](absl::string_view key) {
    return ring->OwnsUnder(new_view, key) && !ring->OwnsUnder(old_view, key);
  });
  common::LogInfo("shard ring: queued the keys this host newly owns",
                  {{"ring", ring->options().ring},
                   {"members", absl::StrJoin(new_view, ",")},
                   {"keys", queued}});
}

std::string Host::ShardDump() const {
  if (ring_ == nullptr) return "";
  const ShardRingStatus status = ring_->Status();
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "shardRing" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "ring" << YAML::Value << status.ring;
  out << YAML::Key << "identity" << YAML::Value << status.identity;
  out << YAML::Key << "lease" << YAML::Value << status.lease;
  out << YAML::Key << "state" << YAML::Value
      << (!status.joined  ? "joining"
          : status.active ? "active"
                          : "not renewed");
  out << YAML::Key << "members" << YAML::Value << YAML::Flow << status.view;
  out << YAML::Key << "adoptedView" << YAML::Value << YAML::Flow << status.adopted;
  out << YAML::Key << "viewGeneration" << YAML::Value << status.generation;
  out << YAML::Key << "drained" << YAML::Value << (status.view == status.adopted);
  out << YAML::Key << "peersReadSincePublished" << YAML::Value << status.peers_fresh;
  out << YAML::Key << "inFlight" << YAML::Value << status.in_flight;
  out << YAML::Key << "draining" << YAML::Value << status.draining;
  if (!status.last_error.empty()) {
    out << YAML::Key << "lastError" << YAML::Value << status.last_error;
  }
  out << YAML::Key << "peers" << YAML::Value << YAML::BeginSeq;
  for (const ShardPeer& peer : status.peers) {
    out << YAML::BeginMap;
    out << YAML::Key << "identity" << YAML::Value << peer.identity;
    out << YAML::Key << "lease" << YAML::Value << peer.lease;
    out << YAML::Key << "live" << YAML::Value << peer.live;
    out << YAML::Key << "adoptedView" << YAML::Value << YAML::Flow << peer.adopted;
    out << YAML::Key << "viewGeneration" << YAML::Value << peer.generation;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

void Host::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (ring_ != nullptr) {
    // Leave first: reconciles in flight end, the Lease goes, the peers take the keys at their
    // next poll while this host's controllers shut down.
    ring_->Stop(/*leave=*/true);
  }
  if (elector_ != nullptr) {
    // Graceful hand-over: stop writing and cancel what is in flight, then give the Lease up so
    // that a standby takes over at its next attempt (within retryPeriod).
    fence_->Trip("the host is stopping");
    elector_->Stop(/*release=*/true);
  }
  // The same per operator: every fence first (nothing of any operator writes any more), then
  // each Lease this host holds is released.
  for (const auto& lease : operator_leases_) lease->fence->Trip("the host is stopping");
  for (const auto& lease : operator_leases_) {
    if (lease->elector != nullptr) lease->elector->Stop(/*release=*/true);
  }
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (watcher_.joinable()) watcher_.join();
  if (discoverer_.joinable()) discoverer_.join();
  if (admin_ != nullptr) admin_->Stop();
  if (observe_ != nullptr) observe_->Stop();
  if (metrics_ != nullptr && provider_ != 0) metrics_->RemoveProvider(provider_);
  if (manager_ != nullptr) manager_->Stop();
  manager_.reset();
  observe_.reset();
  discovery_.reset();
  client_.reset();
  rest_.reset();
  if (apiserver_ != nullptr) apiserver_->Stop();
}

}  // namespace ctrlhost::manager
