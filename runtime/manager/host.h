// The whole host in one object: what `ctrlhost run` starts, and what integration tests start
// in-process.
//
// Start order: the embedded API server (when no kubeconfig is given), the API client, the
// metrics/health server (so /healthz answers while discovery waits on a slow server), discovery,
// then the manager with the operators. Stop goes in
// reverse: the metrics server stops answering, the manager drains controllers and stops
// plugins, then the API server stops.
//
// A cluster that cannot be reached at start does not stop the host: it serves /healthz and
// /readyz (the "api-server" check fails naming the server and the error), starts the plugins,
// keeps its controllers pending (not retried meanwhile: ManagerOptions::api_reachable) and
// retries discovery with backoff (`discovery_backoff` doubling to `discovery_max_backoff`); the
// controllers start once the server answers.
//
// Example:
//   HostOptions options;
//   options.operators = *config::LoadOperators("operator.yaml");
//   options.data_dir = ".ctrlhost";
//   ASSIGN_OR_RETURN(std::unique_ptr<Host> host, Host::Start(options));
//   std::cout << host->kubeconfig_path();
//   host->manager().WaitReady(absl::Minutes(1));
//   host->Stop();
//
// The host knows nothing of the admin API: whoever serves it over a Host (admin_backend.h; the
// `ctrlhost` executable does) borrows the host and stops serving before Stop.
//
// Thread-safety: the accessors are thread-safe; Stop may be called from any thread, once all
// callers of manager() are done with it. Threads: the operator-file watcher (WatchLoop) and,
// while the API server has not answered, the discovery retrier (DiscoveryLoop); mu_ guards what
// they share with the accessors and the /readyz check.
#ifndef CTRLHOST_RUNTIME_MANAGER_HOST_H_
#define CTRLHOST_RUNTIME_MANAGER_HOST_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "prometheus/gauge.h"
#include "runtime/apiserver/server.h"
#include "runtime/common/mutex.h"
#include "runtime/common/version.h"
#include "runtime/config/operator_spec.h"
#include "runtime/kube/client.h"
#include "runtime/kube/discovery.h"
#include "runtime/kube/rest_client.h"
#include "runtime/manager/fence.h"
#include "runtime/manager/leader_elector.h"
#include "runtime/manager/manager.h"
#include "runtime/manager/operator_balance.h"
#include "runtime/manager/shard_ring.h"
#include "runtime/manager/watch_readiness.h"
#include "runtime/observe/metrics.h"
#include "runtime/observe/server.h"

