// A Dispatcher that counts what goes through it, for the ctrlhost_plugin_* metrics: requests by
// result ("ok", "unavailable", "timeout", "resource_exhausted", "invalid", "error"), in flight,
// and request duration. It forwards every call unchanged.
//
//   CountingDispatcher counted(supervisor.get());
//   runner uses &counted; Metrics() -> PluginRequestFigures
//
// Thread-safety: thread-safe; mu_ guards the counters (held only to update or copy them, never
// while forwarding).
#ifndef CTRLHOST_RUNTIME_MANAGER_COUNTING_DISPATCHER_H_
#define CTRLHOST_RUNTIME_MANAGER_COUNTING_DISPATCHER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"
#include "runtime/queue/metrics.h"

namespace ctrlhost::manager {

struct PluginRequestFigures {
  std::map<std::string, uint64_t> requests_total;  // by result
  int64_t in_flight = 0;
  queue::DurationHistogram duration;
};

class CountingDispatcher : public controller::Dispatcher {
 public:
  // `target` is borrowed and must outlive this object and every callback it calls.
  CountingDispatcher(controller::Dispatcher* target, common::Clock* clock);

  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override;

  PluginRequestFigures Figures() const;

  // The result label of a dispatch outcome.
  static const char* ResultLabel(const absl::Status& status);

 private:
  controller::Dispatcher* const target_;
  common::Clock* const clock_;

  mutable common::Mutex mu_;
  PluginRequestFigures figures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_COUNTING_DISPATCHER_H_
