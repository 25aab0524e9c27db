// ShadowComparator: compares, off the serving path, what a plugin's serving instance and its
// shadow (another release given the same calls, whose answers are never applied) answered to
// each call, by what the host would do with each answer (runtime/controller/apply/compare.h).
//
// The serving path only hands over the two answers (Submit: a move into a bounded queue, never a
// wait); one thread of the comparator parses and compares them. When the queue is full the pair
// is dropped and counted, so a slow comparison (huge objects) or a flood never slows the serving
// instance and never grows the host's memory past `max_queued` pairs.
//
// Per controller it counts the pairs compared and their result:
//   same          equal Outcomes
//   different     Outcomes differ (the last `keep_differences` are kept: key, members, patch)
//   shadow_error  the shadow failed (no answer by the deadline, down, refused) and the serving
//                 instance answered: the shadow's fault, not a difference of behaviour
//   dropped       never compared (the comparator or the shadow was behind, see Drop)
// and logs each new kind of difference of a controller once (its summary, e.g. "applies,
// events"; rate limited).
//
//   ShadowComparator comparator([&](absl::string_view c) { return infos.Find(c); }, {});
//   comparator.Submit(call, serving_result, shadow_result);   // from any thread
//   ShadowComparator::Figures f = comparator.Snapshot();
//
// Thread-safety: thread-safe. `mu_` guards the queue and the figures; the comparison itself runs
// on the comparator's thread without it. `lookup` is called on that thread.
#ifndef CTRLHOST_RUNTIME_MANAGER_SHADOW_COMPARATOR_H_
#define CTRLHOST_RUNTIME_MANAGER_SHADOW_COMPARATOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::manager {

class ShadowComparator {
 public:
  // The controller a call names (ReconcileCall.controller) as it runs now, or nullopt when the
  // host runs none by that name (the pair then counts as dropped). A copy: the controllers of a
  // plugin are replaced on a swap, while pairs of the old ones may still wait here.
  using ControllerLookup =
      std::function<std::optional<controller::ControllerInfo>(absl::string_view controller)>;

  struct Options {
    size_t max_queued = 256;         // pairs waiting for comparison
    size_t keep_differences = 20;    // the last differences kept for reports
    std::string plugin;              // for log lines
    common::Clock* clock = nullptr;  // borrowed; null: real
    // The comparing thread runs under SCHED_IDLE: on a busy machine it falls behind and pairs
    // are dropped (counted), instead of taking CPU time from the serving path. Set with an idle
    // shadow (ShadowOptions::idle_cpu).
    bool idle_cpu = false;
  };

  struct Difference {
    std::string controller;
    std::string key;      // namespace/name
    absl::Time at;        // when it was compared
    std::string summary;  // the members that differ ("applies, status")
    // RFC 6902, from the serving answer's Outcome to the shadow's; cut after 4 KiB.
    std::string patch;
  };

  struct ControllerFigures {
    uint64_t compared = 0;  // same + different + shadow_errors
    uint64_t same = 0;
    uint64_t different = 0;
    uint64_t shadow_errors = 0;
    uint64_t dropped = 0;
    // same / compared (1 when nothing was compared).
    double agreement() const {
      return compared == 0 ? 1.0 : static_cast<double>(same) / static_cast<double>(compared);
    }
  };

  struct Figures {
    std::map<std::string, ControllerFigures> controllers;  // by controller name
    std::deque<Difference> differences;                    // oldest first
    ControllerFigures Total() const;
  };

  ShadowComparator(ControllerLookup lookup, Options options);
  // Compares what is queued, then stops its thread.
  ~ShadowComparator();
  ShadowComparator(const ShadowComparator&) = delete;
  ShadowComparator& operator=(const ShadowComparator&) = delete;

  // Queues one call with its two answers. Returns false (and counts the pair as dropped) when
  // `max_queued` pairs wait already. Never blocks.
  bool Submit(pluginpb::ReconcileCall call, controller::DispatchResult serving,
              controller::DispatchResult shadow);
  // Counts a call of `controller` that was not given to the shadow (it was behind).
  void Drop(absl::string_view controller);

  Figures Snapshot() const;
  // Blocks until every pair submitted so far is compared (tests, reports).
  void WaitIdle();

 private:
  struct Pair {
    pluginpb::ReconcileCall call;
    controller::DispatchResult serving;
    controller::DispatchResult shadow;
  };
  void Run();
  void Compare(Pair pair);

  const ControllerLookup lookup_;
  const Options options_;
  common::Clock* const clock_;

  mutable common::Mutex mu_;
  common::CondVar work_cv_;  // a pair was queued, or stopping
  common::CondVar idle_cv_;  // the queue ran empty with nothing in progress
  std::deque<Pair> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the thread compares a pair
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Figures figures_ ABSL_GUARDED_BY(mu_);
  // "controller\0summary" of the differences logged so far (bounded: see Compare).
  absl::flat_hash_set<std::string> logged_kinds_ ABSL_GUARDED_BY(mu_);
  common::LogLimiter log_limiter_;

  std::thread thread_;  // last: starts after everything above is initialised
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_SHADOW_COMPARATOR_H_
