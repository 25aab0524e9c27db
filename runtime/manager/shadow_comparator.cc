#include "runtime/manager/shadow_comparator.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/cache/object.h"
#include "runtime/common/idle_cpu.h"
#include "runtime/common/logging.h"
#include "runtime/controller/apply/compare.h"

namespace ctrlhost::manager {
namespace {

// Kinds of difference remembered for "log each new kind once": past this many, new kinds are
// still counted and kept in the last differences, only not logged as new.
constexpr size_t kMaxLoggedKinds = 256;

// A kept or logged patch is cut here: a difference in a large object can be megabytes.
constexpr size_t kMaxPatchBytes = 4096;

std::string BoundedPatch(const nlohmann::json& patch) {
  // Replacing invalid UTF-8 (never throwing): the strings come from plugins.
  std::string text = patch.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= kMaxPatchBytes) return text;
  const size_t full = text.size();
  text.resize(kMaxPatchBytes);
  absl::StrAppend(&text, "... (", full, " bytes in all)");
  return text;
}

}  // namespace

ShadowComparator::ControllerFigures ShadowComparator::Figures::Total() const {
  ControllerFigures total;
  for (const auto& [name, f] : controllers) {
    total.compared += f.compared;
    total.same += f.same;
    total.different += f.different;
    total.shadow_errors += f.shadow_errors;
    total.dropped += f.dropped;
  }
  return total;
}

ShadowComparator::ShadowComparator(ControllerLookup lookup, Options options)
    : lookup_(std::move(lookup)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      log_limiter_({.per_second = 1, .burst = 10, .clock = clock_}),
      thread_([this] { Run(); }) {}

ShadowComparator::~ShadowComparator() {
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
  }
  work_cv_.SignalAll();
  thread_.join();
}

bool ShadowComparator::Submit(pluginpb::ReconcileCall call, controller::DispatchResult serving,
                              controller::DispatchResult shadow) {
  {
    common::MutexLock lock(&mu_);
    if (stopping_ || queue_.size() >= options_.max_queued) {
      ++figures_.controllers[call.controller()].dropped;
      return false;
    }
    queue_.push_back(Pair{std::move(call), std::move(serving), std::move(shadow)});
  }
  work_cv_.Signal();
  return true;
}

void ShadowComparator::Drop(absl::string_view controller) {
  common::MutexLock lock(&mu_);
  ++figures_.controllers[std::string(controller)].dropped;
}

ShadowComparator::Figures ShadowComparator::Snapshot() const {
  common::MutexLock lock(&mu_);
  return figures_;
}

void ShadowComparator::WaitIdle() {
  common::MutexLock lock(&mu_);
  while (!queue_.empty() || busy_) idle_cv_.Wait(&mu_);
}

void ShadowComparator::Run() {
  if (options_.idle_cpu) {
    if (absl::Status s = common::RunThisThreadOnIdleCpu(); !s.ok()) {
      common::LogWarning("shadow comparisons run at normal priority",
                         {{"plugin", options_.plugin}, {"error", std::string(s.message())}});
    }
  }
  while (true) {
    std::optional<Pair> pair;
    {
      common::MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) work_cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping, and everything queued is compared
      pair.emplace(std::move(queue_.front()));
      queue_.pop_front();
      busy_ = true;
    }
    Compare(*std::move(pair));
    common::MutexLock lock(&mu_);
    busy_ = false;
    if (queue_.empty()) idle_cv_.SignalAll();
  }
}

void ShadowComparator::Compare(Pair pair) {
  const std::string& name = pair.call.controller();
  const std::optional<controller::ControllerInfo> info =
      lookup_ ? lookup_(name) : std::optional<controller::ControllerInfo>();
  const std::string key = pair.call.namespace_().empty()
                              ? pair.call.name()
                              : absl::StrCat(pair.call.namespace_(), "/", pair.call.name());
  if (!info.has_value()) {
    common::MutexLock lock(&mu_);
    ++figures_.controllers[name].dropped;
    return;
  }
  // Both answers are judged against the call they answered, as the applier would judge the
  // serving one: the primary as the call carried it (none when it is gone).
  controller::ReconcileContext context;
  context.controller = &*info;
  context.namespace_ = pair.call.namespace_();
  context.name = pair.call.name();
  context.attempt = pair.call.attempt();
  context.trace_id = pair.call.trace_id();
  if (!pair.call.object().empty()) {
    cache::ObjectParser parser;
    absl::StatusOr<cache::ObjectPtr> primary = parser.Parse(pair.call.object());
    if (primary.ok()) context.primary = *std::move(primary);
  }

  const bool shadow_failed = !pair.shadow.response.ok() && pair.serving.response.ok();
  controller::apply::OutcomeDiff diff;
  if (!shadow_failed) {
    diff = controller::apply::CompareOutcomes(controller::apply::Outcome(context, pair.serving),
                                              controller::apply::Outcome(context, pair.shadow));
  }

  const std::string patch = diff.same ? std::string() : BoundedPatch(diff.patch);
  bool log_new_kind = false;
  {
    common::MutexLock lock(&mu_);
    ControllerFigures& f = figures_.controllers[name];
    ++f.compared;
    if (shadow_failed) {
      ++f.shadow_errors;
      return;
    }
    if (diff.same) {
      ++f.same;
      return;
    }
    ++f.different;
    figures_.differences.push_back(Difference{name, key, clock_->Now(), diff.summary, patch});
    while (figures_.differences.size() > options_.keep_differences) {
      figures_.differences.pop_front();
    }
    if (logged_kinds_.size() < kMaxLoggedKinds) {
      log_new_kind =
          logged_kinds_.insert(absl::StrCat(name, std::string(1, '\0'), diff.summary)).second;
    }
  }
  uint64_t suppressed = 0;
  if (log_new_kind && log_limiter_.Allow(&suppressed)) {
    common::LogInfo("the shadow answered differently (a new kind of difference)",
                    {{"plugin", options_.plugin},
                     {"controller", name},
                     {"key", key},
                     {"differs", diff.summary},
                     {"patch", patch},
                     {"suppressed", suppressed}});
  }
}

}  // namespace ctrlhost::manager
