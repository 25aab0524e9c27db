// Figures from the snapshots the queue and watch packages already keep, for metrics providers.
// A separate target (//runtime/observe:adapters) so that observe itself depends on neither.
//
//   metrics.AddProvider([&](observe::Figures& f) {
//     f.queues.push_back(observe::FromQueueMetrics("web/deployments", queue.Metrics()));
//     for (const watch::ReflectorMetrics& m : registry.Metrics()) {
//       f.watches.push_back(observe::FromReflectorMetrics(m));
//     }
//   });
//
// Pure functions: thread-safe.
#ifndef CTRLHOST_RUNTIME_OBSERVE_ADAPTERS_H_
#define CTRLHOST_RUNTIME_OBSERVE_ADAPTERS_H_

#include <string>

#include "runtime/observe/metrics.h"
#include "runtime/queue/metrics.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::observe {

// Durations in seconds; the queue's decade buckets become histogram buckets (sampled counts are
// exported as the queue estimates them, see queue::QueueMetrics).
HistogramFigures FromDurationHistogram(const queue::DurationHistogram& h);
QueueFigures FromQueueMetrics(std::string name, const queue::QueueMetrics& m);

// `watch` label: the reflector's description.
WatchFigures FromReflectorMetrics(const watch::ReflectorMetrics& m);

}  // namespace ctrlhost::observe

#endif  // CTRLHOST_RUNTIME_OBSERVE_ADAPTERS_H_
