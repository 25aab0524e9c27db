#include "runtime/manager/fence.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::manager {

Fence::Fence(common::Clock* clock) : clock_(clock != nullptr ? clock : common::Clock::Real()) {}

void Fence::Open(absl::Time valid_until) {
  common::MutexLock lock(&mu_);
  if (!tripped_.empty()) return;
  opened_ = true;
  closed_.clear();
  valid_until_ = std::max(valid_until_, valid_until);
}

void Fence::Trip(absl::string_view reason) {
  std::vector<controller::ReconcileCallback> cancelled;
  std::string why;
  {
    common::MutexLock lock(&mu_);
    if (tripped_.empty()) tripped_ = reason.empty() ? "fenced" : std::string(reason);
    why = tripped_;
    for (auto& [id, done] : in_flight_) cancelled.push_back(std::move(done));
    in_flight_.clear();
  }
  for (auto& done : cancelled) {
    done(absl::UnavailableError(absl::StrCat("reconcile cancelled: ", why)));
  }
}

void Fence::Close(absl::string_view reason) {
  std::vector<controller::ReconcileCallback> cancelled;
  std::string why;
  {
    common::MutexLock lock(&mu_);
    closed_ = reason.empty() ? "closed" : std::string(reason);
    why = tripped_.empty() ? closed_ : tripped_;
    for (auto& [id, done] : in_flight_) cancelled.push_back(std::move(done));
    in_flight_.clear();
  }
  for (auto& done : cancelled) {
    done(absl::UnavailableError(absl::StrCat("reconcile cancelled: ", why)));
  }
}

absl::Status Fence::ClosedLocked(absl::Time now) const {
  if (!tripped_.empty()) {
    return absl::UnavailableError(absl::StrCat("not the leader: ", tripped_));
  }
  if (!closed_.empty()) return absl::UnavailableError(absl::StrCat("not the leader: ", closed_));
  if (!opened_) return absl::UnavailableError("not the leader: standby");
  if (now >= valid_until_) {
    return absl::UnavailableError(
        absl::StrCat("not the leader: the Lease was not renewed in time (renew deadline passed at ",
                     absl::FormatTime(absl::RFC3339_full, valid_until_, absl::UTCTimeZone()), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> Fence::WriteDeadline() const {
  const absl::Time now = clock_->Now();
  common::MutexLock lock(&mu_);
  if (absl::Status closed = ClosedLocked(now); !closed.ok()) return closed;
  return valid_until_;
}

bool Fence::tripped() const {
  common::MutexLock lock(&mu_);
  return !tripped_.empty();
}

Fence::Registration Fence::Register(controller::ReconcileCallback* done) {
  const absl::Time now = clock_->Now();
  common::MutexLock lock(&mu_);
  Registration r;
  r.refused = ClosedLocked(now);
  if (!r.refused.ok()) return r;
  r.id = next_id_++;
  in_flight_.emplace(r.id, std::move(*done));
  return r;
}

controller::ReconcileCallback Fence::Unregister(uint64_t id) {
  common::MutexLock lock(&mu_);
  auto it = in_flight_.find(id);
  if (it == in_flight_.end()) return nullptr;
  controller::ReconcileCallback done = std::move(it->second);
  in_flight_.erase(it);
  return done;
}

void FencedDispatcher::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                                controller::ReconcileCallback done) {
  // The fence keeps the callback; whichever comes first (the plugin's answer or Trip) calls it.
  Fence::Registration r = fence_->Register(&done);
  if (!r.refused.ok()) {
    done(r.refused);
    return;
  }
  Fence* fence = fence_;
  const uint64_t id = r.id;
  target_->Dispatch(std::move(call), deadline, [fence, id](controller::DispatchResult result) {
    controller::ReconcileCallback done = fence->Unregister(id);
    if (done != nullptr) done(std::move(result));
  });
}

namespace {
// The calling thread's write fence. Why a thread-local and not a parameter: the fence must reach
// kube::RestClient's write path (RestClientOptions::write_fence, consulted before each write and
// to cut its deadline) through the applier, the API client and every helper between them, whose
// interfaces know nothing of operators; one host-wide client serves every operator.
// Contract:
// - Set only by ScopedWriteFence, which FencedApplier places around each of its calls into the
//   shared applier (Apply, EnsureFinalizer, RecordTerminal): for the duration of that one call,
//   on the runner worker thread that makes it; restored (nesting) when the call returns.
// - Read only by CurrentWriteDeadline() on that same thread, from the write_fence the host
//   installs on its API client with per-operator Leases (host.cc): the applier writes
//   synchronously on the calling thread, so every write of a fenced call sees its fence.
// - Outside a scope it is null: writes of the host itself (leader election and the shard ring
//   have clients of their own) and of operators without a Lease are not fenced here.
thread_local const Fence* current_write_fence = nullptr;
}  // namespace

ScopedWriteFence::ScopedWriteFence(const Fence* fence) : previous_(current_write_fence) {
  current_write_fence = fence;
}

ScopedWriteFence::~ScopedWriteFence() { current_write_fence = previous_; }

const Fence* ScopedWriteFence::Current() { return current_write_fence; }

absl::StatusOr<absl::Time> CurrentWriteDeadline() {
  const Fence* fence = current_write_fence;
  if (fence == nullptr) return absl::InfiniteFuture();
  return fence->WriteDeadline();
}

controller::ApplyOutcome FencedApplier::Apply(const controller::ReconcileContext& context,
                                              const pluginpb::ReconcileResponse& response) {
  if (absl::StatusOr<absl::Time> open = fence_->WriteDeadline(); !open.ok()) {
    controller::ApplyOutcome refused;
    refused.kind = controller::OutcomeKind::kRetry;
    refused.status = absl::UnavailableError(
        absl::StrCat("nothing of the answer written: ", open.status().message()));
    return refused;
  }
  ScopedWriteFence scope(fence_);
  return target_->Apply(context, response);
}

absl::StatusOr<cache::ObjectPtr> FencedApplier::EnsureFinalizer(
    const controller::ReconcileContext& context) {
  if (absl::StatusOr<absl::Time> open = fence_->WriteDeadline(); !open.ok()) {
    return open.status();
  }
  ScopedWriteFence scope(fence_);
  return target_->EnsureFinalizer(context);
}

void FencedApplier::RecordTerminal(const controller::ReconcileContext& context,
                                   const absl::Status& status) {
  if (!fence_->open()) return;  // best effort: a host that may not write records nothing
  ScopedWriteFence scope(fence_);
  target_->RecordTerminal(context, status);
}

}  // namespace ctrlhost::manager
