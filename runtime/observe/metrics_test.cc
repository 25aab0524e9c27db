#include "runtime/observe/metrics.h"

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "runtime/observe/adapters.h"

namespace ctrlhost::observe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Samples of a text exposition: "name{labels as printed}" -> value, plus "# TYPE" lines.
struct Scrape {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
};

Scrape Parse(const std::string& text) {
  Scrape s;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() == 2) s.types[parts[0]] = parts[1];
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    std::string number(line.substr(space + 1));
    if (number == "+Inf") {
      value = std::numeric_limits<double>::infinity();
    } else {
      EXPECT_TRUE(absl::SimpleAtod(number, &value)) << line;
    }
    s.samples[std::string(line.substr(0, space))] = value;
  }
  return s;
}

HistogramFigures TwoBuckets() {
  HistogramFigures h;
  h.upper_bounds = {0.1, 1};
  h.counts = {3, 2, 1};
  h.count = 6;
  h.sum = 4.5;
  return h;
}

// One figure of every kind: a controller, its queue, a plugin, its background tasks, two watches
// (one with a numeric resourceVersion), an HTTP listener.
void OneOfEachFigure(Figures& f) {
  ControllerFigures c;
  c.controller = "web/deployments";
  c.reconcile_total = {{"success", 7}, {"error", 2}};
  c.reconcile_errors_total = 2;
  c.reconcile_time = TwoBuckets();
  c.max_concurrent_reconciles = 4;
  c.active_workers = 1;
  f.controllers.push_back(c);
  QueueFigures q;
  q.name = "web/deployments";
  q.depth = {2, 3};
  q.adds_total = 11;
  q.retries_total = 3;
  q.queue_duration = {HistogramFigures(), TwoBuckets()};
  q.oldest_waiting_seconds = {310, 0.5};
  q.aged_total = 7;
  q.waited_past_max_total = 9;
  q.work_duration = TwoBuckets();
  q.unfinished_work_seconds = 1.5;
  q.longest_running_processor_seconds = 0.75;
  f.queues.push_back(q);
  PluginFigures p;
  p.operator_name = "web";
  p.plugin = "webapp";
  p.up = true;
  p.restarts_total = 1;
  p.swaps_total = 3;
  p.swap_failures_total = 2;
  p.in_flight = 2;
  p.requests_total = {{"ok", 9}};
  p.request_duration = TwoBuckets();
  p.cache_bytes = 8192;
  f.plugins.push_back(p);
  TaskEnqueueFigures t;
  t.operator_name = "web";
  t.plugin = "webapp";
  t.controller = "deployments";
  t.accepted_total = 12;
  t.refused_rate_limited_total = 5;
  t.refused_invalid_total = 1;
  f.task_enqueues.push_back(t);
  WatchFigures w;
  w.watch = "apps/v1 Deployment";
  w.objects = 10;
  w.bytes = 2048;
  w.memory_bytes = 3072;
  w.events_total = 40;
  w.relists_total = 1;
  w.resource_version = "12345";
  f.watches.push_back(w);
  w.watch = "v1 Pod";
  w.resource_version = "opaque-rv";  // not numeric: no last_resource_version sample
  f.watches.push_back(w);
  ConnectionFigures conn;
  conn.server = "apiserver";
  conn.open = 300;
  conn.unauthenticated = 256;
  conn.refused_total = 1;
  conn.evicted_total = 4000;
  conn.timed_out_total = 50;
  conn.evicted_idle_total = 7;
  conn.write_stalled_total = 3;
  conn.streams_open = 2000;
  conn.streams_stalled_total = 9;
  conn.streams_client_closed_total = 11;
  f.connections.push_back(conn);
  RecordingFigures r;
  r.operator_name = "web";
  r.plugin = "webapp";
  r.controller = "deployments";
  r.written_total = 1000;
  r.dropped_total = 3;
  r.bytes_total = 1555000;
  f.recordings.push_back(r);
}

