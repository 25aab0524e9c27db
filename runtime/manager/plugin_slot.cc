#include "runtime/manager/plugin_slot.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/idle_cpu.h"
#include "runtime/common/logging.h"

namespace ctrlhost::manager {

uint32_t PluginSlot::Bucket(absl::string_view key) {
  // FNV-1a: stable across processes and releases (std::hash is neither).
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<uint32_t>(h % 100);
}

absl::StatusOr<std::unique_ptr<PluginSlot>> PluginSlot::Start(OptionsFactory options,
                                                              Listener listener,
                                                              common::Clock* clock) {
  std::unique_ptr<PluginSlot> slot(new PluginSlot(std::move(listener), clock));
  auto instance = std::make_shared<Instance>();
  instance->generation = 1;
  plugin::SupervisorOptions so = options(1);
  so.generation = 1;
  Listener notify = slot->listener_;
  so.on_state_change = [notify](const plugin::PluginStatus&) {
    if (notify) notify();
  };
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      plugin::Supervisor::Start(std::move(so));
  if (!supervisor.ok()) return supervisor.status();
  instance->supervisor = *std::move(supervisor);
  common::MutexLock lock(&slot->mu_);
  slot->serving_ = std::move(instance);
  slot->next_generation_ = 2;
  return slot;
}

PluginSlot::PluginSlot(Listener listener, common::Clock* clock)
    : listener_(std::move(listener)), clock_(clock != nullptr ? clock : common::Clock::Real()) {}

PluginSlot::~PluginSlot() { Stop(); }

void PluginSlot::Forward(const std::shared_ptr<Instance>& instance, pluginpb::ReconcileCall call,
                         absl::Time deadline, controller::ReconcileCallback done) {
  {
    common::MutexLock lock(&instance->mu);
    ++instance->in_flight;
  }
  instance->supervisor->Dispatch(
      std::move(call), deadline,
      [instance, done = std::move(done)](controller::DispatchResult result) {
        done(std::move(result));
        common::MutexLock lock(&instance->mu);
        if (--instance->in_flight == 0) instance->idle_cv.SignalAll();
      });
}

absl::Status PluginSlot::SendNotice(pluginpb::ReconcileRequest notice) {
  std::shared_ptr<Instance> serving;
  {
    common::MutexLock lock(&mu_);
    serving = serving_;
  }
  if (serving == nullptr) return absl::UnavailableError("plugin stopped");
  return serving->supervisor->SendNotice(std::move(notice));
}

void PluginSlot::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                          controller::ReconcileCallback done) {
  std::shared_ptr<Instance> target;
  std::shared_ptr<Shadow> shadow;
  std::string key;
  {
    common::MutexLock lock(&mu_);
    if (!stopped_) {
      target = serving_;
      if (canary_ != nullptr || shadow_ != nullptr) {
        key = call.namespace_().empty() ? call.name()
                                        : absl::StrCat(call.namespace_(), "/", call.name());
      }
      if (canary_ != nullptr && Bucket(key) < canary_percent_) target = canary_;
      if (shadow_ != nullptr &&
          (shadow_->options.percent >= 100 || Bucket(key) < shadow_->options.percent)) {
        shadow = shadow_;
      }
    }
  }
  if (target == nullptr) {
    done(absl::UnavailableError("the plugin is stopped"));
    return;
  }
  if (shadow != nullptr) {
    DispatchWithShadow(target, shadow, std::move(key), std::move(call), deadline, std::move(done));
    return;
  }
  Forward(target, std::move(call), deadline, std::move(done));
}

namespace {

// A copy of `result` for the comparator that shares nothing with it: an error gets a Status of
// its own. Errors come from the session, which keeps copies of the same Status (its health);
// absl::Status counts references in Debian's uninstrumented library, so a copy released last on
// the comparator's thread reads to ThreadSanitizer as a race with the session's thread.
controller::DispatchResult OwnCopy(const controller::DispatchResult& result) {
  if (result.response.ok()) return result;
  const absl::Status& error = result.response.status();
  return controller::DispatchResult(absl::StatusOr<pluginpb::ReconcileResponse>(
                                        absl::Status(error.code(), std::string(error.message()))),
                                    result.capabilities);
}

}  // namespace

