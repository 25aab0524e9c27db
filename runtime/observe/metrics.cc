#include "runtime/observe/metrics.h"

#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "prometheus/text_serializer.h"

namespace ctrlhost::observe {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

ClientMetric& Add(MetricFamily& family, const Labels& labels) {
  ClientMetric& m = family.metric.emplace_back();
  for (const auto& [name, value] : labels) m.label.push_back({name, value});
  return m;
}

void AddGauge(MetricFamily& family, const Labels& labels, double value) {
  Add(family, labels).gauge.value = value;
}

void AddCounter(MetricFamily& family, const Labels& labels, double value) {
  Add(family, labels).counter.value = value;
}

void AddHistogram(MetricFamily& family, const Labels& labels, const HistogramFigures& h) {
  ClientMetric::Histogram& out = Add(family, labels).histogram;
  out.sample_count = h.count;
  out.sample_sum = h.sum;
  if (h.counts.size() != h.upper_bounds.size() + 1) return;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
    cumulative += h.counts[i];
    out.bucket.push_back({cumulative, h.upper_bounds[i]});
  }
  cumulative += h.counts.back();
  out.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
}

bool IsDecimal(const std::string& s) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// controller-runtime's per-controller families.
void AddControllerFamilies(const std::vector<ControllerFigures>& controllers,
                           std::vector<MetricFamily>& out) {
  MetricFamily reconcile_total =
      Family("controller_runtime_reconcile_total", "Total number of reconciliations per controller",
             MetricType::Counter);
  MetricFamily reconcile_errors =
      Family("controller_runtime_reconcile_errors_total",
             "Total number of reconciliation errors per controller", MetricType::Counter);
  MetricFamily reconcile_time =
      Family("controller_runtime_reconcile_time_seconds",
             "Length of time per reconciliation per controller", MetricType::Histogram);
  MetricFamily max_concurrent =
      Family("controller_runtime_max_concurrent_reconciles",
             "Maximum number of concurrent reconciles per controller", MetricType::Gauge);
  MetricFamily active_workers =
      Family("controller_runtime_active_workers", "Number of currently used workers per controller",
             MetricType::Gauge);
  for (const ControllerFigures& c : controllers) {
    const Labels labels = {{"controller", c.controller}};
    for (const auto& [result, n] : c.reconcile_total) {
      AddCounter(reconcile_total, {{"controller", c.controller}, {"result", result}},
                 static_cast<double>(n));
    }
    AddCounter(reconcile_errors, labels, static_cast<double>(c.reconcile_errors_total));
    AddHistogram(reconcile_time, labels, c.reconcile_time);
    AddGauge(max_concurrent, labels, static_cast<double>(c.max_concurrent_reconciles));
    AddGauge(active_workers, labels, static_cast<double>(c.active_workers));
  }
  for (MetricFamily* family :
       {&reconcile_total, &reconcile_errors, &reconcile_time, &max_concurrent, &active_workers}) {
    out.push_back(std::move(*family));
  }
}

