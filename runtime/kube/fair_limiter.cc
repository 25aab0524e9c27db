#include "runtime/kube/fair_limiter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::kube {
namespace {

// A waiter that fair queuing would not serve next re-checks at least this often, so that a
// missed wake-up costs this much at most.
constexpr absl::Duration kRecheck = absl::Seconds(1);
// A token counts as there once the refill is this close to it (floating-point refill sums).
constexpr double kEpsilon = 1e-9;

absl::Status CheckWeight(double weight) {
  if (!(weight > 0) || !std::isfinite(weight)) {
    return absl::InvalidArgumentError(
        absl::StrCat("an API budget weight must be positive and finite, not ", weight));
  }
  return absl::OkStatus();
}

}  // namespace

FairLimiter::FairLimiter(double qps, int burst, common::Clock* clock)
    : qps_(qps), burst_(std::max(1, burst)), clock_(clock), tokens_(burst_), last_(clock->Now()) {}

absl::Status FairLimiter::SetOperatorWeight(absl::string_view operator_name, double weight) {
  if (absl::Status s = CheckWeight(weight); !s.ok()) return s;
  common::MutexLock lock(&mu_);
  operators_[std::string(operator_name)].weight = weight;
  SumWeights();
  return absl::OkStatus();
}

absl::Status FairLimiter::SetControllerWeight(absl::string_view operator_name,
                                              absl::string_view controller, double weight) {
  if (absl::Status s = CheckWeight(weight); !s.ok()) return s;
  common::MutexLock lock(&mu_);
  operators_[std::string(operator_name)].controllers[std::string(controller)].weight = weight;
  SumWeights();  // the operator may be new
  return absl::OkStatus();
}

void FairLimiter::RemoveOperator(absl::string_view operator_name) {
  common::MutexLock lock(&mu_);
  auto it = operators_.find(operator_name);
  // Its waiters keep their entries until they are served or give up.
  if (it == operators_.end() || it->second.waiting > 0) return;
  operators_.erase(it);
  SumWeights();
}

void FairLimiter::SumWeights() {
  weight_sum_ = 0;
  for (const auto& [name, op] : operators_) weight_sum_ += op.weight;
}

bool FairLimiter::ReserveReady(Operator& op, absl::Time now) {
  const double share = op.weight / weight_sum_;
  const double capacity = std::max(1.0, burst_ * share);
  if (op.reserve_last == absl::InfinitePast()) {
    op.reserve = capacity;  // full at first, as a token bucket starts
    op.reserve_last = now;
  }
  if (now > op.reserve_last) {
    op.reserve = std::min(capacity,
                          op.reserve + absl::ToDoubleSeconds(now - op.reserve_last) * qps_ * share);
    op.reserve_last = now;
  }
  return op.reserve + kEpsilon >= 1 && tokens_ - 1 + kEpsilon >= -burst_;
}

absl::Duration FairLimiter::UntilReserve(const Operator& op) const {
  const double rate = qps_ * op.weight / weight_sum_;
  const double own = op.reserve >= 1 ? 0 : (1 - op.reserve) / rate;
  const double shared = tokens_ - 1 >= -burst_ ? 0 : (-burst_ + 1 - tokens_) / qps_;
  return absl::Seconds(std::max(own, shared));
}

void FairLimiter::Refill(absl::Time now) {
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * qps_);
    last_ = now;
  }
}

FairLimiter::Controller& FairLimiter::TenantLocked(const ApiTenant& tenant, Operator** op) {
  auto op_it = operators_.find(tenant.operator_name);
  if (op_it == operators_.end()) {
    op_it = operators_.emplace(tenant.operator_name, Operator()).first;
    SumWeights();
  }
  *op = &op_it->second;
  auto c_it = op_it->second.controllers.find(tenant.controller);
  if (c_it == op_it->second.controllers.end()) {
    c_it = op_it->second.controllers.emplace(tenant.controller, Controller()).first;
  }
  return c_it->second;
}

FairLimiter::Pick FairLimiter::Next() {
  Pick pick;
  double best = 0;
  for (auto& [name, op] : operators_) {
    if (op.waiting == 0) continue;
    const double finish = op.start + 1 / op.weight;
    if (pick.op == nullptr || finish < best) {
      pick.op = &op;
      best = finish;
    }
  }
  if (pick.op == nullptr) return pick;
  pick.controller = NextController(*pick.op);
  return pick;
}

FairLimiter::Controller* FairLimiter::NextController(Operator& op) {
  Controller* next = nullptr;
  double best = 0;
  for (auto& [name, c] : op.controllers) {
    if (c.queue.empty()) continue;
    const double finish = c.start + 1 / c.weight;
    if (next == nullptr || finish < best) {
      next = &c;
      best = finish;
    }
  }
  return next;
}

void FairLimiter::Charge(const Pick& pick) {
  vtime_ = pick.op->start;
  pick.op->finish = pick.op->start + 1 / pick.op->weight;
  pick.op->vtime = pick.controller->start;
  pick.controller->finish = pick.controller->start + 1 / pick.controller->weight;
  ++pick.controller->granted_total;
}

