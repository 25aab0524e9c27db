#include "runtime/observe/adapters.h"

#include <utility>

namespace ctrlhost::observe {

HistogramFigures FromDurationHistogram(const queue::DurationHistogram& h) {
  HistogramFigures out;
  for (int i = 0; i + 1 < queue::DurationHistogram::kBuckets; ++i) {
    out.upper_bounds.push_back(absl::ToDoubleSeconds(queue::DurationHistogram::UpperBound(i)));
  }
  out.counts.assign(h.counts.begin(), h.counts.end());
  out.count = h.count;
  out.sum = absl::ToDoubleSeconds(h.sum());
  return out;
}

QueueFigures FromQueueMetrics(std::string name, const queue::QueueMetrics& m) {
  QueueFigures q;
  q.name = std::move(name);
  for (int p = 0; p < 2; ++p) {
    q.depth[p] = static_cast<double>(m.depth_by_priority[p]);
    q.queue_duration[p] = FromDurationHistogram(m.queue_latency_by_priority[p]);
    q.oldest_waiting_seconds[p] = absl::ToDoubleSeconds(m.oldest_waiting[p]);
  }
  q.adds_total = m.adds_total;
  q.retries_total = m.retries_total;
  q.aged_total = m.aged_total;
  q.waited_past_max_total = m.waited_past_max_total;
  q.work_duration = FromDurationHistogram(m.work_duration);
  q.unfinished_work_seconds = absl::ToDoubleSeconds(m.unfinished_work);
  q.longest_running_processor_seconds = absl::ToDoubleSeconds(m.longest_running);
  return q;
}

WatchFigures FromReflectorMetrics(const watch::ReflectorMetrics& m) {
  WatchFigures w;
  w.watch = m.description;
  w.objects = static_cast<double>(m.objects);
  w.bytes = static_cast<double>(m.bytes);
  w.memory_bytes = static_cast<double>(m.memory_bytes);
  w.events_total = m.events_total;
  w.relists_total = m.relists_total;
  w.resource_version = m.resource_version;
  return w;
}

}  // namespace ctrlhost::observe
