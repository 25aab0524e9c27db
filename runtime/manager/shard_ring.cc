#include "runtime/manager/shard_ring.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/validation.h"
#include "runtime/manager/leader_elector.h"
#include "runtime/manager/lease.h"

namespace ctrlhost::manager {

namespace {

using nlohmann::json;

// A published view: members in join order.
std::vector<std::string> SplitMembers(absl::string_view text) {
  return absl::StrSplit(text, ',', absl::SkipEmpty());
}

// Join order: the Lease's creationTimestamp (RFC 3339 in seconds, set by the API server, so
// it sorts as text), then the identity. A member whose creation time is unknown sorts last.
struct Joined {
  std::string created;
  std::string identity;
  bool operator<(const Joined& o) const {
    return std::tie(created, identity) < std::tie(o.created, o.identity);
  }
};

}  // namespace

std::string ShardLeaseName(absl::string_view ring, absl::string_view identity) {
  std::string name = absl::AsciiStrToLower(absl::StrCat(ring, "-", identity));
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
  }
  if (name.size() > 253) name.resize(253);
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

absl::Status ValidateShardRing(const ShardRingOptions& options) {
  LeaderElectionOptions timings;
  timings.lease_namespace = options.lease_namespace;
  timings.lease_name = options.ring;
  timings.identity = options.identity;
  timings.lease_duration = options.lease_duration;
  timings.renew_deadline = options.renew_deadline;
  timings.retry_period = options.retry_period;
  if (absl::Status s = ValidateLeaderElection(timings); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ring: ", absl::StripPrefix(s.message(), "leader election: ")));
  }
  for (const std::string& problem : kube::IsValidLabelValue(options.ring)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ring: the ring name \"", options.ring, "\" ", problem));
  }
  if (absl::StrContains(options.identity, ',')) {
    return absl::InvalidArgumentError("shard ring: the identity must not contain ','");
  }
  if (options.poll_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shard ring: the poll period must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardRing>> ShardRing::Create(kube::Client* client,
                                                             ShardRingOptions options,
                                                             ViewChange on_view_change) {
  if (absl::Status s = ValidateShardRing(options); !s.ok()) return s;
  return std::unique_ptr<ShardRing>(
      new ShardRing(client, std::move(options), std::move(on_view_change)));
}

ShardRing::ShardRing(kube::Client* client, ShardRingOptions options, ViewChange on_view_change)
    : client_(client),
      options_(std::move(options)),
      on_view_change_(std::move(on_view_change)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      lease_name_(ShardLeaseName(options_.ring, options_.identity)) {}

ShardRing::~ShardRing() { Stop(false); }

void ShardRing::Start() {
  common::LogInfo("shard ring: joining", {{"ring", options_.ring},
                                          {"identity", options_.identity},
                                          {"lease", options_.lease_namespace + "/" + lease_name_}});
  thread_ = std::thread([this] { Loop(); });
}

void ShardRing::Loop() {
  while (true) {
    SyncOnce();
    common::MutexLock lock(&mu_);
    const absl::Time deadline = clock_->Now() + options_.poll_period;
    while (!stopping_ && !wake_ && !clock_->WaitWithDeadline(&mu_, &cv_, deadline)) {
    }
    wake_ = false;
    if (stopping_) return;
  }
}

void ShardRing::Stop(bool leave, absl::Duration drain_timeout) {
  if (stopped_) return;
  stopped_ = true;
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  if (!leave || lease_json_.empty()) return;
  bool drained = false;
  {
    common::MutexLock lock(&mu_);
    leaving_ = true;
    view_.clear();  // every key is someone else's now: Begin answers kNotMine
    current_ = ShardAssignment();
    const absl::Time deadline = clock_->Now() + drain_timeout;
    while (!in_flight_.empty() && !clock_->WaitWithDeadline(&mu_, &cv_, deadline)) {
    }
    drained = in_flight_.empty();
  }
  if (!drained) {
    common::LogWarning("shard ring: reconciles still in flight; the Lease is left to expire",
                       {{"ring", options_.ring}, {"identity", options_.identity}});
    return;
  }
  kube::DeleteOptions del;
  json lease = json::parse(lease_json_, nullptr, /*allow_exceptions=*/false);
  if (lease.is_object() && lease.contains("metadata") && lease["metadata"].is_object()) {
    del.precondition_resource_version = StringField(lease["metadata"], "resourceVersion");
  }
  absl::StatusOr<std::string> deleted =
      client_->Delete(LeaseRef(options_.lease_namespace, lease_name_), del);
  if (deleted.ok() || kube::IsNotFound(deleted.status())) {
    common::LogInfo("shard ring: left the ring; peers take the keys over at their next poll",
                    {{"ring", options_.ring}, {"identity", options_.identity}});
  } else {
    common::LogWarning("shard ring: Lease not deleted; peers take the keys over once it expires",
                       {{"ring", options_.ring}, {"error", deleted.status().message()}});
  }
}

bool ShardRing::DrainedLocked() const {
  for (const auto& [key, flight] : in_flight_) {
    if (!current_.Owns(options_.identity, flight.hash)) return false;
  }
  return true;
}

bool ShardRing::ActiveLocked(absl::Time now) const {
  return last_renewal_ + options_.renew_deadline > now;
}

absl::Status ShardRing::WriteLease(const std::vector<std::string>& adopted, uint64_t generation) {
  const absl::Time now = clock_->Now();
  const kube::ResourceRef ref = LeaseRef(options_.lease_namespace, lease_name_);
  auto fill = [&](json& lease) {
    lease["apiVersion"] = "coordination.k8s.io/v1";
    lease["kind"] = "Lease";
    json& metadata = lease["metadata"];
    metadata["name"] = lease_name_;
    metadata["namespace"] = options_.lease_namespace;
    metadata["labels"][kShardRingLabel] = options_.ring;
    metadata["annotations"][kShardMembersAnnotation] = absl::StrJoin(adopted, ",");
    metadata["annotations"][kShardViewAnnotation] = options_.identity;  // older hosts wait
    metadata["annotations"][kShardGenerationAnnotation] = absl::StrCat(generation);
    json& spec = lease["spec"];
    if (StringField(spec, "holderIdentity") != options_.identity) {
      spec["acquireTime"] = FormatMicroTime(now);
    }
    spec["holderIdentity"] = options_.identity;
    spec["leaseDurationSeconds"] = LeaseSeconds(options_.lease_duration);
    spec["renewTime"] = FormatMicroTime(now);
    if (!spec.contains("leaseTransitions")) spec["leaseTransitions"] = 0;
  };
  absl::StatusOr<std::string> written;
  if (lease_json_.empty()) {
    json lease = json::object();
    fill(lease);
    written = CreateLease(client_, ref, lease);
    if (!written.ok() && kube::IsAlreadyExists(written.status())) {
      // Ours from a write whose answer was lost: take it as it is now.
      absl::StatusOr<json> current = GetLease(client_, ref);
      if (!current.ok()) return current.status();
      fill(*current);
      written = UpdateLease(client_, ref, *current);
    }
  } else {
    json lease = json::parse(lease_json_, nullptr, /*allow_exceptions=*/false);
    fill(lease);
    written = UpdateLease(client_, ref, lease);
  }
  if (!written.ok()) {
    // A conflict or a deleted Lease: start again from what the server holds.
    if (kube::IsConflict(written.status()) || kube::IsNotFound(written.status())) {
      lease_json_.clear();
    }
    return written.status();
  }
  lease_json_ = *std::move(written);
  json lease = json::parse(lease_json_, nullptr, /*allow_exceptions=*/false);
  if (lease.is_object() && lease.contains("metadata") && lease["metadata"].is_object()) {
    own_created_ = StringField(lease["metadata"], "creationTimestamp");
  }
  return absl::OkStatus();
}

absl::Status ShardRing::ReadPeers() {
  uint64_t publications = 0;
  absl::flat_hash_map<std::string, PeerClaim> old_claims;
  absl::flat_hash_map<std::string, std::vector<std::string>> old_adopted;
  {
    common::MutexLock lock(&mu_);
    publications = publications_;
    old_claims = peer_claims_;
    for (const ShardPeer& peer : peers_) old_adopted[peer.identity] = peer.adopted;
  }
  kube::ListOptions list;
  list.label_selector = absl::StrCat(kShardRingLabel, "=", options_.ring);
  kube::ResourceRef ref = LeaseRef(options_.lease_namespace, "");
  absl::StatusOr<kube::ObjectList> leases = client_->List(ref, list);
  if (!leases.ok()) return leases.status();
  const absl::Time now = clock_->Now();
  std::vector<ShardPeer> peers;
  absl::flat_hash_map<std::string, PeerClaim> claims;
  absl::flat_hash_map<std::string, Observed> observed;
  std::vector<Joined> joined;
  std::vector<std::pair<std::string, std::string>> expired;  // name, resourceVersion
  for (const std::string& item : leases->items) {
    json lease = json::parse(item, nullptr, /*allow_exceptions=*/false);
    if (!lease.is_object() || !lease.contains("metadata") || !lease["metadata"].is_object()) {
      continue;
    }
    const json& metadata = lease["metadata"];
    const std::string name = StringField(metadata, "name");
    if (name.empty() || name == lease_name_) continue;
    const json spec =
        lease.contains("spec") && lease["spec"].is_object() ? lease["spec"] : json::object();
    const json annotations = metadata.contains("annotations") && metadata["annotations"].is_object()
                                 ? metadata["annotations"]
                                 : json::object();
    ShardPeer peer;
    peer.identity = StringField(spec, "holderIdentity");
    peer.lease = name;
    peer.older_scheme = !annotations.contains(kShardMembersAnnotation);
    peer.adopted = SplitMembers(StringField(annotations, kShardMembersAnnotation));
    peer.generation = StringField(annotations, kShardGenerationAnnotation);
    peer.created = StringField(metadata, "creationTimestamp");
    Observed seen;
    seen.record = absl::StrCat(spec.dump(), "|", StringField(annotations, kShardMembersAnnotation),
                               "|", StringField(annotations, kShardViewAnnotation));
    seen.resource_version = StringField(metadata, "resourceVersion");
    seen.since = now;
    if (auto it = observed_.find(name); it != observed_.end() && it->second.record == seen.record) {
      seen.since = it->second.since;
    }
    int64_t seconds = IntField(spec, "leaseDurationSeconds", 0);
    if (seconds <= 0) seconds = LeaseSeconds(options_.lease_duration);
    peer.live = !peer.identity.empty() && peer.identity != options_.identity &&
                seen.since + absl::Seconds(seconds) > now;
    if (!peer.live && seen.since + 4 * absl::Seconds(seconds) <= now) {
      expired.emplace_back(name, seen.resource_version);
    }
    if (peer.live && !claims.contains(peer.identity)) {
      joined.push_back({peer.created.empty() ? "~" : peer.created, peer.identity});
      PeerClaim& claim = claims[peer.identity];
      auto before = old_claims.find(peer.identity);
      auto adopted = old_adopted.find(peer.identity);
      if (peer.older_scheme) {
        claim.assignment = nullptr;
      } else if (before != old_claims.end() && before->second.assignment != nullptr &&
                 adopted != old_adopted.end() && adopted->second == peer.adopted) {
        claim.assignment = before->second.assignment;  // unchanged: not computed again
      } else {
        claim.assignment = std::make_shared<const ShardAssignment>(peer.adopted);
      }
      if (peer.older_scheme && warned_older_.insert(peer.identity).second) {
        common::LogWarning(
            "shard ring: a live member runs an older sharding scheme; no key starts while it "
            "is live (stop the older hosts)",
            {{"ring", options_.ring}, {"member", peer.identity}});
      }
    }
    observed[name] = std::move(seen);
    peers.push_back(std::move(peer));
  }
  observed_ = std::move(observed);
  joined.push_back({own_created_.empty() ? "~" : own_created_, options_.identity});
  std::sort(joined.begin(), joined.end());
  std::vector<std::string> view;
  for (Joined& j : joined) view.push_back(std::move(j.identity));
  std::vector<std::string> old_view;
  bool changed = false;
  {
    common::MutexLock lock(&mu_);
    if (leaving_) return absl::OkStatus();
    peer_claims_ = std::move(claims);
    peers_ = std::move(peers);
    read_after_ = publications;
    if (view != view_) {
      old_view = std::move(view_);
      view_ = view;
      current_ = ShardAssignment(view);
      changed = true;
    }
  }
  if (changed) {
    common::LogInfo("shard ring: members changed", {{"ring", options_.ring},
                                                    {"identity", options_.identity},
                                                    {"before", absl::StrJoin(old_view, ",")},
                                                    {"members", absl::StrJoin(view, ",")}});
    if (on_view_change_) on_view_change_(old_view, view);
  }
  // Leases of hosts that died long ago (kill -9 leaves them behind): gone from every view, so
  // deleting them changes nothing but the clutter. The precondition keeps a revived one.
  for (const auto& [name, resource_version] : expired) {
    kube::DeleteOptions del;
    del.precondition_resource_version = resource_version;
    absl::StatusOr<std::string> deleted =
        client_->Delete(LeaseRef(options_.lease_namespace, name), del);
    if (deleted.ok()) {
      common::LogInfo("shard ring: deleted an expired member's Lease",
                      {{"ring", options_.ring}, {"lease", name}});
    }
  }
  return absl::OkStatus();
}

bool ShardRing::SyncOnce() {
  const absl::Time start = clock_->Now();
  std::vector<std::string> target;
  uint64_t generation = 0;
  bool publish = false;
  bool was_active = false;
  {
    common::MutexLock lock(&mu_);
    was_active = ActiveLocked(start);
    target = DrainedLocked() ? view_ : published_;
    publish = target != published_ || lease_json_.empty();
    generation = target != published_ ? generation_ + 1 : generation_;
  }
  absl::Status result = absl::OkStatus();
  if (publish || start - last_write_ >= options_.retry_period) {
    absl::Status written = WriteLease(target, generation);
    if (written.ok()) {
      last_write_ = start;
      common::MutexLock lock(&mu_);
      last_renewal_ = start;
      if (publish) {
        const bool view_changed = target != published_;
        if (view_changed || adopted_.members() != target) adopted_ = ShardAssignment(target);
        published_ = target;
        generation_ = generation;
        ++publications_;
        if (view_changed) {
          common::LogInfo("shard ring: drained and published the view",
                          {{"ring", options_.ring},
                           {"identity", options_.identity},
                           {"generation", generation},
                           {"members", absl::StrJoin(target, ",")}});
        }
      }
      last_error_.clear();
    } else {
      result = written;
      common::MutexLock lock(&mu_);
      last_error_ = absl::StrCat("write Lease: ", written.message());
    }
  }
  if (absl::Status read = ReadPeers(); !read.ok()) {
    result = read;
    common::MutexLock lock(&mu_);
    last_error_ = absl::StrCat("read Leases: ", read.message());
  }
  common::MutexLock lock(&mu_);
  const bool active = ActiveLocked(clock_->Now());
  if (was_active && !active) {
    common::LogError("shard ring: membership not renewed within renewDeadline; starting no keys",
                     {{"ring", options_.ring},
                      {"identity", options_.identity},
                      {"renewDeadline", absl::FormatDuration(options_.renew_deadline)},
                      {"error", last_error_}});
  } else if (!was_active && active) {
    common::LogInfo("shard ring: membership renewed", {{"ring", options_.ring}});
  }
  return result.ok();
}

bool ShardRing::Owns(uint64_t shard_hash) const {
  common::MutexLock lock(&mu_);
  return current_.Owns(options_.identity, shard_hash);
}

std::vector<watch::HashRange> ShardRing::Ranges() const {
  common::MutexLock lock(&mu_);
  return current_.RangesOf(options_.identity);
}

controller::KeyGate::Verdict ShardRing::Begin(absl::string_view key, uint64_t shard_hash) {
  common::MutexLock lock(&mu_);
  if (!current_.Owns(options_.identity, shard_hash)) return kNotMine;
  if (!ActiveLocked(clock_->Now()) || read_after_ != publications_) return kWait;
  if (!adopted_.Owns(options_.identity, shard_hash)) return kWait;
  for (const auto& [peer, claim] : peer_claims_) {
    // Not drained there yet (or a peer of the older scheme, which may claim anything).
    if (claim.assignment == nullptr || claim.assignment->Owns(peer, shard_hash)) return kWait;
  }
  InFlight& flight = in_flight_[std::string(key)];
  ++flight.count;
  flight.hash = shard_hash;
  return kRun;
}

void ShardRing::End(absl::string_view key) {
  common::MutexLock lock(&mu_);
  auto it = in_flight_.find(key);
  if (it == in_flight_.end()) return;
  if (--it->second.count <= 0) in_flight_.erase(it);
  if (view_ != published_ || leaving_) {
    wake_ = true;  // maybe drained: publish now rather than at the next poll
    cv_.SignalAll();
  }
}

absl::Duration ShardRing::retry_after() const {
  return std::min(options_.poll_period, absl::Milliseconds(250));
}

ShardRingStatus ShardRing::Status() const {
  ShardRingStatus status;
  status.ring = options_.ring;
  status.identity = options_.identity;
  status.lease = absl::StrCat(options_.lease_namespace, "/", lease_name_);
  common::MutexLock lock(&mu_);
  status.joined = publications_ > 0;
  status.active = ActiveLocked(clock_->Now());
  status.view = view_;
  status.adopted = published_;
  status.generation = generation_;
  status.peers_fresh = read_after_ == publications_;
  for (const auto& [key, flight] : in_flight_) {
    status.in_flight += flight.count;
    if (!current_.Owns(options_.identity, flight.hash)) status.draining += flight.count;
  }
  status.buckets = current_.BucketsOf(options_.identity);
  status.ranges = current_.RangesOf(options_.identity);
  status.peers = peers_;
  status.last_renewal = last_renewal_;
  status.last_error = last_error_;
  return status;
}

}  // namespace ctrlhost::manager
