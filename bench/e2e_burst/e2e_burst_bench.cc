// e2e-burst (issue 5, "Benchmarks"): 10,000 custom resources created at once in the embedded
// API server, and the time until the plugin has written every one's status.
//
// Each phase starts a fresh manager::Host (embedded API server over HTTPS, manager, and
// bench/e2e_burst:burst_plugin exec'd and supervised over its Unix socket), applies the `Burst`
// CRD, opens one watch on the bursts, then creates --objects Bursts from --clients threads
// (keep-alive HTTPS connections of one kube::RestClient, no client-side rate limit). The watch
// records when each object's `status.phase == Done` arrives.
//
//   floor   the controller disabled: creating the objects alone (the baseline)
//   naive   maxConcurrentReconciles: 1 (one worker, like a naive controller)
//   tuned   maxConcurrentReconciles: --workers, queue rateLimit raised
//   default-host   like tuned, but the host's own API client keeps its default rate limit
//                  (50 QPS / burst 100), on --probe-objects objects (informative)
//
// Flags: --objects=10000 --clients=8 --workers=8 --host-idle=max(8,workers) --probe-objects=400
// --host-qps=0 (the tuned host client's QPS; 0 = unlimited) --phases=floor,naive,tuned,default-host
// --finalizer=false (true: the plugin declares a finalizer, as most operators do) --json
//
// Every controller phase also reports the host's API requests per object and per reconcile
// (counted on the host's RestClient from the first create until it is quiet after convergence).
//
// --kubeconfig=PATH (tools/bench passes a fresh real Kubernetes 1.20 cluster from e2e/kube) adds
// the same measurement against that cluster in the same run, on --real-objects (1000) objects,
// each phase in its own namespace: real-floor (creates alone), real-tuned (host client
// unlimited) and real-default (the host's default 50 QPS / burst 100, as a controller-runtime
// manager has). Figures carry the prefix "real: " and per-object ratios to the embedded ones.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/e2e_burst/burst_kind.h"
#include "bench/report.h"
#include "runtime/common/mutex.h"
#include "runtime/common/status_macros.h"
#include "runtime/config/load.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/client.h"
#include "runtime/kube/kubeconfig.h"
#include "runtime/kube/rest_client.h"
#include "runtime/manager/host.h"
#include "simdjson.h"

namespace ctrlhost::bench {
namespace {

namespace fs = std::filesystem;

int64_t NowNanos() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              origin)
      .count();
}

struct Phase {
  std::string name;
  bool controller = true;
  int workers = 1;
  int objects = 10000;
  int clients = 8;
  double host_qps = 0;  // the host's RestClient QPS (0: unlimited)
  int host_burst = 100;
  size_t host_idle = 8;             // the host's RestClient pool of idle keep-alive connections
  bool default_rate_limit = false;  // leave the controller queue's rateLimit at its default
  bool finalizer = false;           // the plugin declares a finalizer (burst_plugin --finalizer)
  std::string kubeconfig;           // a real cluster; empty: the embedded API server
  std::string namespace_name = "default";
};

struct PhaseResult {
  int64_t created = 0;
  int64_t create_errors = 0;
  std::string first_error;
  absl::Duration create_time;    // first create sent -> last create acknowledged
  absl::Duration converge_time;  // first create sent -> last status seen
  int64_t converged = 0;
  std::vector<absl::Duration> latencies;  // create sent -> status seen, per object
  uint64_t reconciles = 0;
  uint64_t reconcile_errors = 0;
  uint64_t plugin_requests = 0;
  // HTTP requests the host's API client made from the first create until it went quiet after
  // convergence (its watches' starts included, a few per phase).
  int64_t host_requests = 0;
  // Floor only: the requests the host makes per object, sent by the bench's clients instead.
  absl::Duration get_time;    // a GET of every object
  absl::Duration patch_time;  // a status merge patch of every object
};

// `clients` threads run `request(i)` for i in [0, n); returns the wall time. Failures count in
// `errors`.
template <typename F>
absl::Duration ForAll(int n, int clients, std::atomic<int64_t>* errors, F request) {
  std::atomic<int64_t> next{0};
  std::vector<std::thread> threads;
  Stopwatch watch;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
        if (!request(i)) errors->fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return watch.Elapsed();
}