TEST(MetricsRegistryTest, ExportsEveryFamilyWithItsLabels) {
  MetricsRegistry metrics;
  metrics.AddProvider(OneOfEachFigure);
  const std::string text = metrics.ScrapeText();
  const Scrape s = Parse(text);
  const std::map<std::string, double> expected = {
      {R"(controller_runtime_reconcile_total{controller="web/deployments",result="success"})", 7},
      {R"(controller_runtime_reconcile_total{controller="web/deployments",result="error"})", 2},
      {R"(controller_runtime_reconcile_errors_total{controller="web/deployments"})", 2},
      {R"(controller_runtime_reconcile_time_seconds_count{controller="web/deployments"})", 6},
      {R"(controller_runtime_reconcile_time_seconds_sum{controller="web/deployments"})", 4.5},
      {R"(controller_runtime_reconcile_time_seconds_bucket{controller="web/deployments",le="0.1"})",
       3},
      {R"(controller_runtime_reconcile_time_seconds_bucket{controller="web/deployments",le="1"})",
       5},
      {R"(controller_runtime_reconcile_time_seconds_bucket{controller="web/deployments",le="+Inf"})",
       6},
      {R"(controller_runtime_max_concurrent_reconciles{controller="web/deployments"})", 4},
      {R"(controller_runtime_active_workers{controller="web/deployments"})", 1},
      {R"(workqueue_depth{name="web/deployments",priority="low"})", 2},
      {R"(workqueue_depth{name="web/deployments",priority="high"})", 3},
      {R"(ctrlhost_workqueue_oldest_waiting_seconds{name="web/deployments",priority="low"})", 310},
      {R"(ctrlhost_workqueue_oldest_waiting_seconds{name="web/deployments",priority="high"})", 0.5},
      {R"(ctrlhost_workqueue_aged_total{name="web/deployments"})", 7},
      {R"(ctrlhost_workqueue_waited_past_max_total{name="web/deployments"})", 9},
      {R"(workqueue_adds_total{name="web/deployments"})", 11},
      {R"(workqueue_retries_total{name="web/deployments"})", 3},
      {R"(workqueue_queue_duration_seconds_count{name="web/deployments",priority="high"})", 6},
      {R"(workqueue_queue_duration_seconds_count{name="web/deployments",priority="low"})", 0},
      {R"(workqueue_work_duration_seconds_bucket{name="web/deployments",le="+Inf"})", 6},
      {R"(workqueue_unfinished_work_seconds{name="web/deployments"})", 1.5},
      {R"(workqueue_longest_running_processor_seconds{name="web/deployments"})", 0.75},
      {R"(ctrlhost_plugin_up{operator="web",plugin="webapp"})", 1},
      {R"(ctrlhost_plugin_restarts_total{operator="web",plugin="webapp"})", 1},
      {R"(ctrlhost_plugin_swaps_total{operator="web",plugin="webapp",result="success"})", 3},
      {R"(ctrlhost_plugin_swaps_total{operator="web",plugin="webapp",result="failure"})", 2},
      {R"(ctrlhost_plugin_in_flight{operator="web",plugin="webapp"})", 2},
      {R"(ctrlhost_plugin_requests_total{operator="web",plugin="webapp",result="ok"})", 9},
      {R"(ctrlhost_plugin_request_duration_seconds_sum{operator="web",plugin="webapp"})", 4.5},
      {R"(ctrlhost_task_enqueues_total{operator="web",plugin="webapp",controller="deployments"})",
       12},
      {R"(ctrlhost_task_enqueues_refused_total{operator="web",plugin="webapp",controller="deployments",reason="rate_limited"})",
       5},
      {R"(ctrlhost_task_enqueues_refused_total{operator="web",plugin="webapp",controller="deployments",reason="invalid"})",
       1},
      // Zero, but present: every reason is exported from the start.
      {R"(ctrlhost_task_enqueues_refused_total{operator="web",plugin="webapp",controller="deployments",reason="not_running"})",
       0},
      {R"(ctrlhost_recording_records_total{operator="web",plugin="webapp",controller="deployments",result="written"})",
       1000},
      {R"(ctrlhost_recording_records_total{operator="web",plugin="webapp",controller="deployments",result="dropped"})",
       3},
      {R"(ctrlhost_recording_bytes_total{operator="web",plugin="webapp",controller="deployments"})",
       1555000},
      {R"(ctrlhost_watch_objects{watch="apps/v1 Deployment"})", 10},
      {R"(ctrlhost_watch_bytes{watch="apps/v1 Deployment"})", 2048},
      {R"(ctrlhost_watch_memory_bytes{watch="apps/v1 Deployment"})", 3072},
      {R"(ctrlhost_plugin_cache_bytes{operator="web",plugin="webapp"})", 8192},
      {R"(ctrlhost_watch_events_total{watch="apps/v1 Deployment"})", 40},
      {R"(ctrlhost_watch_relists_total{watch="apps/v1 Deployment"})", 1},
      {R"(ctrlhost_watch_last_resource_version{watch="apps/v1 Deployment"})", 12345},
      {R"(ctrlhost_http_open_connections{server="apiserver"})", 300},
      {R"(ctrlhost_http_unauthenticated_connections{server="apiserver"})", 256},
      {R"(ctrlhost_http_connections_closed_total{server="apiserver",reason="refused"})", 1},
      {R"(ctrlhost_http_connections_closed_total{server="apiserver",reason="evicted"})", 4000},
      {R"(ctrlhost_http_connections_closed_total{server="apiserver",reason="timed_out"})", 50},
      {R"(ctrlhost_http_connections_closed_total{server="apiserver",reason="evicted_idle"})", 7},
      {R"(ctrlhost_http_connections_closed_total{server="apiserver",reason="write_stalled"})", 3},
      {R"(ctrlhost_http_streams{server="apiserver"})", 2000},
      {R"(ctrlhost_http_streams_ended_total{server="apiserver",reason="stalled"})", 9},
      {R"(ctrlhost_http_streams_ended_total{server="apiserver",reason="client_closed"})", 11},
      {R"(ctrlhost_http_streams_ended_total{server="apiserver",reason="finished"})", 0},
  };
  for (const auto& [sample, value] : expected) {
    auto it = s.samples.find(sample);
    ASSERT_NE(it, s.samples.end()) << sample << " missing from\n" << text;
    EXPECT_EQ(it->second, value) << sample;
  }
  EXPECT_THAT(text, Not(HasSubstr(R"(ctrlhost_watch_last_resource_version{watch="v1 Pod"})")));
  EXPECT_EQ(s.types.at("controller_runtime_reconcile_total"), "counter");
  EXPECT_EQ(s.types.at("controller_runtime_reconcile_time_seconds"), "histogram");
  EXPECT_EQ(s.types.at("workqueue_depth"), "gauge");
  EXPECT_EQ(s.types.at("ctrlhost_plugin_request_duration_seconds"), "histogram");
}