void PluginSlot::DispatchWithShadow(const std::shared_ptr<Instance>& target,
                                    const std::shared_ptr<Shadow>& shadow, std::string key,
                                    pluginpb::ReconcileCall call, absl::Time deadline,
                                    controller::ReconcileCallback done) {
  auto round = std::make_shared<ShadowRound>();
  bool admitted = false;
  {
    // The call is copied once here, into the round, for the comparison; the shadow's sender
    // copies it from there for the shadow, off the serving path. round->mu is held until the
    // copy is made, so the sender (which takes it after the send) never sees it unset.
    common::MutexLock round_lock(&round->mu);
    {
      common::MutexLock lock(&shadow->mu);
      // One call of a key at the shadow at a time, as at any plugin; a bounded number in all.
      admitted = !shadow->stopping && shadow->keys.size() < shadow->options.max_in_flight &&
                 shadow->keys.insert(key).second;
      if (admitted) shadow->sends.push_back(ShadowSend{deadline, round, std::move(key)});
    }
    if (admitted) round->call = call;
  }
  if (!admitted) {
    shadow->comparator->Drop(call.controller());
    Forward(target, std::move(call), deadline, std::move(done));
    return;
  }
  shadow->send_cv.Signal();
  Forward(target, std::move(call), deadline,
          [round, shadow, done = std::move(done)](controller::DispatchResult result) {
            controller::DispatchResult copy = OwnCopy(result);
            done(std::move(result));  // the serving path first
            bool both = false;
            {
              common::MutexLock lock(&round->mu);
              round->serving.emplace(std::move(copy));
              both = round->other.has_value();
            }
            if (both) FinishRound(shadow, round);
          });
}

void PluginSlot::FinishRound(const std::shared_ptr<Shadow>& shadow,
                             const std::shared_ptr<ShadowRound>& round) {
  {
    common::MutexLock lock(&shadow->mu);
    if (shadow->stopping) return;
  }
  common::MutexLock lock(&round->mu);
  shadow->comparator->Submit(std::move(round->call), *std::move(round->serving),
                             *std::move(round->other));
}

void PluginSlot::SendToShadow(const std::shared_ptr<Shadow>& shadow) {
  if (shadow->options.idle_cpu) {
    // As the shadow's process: its copies and sends take only CPU time nothing else wants.
    if (absl::Status s = common::RunThisThreadOnIdleCpu(); !s.ok()) {
      common::LogWarning("the shadow's sender runs at normal priority",
                         {{"error", std::string(s.message())}});
    }
  }
  while (true) {
    std::optional<ShadowSend> send;
    {
      common::MutexLock lock(&shadow->mu);
      while (shadow->sends.empty() && !shadow->stopping) shadow->send_cv.Wait(&shadow->mu);
      if (shadow->stopping) {
        for (const ShadowSend& dropped : shadow->sends) shadow->keys.erase(dropped.key);
        shadow->sends.clear();
        return;
      }
      send.emplace(std::move(shadow->sends.front()));
      shadow->sends.pop_front();
    }
    std::shared_ptr<ShadowRound> round = send->round;
    pluginpb::ReconcileCall call;
    {
      // The round keeps its call until both answers came, and the shadow's cannot come before
      // this send.
      common::MutexLock lock(&round->mu);
      call = round->call;
    }
    Forward(shadow->instance, std::move(call), send->deadline,
            [round, shadow, key = std::move(send->key)](controller::DispatchResult result) {
              {
                common::MutexLock lock(&shadow->mu);
                shadow->keys.erase(key);
              }
              bool both = false;
              {
                common::MutexLock lock(&round->mu);
                round->other.emplace(OwnCopy(result));
                both = round->serving.has_value();
              }
              if (both) FinishRound(shadow, round);
            });
  }
}

void PluginSlot::StopSender(Shadow* shadow) {
  {
    common::MutexLock lock(&shadow->mu);
    shadow->stopping = true;
  }
  shadow->send_cv.SignalAll();
  if (shadow->sender.joinable()) shadow->sender.join();
}

