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
  ASSIGN_OR_RETURN(kube::RestConfig rest_config, host->ConnectApiServer(options));
  RETURN_IF_ERROR(host->SetUpOperatorLeases(options, rest_config));
  if (!host->operator_leases_.empty()) {
    host->operator_set_at_start_ = OperatorSet(options.operators);
  }
  RETURN_IF_ERROR(host->SetUpLeaderElection(options, rest_config));
  RETURN_IF_ERROR(host->SetUpShardRing(options, rest_config));
  RETURN_IF_ERROR(host->StartClientAndHealth(options, std::move(rest_config)));
  RETURN_IF_ERROR(host->StartManager(options));
  RETURN_IF_ERROR(host->StartLeaderElector(options));
  RETURN_IF_ERROR(host->StartOperatorElectors(options));
  host->StartShardRing();
  host->StartBackgroundThreads(options);
  return host;
}

absl::StatusOr<kube::RestConfig> Host::ConnectApiServer(const HostOptions& options) {
  kube::RestConfig rest_config;
  if (options.kubeconfigs.empty() && options.in_cluster) {
    ASSIGN_OR_RETURN(rest_config, kube::InClusterConfig());
    api_url_ = rest_config.host;
  } else if (options.kubeconfigs.empty()) {
    apiserver::ApiServerOptions server_options = options.apiserver;
    server_options.data_dir = options.data_dir;
    ASSIGN_OR_RETURN(apiserver_, apiserver::ApiServer::Start(server_options));
    api_url_ = apiserver_->url();
    ASSIGN_OR_RETURN(rest_config, kube::LoadKubeconfigFile(apiserver_->kubeconfig_path()));
    // The host's own token (memory only, never in the kubeconfig users and plugins may read):
    // its requests take seats of their own, so users cannot starve the host's informers,
    // leader election or writes (docs/apiserver.md, "Priority levels and seats").
    rest_config.bearer_token = apiserver_->system_token();
    rest_config.token_file.reset();
  } else {
    ASSIGN_OR_RETURN(rest_config, kube::LoadKubeconfigFiles(options.kubeconfigs, options.context));
    api_url_ = rest_config.host;
  }
  return rest_config;
}