// client-go's workqueue families, per queue.
void AddQueueFamilies(const std::vector<QueueFigures>& queues, std::vector<MetricFamily>& out) {
  MetricFamily depth = Family("workqueue_depth", "Current depth of workqueue", MetricType::Gauge);
  MetricFamily adds = Family("workqueue_adds_total", "Total number of adds handled by workqueue",
                             MetricType::Counter);
  MetricFamily queue_duration =
      Family("workqueue_queue_duration_seconds",
             "How long in seconds an item stays in workqueue before being requested",
             MetricType::Histogram);
  MetricFamily work_duration =
      Family("workqueue_work_duration_seconds",
             "How long in seconds processing an item from workqueue takes", MetricType::Histogram);
  MetricFamily retries =
      Family("workqueue_retries_total", "Total number of retries handled by workqueue",
             MetricType::Counter);
  MetricFamily unfinished =
      Family("workqueue_unfinished_work_seconds",
             "How many seconds of work has been done that is in progress and hasn't been "
             "observed by work_duration",
             MetricType::Gauge);
  MetricFamily longest =
      Family("workqueue_longest_running_processor_seconds",
             "How many seconds has the longest running processor for workqueue been running",
             MetricType::Gauge);
  MetricFamily oldest = Family(
      "ctrlhost_workqueue_oldest_waiting_seconds",
      "Seconds the oldest key waiting to be handed out has waited, by priority", MetricType::Gauge);
  MetricFamily aged =
      Family("ctrlhost_workqueue_aged_total",
             "Low-priority keys handed out ahead of waiting high-priority ones because they had "
             "waited the queue's maxWait",
             MetricType::Counter);
  MetricFamily past_max =
      Family("ctrlhost_workqueue_waited_past_max_total",
             "Keys handed out after waiting longer than the queue's maxWait (any priority)",
             MetricType::Counter);
  static constexpr const char* kPriorityNames[2] = {"low", "high"};
  for (const QueueFigures& q : queues) {
    const Labels labels = {{"name", q.name}};
    for (int p = 0; p < 2; ++p) {
      const Labels by_priority = {{"name", q.name}, {"priority", kPriorityNames[p]}};
      AddGauge(depth, by_priority, q.depth[p]);
      AddHistogram(queue_duration, by_priority, q.queue_duration[p]);
      AddGauge(oldest, by_priority, q.oldest_waiting_seconds[p]);
    }
    AddCounter(aged, labels, static_cast<double>(q.aged_total));
    AddCounter(past_max, labels, static_cast<double>(q.waited_past_max_total));
    AddCounter(adds, labels, static_cast<double>(q.adds_total));
    AddHistogram(work_duration, labels, q.work_duration);
    AddCounter(retries, labels, static_cast<double>(q.retries_total));
    AddGauge(unfinished, labels, q.unfinished_work_seconds);
    AddGauge(longest, labels, q.longest_running_processor_seconds);
  }
  for (MetricFamily* family : {&depth, &adds, &queue_duration, &work_duration, &retries,
                               &unfinished, &longest, &oldest, &aged, &past_max}) {
    out.push_back(std::move(*family));
  }
}

// The per-plugin families.
void AddPluginFamilies(const std::vector<PluginFigures>& plugins, std::vector<MetricFamily>& out) {
  MetricFamily up =
      Family("ctrlhost_plugin_up", "1 when the plugin's session is established", MetricType::Gauge);
  MetricFamily restarts = Family("ctrlhost_plugin_restarts_total", "Times the plugin was restarted",
                                 MetricType::Counter);
  MetricFamily in_flight =
      Family("ctrlhost_plugin_in_flight",
             "Reconcile requests sent to the plugin and not yet answered", MetricType::Gauge);
  MetricFamily requests =
      Family("ctrlhost_plugin_requests_total", "Reconcile requests sent to the plugin, by result",
             MetricType::Counter);
  MetricFamily request_duration = Family(
      "ctrlhost_plugin_request_duration_seconds",
      "Seconds from sending a reconcile request to the plugin's answer", MetricType::Histogram);
  MetricFamily cache_bytes =
      Family("ctrlhost_plugin_cache_bytes",
             "Heap bytes of the shared caches the plugin's controllers read (a cache read by "
             "several plugins counts in full for each)",
             MetricType::Gauge);
  MetricFamily swaps =
      Family("ctrlhost_plugin_swaps_total",
             "Hot swaps and canary starts of the plugin, by result: success (the new instance "
             "serves) or failure (it was refused or did not come up; the old one kept serving)",
             MetricType::Counter);
  for (const PluginFigures& p : plugins) {
    const Labels labels = {{"operator", p.operator_name}, {"plugin", p.plugin}};
    AddGauge(up, labels, p.up ? 1 : 0);
    AddCounter(restarts, labels, static_cast<double>(p.restarts_total));
    // Both results from the start, so that increase() and absent-series alerts work.
    AddCounter(swaps, {{"operator", p.operator_name}, {"plugin", p.plugin}, {"result", "success"}},
               static_cast<double>(p.swaps_total));
    AddCounter(swaps, {{"operator", p.operator_name}, {"plugin", p.plugin}, {"result", "failure"}},
               static_cast<double>(p.swap_failures_total));
    AddGauge(in_flight, labels, p.in_flight);
    for (const auto& [result, n] : p.requests_total) {
      AddCounter(requests,
                 {{"operator", p.operator_name}, {"plugin", p.plugin}, {"result", result}},
                 static_cast<double>(n));
    }
    AddHistogram(request_duration, labels, p.request_duration);
    AddGauge(cache_bytes, labels, p.cache_bytes);
  }
  for (MetricFamily* family :
       {&up, &restarts, &swaps, &in_flight, &requests, &request_duration, &cache_bytes}) {
    out.push_back(std::move(*family));
  }
}