void FairLimiter::Enqueue(Operator& op, Controller& controller, Waiter* waiter) {
  if (controller.queue.empty()) controller.start = std::max(op.vtime, controller.finish);
  controller.queue.push_back(waiter);
  if (op.waiting == 0) op.start = std::max(vtime_, op.finish);
  ++op.waiting;
  ++waiting_;
}

void FairLimiter::Grant(const Pick& pick) {
  Waiter* waiter = pick.controller->queue.front();
  pick.controller->queue.pop_front();
  --pick.op->waiting;
  --waiting_;
  Charge(pick);
  // Still waiting: their next requests start where this one finished.
  if (!pick.controller->queue.empty()) pick.controller->start = pick.controller->finish;
  if (pick.op->waiting > 0) pick.op->start = pick.op->finish;
  tokens_ -= 1;
  waiter->granted = true;
  waiter->cv.Signal();
}

void FairLimiter::Dispatch(absl::Time now, bool wake_heads) {
  Refill(now);
  const size_t waiting_before = waiting_;
  // Operators under their share first, from their reserves (only while another operator waits
  // too: alone, an operator has the shared bucket and its burst, exactly).
  for (auto& [name, op] : operators_) {
    while (op.waiting > 0 && waiting_ > op.waiting && ReserveReady(op, now)) {
      op.reserve -= 1;
      Grant(Pick{&op, NextController(op)});
    }
  }
  while (waiting_ > 0 && tokens_ + kEpsilon >= 1) Grant(Next());
  // When the heads changed (a grant, a waiter gone), the head waiter of each operator sets its
  // timer for its reserve, and the one fair queuing serves next for the next shared token.
  // Not otherwise: woken heads call Dispatch, and would wake each other without end.
  if (!wake_heads && waiting_ == waiting_before) return;
  for (auto& [name, op] : operators_) {
    if (op.waiting > 0) NextController(op)->queue.front()->cv.Signal();
  }
}

void FairLimiter::Remove(Operator& op, Controller& controller, Waiter* waiter) {
  auto it = std::find(controller.queue.begin(), controller.queue.end(), waiter);
  if (it == controller.queue.end()) return;
  controller.queue.erase(it);
  --op.waiting;
  --waiting_;
}

absl::Status FairLimiter::Acquire(const ApiTenant& tenant, absl::Time deadline) {
  common::MutexLock lock(&mu_);
  Operator* op = nullptr;
  Controller& controller = TenantLocked(tenant, &op);
  const absl::Time arrived = clock_->Now();
  if (qps_ <= 0) {
    ++controller.granted_total;
    return absl::OkStatus();
  }
  Refill(arrived);
  const bool shared = waiting_ == 0 && tokens_ + kEpsilon >= 1;
  // Else, when other operators wait for the shared bucket, its operator's reserve, unless the
  // operator's earlier requests wait (arrival order).
  const bool reserved = !shared && op->waiting == 0 && waiting_ > 0 && ReserveReady(*op, arrived);
  if (shared || reserved) {
    // Charged either way, so that the shares count recent use.
    op->start = std::max(vtime_, op->finish);
    controller.start = std::max(op->vtime, controller.finish);
    Charge(Pick{op, &controller});
    tokens_ -= 1;
    if (reserved) op->reserve -= 1;
    return absl::OkStatus();
  }
  Waiter waiter;
  Enqueue(*op, controller, &waiter);
  // An operator that starts waiting makes the others' heads eligible for their reserves.
  bool wake_heads = op->waiting == 1 && waiting_ > 1;
  while (true) {
    const absl::Time now = clock_->Now();
    Dispatch(now, std::exchange(wake_heads, false));
    if (waiter.granted) {
      ++controller.waited_total;
      controller.wait_time += now - arrived;
      return absl::OkStatus();
    }
    if (now >= deadline) {
      Remove(*op, controller, &waiter);
      // It may have been the next one: the new next one sets its timer.
      if (waiting_ > 0) Dispatch(now, /*wake_heads=*/true);
      return absl::DeadlineExceededError(
          "client-side rate limiter: no token available before the deadline (the host's API "
          "budget, shared by weight between operators: --kube-api-qps, apiClient.qps)");
    }
    const Pick next = Next();
    absl::Duration wait = kRecheck;
    if (next.controller != nullptr && next.controller->queue.front() == &waiter) {
      wait = std::min(wait, absl::Seconds((1 - tokens_) / qps_));
    }
    if (waiting_ > op->waiting && NextController(*op)->queue.front() == &waiter) {
      wait = std::min(wait, UntilReserve(*op));
    }
    const absl::Time wake = std::min(deadline, now + std::max(absl::Nanoseconds(1), wait));
    clock_->WaitWithDeadline(&mu_, &waiter.cv, wake);
  }
}

std::vector<FairLimiter::TenantFigures> FairLimiter::Figures() const {
  common::MutexLock lock(&mu_);
  std::vector<TenantFigures> out;
  for (const auto& [op_name, op] : operators_) {
    for (const auto& [c_name, c] : op.controllers) {
      TenantFigures f;
      f.operator_name = op_name;
      f.controller = c_name;
      f.operator_weight = op.weight;
      f.controller_weight = c.weight;
      f.granted_total = c.granted_total;
      f.waited_total = c.waited_total;
      f.wait_time = c.wait_time;
      f.waiting = c.queue.size();
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace ctrlhost::kube
