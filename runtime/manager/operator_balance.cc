#include "runtime/manager/operator_balance.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::manager {

namespace {

// A hand-over nobody completed by then (no peer holds the Lease, this host does not lead it
// again) is given up: a backstop, since MayAcquire lets this host take the Lease back once it
// stood free for leaseDuration.
absl::Duration HandOverBackstop(const LeaderElectionOptions& options) {
  return 3 * options.lease_duration + absl::Seconds(10);
}

}  // namespace

std::string OperatorRingName(std::vector<std::string> operators) {
  std::sort(operators.begin(), operators.end());
  uint32_t hash = 2166136261u;  // FNV-1a 32
  for (unsigned char c : absl::StrJoin(operators, ",")) {
    hash ^= c;
    hash *= 16777619u;
  }
  return absl::StrFormat("ctrlhost-operators-%08x", hash);
}

int FairShare(int operators, int hosts) {
  hosts = std::max(hosts, 1);
  return (operators + hosts - 1) / hosts;
}

absl::StatusOr<std::unique_ptr<OperatorBalancer>> OperatorBalancer::Create(
    kube::Client* client, OperatorBalancerOptions options, std::vector<std::string> operators) {
  if (operators.empty()) {
    return absl::InvalidArgumentError("operator balance: no operator has a Lease of its own");
  }
  options.ring.ring = OperatorRingName(operators);
  if (options.ring.clock == nullptr) options.ring.clock = options.clock;
  const std::string identity = options.ring.identity;
  auto balancer =
      std::make_unique<OperatorBalancer>(std::move(operators), identity, nullptr, options);
  OperatorBalancer* raw = balancer.get();
  ASSIGN_OR_RETURN(balancer->ring_, ShardRing::Create(client, options.ring,
                                                      [raw](const std::vector<std::string>&,
                                                            const std::vector<std::string>&) {
                                                        raw->OnMembersChanged();
                                                      }));
  const ShardRing* ring = balancer->ring_.get();
  balancer->members_ = [ring] {
    const ShardRingStatus status = ring->Status();
    return status.joined ? status.view : std::vector<std::string>();
  };
  return balancer;
}

OperatorBalancer::OperatorBalancer(std::vector<std::string> operators, std::string identity,
                                   Members members, OperatorBalancerOptions options)
    : options_(std::move(options)),
      identity_(std::move(identity)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      members_(std::move(members)) {
  std::sort(operators.begin(), operators.end());
  common::MutexLock lock(&mu_);
  for (std::string& name : operators) entries_.push_back(Entry{std::move(name)});
}

OperatorBalancer::~OperatorBalancer() { Stop(); }

void OperatorBalancer::Attach(const std::string& operator_name, LeaderElector* elector) {
  common::MutexLock lock(&mu_);
  for (Entry& e : entries_) {
    if (e.name == operator_name) e.elector = elector;
  }
}

int OperatorBalancer::Hosts(std::vector<std::string>* members) const {
  *members = members_ ? members_() : std::vector<std::string>();
  // Before the first read of the ring this host counts itself alone.
  return std::max<int>(1, static_cast<int>(members->size()));
}

int OperatorBalancer::HeldLocked(absl::Time now, const std::string& except) const {
  int held = 0;
  for (const Entry& e : entries_) {
    if (e.name == except || e.elector == nullptr) continue;
    if (e.reserved_until > now || e.elector->Status().leading) ++held;
  }
  return held;
}

bool OperatorBalancer::MayAcquire(const std::string& operator_name, const AcquireAttempt& attempt) {
  // Its holder stopped renewing: a failover, taken at once (a later hand-over evens it out).
  if (!attempt.previous_holder.empty()) return true;
  std::vector<std::string> members;
  const int hosts = Hosts(&members);
  const absl::Time now = clock_->Now();
  common::MutexLock lock(&mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.name == operator_name; });
  if (it == entries_.end() || it->elector == nullptr) return true;
  const LeaderElectionOptions& le = it->elector->options();
  // Free for leaseDuration and nobody took it: better an extra share than no leader.
  if (attempt.vacant_for >= le.lease_duration) return true;
  const int fair = FairShare(static_cast<int>(entries_.size()), hosts);
  if (HeldLocked(now, operator_name) >= fair) return false;
  // Counted as held while the attempt runs, so that two electors of this host racing for free
  // Leases do not both take the last place of the share.
  it->reserved_until = now + le.retry_period;
  return true;
}

void OperatorBalancer::Join() {
  if (ring_ == nullptr) return;
  if (!ring_->SyncOnce()) {
    common::LogWarning(
        "per-operator Leases: membership not read yet; this host counts itself "
        "alone until it is",
        {{"ring", ring_->options().ring}, {"error", ring_->Status().last_error}});
  }
}

void OperatorBalancer::Start() {
  if (started_ || stopped_) return;
  started_ = true;
  if (ring_ != nullptr) ring_->Start();
  thread_ = std::thread([this] { Loop(); });
}