absl::StatusOr<std::shared_ptr<PluginSlot::Instance>> PluginSlot::StartInstance(
    const OptionsFactory& options, absl::Duration ready_timeout,
    const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept,
    SwapResult* result) {
  uint64_t generation = 0;
  {
    common::MutexLock lock(&mu_);
    if (stopped_) return absl::FailedPreconditionError("the plugin is stopped");
    generation = next_generation_++;
  }
  auto instance = std::make_shared<Instance>();
  instance->generation = generation;
  plugin::SupervisorOptions so = options(generation);
  so.generation = generation;
  Listener notify = listener_;
  so.on_state_change = [notify](const plugin::PluginStatus&) {
    if (notify) notify();
  };
  const bool exec_source = !so.source.exec.command.empty();
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      plugin::Supervisor::Start(std::move(so));
  if (!supervisor.ok()) {
    result->failure = SwapFailure::kStartFailed;
    return supervisor.status();
  }
  instance->supervisor = *std::move(supervisor);
  // The first outcome of the new instance decides: READY, or the first failure (the supervisor
  // would retry with backoff; a swap does not wait for that).
  const bool settled = instance->supervisor->WaitFor(
      [](const plugin::PluginStatus& s) {
        return s.state == plugin::PluginState::kReady || s.state == plugin::PluginState::kFailed ||
               s.state == plugin::PluginState::kBackoff || s.state == plugin::PluginState::kStopped;
      },
      ready_timeout);
  plugin::PluginStatus status = instance->supervisor->status();
  absl::Status failed;
  if (!settled) {
    result->failure = SwapFailure::kTimeout;
    failed = absl::DeadlineExceededError(absl::StrCat(
        "generation ", generation, " was not ready within ", absl::FormatDuration(ready_timeout)));
  } else if (status.state != plugin::PluginState::kReady || status.describe == nullptr) {
    // An exec'd plugin whose process never ran (a missing or non-executable binary: no pid) is
    // START_FAILED, as docs/cli.md says; one that ran and was refused is HANDSHAKE_FAILED.
    const bool never_ran = exec_source && status.pid == 0;
    result->failure = status.state == plugin::PluginState::kFailed && !never_ran
                          ? SwapFailure::kHandshakeFailed
                          : SwapFailure::kStartFailed;
    failed = absl::Status(
        status.last_error.ok() ? absl::StatusCode::kUnavailable : status.last_error.code(),
        absl::StrCat("generation ", generation, " did not start: ",
                     status.last_error.ok() ? "stopped" : status.last_error.message()));
  } else if (accept) {
    if (absl::Status s = accept(*status.describe); !s.ok()) {
      result->failure = SwapFailure::kIncompatible;
      failed = absl::Status(s.code(), absl::StrCat("generation ", generation, ": ", s.message()));
    }
  }
  if (!failed.ok()) {
    instance->supervisor->Stop(absl::Seconds(2));
    return failed;
  }
  result->describe = status.describe;
  return instance;
}

void PluginSlot::Drain(const std::shared_ptr<Instance>& instance, absl::Duration timeout) {
  if (instance == nullptr) return;
  // Its background tasks stop now, not when its stream closes after the drain: only the
  // serving instance runs tasks (the manager starts them there).
  const plugin::PluginStatus drained = instance->supervisor->status();
  if (std::find(drained.capabilities.begin(), drained.capabilities.end(),
                pluginpb::CAPABILITY_BACKGROUND_TASKS) != drained.capabilities.end()) {
    pluginpb::ReconcileRequest stop;
    stop.mutable_stop_tasks()->set_reason("plugin swapped out");
    // Bounded wait until it went out: the drain below may close the stream at once. Not READY:
    // no tasks run there.
    (void)instance->supervisor->SendNotice(std::move(stop), absl::Seconds(2));
  }
  {
    const absl::Time deadline = clock_->Now() + timeout;
    common::MutexLock lock(&instance->mu);
    while (instance->in_flight > 0) {
      if (clock_->WaitWithDeadline(&instance->mu, &instance->idle_cv, deadline)) break;
    }
    if (instance->in_flight > 0) {
      common::LogWarning(
          "drain timeout: requests still in flight are failed and requeued",
          {{"generation", instance->generation}, {"in_flight", instance->in_flight}});
    }
  }
  // Whatever is still in flight fails UNAVAILABLE here (the runner requeues it).
  instance->supervisor->Stop();
}

SwapResult PluginSlot::Swap(
    OptionsFactory options, absl::Duration ready_timeout, absl::Duration drain_timeout,
    const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept) {
  common::MutexLock swap_lock(&swap_mu_);
  SwapResult result;
  {
    common::MutexLock lock(&mu_);
    if (canary_ != nullptr) {
      result.status = absl::FailedPreconditionError(absl::StrCat(
          "a canary (generation ", canary_->generation, ") is running: promote or abort it first"));
      result.serving_generation = serving_ != nullptr ? serving_->generation : 0;
      return result;
    }
  }
  const absl::Time start = clock_->Now();
  absl::StatusOr<std::shared_ptr<Instance>> fresh =
      StartInstance(options, ready_timeout, accept, &result);
  std::shared_ptr<Instance> old;
  {
    common::MutexLock lock(&mu_);
    result.serving_generation = serving_ != nullptr ? serving_->generation : 0;
    if (!fresh.ok()) {
      result.status = fresh.status();
      last_swap_error_ = std::string(fresh.status().message());
      ++failed_swaps_;
      return result;
    }
    if (stopped_) {
      result.status = absl::FailedPreconditionError("the plugin was stopped during the swap");
      old = *fresh;  // stopped below, outside the lock
      result.serving_generation = 0;
    } else {
      old = serving_;
      serving_ = *fresh;
      ++swaps_;
    }
  }
  if (!result.status.ok()) {
    old->supervisor->Stop();
    return result;
  }
  {
    common::MutexLock lock(&mu_);
    last_swap_error_.clear();
    result.serving_generation = serving_->generation;
    result.drained_generation = old != nullptr ? old->generation : 0;
  }
  result.ready_at = clock_->Now();
  result.cut_over = result.ready_at - start;
  common::LogInfo("plugin swapped", {{"generation", result.serving_generation},
                                     {"replaced", result.drained_generation},
                                     {"cut_over", absl::FormatDuration(result.cut_over)}});
  if (listener_) listener_();
  Drain(old, drain_timeout);
  return result;
}