std::string OperatorYaml(const Phase& phase, const std::string& plugin) {
  std::string controller = phase.controller
                               ? absl::StrCat("    maxConcurrentReconciles: ", phase.workers, "\n")
                               : "    disabled: true\n";
  if (phase.controller && !phase.default_rate_limit) {
    absl::StrAppend(&controller, "    rateLimit: {qps: 1000000, burst: 1000000}\n");
  }
  return absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata: {name: bench}
spec:
  plugins:
  - name: burst
    exec: {command: ")",
                      plugin, "\"", phase.finalizer ? ", args: [--finalizer]" : "", R"(}
    maxInFlight: 1024
  controllers:
  - name: burst
)",
                      controller);
}

// Parses one watch event; sets `index` to N of "b-N" when its status phase is Done.
bool DoneIndex(simdjson::ondemand::parser& parser, const std::string& object, int64_t* index) {
  simdjson::padded_string padded(object);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return false;
  std::string_view name;
  if (doc["metadata"]["name"].get_string().get(name) != simdjson::SUCCESS) return false;
  std::string name_copy(name);
  std::string_view phase;
  if (doc["status"]["phase"].get_string().get(phase) != simdjson::SUCCESS) return false;
  if (phase != "Done" || !absl::StartsWith(name_copy, "b-")) return false;
  return absl::SimpleAtoi(absl::string_view(name_copy).substr(2), index);
}

