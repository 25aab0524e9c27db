// The host's Leases and shard ring (host.h): their set-up and start (steps of Host::Start), the
// electors' and the ring's callbacks, and their parts of /readyz and /debug/dump.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/manager/host.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::manager {
namespace {

// A client of its own for Lease traffic (electors, the shard ring): never throttled behind the
// controllers' requests, never fenced, each request bounded near the retry period so that a hung
// connection cannot hold a renewal past its deadline.
kube::RestClientOptions LeaseClientOptions(const HostOptions& options, absl::Duration timeout,
                                           size_t connections, absl::string_view role) {
  kube::RestClientOptions lease_options;
  lease_options.qps = 0;
  lease_options.timeout = timeout;
  lease_options.max_idle_connections = connections;
  lease_options.user_agent = absl::StrCat(options.rest.user_agent, "/", role);
  return lease_options;
}

}  // namespace

absl::Status Host::SetUpOperatorLeases(const HostOptions& options,
                                       const kube::RestConfig& rest_config) {
  if (options.operator_leases.empty()) return absl::OkStatus();
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
    operator_leases_.push_back(std::move(lease));
    shortest_retry = std::min(shortest_retry, le.retry_period);
  }
  ASSIGN_OR_RETURN(
      elector_rest_,
      kube::RestClient::Create(
          rest_config, LeaseClientOptions(options, shortest_retry,
                                          2 * options.operator_leases.size(), "leader-election")));
  elector_client_ = std::make_unique<kube::Client>(elector_rest_.get());
  return absl::OkStatus();
}

absl::Status Host::SetUpLeaderElection(const HostOptions& options,
                                       const kube::RestConfig& rest_config) {
  if (!options.leader_election.has_value()) return absl::OkStatus();
  RETURN_IF_ERROR(ValidateLeaderElection(*options.leader_election));
  fence_ = std::make_unique<Fence>(options.leader_election->clock);
  ASSIGN_OR_RETURN(
      elector_rest_,
      kube::RestClient::Create(rest_config,
                               LeaseClientOptions(options, options.leader_election->retry_period, 2,
                                                  "leader-election")));
  elector_client_ = std::make_unique<kube::Client>(elector_rest_.get());
  return absl::OkStatus();
}

absl::Status Host::SetUpShardRing(const HostOptions& options, const kube::RestConfig& rest_config) {
  if (!options.shard_ring.has_value()) return absl::OkStatus();
  if (options.leader_election.has_value()) {
    return absl::InvalidArgumentError("a shard ring and leader election exclude each other");
  }
  RETURN_IF_ERROR(ValidateShardRing(*options.shard_ring));
  ASSIGN_OR_RETURN(ring_rest_,
                   kube::RestClient::Create(
                       rest_config, LeaseClientOptions(options, options.shard_ring->retry_period, 2,
                                                       "shard-ring")));
  ring_client_ = std::make_unique<kube::Client>(ring_rest_.get());
  ASSIGN_OR_RETURN(ring_, ShardRing::Create(ring_client_.get(), *options.shard_ring,
                                            [this](const std::vector<std::string>& old_view,
                                                   const std::vector<std::string>& new_view) {
                                              OnShardViewChange(old_view, new_view);
                                            }));
  return absl::OkStatus();
}

