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
  ASSIGN_OR_RETURN(elector_rest_,
                   kube::RestClient::Create(
                       rest_config, LeaseClientOptions(options, shortest_retry,
                                                       2 * options.operator_leases.size() + 2,
                                                       "leader-election")));
  elector_client_ = std::make_unique<kube::Client>(elector_rest_.get());
  // Membership for the balance: in the namespace of the first operator's Lease (by name), with
  // its timings and this host's identity.
  const LeaderElectionOptions& first = options.operator_leases.begin()->second;
  OperatorBalancerOptions balance;
  balance.ring.lease_namespace = first.lease_namespace;
  balance.ring.identity = first.identity;
  balance.ring.lease_duration = first.lease_duration;
  balance.ring.renew_deadline = first.renew_deadline;
  balance.ring.retry_period = first.retry_period;
  balance.clock = first.clock;
  std::vector<std::string> names;
  for (const auto& [op, le] : options.operator_leases) names.push_back(op);
  ASSIGN_OR_RETURN(balancer_, OperatorBalancer::Create(elector_client_.get(), std::move(balance),
                                                       std::move(names)));
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
  shard_scope_ = std::make_shared<watch::ShardScope>();
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
    OperatorBalancer* balancer = balancer_.get();
    callbacks.may_acquire = [balancer, raw](const AcquireAttempt& attempt) {
      return balancer->MayAcquire(raw->operator_name, attempt);
    };
    ASSIGN_OR_RETURN(lease->elector,
                     LeaderElector::Create(elector_client_.get(), le, std::move(callbacks)));
    balancer_->Attach(lease->operator_name, lease->elector.get());
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
  // The members first, so that the electors start knowing the peers (and their fair share).
  balancer_->Join();
  for (const auto& lease : operator_leases_) lease->elector->Start();
  balancer_->Start();
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
  if (reason == kLeaseHandedOver) {
    // Voluntary (operator_balance.h), while the Lease is still held: no new reconcile, those in
    // flight finish (their writes too: the fence stays open until its renew deadline at most,
    // since renewals pause meanwhile) up to the manager's shutdown timeout, then the fence
    // closes (cancelling anything left) and the elector releases the Lease. The operator stays
    // a warm standby; the next acquisition opens the fence again.
    Fence* fence = lease->fence.get();
    manager_->StopDispatching(lease->operator_name, [fence] { fence->Close(kLeaseHandedOver); });
    lease->gauge->Set(0);
    return;
  }
  // Fence first: nothing of this operator still in flight may write once it is not the leader.
  lease->fence->Trip(reason == kLeaseReleased ? "the host is stopping: Lease released" : reason);
  lease->gauge->Set(0);
  if (reason == kLeaseReleased) return;
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
    // Free, but this host holds its fair share (operator_balance.h).
    if (status.acquire_deferred) out << YAML::Key << "acquireDeferred" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  const OperatorBalanceStatus balance = balancer_->Status();
  out << YAML::Key << "operatorLeaseBalance" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "ring" << YAML::Value << balance.ring;
  out << YAML::Key << "hosts" << YAML::Value << balance.hosts;
  out << YAML::Key << "members" << YAML::Value << YAML::Flow << balance.members;
  out << YAML::Key << "operators" << YAML::Value << balance.operators;
  out << YAML::Key << "fairShare" << YAML::Value << balance.fair_share;
  out << YAML::Key << "leading" << YAML::Value << YAML::Flow << balance.led;
  out << YAML::Key << "handingOver" << YAML::Value << balance.handing_over;
  out << YAML::Key << "handOvers" << YAML::Value << balance.hand_overs;
  if (!balance.paused.empty()) out << YAML::Key << "paused" << YAML::Value << balance.paused;
  out << YAML::EndMap << YAML::EndMap;
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
  const ShardRing* ring = ring_.get();
  const std::string& me = ring->options().identity;
  const ShardAssignment before(old_view);
  const ShardAssignment after(new_view);
  std::vector<watch::HashRange> ranges = after.RangesOf(me);
  common::LogInfo("shard ring: this host's part of the hash space",
                  {{"ring", ring->options().ring},
                   {"members", absl::StrJoin(new_view, ",")},
                   {"buckets", after.BucketsOf(me)},
                   {"of", kShardBuckets},
                   {"ranges", ranges.size()}});
  // The sharded caches list their new part again: objects this host newly owns arrive as adds
  // (and are queued by them), those it no longer owns leave as deletes of keys not its own.
  shard_scope_->Set(std::move(ranges));
  if (manager_ == nullptr) return;
  // The first member in join order labels the sharded kinds' objects (where the server needs
  // labels); when it leaves, the next one does.
  if (ShardLabeler* labeler = manager_->shard_labeler(); labeler != nullptr) {
    labeler->SetActive(!new_view.empty() && new_view.front() == me);
  }
  // Objects already cached (a cache not restricted to the shard, or one not yet re-listed).
  const size_t queued = manager_->EnqueueSharded([&](const cache::Object& primary) {
    const uint64_t hash = controller::ShardHash(primary.uid());
    return after.Owns(me, hash) && !before.Owns(me, hash);
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
  // This host's part of the hash space under `members` (what its sharded caches hold).
  out << YAML::Key << "buckets" << YAML::Value
      << absl::StrCat(status.buckets, " of ", kShardBuckets);
  out << YAML::Key << "hashRanges" << YAML::Value << YAML::BeginSeq;
  for (const watch::HashRange& r : status.ranges) {
    out << absl::StrCat("0x", absl::Hex(r.start), "-0x",
                        r.end == absl::uint128(1) << 64
                            ? "10000000000000000"
                            : absl::StrCat(absl::Hex(absl::Uint128Low64(r.end))));
  }
  out << YAML::EndSeq;
  out << YAML::Key << "drained" << YAML::Value << (status.view == status.adopted);
  out << YAML::Key << "peersReadSincePublished" << YAML::Value << status.peers_fresh;
  out << YAML::Key << "inFlight" << YAML::Value << status.in_flight;
  out << YAML::Key << "draining" << YAML::Value << status.draining;
  if (!status.last_error.empty()) {
    out << YAML::Key << "lastError" << YAML::Value << status.last_error;
  }
  if (manager_ != nullptr && manager_->shard_labeler() != nullptr) {
    const ShardLabelerStatus labeler = manager_->shard_labeler()->Status();
    out << YAML::Key << "labeler" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "active" << YAML::Value << labeler.active;
    out << YAML::Key << "kinds" << YAML::Value << labeler.kinds;
    out << YAML::Key << "labelledTotal" << YAML::Value << labeler.labelled_total;
    out << YAML::Key << "fixedTotal" << YAML::Value << labeler.fixed_total;
    out << YAML::Key << "failuresTotal" << YAML::Value << labeler.failures_total;
    out << YAML::Key << "pending" << YAML::Value << labeler.pending;
    if (!labeler.last_error.empty()) {
      out << YAML::Key << "lastError" << YAML::Value << labeler.last_error;
    }
    out << YAML::EndMap;
  }
  out << YAML::Key << "peers" << YAML::Value << YAML::BeginSeq;
  for (const ShardPeer& peer : status.peers) {
    out << YAML::BeginMap;
    out << YAML::Key << "identity" << YAML::Value << peer.identity;
    out << YAML::Key << "lease" << YAML::Value << peer.lease;
    out << YAML::Key << "live" << YAML::Value << peer.live;
    out << YAML::Key << "adoptedView" << YAML::Value << YAML::Flow << peer.adopted;
    out << YAML::Key << "viewGeneration" << YAML::Value << peer.generation;
    if (peer.older_scheme) out << YAML::Key << "olderScheme" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace ctrlhost::manager
