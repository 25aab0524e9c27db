#include "runtime/manager/leader_elector.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/kube/api_status.h"
#include "runtime/manager/lease.h"

namespace ctrlhost::manager {

namespace {

using nlohmann::json;

// The elected Lease, or its collection (to create it) when not `named`.
kube::ResourceRef ElectionLease(const LeaderElectionOptions& options, bool named) {
  return LeaseRef(options.lease_namespace, named ? options.lease_name : "");
}

}  // namespace

absl::Status ValidateLeaderElection(const LeaderElectionOptions& options) {
  auto invalid = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("leader election: ", why));
  };
  if (options.lease_name.empty()) return invalid("the Lease name must not be empty");
  if (options.lease_namespace.empty()) return invalid("the Lease namespace must not be empty");
  if (options.identity.empty()) return invalid("the identity must not be empty");
  if (options.retry_period <= absl::ZeroDuration()) return invalid("retryPeriod must be positive");
  if (options.lease_duration <= options.renew_deadline) {
    return invalid(absl::StrCat("leaseDuration (", absl::FormatDuration(options.lease_duration),
                                ") must be greater than renewDeadline (",
                                absl::FormatDuration(options.renew_deadline), ")"));
  }
  if (options.renew_deadline <= options.retry_period * 1.2) {
    return invalid(absl::StrCat("renewDeadline (", absl::FormatDuration(options.renew_deadline),
                                ") must be greater than 1.2 x retryPeriod (",
                                absl::FormatDuration(options.retry_period), ")"));
  }
  return absl::OkStatus();
}

std::string DefaultIdentity() {
  std::string base;
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') base = pod;
  if (base.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) base = name;
  }
  if (base.empty()) base = "ctrlhost";
  absl::BitGen gen;
  return absl::StrFormat("%s_%08x", base, absl::Uniform<uint32_t>(gen));
}

absl::StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(kube::Client* client,
                                                                     LeaderElectionOptions options,
                                                                     LeaderCallbacks callbacks) {
  if (absl::Status s = ValidateLeaderElection(options); !s.ok()) return s;
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(client, std::move(options), std::move(callbacks)));
}

LeaderElector::LeaderElector(kube::Client* client, LeaderElectionOptions options,
                             LeaderCallbacks callbacks)
    : client_(client),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      lease_(absl::StrCat(options_.lease_namespace, "/", options_.lease_name)) {
  status_.lease = lease_;
  status_.identity = options_.identity;
}

LeaderElector::~LeaderElector() { Stop(false); }

void LeaderElector::Start() {
  common::LogInfo("leader election: standing as a candidate",
                  {{"lease", lease_}, {"identity", options_.identity}});
  thread_ = std::thread([this] { Loop(); });
  watcher_ = std::thread([this] { WatchLoop(); });
}