// The families of background tasks' enqueues, per controller.
void AddTaskFamilies(const std::vector<TaskEnqueueFigures>& figures,
                     std::vector<MetricFamily>& out) {
  MetricFamily task_enqueues =
      Family("ctrlhost_task_enqueues_total",
             "Keys the controller's background tasks enqueued (TaskEnqueue accepted)",
             MetricType::Counter);
  MetricFamily task_refused =
      Family("ctrlhost_task_enqueues_refused_total",
             "TaskEnqueue messages of the controller's background tasks the host refused, by "
             "reason: rate_limited (over spec.controllers[].backgroundTasks), invalid (malformed "
             "namespace/name), not_running (the tasks were not started or were stopped)",
             MetricType::Counter);
  for (const TaskEnqueueFigures& t : figures) {
    AddCounter(task_enqueues,
               {{"operator", t.operator_name}, {"plugin", t.plugin}, {"controller", t.controller}},
               static_cast<double>(t.accepted_total));
    // Every reason from the start, so that increase() and absent-series alerts work.
    for (const auto& [reason, n] :
         {std::pair<const char*, uint64_t>{"rate_limited", t.refused_rate_limited_total},
          {"invalid", t.refused_invalid_total},
          {"not_running", t.refused_not_running_total}}) {
      AddCounter(task_refused,
                 {{"operator", t.operator_name},
                  {"plugin", t.plugin},
                  {"controller", t.controller},
                  {"reason", reason}},
                 static_cast<double>(n));
    }
  }
  for (MetricFamily* family : {&task_enqueues, &task_refused}) {
    out.push_back(std::move(*family));
  }
}

// The shadow comparisons, per controller and result.
void AddShadowFamilies(const std::vector<ShadowFigures>& figures, std::vector<MetricFamily>& out) {
  MetricFamily comparisons =
      Family("ctrlhost_shadow_comparisons_total",
             "Calls of a plugin's controller given to its shadow, by result: same, different "
             "(the host would have written otherwise), shadow_error (the shadow failed the "
             "call), dropped (not compared: the shadow or the comparison was behind); from zero "
             "when the shadow starts",
             MetricType::Counter);
  for (const ShadowFigures& s : figures) {
    for (const auto& [result, n] : {std::pair<const char*, uint64_t>{"same", s.same},
                                    {"different", s.different},
                                    {"shadow_error", s.shadow_errors},
                                    {"dropped", s.dropped}}) {
      AddCounter(comparisons,
                 {{"operator", s.operator_name},
                  {"plugin", s.plugin},
                  {"controller", s.controller},
                  {"result", result}},
                 static_cast<double>(n));
    }
  }
  out.push_back(std::move(comparisons));
}

// The recorded controllers, per controller.
void AddRecordingFamilies(const std::vector<RecordingFigures>& figures,
                          std::vector<MetricFamily>& out) {
  MetricFamily records =
      Family("ctrlhost_recording_records_total",
             "Reconciles of a recorded controller (spec.record, --record), by result: written "
             "to the recording, dropped (the writer was behind, or a write failed: the "
             "recording has a gap); from zero when the host starts recording the controller",
             MetricType::Counter);
  MetricFamily bytes =
      Family("ctrlhost_recording_bytes_total",
             "Bytes written to a recorded controller's recording files", MetricType::Counter);
  for (const RecordingFigures& r : figures) {
    const Labels labels = {
        {"operator", r.operator_name}, {"plugin", r.plugin}, {"controller", r.controller}};
    for (const auto& [result, n] : {std::pair<const char*, uint64_t>{"written", r.written_total},
                                    {"dropped", r.dropped_total}}) {
      Labels with_result = labels;
      with_result.push_back({"result", result});
      AddCounter(records, with_result, static_cast<double>(n));
    }
    AddCounter(bytes, labels, static_cast<double>(r.bytes_total));
  }
  out.push_back(std::move(records));
  out.push_back(std::move(bytes));
}