namespace ctrlhost::manager {

struct HostOptions {
  std::vector<config::OperatorSpec> operators;
  // The operator file or directory `operators` came from. When set, it is watched: an edit is
  // loaded and applied live (Manager::Apply); an invalid edit is refused with its precise
  // error (logged, and in /debug/dump) and the running set stays as it was.
  std::string operator_path;
  absl::Duration watch_interval = absl::Seconds(1);
  // Cluster to work against (kubectl's merge rules); empty: the embedded API server, unless
  // `in_cluster`.
  std::vector<std::string> kubeconfigs;
  // With no kubeconfigs: the cluster the host runs in (KUBERNETES_SERVICE_HOST/PORT and the
  // service-account token, CA and namespace; the token is re-read when the kubelet rotates it).
  bool in_cluster = false;
  std::string context;
  // Embedded API server settings (data_dir is overridden by `data_dir` below).
  apiserver::ApiServerOptions apiserver;
  // Plugin sockets, and the embedded server's database, certificates and kubeconfig.
  std::string data_dir = ".ctrlhost";
  // More paths no exec'd plugin may reach, besides the data dir and the kubeconfigs: the admin
  // API's socket and token file, which whoever serves the admin API over this host chooses
  // (`ctrlhost run`: runtime/exe, with admin_backend.h).
  std::vector<std::string> plugin_hidden_paths;
  // ManagerOptions::record_dir (ctrlhost run --record).
  std::string record_dir;
  std::string metrics_bind = "127.0.0.1";
  int metrics_port = 9090;  // 0: any free port
  std::string host_version = common::kCtrlhostVersion;
  kube::RestClientOptions rest;
  // Client-side rate limit of the API client when set (`ctrlhost run --kube-api-qps/-burst`,
  // or spec.apiClient of the operator documents). Unset: `rest`'s (50 QPS / burst 100), except
  // that against the embedded server the QPS limit is off.
  std::optional<double> api_qps;
  std::optional<int> api_burst;
  // Readiness fails when a watch has been failing this long (ManagerOptions::watch_stale_after).
  absl::Duration watch_stale_after = kDefaultWatchStaleAfter;
  // Exec'd plugins' user and Landlock restriction (ManagerOptions); the data dir, the
  // kubeconfigs and the admin socket are hidden from them.
  std::optional<uid_t> plugin_uid;
  std::optional<gid_t> plugin_gid;
  bool plugin_uid_per_plugin = false;
  bool plugin_landlock = true;
  // Host-wide limits on what plugins may declare (ManagerOptions).
  int max_controllers = 1000;
  int max_reconcile_workers = 4096;
  // Discovery retries while the API server does not answer at start.
  absl::Duration discovery_backoff = absl::Milliseconds(500);
  absl::Duration discovery_max_backoff = absl::Seconds(10);
  // Leader election between hosts that run the same operators against one cluster (`ctrlhost
  // run --leader-elect`). Unset: this host dispatches at once. Set: it starts as a warm
  // standby (plugins started, caches synced, nothing dispatched) and dispatches only while it
  // holds the Lease; its API writes go through a fence (fence.h) that closes at renewDeadline
  // without a renewal; losing the Lease is final for this Host (leadership_lost(): the process
  // exits and is restarted as a standby); Stop gives the Lease up after fencing.
  std::optional<LeaderElectionOptions> leader_election;
  // Per-operator Leases (spec.leaderElection.perOperator), by operator name: each such operator
  // starts as a warm standby and dispatches only while this host holds its Lease; its
  // reconciles go through a Fence of its own (FencedDispatcher) and so do its writes
  // (FencedApplier: refused, or cut, at that fence). Losing one of them is final for this Host,
  // as for the host-wide Lease (leadership_lost() names the operator); Stop releases every one
  // this host holds after fencing it. Excludes leader_election and shard_ring. The operators and
  // their blocks are fixed at start: a reload that changes them is refused. The hosts balance
  // them (operator_balance.h): each leads at most ceil(operators / hosts) of the free ones and
  // hands extra ones over (fence closed, dispatch stopped, Lease released; the operator stays a
  // warm standby here) when another host joins.
  std::map<std::string, LeaderElectionOptions> operator_leases;
  // Sharding (`ctrlhost run --shard-ring`): this host joins the ring (shard_ring.h) and its
  // controllers with `sharding: {enabled: true}` reconcile only its share of their keys; on a
  // change of members it queues the keys it newly owns; Stop leaves the ring first (in-flight
  // reconciles drained, its Lease deleted) so the peers take over at once. Excludes
  // leader_election.
  std::optional<ShardRingOptions> shard_ring;
};

class Host {
 public:
  static absl::StatusOr<std::unique_ptr<Host>> Start(HostOptions options);
  ~Host();  // Stop()
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  bool embedded() const { return apiserver_ != nullptr; }
  std::string api_url() const { return api_url_; }
  // The embedded server's kubeconfig ("" against a cluster).
  std::string kubeconfig_path() const;
  std::string metrics_url() const;  // "http://127.0.0.1:PORT/metrics"
  Manager& manager() { return *manager_; }
  kube::Client& client() { return *client_; }

  // Loads the operator files again and applies them now (what the watcher does on an edit).
  // The load error (nothing changed) or what was applied.
  absl::StatusOr<config::OperatorSetDiff> Reload(bool dry_run);
  // The last reload's problems ("" when it applied cleanly).
  std::string last_reload_error() const;

  // OK once discovery answered (it stays OK: later outages show as stale watches); before,
  // Unavailable: "API server https://... unreachable for 12s: <error>; retrying discovery".
  absl::Status ApiServerCheck() const;

  // The shard ring (null without one).
  const ShardRing* shard_ring() const { return ring_.get(); }
  // Leader election (null without it).
  const LeaderElector* leader_elector() const { return elector_.get(); }
  // "" while this host leads or stands by; why it lost the Lease once it did (final).
  std::string leadership_lost() const;
  // Per-operator Leases: the elector of `operator_name` (null when it has none).
  const LeaderElector* operator_elector(const std::string& operator_name) const;
  // Per-operator Leases: their balancing across the hosts (null without them).
  const OperatorBalancer* operator_balancer() const { return balancer_.get(); }
  // Waits (bounded) until leadership_lost() is set; returns it ("" on timeout).
  std::string WaitLeadershipLost(absl::Duration timeout) const;

  // Idempotent.
  void Stop();