absl::StatusOr<PhaseResult> RunPhase(const Phase& phase, const std::string& plugin,
                                     const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSIGN_OR_RETURN(std::vector<config::OperatorSpec> operators,
                   config::ParseOperators(OperatorYaml(phase, plugin), "operator.yaml"));
  manager::HostOptions options;
  options.operators = operators;
  options.data_dir = (dir / "data").string();
  options.apiserver.port = 0;
  options.metrics_port = 0;
  if (!phase.kubeconfig.empty()) {
    options.kubeconfigs = {phase.kubeconfig};
    options.api_qps = phase.host_qps;  // the host would apply its cluster default otherwise
    options.api_burst = phase.host_burst;
  }
  options.rest.qps = phase.host_qps;
  options.rest.burst = phase.host_burst;
  options.rest.max_idle_connections = phase.host_idle;
  ASSIGN_OR_RETURN(std::unique_ptr<manager::Host> host, manager::Host::Start(options));

  kube::ResourceRef bursts = kBursts;
  bursts.namespace_name = phase.namespace_name;
  if (absl::Status s = host->client().Create(kCrds, kBurstCrd).status();
      !s.ok() && !kube::IsAlreadyExists(s)) {
    return s;
  }
  if (phase.namespace_name != "default") {
    const kube::ResourceRef namespaces{"", "v1", "namespaces", "", "", ""};
    RETURN_IF_ERROR(
        host->client()
            .Create(namespaces,
                    absl::StrCat(R"({"apiVersion":"v1","kind":"Namespace",)",
                                 R"("metadata":{"name":")", phase.namespace_name, R"("}})"))
            .status());
  }
  // Creators and the watch get their own client: no rate limit, a connection per thread.
  ASSIGN_OR_RETURN(kube::RestConfig config,
                   kube::LoadKubeconfigFile(phase.kubeconfig.empty() ? host->kubeconfig_path()
                                                                     : phase.kubeconfig));
  kube::RestClientOptions rest_options;
  rest_options.qps = 0;
  rest_options.max_idle_connections = phase.clients + 1;
  ASSIGN_OR_RETURN(std::unique_ptr<kube::RestClient> rest,
                   kube::RestClient::Create(config, rest_options));
  kube::Client client(rest.get());

  if (phase.controller) {
    RETURN_IF_ERROR(host->manager().WaitReady(absl::Seconds(60)));
  }
  std::string from_revision;
  const absl::Time served_deadline = absl::Now() + absl::Seconds(30);
  while (true) {
    absl::StatusOr<kube::ObjectList> list = client.List(bursts);
    if (list.ok()) {
      from_revision = list->resource_version;
      break;
    }
    if (absl::Now() > served_deadline) return list.status();
    absl::SleepFor(absl::Milliseconds(20));
  }

  const int n = phase.objects;
  kube::RestClient* const host_rest = host->client().rest();
  const int64_t host_requests_before = host_rest->attempts();
  std::vector<int64_t> sent_ns(n, 0), done_ns(n, 0);
  std::atomic<int64_t> converged{0};
  std::atomic<bool> watch_failed{false};
  kube::StreamCanceller canceller;
  std::thread watcher;
  if (phase.controller) {
    watcher = std::thread([&] {
      simdjson::ondemand::parser parser;
      kube::WatchOptions watch_options;
      watch_options.resource_version = from_revision;
      watch_options.idle_timeout = absl::Minutes(2);
      absl::Status s = client.Watch(
          bursts, watch_options,
          [&](kube::WatchEvent event) {
            int64_t i = 0;
            if (event.type == "MODIFIED" && DoneIndex(parser, event.object, &i) && i >= 0 &&
                i < n && done_ns[i] == 0) {
              done_ns[i] = NowNanos();
              if (converged.fetch_add(1) + 1 == n) return false;
            }
            return true;
          },
          &canceller);
      if (!s.ok()) {
        std::cerr << "e2e-burst: watch ended: " << s << "\n";
        watch_failed = true;
      }
    });
  }

  // Creates: `clients` threads take the next index until all are sent.
  PhaseResult result;
  std::atomic<int64_t> next{0}, created{0}, errors{0};
  common::Mutex error_mu;
  std::string first_error;
  std::vector<int64_t> acked_ns(n, 0);
  std::vector<std::thread> creators;
  for (int c = 0; c < phase.clients; ++c) {
    creators.emplace_back([&] {
      while (true) {
        const int64_t i = next.fetch_add(1);
        if (i >= n) return;
        const std::string body = absl::StrCat(
            R"({"apiVersion":"burst.bench.ctrlhost.dev/v1","kind":"Burst","metadata":{"name":"b-)",
            i, R"(","namespace":")", phase.namespace_name, R"("},"spec":{"size":)", i, "}}");
        sent_ns[i] = NowNanos();
        absl::StatusOr<std::string> r = client.Create(bursts, body);
        acked_ns[i] = NowNanos();
        if (r.ok()) {
          created.fetch_add(1);
        } else {
          errors.fetch_add(1);
          common::MutexLock lock(&error_mu);
          if (first_error.empty()) first_error = r.status().ToString();
        }
      }
    });
  }
  for (std::thread& t : creators) t.join();
  const int64_t first_sent = *std::min_element(sent_ns.begin(), sent_ns.end());
  result.created = created.load();
  result.create_errors = errors.load();
  result.first_error = first_error;
  result.create_time =
      absl::Nanoseconds(*std::max_element(acked_ns.begin(), acked_ns.end()) - first_sent);

  if (!phase.controller) {
    // What the host adds per object, from the same clients: the applier's GET of the live
    // object, then its status merge patch with that resourceVersion as precondition.
    std::atomic<int64_t> extra_errors{0};
    result.get_time = ForAll(n, phase.clients, &extra_errors, [&](int64_t i) {
      kube::ResourceRef ref = bursts;
      ref.name = absl::StrCat("b-", i);
      return client.Get(ref).ok();
    });
    result.patch_time = ForAll(n, phase.clients, &extra_errors, [&](int64_t i) {
      kube::ResourceRef ref = bursts;
      ref.name = absl::StrCat("b-", i);
      ref.subresource = "status";
      return client
          .Patch(ref, kube::PatchType::kMerge,
                 R"({"status":{"phase":"Done","observedGeneration":1}})")
          .ok();
    });
    result.create_errors += extra_errors.load();
  }
  if (phase.controller) {
    // Bounded wait for the watch to see every status (it returns by itself when it has).
    const absl::Time deadline = absl::Now() + absl::Seconds(90);
    while (converged.load() < result.created && !watch_failed.load() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    canceller.Cancel();
    watcher.join();
    result.converged = converged.load();
    int64_t last = first_sent;
    for (int i = 0; i < n; ++i) {
      if (done_ns[i] == 0) continue;
      last = std::max(last, done_ns[i]);
      result.latencies.push_back(absl::Nanoseconds(done_ns[i] - sent_ns[i]));
    }
    result.converge_time = absl::Nanoseconds(last - first_sent);
    // The host may still be busy after the last status (reconciles caused by its own writes):
    // count its requests once they stop for 1 s (bounded).
    int64_t seen = host_rest->attempts();
    const absl::Time quiet_deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < quiet_deadline) {
      absl::SleepFor(absl::Seconds(1));
      const int64_t now = host_rest->attempts();
      if (now == seen) break;
      seen = now;
    }
    result.host_requests = seen - host_requests_before;
    observe::Figures figures;
    host->manager().Collect(figures);
    for (const observe::ControllerFigures& c : figures.controllers) {
      for (const auto& [r, count] : c.reconcile_total) result.reconciles += count;
      result.reconcile_errors += c.reconcile_errors_total;
    }
    for (const auto& p : figures.plugins) {
      for (const auto& [r, count] : p.requests_total) result.plugin_requests += count;
    }
  }
  // Our connections first: the server's shutdown would wait for idle keep-alive connections.
  rest.reset();
  host->Stop();
  host.reset();
  fs::remove_all(dir);
  return result;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }
double Millis(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

int Main(int argc, char** argv) {
  Reporter reporter("e2e-burst", argc, argv);
  int objects = 10000, clients = 8, workers = 8, probe_objects = 400, host_idle = -1;
  bool finalizer = false;
  double host_qps = 0;
  std::string kubeconfig;
  int real_objects = 1000;
  std::vector<std::string> phases = {"floor", "naive", "tuned", "default-host"};
  for (const std::string& arg : reporter.args()) {
    std::pair<std::string, std::string> kv = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    bool ok = true;
    if (kv.first == "--objects") {
      ok = absl::SimpleAtoi(kv.second, &objects) && objects > 0;
    } else if (kv.first == "--clients") {
      ok = absl::SimpleAtoi(kv.second, &clients) && clients > 0;
    } else if (kv.first == "--workers") {
      ok = absl::SimpleAtoi(kv.second, &workers) && workers > 0;
    } else if (kv.first == "--probe-objects") {
      ok = absl::SimpleAtoi(kv.second, &probe_objects) && probe_objects > 0;
    } else if (kv.first == "--host-idle") {
      ok = absl::SimpleAtoi(kv.second, &host_idle) && host_idle > 0;
    } else if (kv.first == "--host-qps") {
      ok = absl::SimpleAtod(kv.second, &host_qps) && host_qps >= 0;
    } else if (kv.first == "--finalizer") {
      ok = kv.second == "true" || kv.second == "false";
      finalizer = kv.second == "true";
    } else if (kv.first == "--phases") {
      phases = absl::StrSplit(kv.second, ',', absl::SkipEmpty());
    } else if (kv.first == "--kubeconfig") {
      kubeconfig = kv.second;
      ok = !kubeconfig.empty();
    } else if (kv.first == "--real-objects") {
      ok = absl::SimpleAtoi(kv.second, &real_objects) && real_objects > 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "e2e-burst: bad flag " << arg << "\n";
      return 2;
    }
  }
  auto wants = [&](absl::string_view p) {
    return std::find(phases.begin(), phases.end(), p) != phases.end();
  };

  // The plugin sits next to this binary in bazel-bin (and in its runfiles).
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string plugin = (self.parent_path() / "burst_plugin").string();
  if (ec || !fs::exists(plugin)) {
    std::cerr << "e2e-burst: plugin not found next to the binary: " << plugin << "\n";
    return 1;
  }
  const char* tmp = std::getenv("TMPDIR");
  const fs::path root =
      fs::path(tmp != nullptr ? tmp : "/tmp") / absl::StrCat("e2e-burst-", getpid());

  auto run = [&](const Phase& phase) -> std::optional<PhaseResult> {
    std::cerr << "e2e-burst: phase " << phase.name << " (" << phase.objects << " objects)\n";
    absl::StatusOr<PhaseResult> r = RunPhase(phase, plugin, root / phase.name);
    if (!r.ok()) {
      std::cerr << "e2e-burst: phase " << phase.name << " failed: " << r.status() << "\n";
      Figure f;
      f.metric = absl::StrCat(phase.name, " phase ran");
      f.value = 0;
      f.unit = "bool";
      f.met = false;
      reporter.Add(f);
      return std::nullopt;
    }
    if (r->create_errors > 0) {
      std::cerr << "e2e-burst: " << phase.name << ": " << r->create_errors
                << " creates failed, first: " << r->first_error << "\n";
    }
    return *r;
  };

  Phase base;
  base.objects = objects;
  base.clients = clients;
  base.host_qps = host_qps;
  base.host_burst = 1000000;
  base.finalizer = finalizer;

  std::optional<PhaseResult> floor, naive, tuned, probe;
  if (wants("floor")) {
    Phase p = base;
    p.name = "floor";
    p.controller = false;
    floor = run(p);
  }
  if (wants("naive")) {
    Phase p = base;
    p.name = "naive";
    p.workers = 1;
    naive = run(p);
  }
  if (wants("tuned")) {
    Phase p = base;
    p.name = "tuned";
    p.workers = workers;
    p.host_idle = host_idle > 0 ? host_idle : std::max(8, workers);
    tuned = run(p);
  }
  if (wants("default-host")) {
    Phase p = base;
    p.name = "default-host";
    p.objects = probe_objects;
    p.workers = workers;
    p.host_qps = kube::RestClientOptions().qps;
    p.host_burst = kube::RestClientOptions().burst;
    p.default_rate_limit = true;
    probe = run(p);
  }

  auto add = [&](std::string metric, double value, std::string unit, std::optional<double> baseline,
                 std::optional<double> ratio, std::optional<std::string> target,
                 std::optional<bool> met) {
    Figure f;
    f.metric = std::move(metric);
    f.value = value;
    f.unit = std::move(unit);
    f.baseline = baseline;
    f.ratio = ratio;
    f.target = std::move(target);
    f.met = met;
    reporter.Add(f);
  };
  std::optional<double> floor_s;
  if (floor) {
    floor_s = Seconds(floor->create_time);
    add("floor: creates alone, no controller", floor->created / *floor_s, "creates/s", std::nullopt,
        std::nullopt, std::nullopt, floor->create_errors == 0);
    add("floor: time to create all", *floor_s, "s", std::nullopt, std::nullopt, std::nullopt,
        std::nullopt);
    add("floor: GETs/s (the applier's read, from clients)", objects / Seconds(floor->get_time),
        "ops/s", std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("floor: status patches/s (from clients)", objects / Seconds(floor->patch_time), "ops/s",
        std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("floor: create + GET + patch, serial",
        Seconds(floor->create_time + floor->get_time + floor->patch_time), "s", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
  }
  if (tuned) {
    const double converge_s = Seconds(tuned->converge_time);
    const bool all = tuned->converged == objects && tuned->create_errors == 0;
    add(absl::StrCat("tuned (", workers, " workers): time to all converged"), converge_s, "s",
        floor_s, floor_s ? std::optional<double>(converge_s / *floor_s) : std::nullopt, "<= 5 s",
        all && converge_s <= 5);
    add("tuned: objects converged", tuned->converged, "objects", objects, std::nullopt,
        absl::StrCat("== ", objects), all);
    add("tuned: creates/s (controller running)", tuned->created / Seconds(tuned->create_time),
        "creates/s", floor ? std::optional<double>(floor->created / *floor_s) : std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
    add("tuned: reconciles/s", tuned->reconciles / converge_s, "reconciles/s", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
    add("tuned: reconciles per object", static_cast<double>(tuned->reconciles) / objects, "x",
        std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("tuned: host API requests per object", static_cast<double>(tuned->host_requests) / objects,
        "requests", std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("tuned: host API requests per reconcile",
        tuned->reconciles == 0 ? 0.0
                               : static_cast<double>(tuned->host_requests) / tuned->reconciles,
        "requests", std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("tuned: create->status latency p50", Millis(Percentile(tuned->latencies, 50)), "ms",
        std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("tuned: create->status latency p99", Millis(Percentile(tuned->latencies, 99)), "ms",
        std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  }
  if (naive) {
    const double naive_s = Seconds(naive->converge_time);
    add("naive (1 worker): time to all converged", naive_s, "s",
        tuned ? std::optional<double>(Seconds(tuned->converge_time)) : std::nullopt,
        tuned ? std::optional<double>(naive_s / Seconds(tuned->converge_time)) : std::nullopt,
        std::nullopt, naive->converged == objects);
    add("naive: reconciles/s", naive->reconciles / naive_s, "reconciles/s", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
    add("naive: host API requests per object", static_cast<double>(naive->host_requests) / objects,
        "requests", std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("naive: create->status latency p99", Millis(Percentile(naive->latencies, 99)), "ms",
        std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  }
  if (probe) {
    const double s = Seconds(probe->converge_time);
    add(absl::StrCat("default host client (50 QPS): ", probe_objects, " objects converged in"), s,
        "s", std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("default host client: status writes/s", probe->converged / s, "objects/s", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
    add("default host client: host API requests per object",
        static_cast<double>(probe->host_requests) / probe_objects, "requests", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
  }
  if (!kubeconfig.empty()) {
    // The same phases against the real cluster, in the same run.
    Phase real = base;
    real.kubeconfig = kubeconfig;
    real.objects = real_objects;
    real.workers = workers;
    real.host_idle = host_idle > 0 ? host_idle : std::max(8, workers);
    Phase real_floor = real;
    real_floor.name = "real-floor";
    real_floor.namespace_name = "burst-floor";
    real_floor.controller = false;
    std::optional<PhaseResult> rf = run(real_floor);
    Phase real_tuned = real;
    real_tuned.name = "real-tuned";
    real_tuned.namespace_name = "burst-tuned";
    std::optional<PhaseResult> rt = run(real_tuned);
    Phase real_default = real;
    real_default.name = "real-default";
    real_default.namespace_name = "burst-default";
    real_default.host_qps = kube::RestClientOptions().qps;
    real_default.host_burst = kube::RestClientOptions().burst;
    real_default.default_rate_limit = true;
    std::optional<PhaseResult> rd = run(real_default);
    std::optional<double> real_floor_s;
    if (rf) {
      real_floor_s = Seconds(rf->create_time);
      add("real: floor: creates/s, no controller", rf->created / *real_floor_s, "creates/s",
          floor ? std::optional<double>(floor->created / *floor_s) : std::nullopt,
          floor ? std::optional<double>((rf->created / *real_floor_s) / (floor->created / *floor_s))
                : std::nullopt,
          std::nullopt, rf->create_errors == 0);
    }
    auto real_phase = [&](const char* label, const std::optional<PhaseResult>& r) {
      if (!r) return;
      const double s = Seconds(r->converge_time);
      const bool all = r->converged == real_objects && r->create_errors == 0;
      // Per object, against the embedded tuned phase of this run.
      std::optional<double> embedded_per_object;
      if (tuned && tuned->converged > 0) {
        embedded_per_object = Seconds(tuned->converge_time) / tuned->converged;
      }
      const double per_object = r->converged > 0 ? s / r->converged : 0;
      add(absl::StrCat("real: ", label, ": ", real_objects, " objects to status written"), s, "s",
          real_floor_s, real_floor_s ? std::optional<double>(s / *real_floor_s) : std::nullopt,
          std::nullopt, all);
      add(absl::StrCat("real: ", label, ": objects/s"), r->converged / s, "objects/s",
          embedded_per_object ? std::optional<double>(1 / *embedded_per_object) : std::nullopt,
          embedded_per_object && per_object > 0
              ? std::optional<double>(*embedded_per_object / per_object)
              : std::nullopt,
          std::nullopt, std::nullopt);
      add(absl::StrCat("real: ", label, ": host API requests per object"),
          static_cast<double>(r->host_requests) / real_objects, "requests", std::nullopt,
          std::nullopt, std::nullopt, std::nullopt);
      add(absl::StrCat("real: ", label, ": create->status latency p99"),
          Millis(Percentile(r->latencies, 99)), "ms", std::nullopt, std::nullopt, std::nullopt,
          std::nullopt);
    };
    real_phase("tuned (host client unlimited)", rt);
    real_phase("default host client (50 QPS)", rd);
  }
  fs::remove_all(root);
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