// The per-watch cache families.
void AddWatchFamilies(const std::vector<WatchFigures>& watches, std::vector<MetricFamily>& out) {
  MetricFamily objects =
      Family("ctrlhost_watch_objects", "Objects in the watch's cache", MetricType::Gauge);
  MetricFamily bytes =
      Family("ctrlhost_watch_bytes", "JSON bytes held by the watch's cache", MetricType::Gauge);
  MetricFamily memory_bytes =
      Family("ctrlhost_watch_memory_bytes",
             "Heap bytes of the watch's cached objects (JSON, parsed metadata, object headers)",
             MetricType::Gauge);
  MetricFamily events =
      Family("ctrlhost_watch_events_total",
             "Watch events applied to the cache (bookmarks excluded)", MetricType::Counter);
  MetricFamily relists =
      Family("ctrlhost_watch_relists_total", "Lists after the first (410 Gone, broken streams)",
             MetricType::Counter);
  MetricFamily last_rv =
      Family("ctrlhost_watch_last_resource_version",
             "The resourceVersion the cache is at, when it is numeric", MetricType::Gauge);
  for (const WatchFigures& w : watches) {
    const Labels labels = {{"watch", w.watch}};
    AddGauge(objects, labels, w.objects);
    AddGauge(bytes, labels, w.bytes);
    AddGauge(memory_bytes, labels, w.memory_bytes);
    AddCounter(events, labels, static_cast<double>(w.events_total));
    AddCounter(relists, labels, static_cast<double>(w.relists_total));
    double rv = 0;
    if (IsDecimal(w.resource_version) && absl::SimpleAtod(w.resource_version, &rv)) {
      AddGauge(last_rv, labels, rv);
    }
  }
  for (MetricFamily* family : {&objects, &bytes, &memory_bytes, &events, &relists, &last_rv}) {
    out.push_back(std::move(*family));
  }
}

// The families of the HTTP listeners' connection limits.
void AddConnectionFamilies(const std::vector<ConnectionFigures>& connections,
                           std::vector<MetricFamily>& out) {
  MetricFamily open_connections = Family("ctrlhost_http_open_connections",
                                         "Open connections of the listener", MetricType::Gauge);
  MetricFamily unauthenticated =
      Family("ctrlhost_http_unauthenticated_connections", "Open connections not yet authenticated",
             MetricType::Gauge);
  MetricFamily closed = Family("ctrlhost_http_connections_closed_total",
                               "Connections the listener closed to protect itself, by reason: "
                               "refused (limit reached, every connection busy), evicted "
                               "(unauthenticated, for a newer one), evicted_idle (idle "
                               "keep-alive, for a newer one), timed_out (not authenticated in "
                               "time), write_stalled (the client read nothing of its response)",
                               MetricType::Counter);
  MetricFamily streams =
      Family("ctrlhost_http_streams",
             "Long-running responses (watches) being written by the listener's stream loop",
             MetricType::Gauge);
  MetricFamily streams_ended = Family(
      "ctrlhost_http_streams_ended_total",
      "Long-running responses (watches) the stream loop ended, by reason: finished (their last "
      "chunk written), client_closed, stalled (the client accepted no byte for the watch stall "
      "timeout: a watcher that cannot keep up, ended), cut_at_stop",
      MetricType::Counter);
  for (const ConnectionFigures& c : connections) {
    AddGauge(streams, {{"server", c.server}}, c.streams_open);
    AddCounter(streams_ended, {{"server", c.server}, {"reason", "finished"}},
               static_cast<double>(c.streams_finished_total));
    AddCounter(streams_ended, {{"server", c.server}, {"reason", "client_closed"}},
               static_cast<double>(c.streams_client_closed_total));
    AddCounter(streams_ended, {{"server", c.server}, {"reason", "stalled"}},
               static_cast<double>(c.streams_stalled_total));
    AddCounter(streams_ended, {{"server", c.server}, {"reason", "cut_at_stop"}},
               static_cast<double>(c.streams_cut_total));
    AddGauge(open_connections, {{"server", c.server}}, c.open);
    AddGauge(unauthenticated, {{"server", c.server}}, c.unauthenticated);
    AddCounter(closed, {{"server", c.server}, {"reason", "refused"}},
               static_cast<double>(c.refused_total));
    AddCounter(closed, {{"server", c.server}, {"reason", "evicted"}},
               static_cast<double>(c.evicted_total));
    AddCounter(closed, {{"server", c.server}, {"reason", "timed_out"}},
               static_cast<double>(c.timed_out_total));
    AddCounter(closed, {{"server", c.server}, {"reason", "evicted_idle"}},
               static_cast<double>(c.evicted_idle_total));
    AddCounter(closed, {{"server", c.server}, {"reason", "write_stalled"}},
               static_cast<double>(c.write_stalled_total));
  }
  for (MetricFamily* family :
       {&open_connections, &unauthenticated, &closed, &streams, &streams_ended}) {
    out.push_back(std::move(*family));
  }
}