 private:
  Host() = default;
  // Start's steps, in order. Each leaves what it made in the host, which Stop takes down.
  // The cluster: the embedded API server started here (apiserver_), the Pod's, or the
  // kubeconfigs'; sets api_url_.
  absl::StatusOr<kube::RestConfig> ConnectApiServer(const HostOptions& options);
  // Per-operator Leases: a fence each and the electors' client (InvalidArgument for options
  // that do not validate or exclude them).
  absl::Status SetUpOperatorLeases(const HostOptions& options, const kube::RestConfig& rest_config);
  // The host-wide Lease: its fence and the elector's client.
  absl::Status SetUpLeaderElection(const HostOptions& options, const kube::RestConfig& rest_config);
  // The shard ring (not started yet) and its client.
  absl::Status SetUpShardRing(const HostOptions& options, const kube::RestConfig& rest_config);
  // The API client's options: rate limit, connection pool, and the write fence of the Leases
  // set up before.
  kube::RestClientOptions ApiClientOptions(const HostOptions& options) const;
  // The API client, the metrics/health server, then the first discovery (its failure is not
  // fatal: the "api-server" check reports it and StartBackgroundThreads retries).
  absl::Status StartClientAndHealth(const HostOptions& options, kube::RestConfig rest_config);
  // The manager with the operators, its figures, readiness check and dump.
  absl::Status StartManager(const HostOptions& options);
  // The electors and the ring start once the manager runs: their callbacks call into it.
  absl::Status StartLeaderElector(const HostOptions& options);
  absl::Status StartOperatorElectors(const HostOptions& options);
  void StartShardRing();
  // The discovery retrier (when the first discovery failed) and the operator-file watcher.
  void StartBackgroundThreads(const HostOptions& options);
  void WatchLoop();
  // Retries discovery with backoff until it answers (started when it failed at start).
  void DiscoveryLoop(absl::Duration initial, absl::Duration max);
  // path + contents of every operator file, or the resolution error.
  std::string Fingerprint() const;

  // The embedded API server's and the observe endpoints' connection figures (a provider).
  void CollectConnections(observe::Figures& figures) const;  // and the API budget's tenants
  // The `apiBudget:` section of /debug/dump: the client's limit and each tenant's weights and
  // use.
  std::string ApiBudgetDump() const;
  // The leader-election callbacks.
  void OnStartedLeading(absl::Time valid_until);
  void OnStoppedLeading(const std::string& reason);
  struct OperatorLease;
  void OnOperatorStartedLeading(OperatorLease* lease, absl::Time valid_until);
  void OnOperatorStoppedLeading(OperatorLease* lease, const std::string& reason);
  std::string OperatorLeasesDump() const;
  std::string LeaderDump() const;
  std::string ShardDump() const;
  void OnShardViewChange(const std::vector<std::string>& old_view,
                         const std::vector<std::string>& new_view);

  std::unique_ptr<apiserver::ApiServer> apiserver_;
  std::unique_ptr<Fence> fence_;  // with leader election
  std::unique_ptr<kube::RestClient> elector_rest_;
  std::unique_ptr<kube::Client> elector_client_;
  std::unique_ptr<LeaderElector> elector_;
  prometheus::Gauge* leader_gauge_ = nullptr;  // leader_election_master_status
  // Per-operator Leases (set at start, constant after; each member is thread-safe).
  struct OperatorLease {
    std::string operator_name;
    std::unique_ptr<Fence> fence;
    std::unique_ptr<LeaderElector> elector;
    prometheus::Gauge* gauge = nullptr;  // leader_election_master_status{name=<its Lease>}
  };
  std::vector<std::unique_ptr<OperatorLease>> operator_leases_;
  // Balances operator_leases_ across the hosts (with them; its ring uses elector_client_).
  std::unique_ptr<OperatorBalancer> balancer_;
  // With per-operator Leases: the operators and their blocks at start (a reload must keep them).
  std::string operator_set_at_start_;
  std::unique_ptr<kube::RestClient> ring_rest_;
  std::unique_ptr<kube::Client> ring_client_;
  std::unique_ptr<ShardRing> ring_;
  // This host's part of the hash space, set on every view change (null without a ring).
  std::shared_ptr<watch::ShardScope> shard_scope_;
  std::string api_url_;
  std::unique_ptr<kube::RestClient> rest_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<kube::Discovery> discovery_;
  std::unique_ptr<observe::MetricsRegistry> metrics_;
  std::unique_ptr<observe::ObserveServer> observe_;
  std::unique_ptr<Manager> manager_;
  observe::MetricsRegistry::ProviderId provider_ = 0;
  std::string operator_path_;
  absl::Duration watch_interval_;

  mutable common::Mutex mu_;
  mutable common::CondVar cv_;  // wakes the watcher on Stop and WaitLeadershipLost
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string leadership_lost_ ABSL_GUARDED_BY(mu_);
  std::string last_reload_error_ ABSL_GUARDED_BY(mu_);
  // The operators' spec.leaderElection blocks at start (set once before any thread starts) and
  // as the last reload saw them: a reload that changes them logs a warning once.
  std::string leader_blocks_at_start_;
  std::string leader_blocks_seen_ ABSL_GUARDED_BY(mu_);
  // The discovery failure that keeps the API server unready (OK once it answered).
  absl::Status api_error_ ABSL_GUARDED_BY(mu_);
  absl::Time api_failing_since_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
  std::thread discoverer_;
  bool stopped_ = false;  // Stop is called from one thread (see the class comment)
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_HOST_H_
