// Prometheus metrics of the host with controller-runtime's and client-go's names, collected at
// scrape time from snapshot providers rather than pushed on hot paths.
//
// The manager registers one or more providers; each fills plain structs (ControllerFigures,
// QueueFigures, PluginFigures, WatchFigures) from the snapshots its components already keep
// (WorkQueue::Metrics(), ReflectorRegistry::Metrics(), ...). observe depends on none of those
// packages (figures.h adapts queue and watch snapshots, in its own target).
//
//   observe::MetricsRegistry metrics;
//   observe::MetricsRegistry::ProviderId id = metrics.AddProvider([&](observe::Figures& f) {
//     f.queues.push_back(observe::FromQueueMetrics("web/deployments", queue.Metrics()));
//   });
//   std::string text = metrics.ScrapeText();   // what GET /metrics serves
//   metrics.RemoveProvider(id);                  // before what the callback reads goes away
//
// Exported families (label names in braces):
//   controller_runtime_reconcile_total{controller,result}          counter
//   controller_runtime_reconcile_errors_total{controller}          counter
//   controller_runtime_reconcile_time_seconds{controller}          histogram
//   controller_runtime_max_concurrent_reconciles{controller}       gauge
//   controller_runtime_active_workers{controller}                  gauge
//   workqueue_depth{name}  workqueue_adds_total{name}  workqueue_retries_total{name}
//   workqueue_queue_duration_seconds{name}  workqueue_work_duration_seconds{name}  (histograms)
//   workqueue_unfinished_work_seconds{name}  workqueue_longest_running_processor_seconds{name}
//   ctrlhost_plugin_up{operator,plugin}  ctrlhost_plugin_restarts_total{operator,plugin}
//   ctrlhost_plugin_in_flight{operator,plugin}
//   ctrlhost_plugin_requests_total{operator,plugin,result}
//   ctrlhost_plugin_request_duration_seconds{operator,plugin}      histogram
//   ctrlhost_plugin_cache_bytes{operator,plugin}
//   ctrlhost_plugin_swaps_total{operator,plugin,result}  result: success | failure (both always)
//   ctrlhost_task_enqueues_total{operator,plugin,controller}     accepted background-task enqueues
//   ctrlhost_task_enqueues_refused_total{operator,plugin,controller,reason}
//                        reason: rate_limited | invalid | not_running (all three always)
//   ctrlhost_watch_objects{watch}  ctrlhost_watch_bytes{watch}  ctrlhost_watch_events_total{watch}
//   ctrlhost_watch_memory_bytes{watch}
//   ctrlhost_watch_relists_total{watch}
//   ctrlhost_watch_last_resource_version{watch}   (only when the resourceVersion is numeric)
// plus whatever is registered directly in registry() (push-style metrics of other parts).
//
// Thread-safe. providers_mu_ guards the provider list; collect_mu_ serialises scrapes with
// RemoveProvider, so once RemoveProvider returns its callback is not running and never runs
// again. Providers run on the scraping thread (an HTTP worker): they must be quick, must not
// block on locks held while waiting for I/O, and must not call back into the registry.
#ifndef CTRLHOST_RUNTIME_OBSERVE_METRICS_H_
#define CTRLHOST_RUNTIME_OBSERVE_METRICS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::observe {

// A histogram as plain numbers. counts[i] is the count of bucket i alone (not cumulative);
// bucket i holds values <= upper_bounds[i]; counts has one more entry than upper_bounds, the
// +Inf bucket. When counts has the wrong size the histogram is exported with no buckets.
struct HistogramFigures {
  std::vector<double> upper_bounds;  // ascending, seconds for *_seconds metrics
  std::vector<uint64_t> counts;
  uint64_t count = 0;
  double sum = 0;
};

struct ControllerFigures {
  std::string controller;
  // reconcile_total by result: controller-runtime uses "success", "error", "requeue",
  // "requeue_after" (and "terminal_error"); any result name is exported as given.
  std::map<std::string, uint64_t> reconcile_total;
  uint64_t reconcile_errors_total = 0;
  HistogramFigures reconcile_time;  // seconds
  int64_t max_concurrent_reconciles = 0;
  int64_t active_workers = 0;
  // Sharded controllers only (-1 otherwise): primaries in the cache this host owns now.
  int64_t shard_keys_owned = -1;
};

// Per-priority arrays are indexed like queue::Priority: [0] low, [1] high.
struct QueueFigures {
  std::string name;
  std::array<double, 2> depth{};  // by priority
  uint64_t adds_total = 0;
  uint64_t retries_total = 0;
  // Seconds from added to handed out, by the priority the key was handed out at.
  std::array<HistogramFigures, 2> queue_duration;
  // Seconds the oldest ready key of each priority has waited (0 when none).
  std::array<double, 2> oldest_waiting_seconds{};
  uint64_t aged_total = 0;             // low keys handed out ahead of high ones by aging
  uint64_t waited_past_max_total = 0;  // keys handed out after waiting longer than max_wait
  HistogramFigures work_duration;      // seconds from handed out to done
  double unfinished_work_seconds = 0;
  double longest_running_processor_seconds = 0;
};