absl::Status Host::StartLeaderElector(const HostOptions& options) {
  if (!options.leader_election.has_value()) return absl::OkStatus();
  leader_gauge_ =
      &prometheus::BuildGauge()
           .Name("leader_election_master_status")
           .Help("1 while this host holds the leader-election Lease named by `name`, else 0")
           .Register(metrics_->registry())
           .Add({{"name", options.leader_election->lease_name}});
  LeaderCallbacks callbacks;
  callbacks.on_started_leading = [this](absl::Time valid_until) { OnStartedLeading(valid_until); };
  Fence* fence = fence_.get();
  callbacks.on_renewed = [fence](absl::Time valid_until) { fence->Extend(valid_until); };
  callbacks.on_stopped_leading = [this](const std::string& reason) { OnStoppedLeading(reason); };
  ASSIGN_OR_RETURN(elector_, LeaderElector::Create(elector_client_.get(), *options.leader_election,
                                                   std::move(callbacks)));
  observe_->SetReadyCheck("leader", [this]() -> absl::Status {
    const std::string lost = leadership_lost();
    if (lost.empty()) return absl::OkStatus();  // a standby is ready: it serves
    return absl::UnavailableError(absl::StrCat("leadership lost: ", lost));
  });
  const LeaderElector* elector = elector_.get();
  observe_->SetReadyDetail("leader", [elector]() -> std::string {
    const LeaderStatus status = elector->Status();
    if (status.leading) return absl::StrCat("leading (Lease ", status.lease, ")");
    return absl::StrCat("standby (Lease ", status.lease, ", leader ",
                        status.holder.empty() ? "none" : status.holder, ")");
  });
  elector_->Start();
  return absl::OkStatus();
}

absl::Status Host::StartOperatorElectors(const HostOptions& options) {
  if (operator_leases_.empty()) return absl::OkStatus();
  auto& family =
      prometheus::BuildGauge()
          .Name("leader_election_master_status")
          .Help("1 while this host holds the leader-election Lease named by `name`, else 0")
          .Register(metrics_->registry());
  for (const auto& lease : operator_leases_) {
    const LeaderElectionOptions& le = options.operator_leases.at(lease->operator_name);
    lease->gauge = &family.Add({{"name", le.lease_name}});
    OperatorLease* raw = lease.get();
    LeaderCallbacks callbacks;
    callbacks.on_started_leading = [this, raw](absl::Time valid_until) {
      OnOperatorStartedLeading(raw, valid_until);
    };
    Fence* fence = lease->fence.get();
    callbacks.on_renewed = [fence](absl::Time valid_until) { fence->Extend(valid_until); };
    callbacks.on_stopped_leading = [this, raw](const std::string& reason) {
      OnOperatorStoppedLeading(raw, reason);
    };
    ASSIGN_OR_RETURN(lease->elector,
                     LeaderElector::Create(elector_client_.get(), le, std::move(callbacks)));
  }
  observe_->SetReadyCheck("leader", [this]() -> absl::Status {
    const std::string lost = leadership_lost();
    if (lost.empty()) return absl::OkStatus();  // standing by for an operator is ready
    return absl::UnavailableError(absl::StrCat("leadership lost: ", lost));
  });
  observe_->SetReadyDetail("leader", [this]() -> std::string {
    std::vector<std::string> parts;
    for (const auto& lease : operator_leases_) {
      const LeaderStatus status = lease->elector->Status();
      parts.push_back(absl::StrCat(
          "operator ", lease->operator_name, ": ",
          status.leading ? absl::StrCat("leading (Lease ", status.lease, ")")
                         : absl::StrCat("standby (Lease ", status.lease, ", leader ",
                                        status.holder.empty() ? "none" : status.holder, ")")));
    }
    return absl::StrJoin(parts, "; ");
  });
  for (const auto& lease : operator_leases_) lease->elector->Start();
  return absl::OkStatus();
}

void Host::StartShardRing() {
  if (ring_ == nullptr) return;
  const ShardRing* ring = ring_.get();
  observe_->SetReadyCheck("shard-ring", [ring]() -> absl::Status {
    const ShardRingStatus status = ring->Status();
    if (status.joined && status.active) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "shard ring ", status.ring, ": ",
        !status.joined ? "not joined yet" : "membership not renewed within renewDeadline",
        status.last_error.empty() ? "" : ": ", status.last_error));
  });
  observe_->SetReadyDetail("shard-ring", [ring]() -> std::string {
    const ShardRingStatus status = ring->Status();
    return absl::StrCat("member of shard ring ", status.ring, " (", status.view.size(),
                        " members, view generation ", status.generation, ")");
  });
  ring_->Start();
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

}  // namespace ctrlhost::manager