void LeaderElector::WatchLoop() {
  while (true) {
    {
      common::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    kube::WatchOptions watch;
    watch.timeout_seconds = 300;
    watch.allow_bookmarks = false;
    absl::Status ended = client_->Watch(
        ElectionLease(options_, true), watch,
        [this](kube::WatchEvent event) {
          if (event.type != "ADDED" && event.type != "MODIFIED") return true;
          json lease = json::parse(event.object, nullptr, /*allow_exceptions=*/false);
          if (!lease.is_object() || !lease.contains("spec") || !lease["spec"].is_object()) {
            return true;
          }
          const std::string holder = StringField(lease["spec"], "holderIdentity");
          common::MutexLock lock(&mu_);
          // The holder as the watch sees it (at once, not at the next attempt): a balancer
          // waiting for a handed-over Lease to be taken reads it here.
          status_.holder = holder;
          if (holder.empty()) {
            attempt_now_ = true;
            cv_.SignalAll();
          } else if (leading_ && holder != options_.identity) {
            taken_by_ = holder;
            cv_.SignalAll();
          }
          return !stopping_;
        },
        &canceller_);
    if (!ended.ok()) {
      common::LogDebug("leader election: Lease watch ended", {{"lease", lease_}, {"error", ended}});
    }
    // The attempts every retryPeriod go on meanwhile; the watch only speeds a hand-over up.
    if (!WaitUntil(clock_->Now() + options_.retry_period)) return;
  }
}

void LeaderElector::Stop(bool release) {
  if (stopped_) return;
  stopped_ = true;
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
  if (watcher_.joinable()) watcher_.join();
  bool was_leading = false;
  {
    common::MutexLock lock(&mu_);
    was_leading = leading_;
  }
  if (!release || !was_leading) return;
  absl::Status released = Release();
  if (released.ok()) {
    common::LogInfo("leader election: Lease released", {{"lease", lease_}});
  } else {
    common::LogWarning("leader election: Lease not released; a standby takes over once it expires",
                       {{"lease", lease_}, {"error", released.message()}});
  }
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading(kLeaseReleased);
}

bool LeaderElector::HandOver() {
  common::MutexLock lock(&mu_);
  if (!leading_ || stopping_ || hand_over_) return false;
  hand_over_ = true;
  cv_.SignalAll();
  return true;
}

void LeaderElector::AttemptNow() {
  common::MutexLock lock(&mu_);
  attempt_now_ = true;
  cv_.SignalAll();
}

bool LeaderElector::WaitUntil(absl::Time deadline, bool wakeable) {
  common::MutexLock lock(&mu_);
  while (!stopping_ && !(wakeable && attempt_now_) &&
         !(leading_ && (!taken_by_.empty() || hand_over_)) &&
         !clock_->WaitWithDeadline(&mu_, &cv_, deadline)) {
  }
  attempt_now_ = false;
  return !stopping_;
}

bool LeaderElector::MayAcquire(const AcquireAttempt& attempt) {
  const bool may = !callbacks_.may_acquire || callbacks_.may_acquire(attempt);
  common::MutexLock lock(&mu_);
  if (!may && !status_.acquire_deferred) {
    common::LogInfo(
        "leader election: standing by; the Lease is free but this host may not take "
        "it now",
        {{"lease", lease_},
         {"identity", options_.identity},
         {"previous_holder", attempt.previous_holder}});
  }
  status_.acquire_deferred = !may;
  if (!may) status_.last_error.clear();
  return may;
}

bool LeaderElector::TryAcquireOrRenew() {
  const absl::Time now = clock_->Now();
  auto fail = [&](absl::string_view what, const absl::Status& s) {
    common::MutexLock lock(&mu_);
    status_.last_error = absl::StrCat(what, ": ", s.message());
    return false;
  };
  json spec = {{"holderIdentity", options_.identity},
               {"leaseDurationSeconds", LeaseSeconds(options_.lease_duration)},
               {"acquireTime", FormatMicroTime(now)},
               {"renewTime", FormatMicroTime(now)},
               {"leaseTransitions", 0}};
  absl::StatusOr<json> got = GetLease(client_, ElectionLease(options_, true));
  if (!got.ok() && kube::IsNotFound(got.status())) {
    if (!MayAcquire(AcquireAttempt{})) return false;
    json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", options_.lease_name}, {"namespace", options_.lease_namespace}}},
        {"spec", spec}};
    absl::StatusOr<std::string> created =
        CreateLease(client_, ElectionLease(options_, false), lease);
    if (!created.ok()) return fail("create Lease", created.status());
    common::MutexLock lock(&mu_);
    observed_spec_ = spec.dump();
    observed_time_ = now;
    status_.holder = options_.identity;
    status_.transitions = 0;
    status_.acquire_time = status_.renew_time = FormatMicroTime(now);
    status_.last_renewal = now;
    status_.last_error.clear();
    return true;
  }
  if (!got.ok()) return fail("read Lease", got.status());
  json& lease = *got;
  const json old =
      lease.contains("spec") && lease["spec"].is_object() ? lease["spec"] : json::object();
  const std::string holder = StringField(old, "holderIdentity");
  const int64_t transitions = IntField(old, "leaseTransitions", 0);
  const int64_t duration =
      IntField(old, "leaseDurationSeconds", LeaseSeconds(options_.lease_duration));
  bool new_holder = false;
  bool held_by_other = false;
  bool ask = false;  // a Lease this host does not hold: may_acquire decides
  AcquireAttempt attempt;
  {
    common::MutexLock lock(&mu_);
    const std::string raw = old.dump();
    if (raw != observed_spec_) {
      observed_spec_ = raw;
      observed_time_ = now;
    }
    new_holder = holder != logged_holder_;
    logged_holder_ = holder;
    status_.holder = holder;
    status_.transitions = transitions;
    status_.acquire_time = StringField(old, "acquireTime");
    status_.renew_time = StringField(old, "renewTime");
    held_by_other = !holder.empty() && holder != options_.identity &&
                    observed_time_ + absl::Seconds(duration) > now;
    if (held_by_other) status_.last_error.clear();
    if (held_by_other) status_.acquire_deferred = false;
    if (held_by_other && leading_) taken_by_ = holder;
    ask = !held_by_other && holder != options_.identity && !leading_;
    attempt.exists = true;
    attempt.previous_holder = holder;
    const absl::Time vacant_since =
        holder.empty() ? observed_time_ : observed_time_ + absl::Seconds(duration);
    attempt.vacant_for = std::max(absl::ZeroDuration(), now - vacant_since);
  }
  if (held_by_other) {
    if (new_holder) {
      common::LogInfo("leader election: standing by; the Lease is held by another host",
                      {{"lease", lease_}, {"holder", holder}, {"transitions", transitions}});
    }
    return false;  // held by another host, not expired
  }
  if (ask && !MayAcquire(attempt)) return false;
  if (holder == options_.identity) {
    spec["acquireTime"] = StringField(old, "acquireTime");
    spec["leaseTransitions"] = transitions;
  } else {
    spec["leaseTransitions"] = transitions + 1;
  }
  lease["spec"] = spec;
  // The read resourceVersion stays in metadata: the update is conditional on it.
  absl::StatusOr<std::string> updated = UpdateLease(client_, ElectionLease(options_, true), lease);
  if (!updated.ok()) return fail("update Lease", updated.status());
  common::MutexLock lock(&mu_);
  observed_spec_ = spec.dump();
  observed_time_ = now;
  status_.holder = options_.identity;
  status_.transitions = spec["leaseTransitions"].get<int64_t>();
  status_.acquire_time = spec["acquireTime"].get<std::string>();
  status_.renew_time = FormatMicroTime(now);
  status_.last_renewal = now;
  status_.last_error.clear();
  return true;
}