struct PluginFigures {
  std::string operator_name;
  std::string plugin;
  bool up = false;
  uint64_t restarts_total = 0;
  uint64_t swaps_total = 0;          // hot swaps / canary promotions that cut over
  uint64_t swap_failures_total = 0;  // swaps / canary starts whose new instance failed
  double in_flight = 0;
  std::map<std::string, uint64_t> requests_total;  // by result, e.g. "ok", "error", "timeout"
  HistogramFigures request_duration;               // seconds
  // Heap bytes of the shared caches this plugin's controllers read; a cache several plugins
  // read counts in full for each of them.
  double cache_bytes = 0;
};

// One controller's background-task enqueues (manager::BackgroundTasks' counters).
struct TaskEnqueueFigures {
  std::string operator_name;
  std::string plugin;
  std::string controller;
  uint64_t accepted_total = 0;
  uint64_t refused_rate_limited_total = 0;  // over the controller's token bucket
  uint64_t refused_invalid_total = 0;       // malformed namespace/name
  uint64_t refused_not_running_total = 0;   // tasks not started, stopped, another instance's
};

// One controller of a plugin that has a shadow (runtime/manager/shadow_comparator.h). The
// counts start at zero when the shadow starts.
struct ShadowFigures {
  std::string operator_name;
  std::string plugin;
  std::string controller;
  uint64_t same = 0;
  uint64_t different = 0;
  uint64_t shadow_errors = 0;
  uint64_t dropped = 0;
};

// One recorded controller (spec.record, --record; runtime/controller/record/recorder.h). The
// counts are the recorder's: from zero when the host starts recording the controller.
struct RecordingFigures {
  std::string operator_name;
  std::string plugin;
  std::string controller;
  uint64_t written_total = 0;  // records written to the recording's files
  uint64_t dropped_total = 0;  // not written: the writer was behind, or a write failed
  uint64_t bytes_total = 0;    // bytes written, file headers included
};

struct WatchFigures {
  std::string watch;  // e.g. WatchKey::ToString()
  double objects = 0;
  double bytes = 0;
  double memory_bytes = 0;  // heap bytes of the cached objects (JSON, metadata, headers)
  uint64_t events_total = 0;
  uint64_t relists_total = 0;
  std::string resource_version;  // exported as a gauge only when it is a decimal integer
};

// One HTTP listener's connections (serving::ConnectionServer::Stats): "apiserver" (the
// embedded API server) or "observe" (these endpoints).
struct ConnectionFigures {
  std::string server;
  double open = 0;
  double unauthenticated = 0;
  uint64_t refused_total = 0;       // closed at once: the connection limit was reached
  uint64_t evicted_total = 0;       // unauthenticated, closed for a newer connection
  uint64_t timed_out_total = 0;     // not authenticated within the deadline (slowloris)
  uint64_t evicted_idle_total = 0;  // authenticated, idle between requests, closed for a newer one
  uint64_t write_stalled_total =
      0;  // the client read nothing of its response for the stall timeout
  // Long-running responses (watches) written by the listener's stream loop, and those ended,
  // by how: finished (last chunk written), client_closed, stalled (no byte accepted for the
  // watch stall timeout; kube-apiserver's apiserver_terminated_watchers_total), cut_at_stop.
  double streams_open = 0;
  uint64_t streams_finished_total = 0;
  uint64_t streams_client_closed_total = 0;
  uint64_t streams_stalled_total = 0;
  uint64_t streams_cut_total = 0;
};

// What providers fill in; one scrape merges every provider's figures.
// One tenant of the host's API budget (kube::FairLimiter): operator "-" is the host itself.
struct ApiBudgetFigures {
  std::string operator_name;
  std::string controller;
  uint64_t requests_total = 0;   // requests (attempts) let through
  uint64_t throttled_total = 0;  // of them, those that waited for a token
  double throttle_seconds_total = 0;
  double waiting = 0;  // waiting now
};

struct Figures {
  std::vector<ControllerFigures> controllers;
  std::vector<QueueFigures> queues;
  std::vector<PluginFigures> plugins;
  std::vector<TaskEnqueueFigures> task_enqueues;
  std::vector<ShadowFigures> shadows;
  std::vector<RecordingFigures> recordings;
  std::vector<WatchFigures> watches;
  std::vector<ConnectionFigures> connections;
  std::vector<ApiBudgetFigures> api_budget;
};

class MetricsRegistry {
 public:
  using Provider = std::function<void(Figures& figures)>;
  using ProviderId = uint64_t;

  MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Calls `provider` on every scrape until RemoveProvider(id).
  ProviderId AddProvider(Provider provider);
  // Idempotent. On return the provider is not running and will not run again.
  void RemoveProvider(ProviderId id);

  // For push-style metrics of other parts (prometheus-cpp counters, gauges, ...). Their names
  // must not collide with the families above.
  prometheus::Registry& registry() { return *registry_; }

  // Every family: the providers' figures, then registry()'s.
  std::vector<prometheus::MetricFamily> Collect() const;
  // Collect() in the Prometheus text exposition format 0.0.4.
  std::string ScrapeText() const;

 private:
  // Constant after construction.
  const std::shared_ptr<prometheus::Registry> registry_;

  mutable common::Mutex collect_mu_;  // held for a whole Collect(); taken before providers_mu_
  mutable common::Mutex providers_mu_;
  std::map<ProviderId, std::shared_ptr<const Provider>> providers_ ABSL_GUARDED_BY(providers_mu_);
  ProviderId next_id_ ABSL_GUARDED_BY(providers_mu_) = 1;
};

// The content type of ScrapeText().
inline constexpr char kPrometheusTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace ctrlhost::observe

#endif  // CTRLHOST_RUNTIME_OBSERVE_METRICS_H_