kube::RestClientOptions Host::ApiClientOptions(const HostOptions& options) const {
  kube::RestClientOptions rest_options = options.rest;
  if (apiserver_ != nullptr) {
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
  if (!operator_leases_.empty()) {
    // Writes are fenced per operator: the applier of an operator with a Lease installs its
    // fence on the writing thread (FencedApplier), which this check reads.
    rest_options.write_fence = [] { return CurrentWriteDeadline(); };
  }
  if (fence_ != nullptr) {
    Fence* fence = fence_.get();
    rest_options.write_fence = [fence] { return fence->WriteDeadline(); };
  }
  return rest_options;
}

absl::Status Host::StartClientAndHealth(const HostOptions& options, kube::RestConfig rest_config) {
  ASSIGN_OR_RETURN(rest_,
                   kube::RestClient::Create(std::move(rest_config), ApiClientOptions(options)));
  client_ = std::make_unique<kube::Client>(rest_.get());
  discovery_ = std::make_unique<kube::Discovery>(rest_.get());
  // Health endpoints first: they answer while the first discovery waits on a slow server.
  metrics_ = std::make_unique<observe::MetricsRegistry>();
  observe::ObserveServerOptions observe_options;
  observe_options.bind = options.metrics_bind;
  observe_options.port = options.metrics_port;
  observe_options.metrics = metrics_.get();
  ASSIGN_OR_RETURN(observe_, observe::ObserveServer::Start(observe_options));
  {
    common::MutexLock lock(&mu_);
    api_error_ = absl::UnavailableError("first discovery in progress");
    api_failing_since_ = absl::Now();
  }
  observe_->SetReadyCheck("api-server", [this] { return ApiServerCheck(); });
  if (absl::Status s = discovery_->Refresh(); s.ok()) {
    common::MutexLock lock(&mu_);
    api_error_ = absl::OkStatus();
  } else {
    // Not fatal: the host serves its health endpoints and starts its controllers once the
    // server answers (a host started before its cluster, or during an outage, recovers alone).
    common::LogWarning(
        "API server unreachable at start; retrying discovery (controllers wait for it)",
        {{"api_server", api_url_}, {"error", s.message()}});
    common::MutexLock lock(&mu_);
    api_error_ = s;
  }
  return absl::OkStatus();
}

absl::Status Host::StartManager(const HostOptions& options) {
  ManagerOptions manager_options;
  manager_options.client = client_.get();
  manager_options.discovery = discovery_.get();
  manager_options.data_dir = options.data_dir;
  manager_options.record_dir = options.record_dir;
  manager_options.host_version = options.host_version;
  manager_options.watch_stale_after = options.watch_stale_after;
  manager_options.plugin_uid = options.plugin_uid;
  manager_options.plugin_gid = options.plugin_gid;
  manager_options.plugin_uid_per_plugin = options.plugin_uid_per_plugin;
  manager_options.plugin_landlock = options.plugin_landlock;
  manager_options.max_controllers = options.max_controllers;
  manager_options.max_reconcile_workers = options.max_reconcile_workers;
  manager_options.plugin_hidden_paths = options.kubeconfigs;
  manager_options.plugin_hidden_paths.insert(manager_options.plugin_hidden_paths.end(),
                                             options.plugin_hidden_paths.begin(),
                                             options.plugin_hidden_paths.end());
  manager_options.api_reachable = [this] { return ApiServerCheck().ok(); };
  manager_options.dispatching = !options.leader_election.has_value();
  manager_options.fence = fence_.get();
  for (const auto& lease : operator_leases_) {
    manager_options.operator_fences[lease->operator_name] = lease->fence.get();
  }
  manager_options.shard_gate = ring_.get();
  manager_options.shard_scope = shard_scope_;
  manager_options.shard_labeler_client = ring_client_.get();
  manager_options.api_budget = &rest_->limiter();
  ASSIGN_OR_RETURN(manager_, Manager::Create(manager_options));
  if (shard_scope_ != nullptr) {
    // Where the server has no shard selector, the hosts watch their buckets by label: the
    // labeller writes the labels, and every host fixes the wrong ones its watches report.
    shard_scope_->EnableLabels({kShardBucketLabel, kShardBucketBits});
    if (ShardLabeler* labeler = manager_->shard_labeler(); labeler != nullptr) {
      shard_scope_->SetMislabeledHandler(
          [labeler](const cache::Object& object) { labeler->Fix(object); });
    }
  }
  Manager* manager = manager_.get();
  provider_ = metrics_->AddProvider([this, manager](observe::Figures& figures) {
    manager->Collect(figures);
    CollectConnections(figures);
  });
  observe_->SetReadyCheck("controllers", [manager] { return manager->Ready(); });
  // Keys waiting past their queue's maxWait: a warning, not a failure (the host works, slowly).
  observe_->SetReadyCheck("queues", [] { return absl::OkStatus(); });
  observe_->SetReadyDetail("queues", [manager] {
    const std::vector<std::string> warnings = manager->QueueWarnings();
    return warnings.empty() ? std::string()
                            : absl::StrCat("warning: ", absl::StrJoin(warnings, "; "));
  });
  observe_->SetDumpProvider([this, manager]() -> absl::StatusOr<std::string> {
    return absl::StrCat(manager->DumpYaml(), LeaderDump(), OperatorLeasesDump(), ShardDump(),
                        ApiBudgetDump());
  });
  return manager_->Start(options.operators);
}

void Host::StartBackgroundThreads(const HostOptions& options) {
  if (!ApiServerCheck().ok()) {
    discoverer_ =
        std::thread([this, initial = options.discovery_backoff,
                     max = options.discovery_max_backoff] { DiscoveryLoop(initial, max); });
  }
  operator_path_ = options.operator_path;
  watch_interval_ = options.watch_interval;
  if (!operator_path_.empty()) watcher_ = std::thread([this] { WatchLoop(); });
}

Host::~Host() { Stop(); }

std::string Host::kubeconfig_path() const {
  return apiserver_ != nullptr ? apiserver_->kubeconfig_path() : "";
}

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
    c.streams_open = static_cast<double>(stats.streams.open);
    c.streams_finished_total = stats.streams.finished;
    c.streams_client_closed_total = stats.streams.peer_closed;
    c.streams_stalled_total = stats.streams.stalled;
    c.streams_cut_total = stats.streams.cut_at_stop;
    figures.connections.push_back(std::move(c));
  };
  if (apiserver_ != nullptr) add("apiserver", apiserver_->connection_stats());
  if (observe_ != nullptr) add("observe", observe_->connection_stats());
  if (rest_ == nullptr) return;
  for (const kube::FairLimiter::TenantFigures& t : rest_->limiter().Figures()) {
    observe::ApiBudgetFigures f;
    f.operator_name = t.operator_name.empty() ? "-" : t.operator_name;
    f.controller = t.controller.empty() ? "-" : t.controller;
    f.requests_total = t.granted_total;
    f.throttled_total = t.waited_total;
    f.throttle_seconds_total = absl::ToDoubleSeconds(t.wait_time);
    f.waiting = static_cast<double>(t.waiting);
    figures.api_budget.push_back(std::move(f));
  }
}

std::string Host::ApiBudgetDump() const {
  if (rest_ == nullptr) return "";
  const kube::FairLimiter& limiter = rest_->limiter();
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "apiBudget" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "qps" << YAML::Value << limiter.qps();
  out << YAML::Key << "burst" << YAML::Value << limiter.burst();
  out << YAML::Key << "tenants" << YAML::Value << YAML::BeginSeq;
  for (const kube::FairLimiter::TenantFigures& t : limiter.Figures()) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "operator" << YAML::Value
        << (t.operator_name.empty() ? "-" : t.operator_name);
    out << YAML::Key << "controller" << YAML::Value << (t.controller.empty() ? "-" : t.controller);
    out << YAML::Key << "operatorWeight" << YAML::Value << t.operator_weight;
    out << YAML::Key << "controllerWeight" << YAML::Value << t.controller_weight;
    out << YAML::Key << "requests" << YAML::Value << t.granted_total;
    out << YAML::Key << "throttled" << YAML::Value << t.waited_total;
    out << YAML::Key << "throttleSeconds" << YAML::Value << absl::ToDoubleSeconds(t.wait_time);
    out << YAML::Key << "waiting" << YAML::Value << t.waiting;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
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
  // The same per operator: no hand-over any more and out of the balance's ring (the peers
  // count one host less, so that they take the Leases released next at once), every fence
  // (nothing of any operator writes any more), then each Lease this host holds is released.
  if (balancer_ != nullptr) balancer_->Stop();
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