absl::Status LeaderElector::Release() {
  absl::StatusOr<json> got = GetLease(client_, ElectionLease(options_, true));
  if (!got.ok()) return got.status();
  json& lease = *got;
  if (!lease.contains("spec") || !lease["spec"].is_object()) {
    return absl::DataLossError("the Lease has no spec");
  }
  if (StringField(lease["spec"], "holderIdentity") != options_.identity) {
    return absl::OkStatus();  // not ours (any more): nothing to give up
  }
  const absl::Time now = clock_->Now();
  json& spec = lease["spec"];
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["acquireTime"] = FormatMicroTime(now);
  spec["renewTime"] = FormatMicroTime(now);
  absl::StatusOr<std::string> updated = UpdateLease(client_, ElectionLease(options_, true), lease);
  if (!updated.ok()) return updated.status();
  common::MutexLock lock(&mu_);
  leading_ = false;
  status_.leading = false;
  status_.holder.clear();
  return absl::OkStatus();
}

void LeaderElector::Loop() {
  absl::BitGen gen;
  while (Campaign(gen)) {
    std::string reason;
    switch (Lead(&reason)) {
      case LeadEnd::kStopping:
        return;
      case LeadEnd::kHandOver:
        GiveUp();
        continue;  // a candidate again
      case LeadEnd::kLost:
        common::LogError("leader election: leadership lost",
                         {{"lease", lease_}, {"identity", options_.identity}, {"reason", reason}});
        if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading(reason);
        return;
    }
  }
}