TEST(MetricsRegistryTest, LabelValuesAreEscaped) {
  MetricsRegistry metrics;
  metrics.AddProvider([](Figures& f) {
    QueueFigures q;
    q.name = "a\"b\\c\nd";
    f.queues.push_back(q);
  });
  EXPECT_THAT(metrics.ScrapeText(),
              HasSubstr(R"(workqueue_depth{name="a\"b\\c\nd",priority="low"} 0)"));
}

TEST(MetricsRegistryTest, NoProvidersNoFamiliesAndRemovedProvidersStop) {
  MetricsRegistry metrics;
  EXPECT_EQ(metrics.ScrapeText(), "");
  int calls = 0;
  MetricsRegistry::ProviderId id = metrics.AddProvider([&](Figures& f) {
    ++calls;
    f.queues.emplace_back().name = "q";
  });
  EXPECT_THAT(metrics.ScrapeText(), HasSubstr("workqueue_depth{name=\"q\",priority=\"low\"} 0"));
  metrics.RemoveProvider(id);
  metrics.RemoveProvider(id);  // idempotent
  EXPECT_EQ(metrics.ScrapeText(), "");
  EXPECT_EQ(calls, 1);
}

TEST(MetricsRegistryTest, ProvidersMergeAndPushMetricsFollow) {
  MetricsRegistry metrics;
  metrics.AddProvider([](Figures& f) { f.queues.emplace_back().name = "a"; });
  metrics.AddProvider([](Figures& f) { f.queues.emplace_back().name = "b"; });
  prometheus::BuildCounter()
      .Name("ctrlhost_applies_total")
      .Help("test")
      .Register(metrics.registry())
      .Add({{"kind", "Deployment"}})
      .Increment(3);
  const std::string text = metrics.ScrapeText();
  // One family with both queues (a second "# TYPE workqueue_depth" would be invalid).
  EXPECT_EQ(text.find("# TYPE workqueue_depth"), text.rfind("# TYPE workqueue_depth"));
  EXPECT_THAT(text, HasSubstr("workqueue_depth{name=\"a\",priority=\"high\"} 0"));
  EXPECT_THAT(text, HasSubstr("workqueue_depth{name=\"b\",priority=\"high\"} 0"));
  EXPECT_THAT(text, HasSubstr("ctrlhost_applies_total{kind=\"Deployment\"} 3"));
}