SwapResult PluginSlot::StartCanary(
    OptionsFactory options, uint32_t percent, absl::Duration ready_timeout,
    const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept) {
  common::MutexLock swap_lock(&swap_mu_);
  SwapResult result;
  if (percent < 1 || percent > 99) {
    result.status = absl::InvalidArgumentError("canary percent must be 1..99");
    return result;
  }
  {
    common::MutexLock lock(&mu_);
    result.serving_generation = serving_ != nullptr ? serving_->generation : 0;
    if (canary_ != nullptr) {
      result.status = absl::FailedPreconditionError("a canary is running already");
      return result;
    }
  }
  const absl::Time start = clock_->Now();
  absl::StatusOr<std::shared_ptr<Instance>> fresh =
      StartInstance(options, ready_timeout, accept, &result);
  common::MutexLock lock(&mu_);
  if (!fresh.ok()) {
    result.status = fresh.status();
    last_swap_error_ = std::string(fresh.status().message());
    ++failed_swaps_;
    return result;
  }
  canary_ = *fresh;
  canary_percent_ = percent;
  result.ready_at = clock_->Now();
  result.cut_over = result.ready_at - start;
  return result;
}

SwapResult PluginSlot::PromoteCanary(absl::Duration drain_timeout) {
  common::MutexLock swap_lock(&swap_mu_);
  SwapResult result;
  std::shared_ptr<Instance> old;
  {
    common::MutexLock lock(&mu_);
    if (canary_ == nullptr) {
      result.status = absl::FailedPreconditionError("no canary is running");
      result.serving_generation = serving_ != nullptr ? serving_->generation : 0;
      return result;
    }
    old = serving_;
    serving_ = std::move(canary_);
    canary_ = nullptr;
    canary_percent_ = 0;
    ++swaps_;
    result.serving_generation = serving_->generation;
    result.drained_generation = old != nullptr ? old->generation : 0;
    result.describe = serving_->supervisor->status().describe;
  }
  result.ready_at = clock_->Now();
  if (listener_) listener_();
  Drain(old, drain_timeout);
  return result;
}

absl::Status PluginSlot::AbortCanary(absl::Duration drain_timeout) {
  common::MutexLock swap_lock(&swap_mu_);
  std::shared_ptr<Instance> canary;
  {
    common::MutexLock lock(&mu_);
    if (canary_ == nullptr) return absl::FailedPreconditionError("no canary is running");
    canary = std::move(canary_);
    canary_ = nullptr;
    canary_percent_ = 0;
  }
  if (listener_) listener_();
  Drain(canary, drain_timeout);
  return absl::OkStatus();
}