bool LeaderElector::Campaign(absl::BitGen& gen) {
  // Standby: try every retryPeriod (+ jitter, so that standbys do not race in step).
  while (true) {
    const absl::Time attempt = clock_->Now();
    if (TryAcquireOrRenew()) {
      const absl::Time valid_until = attempt + options_.renew_deadline;
      {
        common::MutexLock lock(&mu_);
        leading_ = true;
        status_.leading = true;
        status_.acquire_deferred = false;
        // Stop raced the acquisition: lead for Stop's release only.
        if (stopping_) return false;
      }
      common::LogInfo("leader election: leading", {{"lease", lease_},
                                                   {"identity", options_.identity},
                                                   {"transitions", Status().transitions}});
      if (callbacks_.on_started_leading) callbacks_.on_started_leading(valid_until);
      return true;
    }
    if (!WaitUntil(clock_->Now() +
                       options_.retry_period * (1.0 + 0.2 * absl::Uniform<double>(gen, 0.0, 1.0)),
                   /*wakeable=*/true)) {
      return false;
    }
  }
}

LeaderElector::LeadEnd LeaderElector::Lead(std::string* lost_reason) {
  // Renew every retryPeriod; give up once renewDeadline passed without a renewal.
  absl::Time valid_until;
  {
    common::MutexLock lock(&mu_);
    valid_until = status_.last_renewal + options_.renew_deadline;
  }
  absl::Time next = clock_->Now() + options_.retry_period;
  std::string taken_by;
  auto seen = [&] {
    common::MutexLock lock(&mu_);
    taken_by = taken_by_;
    return hand_over_;
  };
  while (true) {
    if (!WaitUntil(std::min(next, valid_until))) return LeadEnd::kStopping;
    const bool hand_over = seen();
    if (!taken_by.empty()) break;  // the watch saw another holder
    if (hand_over) return LeadEnd::kHandOver;
    const absl::Time attempt = clock_->Now();
    if (attempt < valid_until && TryAcquireOrRenew()) {
      valid_until = attempt + options_.renew_deadline;
      {
        common::MutexLock lock(&mu_);
        if (stopping_) return LeadEnd::kStopping;
      }
      if (callbacks_.on_renewed) callbacks_.on_renewed(valid_until);
      next = attempt + options_.retry_period;
      continue;
    }
    seen();
    if (!taken_by.empty()) break;  // the attempt read another holder, unexpired
    if (clock_->Now() >= valid_until) break;
    // A failed renewal is retried sooner, still within renewDeadline.
    next = clock_->Now() + options_.retry_period / 2;
  }
  common::MutexLock lock(&mu_);
  leading_ = false;
  status_.leading = false;
  taken_by_.clear();
  hand_over_ = false;
  *lost_reason = !taken_by.empty()
                     ? absl::StrCat("the Lease is held by ", taken_by,
                                    " now; this host stopped writing as soon as it saw that")
                     : absl::StrCat("the Lease was not renewed within renewDeadline (",
                                    absl::FormatDuration(options_.renew_deadline), ")",
                                    status_.last_error.empty() ? "" : ": ", status_.last_error);
  return LeadEnd::kLost;
}

void LeaderElector::GiveUp() {
  {
    common::MutexLock lock(&mu_);
    leading_ = false;
    status_.leading = false;
    taken_by_.clear();
    hand_over_ = false;
  }
  common::LogInfo("leader election: handing the Lease over",
                  {{"lease", lease_}, {"identity", options_.identity}});
  // The Lease is still held: nobody else leads while the caller stops writing and drains.
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading(kLeaseHandedOver);
  absl::Status released = Release();
  if (released.ok()) {
    common::LogInfo("leader election: Lease handed over (released); standing by as a candidate",
                    {{"lease", lease_}, {"identity", options_.identity}});
  } else {
    common::LogWarning(
        "leader election: Lease not released at the hand-over; another host takes it once it "
        "expires",
        {{"lease", lease_}, {"identity", options_.identity}, {"error", released.message()}});
  }
}

LeaderStatus LeaderElector::Status() const {
  common::MutexLock lock(&mu_);
  return status_;
}

}  // namespace ctrlhost::manager