void OperatorBalancer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  // Leaving deletes this host's member Lease: the peers count one host less at their next read
  // (and their standbys try at once), before this host releases its operators' Leases.
  if (ring_ != nullptr) ring_->Stop(/*leave=*/true);
}

void OperatorBalancer::Loop() {
  while (true) {
    BalanceOnce();
    common::MutexLock lock(&mu_);
    const absl::Time deadline = clock_->Now() + options_.poll_period;
    while (!stopping_ && !wake_ && !clock_->WaitWithDeadline(&mu_, &cv_, deadline)) {
    }
    wake_ = false;
    if (stopping_) return;
  }
}

void OperatorBalancer::OnMembersChanged() {
  common::MutexLock lock(&mu_);
  wake_ = true;
  cv_.SignalAll();
}

bool OperatorBalancer::HandOverOverLocked(absl::Time now, int fair_share, int led) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.name == handing_over_; });
  if (it == entries_.end()) {
    handing_over_.clear();
    return true;
  }
  const LeaderStatus status = it->elector->Status();
  const absl::Duration took = now - hand_over_since_;
  if (!status.leading && !status.holder.empty() && status.holder != identity_) {
    common::LogInfo("per-operator Leases: operator handed over",
                    {{"operator", it->name},
                     {"lease", status.lease},
                     {"to", status.holder},
                     {"seconds", absl::ToDoubleSeconds(took)}});
    handing_over_.clear();
    return true;
  }
  std::string stalled;
  if (status.leading) {
    stalled = absl::StrCat("operator ", it->name,
                           " was handed over, but no other host took it: this host leads it again");
  } else if (took > HandOverBackstop(it->elector->options())) {
    stalled = absl::StrCat("operator ", it->name, " was handed over ",
                           absl::FormatDuration(absl::Trunc(took, absl::Seconds(1))),
                           " ago and no host holds its Lease yet");
  } else {
    return false;  // under way
  }
  common::LogWarning(
      "per-operator Leases: hand-over not taken; balancing waits until the hosts "
      "change",
      {{"operator", it->name}, {"reason", stalled}});
  handing_over_.clear();
  if (led > fair_share || !status.leading) paused_ = std::move(stalled);
  return true;
}

void OperatorBalancer::BalanceOnce() {
  std::vector<std::string> members;
  const int hosts = Hosts(&members);
  const absl::Time now = clock_->Now();
  std::vector<LeaderElector*> standbys;  // to try again at once: the fair share changed
  LeaderElector* give = nullptr;
  std::string pick;
  {
    common::MutexLock lock(&mu_);
    if (stopping_) return;
    const int fair = FairShare(static_cast<int>(entries_.size()), hosts);
    std::vector<const Entry*> led;
    for (Entry& e : entries_) {
      if (e.elector == nullptr) continue;
      if (e.elector->Status().leading) {
        e.reserved_until = absl::InfinitePast();  // acquired: counted as led from now on
        led.push_back(&e);
      } else {
        standbys.push_back(e.elector);
      }
    }
    const bool changed = members != last_members_;
    if (changed) {
      last_members_ = members;
      if (!paused_.empty()) {
        common::LogInfo("per-operator Leases: the hosts changed; balancing resumes",
                        {{"hosts", hosts}, {"members", absl::StrJoin(members, ",")}});
      }
      paused_.clear();
    } else {
      standbys.clear();
    }
    const int led_count = static_cast<int>(led.size());
    const bool idle = handing_over_.empty() || HandOverOverLocked(now, fair, led_count);
    if (idle && paused_.empty() && led_count > fair) {
      pick = led.back()->name;  // the highest name: every host picks alike
      give = led.back()->elector;
      handing_over_ = pick;
      hand_over_since_ = now;
      ++hand_overs_;
      common::LogInfo("per-operator Leases: handing an operator over to balance the hosts",
                      {{"operator", pick},
                       {"leading", led_count},
                       {"fair_share", fair},
                       {"hosts", hosts},
                       {"members", absl::StrJoin(members, ",")}});
    }
  }
  for (LeaderElector* standby : standbys) standby->AttemptNow();
  if (give != nullptr && !give->HandOver()) {
    common::MutexLock lock(&mu_);  // it stopped leading meanwhile: nothing to hand over
    if (handing_over_ == pick) handing_over_.clear();
  }
}

OperatorBalanceStatus OperatorBalancer::Status() const {
  OperatorBalanceStatus status;
  const int hosts = Hosts(&status.members);
  if (ring_ != nullptr) status.ring = ring_->options().ring;
  common::MutexLock lock(&mu_);
  status.operators = static_cast<int>(entries_.size());
  status.hosts = hosts;
  status.fair_share = FairShare(status.operators, hosts);
  for (const Entry& e : entries_) {
    if (e.elector != nullptr && e.elector->Status().leading) status.led.push_back(e.name);
  }
  status.handing_over = handing_over_;
  status.paused = paused_;
  status.hand_overs = hand_overs_;
  return status;
}

}  // namespace ctrlhost::manager