void AddApiBudgetFamilies(const std::vector<ApiBudgetFigures>& tenants,
                          std::vector<MetricFamily>& out) {
  MetricFamily requests =
      Family("ctrlhost_api_requests_total",
             "API requests (attempts) the host's client-side budget let through, by operator and "
             "controller (operator \"-\": the host's own: watches, leases, events)",
             MetricType::Counter);
  MetricFamily throttled = Family(
      "ctrlhost_api_throttled_requests_total",
      "Of those, the requests that waited for their share of the budget", MetricType::Counter);
  MetricFamily wait =
      Family("ctrlhost_api_throttle_seconds_total",
             "Seconds requests waited for their share of the budget", MetricType::Counter);
  MetricFamily waiting =
      Family("ctrlhost_api_waiting_requests", "Requests waiting for their share of the budget now",
             MetricType::Gauge);
  for (const ApiBudgetFigures& t : tenants) {
    const Labels labels = {{"operator", t.operator_name}, {"controller", t.controller}};
    AddCounter(requests, labels, static_cast<double>(t.requests_total));
    AddCounter(throttled, labels, static_cast<double>(t.throttled_total));
    AddCounter(wait, labels, t.throttle_seconds_total);
    AddGauge(waiting, labels, t.waiting);
  }
  for (MetricFamily* family : {&requests, &throttled, &wait, &waiting}) {
    out.push_back(std::move(*family));
  }
}

// The families built from providers' figures, in a fixed order; empty ones are dropped.
std::vector<MetricFamily> Build(const Figures& f) {
  std::vector<MetricFamily> families;
  AddControllerFamilies(f.controllers, families);
  AddQueueFamilies(f.queues, families);
  AddPluginFamilies(f.plugins, families);
  AddTaskFamilies(f.task_enqueues, families);
  AddShadowFamilies(f.shadows, families);
  AddRecordingFamilies(f.recordings, families);
  AddWatchFamilies(f.watches, families);
  AddConnectionFamilies(f.connections, families);
  AddApiBudgetFamilies(f.api_budget, families);
  MetricFamily& shard_keys_owned = families.emplace_back(Family(
      "ctrlhost_shard_keys_owned",
      "Primary keys of a sharded controller this host owns in the shard ring", MetricType::Gauge));
  for (const ControllerFigures& c : f.controllers) {
    if (c.shard_keys_owned >= 0) {
      AddGauge(shard_keys_owned, {{"controller", c.controller}},
               static_cast<double>(c.shard_keys_owned));
    }
  }
  std::vector<MetricFamily> out;
  for (MetricFamily& family : families) {
    if (!family.metric.empty()) out.push_back(std::move(family));
  }
  return out;
}

}  // namespace

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

MetricsRegistry::ProviderId MetricsRegistry::AddProvider(Provider provider) {
  common::MutexLock lock(&providers_mu_);
  const ProviderId id = next_id_++;
  providers_.emplace(id, std::make_shared<const Provider>(std::move(provider)));
  return id;
}

void MetricsRegistry::RemoveProvider(ProviderId id) {
  // Taking collect_mu_ waits for a scrape that may be calling this provider right now.
  common::MutexLock collect(&collect_mu_);
  common::MutexLock lock(&providers_mu_);
  providers_.erase(id);
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  common::MutexLock collect(&collect_mu_);
  std::vector<std::shared_ptr<const Provider>> providers;
  {
    common::MutexLock lock(&providers_mu_);
    for (const auto& [id, provider] : providers_) providers.push_back(provider);
  }
  Figures figures;
  for (const auto& provider : providers) (*provider)(figures);
  std::vector<prometheus::MetricFamily> families = Build(figures);
  for (prometheus::MetricFamily& family : registry_->Collect()) {
    families.push_back(std::move(family));
  }
  return families;
}

std::string MetricsRegistry::ScrapeText() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, Collect());
  return out.str();
}

}  // namespace ctrlhost::observe