SwapResult PluginSlot::StartShadow(
    OptionsFactory options, ShadowOptions shadow_options,
    std::shared_ptr<ShadowComparator> comparator, absl::Duration ready_timeout,
    const std::function<absl::Status(const pluginpb::DescribeResponse&)>& accept) {
  common::MutexLock swap_lock(&swap_mu_);
  SwapResult result;
  if (shadow_options.percent < 1 || shadow_options.percent > 100) {
    result.status = absl::InvalidArgumentError("shadow percent must be 1..100");
    return result;
  }
  if (shadow_options.max_in_flight == 0) {
    result.status = absl::InvalidArgumentError("a shadow needs an in-flight bound of at least 1");
    return result;
  }
  if (comparator == nullptr) {
    result.status = absl::InvalidArgumentError("a shadow needs a comparator");
    return result;
  }
  {
    common::MutexLock lock(&mu_);
    result.serving_generation = serving_ != nullptr ? serving_->generation : 0;
    if (shadow_ != nullptr) {
      result.status = absl::FailedPreconditionError(
          absl::StrCat("a shadow (generation ", shadow_->instance->generation,
                       ") is running already: stop it first"));
      return result;
    }
  }
  if (shadow_options.idle_cpu) {
    options = [inner = std::move(options)](uint64_t generation) {
      plugin::SupervisorOptions o = inner(generation);
      o.source.exec.idle_cpu = true;
      return o;
    };
  }
  const absl::Time start = clock_->Now();
  absl::StatusOr<std::shared_ptr<Instance>> fresh =
      StartInstance(options, ready_timeout, accept, &result);
  if (!fresh.ok()) {
    result.status = fresh.status();
    return result;
  }
  auto shadow = std::make_shared<Shadow>();
  shadow->instance = *fresh;
  shadow->comparator = std::move(comparator);
  shadow->options = shadow_options;
  shadow->sender = std::thread([shadow] { SendToShadow(shadow); });
  {
    common::MutexLock lock(&mu_);
    if (!stopped_) {
      shadow_ = shadow;
      shadow = nullptr;
    }
  }
  if (shadow != nullptr) {  // the slot was stopped meanwhile
    StopSender(shadow.get());
    shadow->instance->supervisor->Stop();
    result.status =
        absl::FailedPreconditionError("the plugin was stopped while its shadow started");
    return result;
  }
  result.ready_at = clock_->Now();
  result.cut_over = result.ready_at - start;
  common::LogInfo("plugin shadow started",
                  {{"generation", (*fresh)->generation}, {"percent", shadow_options.percent}});
  if (listener_) listener_();
  return result;
}

absl::Status PluginSlot::StopShadow(absl::Duration drain_timeout) {
  common::MutexLock swap_lock(&swap_mu_);
  std::shared_ptr<Shadow> shadow;
  {
    common::MutexLock lock(&mu_);
    if (shadow_ == nullptr) return absl::FailedPreconditionError("no shadow is running");
    shadow = std::move(shadow_);
    shadow_ = nullptr;
  }
  StopSender(shadow.get());
  if (listener_) listener_();
  Drain(shadow->instance, drain_timeout);
  common::LogInfo("plugin shadow stopped", {{"generation", shadow->instance->generation}});
  return absl::OkStatus();
}

std::shared_ptr<ShadowComparator> PluginSlot::shadow_comparator() const {
  common::MutexLock lock(&mu_);
  return shadow_ != nullptr ? shadow_->comparator : nullptr;
}

plugin::PluginStatus PluginSlot::status() const {
  std::shared_ptr<Instance> serving;
  {
    common::MutexLock lock(&mu_);
    serving = serving_;
  }
  if (serving == nullptr) {
    plugin::PluginStatus s;
    s.state = plugin::PluginState::kStopped;
    return s;
  }
  return serving->supervisor->status();
}

uint64_t PluginSlot::generation() const {
  common::MutexLock lock(&mu_);
  return serving_ != nullptr ? serving_->generation : 0;
}

SlotStatus PluginSlot::Snapshot() const {
  std::shared_ptr<Instance> serving, canary;
  std::shared_ptr<Shadow> shadow;
  SlotStatus out;
  {
    common::MutexLock lock(&mu_);
    serving = serving_;
    canary = canary_;
    shadow = shadow_;
    out.canary_percent = canary_percent_;
    out.swaps = swaps_;
    out.failed_swaps = failed_swaps_;
    out.last_swap_error = last_swap_error_;
  }
  if (serving != nullptr) {
    out.serving = serving->supervisor->status();
    out.serving_generation = serving->generation;
    out.serving_socket = serving->supervisor->socket_path();
  } else {
    out.serving.state = plugin::PluginState::kStopped;
  }
  if (canary != nullptr) {
    out.has_canary = true;
    out.canary = canary->supervisor->status();
    out.canary_generation = canary->generation;
  }
  if (shadow != nullptr) {
    out.has_shadow = true;
    out.shadow = shadow->instance->supervisor->status();
    out.shadow_generation = shadow->instance->generation;
    out.shadow_percent = shadow->options.percent;
    out.shadow_idle_cpu = shadow->options.idle_cpu;
  }
  return out;
}

void PluginSlot::Stop() {
  std::shared_ptr<Instance> serving, canary;
  std::shared_ptr<Shadow> shadow;
  {
    common::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    serving = std::move(serving_);
    canary = std::move(canary_);
    shadow = std::move(shadow_);
  }
  if (shadow != nullptr) {
    StopSender(shadow.get());
    shadow->instance->supervisor->Stop();
  }
  if (canary != nullptr) canary->supervisor->Stop();
  if (serving != nullptr) serving->supervisor->Stop();
}

}  // namespace ctrlhost::manager