TEST(MetricsRegistryTest, MalformedHistogramHasNoBuckets) {
  MetricsRegistry metrics;
  metrics.AddProvider([](Figures& f) {
    PluginFigures p;
    p.plugin = "x";
    p.request_duration.upper_bounds = {1, 2};
    p.request_duration.counts = {1};  // wrong size
    p.request_duration.count = 1;
    f.plugins.push_back(p);
  });
  const std::string text = metrics.ScrapeText();
  EXPECT_THAT(text, HasSubstr("ctrlhost_plugin_request_duration_seconds_count"));
  EXPECT_THAT(text, Not(HasSubstr("le=\"1\"")));
}

TEST(MetricsRegistryTest, RemoveProviderWaitsForARunningScrape) {
  MetricsRegistry metrics;
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::atomic<bool> removed{false};
  MetricsRegistry::ProviderId id = metrics.AddProvider([&](Figures&) {
    inside = true;
    while (!release) std::this_thread::yield();
    EXPECT_FALSE(removed.load());
  });
  std::thread scraper([&] { metrics.ScrapeText(); });
  while (!inside) std::this_thread::yield();
  std::thread remover([&] {
    metrics.RemoveProvider(id);
    removed = true;
  });
  release = true;
  remover.join();
  scraper.join();
  EXPECT_TRUE(removed);
}

TEST(AdaptersTest, QueueMetricsBecomeSecondsAndCumulativeBuckets) {
  queue::QueueMetrics m;
  m.depth = 3;
  m.depth_by_priority = {1, 2};
  m.oldest_waiting = {absl::Seconds(400), absl::Milliseconds(250)};
  m.aged_total = 4;
  m.waited_past_max_total = 5;
  m.adds_total = 10;
  m.retries_total = 2;
  // One key handed out at low priority, one at high.
  m.queue_latency_by_priority[0].Observe(absl::Microseconds(5));  // first bucket (<= 10 us)
  m.queue_latency_by_priority[1].Observe(absl::Seconds(5000));    // +Inf
  m.longest_running = absl::Milliseconds(1500);
  m.unfinished_work = absl::Seconds(2);
  QueueFigures q = FromQueueMetrics("q", m);
  EXPECT_EQ(q.depth[0], 1);
  EXPECT_EQ(q.depth[1], 2);
  EXPECT_EQ(q.oldest_waiting_seconds[0], 400);
  EXPECT_EQ(q.oldest_waiting_seconds[1], 0.25);
  EXPECT_EQ(q.aged_total, 4u);
  EXPECT_EQ(q.waited_past_max_total, 5u);
  EXPECT_EQ(q.adds_total, 10u);
  EXPECT_EQ(q.retries_total, 2u);
  EXPECT_EQ(q.longest_running_processor_seconds, 1.5);
  EXPECT_EQ(q.unfinished_work_seconds, 2);
  const HistogramFigures& low = q.queue_duration[0];
  const HistogramFigures& high = q.queue_duration[1];
  ASSERT_EQ(low.counts.size(), low.upper_bounds.size() + 1);
  EXPECT_DOUBLE_EQ(low.upper_bounds.front(), 1e-5);
  EXPECT_EQ(low.counts.front(), 1u);
  EXPECT_EQ(low.count, 1u);
  EXPECT_EQ(high.counts.back(), 1u);
  EXPECT_EQ(high.count, 1u);
  EXPECT_NEAR(low.sum + high.sum, 5000.000005, 1e-6);

  watch::ReflectorMetrics r;
  r.description = "v1 ConfigMap";
  r.objects = 4;
  r.bytes = 100;
  r.memory_bytes = 300;
  r.events_total = 8;
  r.relists_total = 1;
  r.resource_version = "77";
  WatchFigures w = FromReflectorMetrics(r);
  EXPECT_EQ(w.watch, "v1 ConfigMap");
  EXPECT_EQ(w.objects, 4);
  EXPECT_EQ(w.bytes, 100);
  EXPECT_EQ(w.memory_bytes, 300);
  EXPECT_EQ(w.events_total, 8u);
  EXPECT_EQ(w.relists_total, 1u);
  EXPECT_EQ(w.resource_version, "77");
}

}  // namespace
}  // namespace ctrlhost::observe
