// swap (issue 6, "Benchmark swap"): how much a hot swap of a plugin disturbs a controller under
// load, against a full host restart of the same workload measured in the same run.
//
// The host runs in-process as `ctrlhost run` does (manager::Host: embedded API server over
// HTTPS, manager, bench/swap:swap_plugin exec'd and supervised over its Unix socket). The
// plugin answers every reconcile of a `Tick` with Requeue(--requeue-ms +-50%, random, so that the
// objects' phases spread into a steady stream) and no write, so
// --objects Ticks are reconciled continuously (the load) with no API traffic, and it appends one
// record per completed reconcile (CLOCK_MONOTONIC, object, pid) to one O_APPEND file shared by
// every plugin process (bench/swap/record.h). All figures come from that log:
//
//   swap      --swaps times Manager::SwapPlugin v1 -> v2 -> v1 ... (v2: the same binary with
//             another environment), --settle apart. Per swap: SwapResult.cut_over (request ->
//             new instance serving), the request -> first reconcile by the new process, and the
//             longest gap between consecutive completed reconciles in the window [request, the
//             call's return (after the old instance drained) + --tail]; where that gap lay
//             (before, across or after the cut-over); the gap containing the cut-over instant;
//             the new process's own timeline (markers it logs on entering main() and Run()).
//   control   the same-run reference for the gap: a window of the same length half a settle
//             period after each swap, with no swap (the machine's own stalls).
//   restart   the baseline, --restarts times: Host::Stop, then Host::Start on the same data dir
//             (embedded API server reopened, relist, resume). The longest gap from the stop
//             until the rate is back, and the time from the stop to 90% of the steady rate.
//             In-process, so it omits the exec of a new host binary: a real restart is longer.
//   lost      after every swap and restart, every object must be reconciled again before the
//             next one (counted per object from the log).
//
// Flags: --objects=1000 --workers=32 --requeue-ms=200 --swaps=10 --settle=1s --tail=200ms
// --restarts=3 --warmup=2s --kubeconfig=PATH --json
//
// With --kubeconfig (tools/bench passes a fresh real Kubernetes 1.20 cluster from e2e/kube) the
// whole measurement runs a second time against that cluster, in the same run, and its figures are
// printed with the prefix "real: " beside the embedded server's. The load itself makes no API
// calls (the plugin only requeues), so the two differ in the restart baseline: a relist from
// kube-apiserver instead of the embedded server, and no embedded server to reopen.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/report.h"
#include "bench/swap/record.h"
#include "runtime/common/status_macros.h"
#include "runtime/config/load.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/client.h"
#include "runtime/manager/host.h"

namespace ctrlhost::bench::swap {
namespace {

namespace fs = std::filesystem;

const kube::ResourceRef kCrds{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "", "", ""};
const kube::ResourceRef kTicks{"swap.bench.ctrlhost.dev", "v1", "ticks", "default", "", ""};

constexpr char kCrd[] = R"({"apiVersion":"apiextensions.k8s.io/v1",
"kind":"CustomResourceDefinition","metadata":{"name":"ticks.swap.bench.ctrlhost.dev"},
"spec":{"group":"swap.bench.ctrlhost.dev","scope":"Namespaced",
"names":{"plural":"ticks","singular":"tick","kind":"Tick","listKind":"TickList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})";

constexpr char kOperator[] = "bench";
constexpr char kPlugin[] = "swap";

struct Flags {
  int objects = 1000;
  int workers = 32;
  int requeue_ms = 200;
  int swaps = 10;
  int restarts = 3;
  absl::Duration settle = absl::Seconds(1);
  absl::Duration tail = absl::Milliseconds(200);
  absl::Duration warmup = absl::Seconds(2);
  std::string kubeconfig;  // also measure against this (real) cluster: --kubeconfig=PATH
};

std::string OperatorYaml(const Flags& flags, const std::string& plugin, const std::string& log) {
  return absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata: {name: )",
                      kOperator, R"(}
spec:
  plugins:
  - name: )",
                      kPlugin, R"(
    exec:
      command: ")",
                      plugin, R"("
      env: {SWAP_BENCH_RECORD: ")",
                      log, R"(", SWAP_BENCH_VERSION: v1, SWAP_BENCH_REQUEUE_MS: ")",
                      flags.requeue_ms, R"(", SWAP_BENCH_WORKERS: ")", flags.workers, R"("}
    maxInFlight: 1024
  controllers:
  - name: tick
    maxConcurrentReconciles: )",
                      flags.workers, R"(
    rateLimit: {qps: 1000000, burst: 1000000}
)");
}

// The plugin spec of the running operator with SWAP_BENCH_VERSION=`version`.
config::PluginSpec Version(const config::PluginSpec& base, const std::string& version) {
  config::PluginSpec spec = base;
  config::ExecSpec exec = *base.exec();
  for (auto& [name, value] : exec.env) {
    if (name == "SWAP_BENCH_VERSION") value = version;
  }
  spec.source = exec;
  return spec;
}

struct SwapRun {
  int64_t request_ns = 0;   // SwapPlugin called
  int64_t returned_ns = 0;  // SwapPlugin returned (the old instance drained)
  absl::Duration cut_over;  // SwapResult.cut_over
  bool ok = false;
  std::string error;
};

struct RestartRun {
  int64_t stop_ns = 0;     // Host::Stop called
  int64_t stopped_ns = 0;  // Host::Stop returned
  int64_t started_ns = 0;  // Host::Start returned
  int64_t ready_ns = 0;    // Manager::WaitReady returned
  bool ok = false;
};

absl::Status CreateObjects(kube::Client& client, int n) {
  std::atomic<int> next{0}, errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < 4; ++c) {
    threads.emplace_back([&] {
      for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
        const std::string body = absl::StrCat(
            R"({"apiVersion":"swap.bench.ctrlhost.dev/v1","kind":"Tick","metadata":{"name":"t-)", i,
            R"(","namespace":"default"},"spec":{"n":)", i, "}}");
        if (!client.Create(kTicks, body).ok()) errors.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (errors.load() > 0) {
    return absl::InternalError(absl::StrCat(errors.load(), " creates failed"));
  }
  return absl::OkStatus();
}

void SleepUntilMono(int64_t mono_ns) {
  const int64_t now = MonoNanos();
  if (mono_ns > now) absl::SleepFor(absl::Nanoseconds(mono_ns - now));
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::vector<absl::Duration> d;
  for (double x : v) d.push_back(absl::Milliseconds(x));
  return absl::ToDoubleMilliseconds(Percentile(d, 50));
}

void RunOnce(Reporter& reporter, const Flags& flags, const std::string& kubeconfig,
             const std::string& prefix);

int Main(int argc, char** argv) {
  Reporter reporter("swap", argc, argv);
  Flags flags;
  for (const std::string& arg : reporter.args()) {
    std::pair<std::string, std::string> kv = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    bool ok = true;
    if (kv.first == "--objects") {
      ok = absl::SimpleAtoi(kv.second, &flags.objects) && flags.objects > 0;
    } else if (kv.first == "--workers") {
      ok = absl::SimpleAtoi(kv.second, &flags.workers) && flags.workers > 0 && flags.workers <= 64;
    } else if (kv.first == "--requeue-ms") {
      ok = absl::SimpleAtoi(kv.second, &flags.requeue_ms) && flags.requeue_ms >= 0;
    } else if (kv.first == "--swaps") {
      ok = absl::SimpleAtoi(kv.second, &flags.swaps) && flags.swaps > 0;
    } else if (kv.first == "--restarts") {
      ok = absl::SimpleAtoi(kv.second, &flags.restarts) && flags.restarts > 0;
    } else if (kv.first == "--settle") {
      ok = absl::ParseDuration(kv.second, &flags.settle) && flags.settle > absl::ZeroDuration();
    } else if (kv.first == "--tail") {
      ok = absl::ParseDuration(kv.second, &flags.tail) && flags.tail >= absl::ZeroDuration();
    } else if (kv.first == "--warmup") {
      ok = absl::ParseDuration(kv.second, &flags.warmup) && flags.warmup > absl::ZeroDuration();
    } else if (kv.first == "--kubeconfig") {
      flags.kubeconfig = kv.second;
      ok = !flags.kubeconfig.empty();
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "swap: bad flag " << arg << "\n";
      return 2;
    }
  }
  RunOnce(reporter, flags, "", "");
  if (!flags.kubeconfig.empty()) RunOnce(reporter, flags, flags.kubeconfig, "real: ");
  return reporter.Finish();
}

// One whole measurement against the embedded API server (`kubeconfig` empty) or the cluster of
// `kubeconfig`; figures are added to `reporter` with `prefix` before their names.
void RunOnce(Reporter& reporter, const Flags& flags, const std::string& kubeconfig,
             const std::string& prefix) {
  std::cerr << "swap: measuring against "
            << (kubeconfig.empty() ? "the embedded API server" : "the cluster of " + kubeconfig)
            << "\n";

  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string plugin = (self.parent_path() / "swap_plugin").string();
  if (ec || !fs::exists(plugin)) {
    std::cerr << "swap: plugin not found next to the binary: " << plugin << "\n";
    Figure f;
    f.metric = absl::StrCat(prefix, "plugin found");
    f.value = 0;
    f.unit = "bool";
    f.met = false;
    reporter.Add(f);
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  const fs::path root = fs::path(tmp != nullptr ? tmp : "/tmp") /
                        absl::StrCat("swap-", getpid(), prefix.empty() ? "" : "-real");
  fs::remove_all(root);
  // The plugin writes its record log in a directory of its own, made before the host starts:
  // `root` holds the host's data dir, which the plugin sandbox hides, so `root` itself lies on
  // the way to a hidden path and takes no new entries from a plugin (runtime/plugin/sandbox.h).
  fs::create_directories(root / "out");
  const std::string log = (root / "out" / "reconciles.log").string();

  auto fail = [&](const std::string& what, const absl::Status& status) {
    std::cerr << "swap: " << prefix << what << ": " << status << "\n";
    Figure f;
    f.metric = absl::StrCat(prefix, what, " ran");
    f.value = 0;
    f.unit = "bool";
    f.met = false;
    reporter.Add(f);
    fs::remove_all(root);
  };

  absl::StatusOr<std::vector<config::OperatorSpec>> operators =
      config::ParseOperators(OperatorYaml(flags, plugin, log), "operator.yaml");
  if (!operators.ok()) return fail("operator spec", operators.status());

  const config::PluginSpec base = operators->front().plugins.front();
  manager::HostOptions options;
  options.operators = *operators;
  options.data_dir = (root / "data").string();
  options.apiserver.port = 0;
  options.metrics_port = 0;
  if (!kubeconfig.empty()) options.kubeconfigs = {kubeconfig};

  absl::StatusOr<std::unique_ptr<manager::Host>> started = manager::Host::Start(options);
  if (!started.ok()) return fail("host start", started.status());
  std::unique_ptr<manager::Host> host = std::move(*started);
  if (absl::Status s = host->client().Create(kCrds, kCrd).status();
      !s.ok() && !kube::IsAlreadyExists(s)) {
    return fail("CRD create", s);
  }

  if (absl::Status s = host->manager().WaitReady(absl::Seconds(60)); !s.ok()) {
    return fail("manager ready", s);
  }
  // The CRD's resource is served a moment after its create: retry the first object briefly.
  const absl::Time served_deadline = absl::Now() + absl::Seconds(30);
  while (!host->client().List(kTicks).ok()) {
    if (absl::Now() > served_deadline) return fail("CRD served", absl::DeadlineExceededError(""));
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::cerr << "swap: creating " << flags.objects << " objects\n";
  if (absl::Status s = CreateObjects(host->client(), flags.objects); !s.ok()) {
    return fail("object creates", s);
  }

  // Warm-up, then a steady window of the same length (the rate, and the longest gap with no
  // swap: the noise floor of the gap figure).
  absl::SleepFor(flags.warmup);
  const int64_t steady_begin = MonoNanos();
  absl::SleepFor(flags.warmup);
  const int64_t steady_end = MonoNanos();

  std::cerr << "swap: " << flags.swaps << " swaps\n";
  std::vector<SwapRun> swaps;
  manager::Manager::SwapOptions swap_options;
  for (int i = 0; i < flags.swaps; ++i) {
    SwapRun run;
    run.request_ns = MonoNanos();
    manager::SwapResult r = host->manager().SwapPlugin(
        kOperator, kPlugin, Version(base, i % 2 == 0 ? "v2" : "v1"), swap_options);
    run.returned_ns = MonoNanos();
    run.ok = r.status.ok();
    run.error = r.status.ToString();
    run.cut_over = r.cut_over;
    if (!run.ok) std::cerr << "swap: swap " << i << " failed: " << r.status << "\n";
    swaps.push_back(run);
    SleepUntilMono(run.returned_ns + absl::ToInt64Nanoseconds(flags.settle));
  }
  observe::Figures host_figures;
  host->manager().Collect(host_figures);
  uint64_t relists = 0, reconcile_errors = 0;
  for (const observe::WatchFigures& w : host_figures.watches) relists += w.relists_total;
  for (const observe::ControllerFigures& c : host_figures.controllers) {
    reconcile_errors += c.reconcile_errors_total;
  }

  std::cerr << "swap: " << flags.restarts << " host restarts\n";
  std::vector<RestartRun> restarts;
  for (int i = 0; i < flags.restarts; ++i) {
    RestartRun run;
    run.stop_ns = MonoNanos();
    host->Stop();
    host.reset();
    run.stopped_ns = MonoNanos();
    absl::StatusOr<std::unique_ptr<manager::Host>> again = manager::Host::Start(options);
    if (!again.ok()) return fail("host restart", again.status());
    host = std::move(*again);
    run.started_ns = MonoNanos();
    run.ok = host->manager().WaitReady(absl::Seconds(60)).ok();
    run.ready_ns = MonoNanos();
    restarts.push_back(run);
    SleepUntilMono(run.ready_ns + absl::ToInt64Nanoseconds(flags.settle * 2));
  }
  const int64_t end_ns = MonoNanos();
  host->Stop();
  host.reset();

  absl::StatusOr<std::vector<Record>> loaded = ReadRecords(log);
  if (!loaded.ok()) return fail("record log", loaded.status());
  std::vector<Record> records = std::move(*loaded);
  SortByTime(records);
  const std::vector<Record> markers = SplitMarkers(records);
  fs::remove_all(root);

  const uint32_t n = static_cast<uint32_t>(flags.objects);
  const double steady_s = static_cast<double>(steady_end - steady_begin) / 1e9;
  const double rate = static_cast<double>(CountIn(records, steady_begin, steady_end)) / steady_s;
  const Gap steady_gap = LongestGap(records, steady_begin, steady_end);

  std::vector<double> swap_gaps, cut_overs, first_new, at_cut_over, control_gaps, to_main, to_run,
      cut_to_first;
  int before_cut_over = 0, across_cut_over = 0, after_cut_over = 0;
  int64_t swap_lost = 0;
  bool swaps_ok = true;
  for (size_t i = 0; i < swaps.size(); ++i) {
    const SwapRun& s = swaps[i];
    swaps_ok = swaps_ok && s.ok;
    const int64_t window_end = s.returned_ns + absl::ToInt64Nanoseconds(flags.tail);
    const Gap gap = LongestGap(records, s.request_ns, window_end);
    swap_gaps.push_back(Ms(gap.length_ns));
    cut_overs.push_back(absl::ToDoubleMilliseconds(s.cut_over));
    const uint32_t old_pid = PidBefore(records, s.request_ns);
    const int64_t first = FirstFromOtherPid(records, s.request_ns, old_pid);
    // The new process's own timeline: exec'd and loaded (main), about to serve (Run).
    uint32_t new_pid = 0;
    for (size_t k = 0; first >= 0 && k < records.size(); ++k) {
      if (records[k].mono_ns >= first && records[k].pid != old_pid) {
        new_pid = records[k].pid;
        break;
      }
    }
    const int64_t main_at = MarkerOf(markers, new_pid, kMarkerMain);
    const int64_t run_at = MarkerOf(markers, new_pid, kMarkerRun);
    if (main_at > 0 && run_at > 0) {
      to_main.push_back(Ms(main_at - s.request_ns));
      to_run.push_back(Ms(run_at - s.request_ns));
    }
    first_new.push_back(first < 0 ? -1 : Ms(first - s.request_ns));
    // Where the longest gap lies relative to the cut-over: before it the old instance still
    // serves alone (the new process is starting on the same cores), after it the new one does.
    const int64_t cut = s.request_ns + absl::ToInt64Nanoseconds(s.cut_over);
    if (first >= 0) cut_to_first.push_back(Ms(first - cut));
    const char* where = "across the cut-over";
    if (gap.to_ns <= cut) {
      where = "before the cut-over";
      ++before_cut_over;
    } else if (gap.from_ns >= cut) {
      where = "after the cut-over";
      ++after_cut_over;
    } else {
      ++across_cut_over;
    }
    // The interval between reconciles that contains the cut-over instant: the switch's own cost.
    at_cut_over.push_back(Ms(LongestGap(records, cut, cut).length_ns));
    const int64_t next = i + 1 < swaps.size() ? swaps[i + 1].request_ns : restarts[0].stop_ns;
    // The control: a window of the same length with no swap, half a settle period later (the
    // machine's own stalls; the same-run reference for the gap figures).
    const int64_t length = window_end - s.request_ns;
    const int64_t control_begin = s.returned_ns + absl::ToInt64Nanoseconds(flags.settle / 2);
    if (control_begin + length < next) {
      control_gaps.push_back(
          Ms(LongestGap(records, control_begin, control_begin + length).length_ns));
    }
    swap_lost = std::max(swap_lost, MissingIn(records, n, s.returned_ns, next));
    std::cerr << "swap: swap " << i << ": cut-over " << cut_overs.back() << " ms, returned after "
              << Ms(s.returned_ns - s.request_ns) << " ms, first reconcile by the new process "
              << first_new.back() << " ms, longest gap " << swap_gaps.back() << " ms ("
              << Ms(gap.from_ns - s.request_ns) << " .. " << Ms(gap.to_ns - s.request_ns)
              << " ms after the request, " << where << "), gap at the cut-over "
              << at_cut_over.back() << " ms; new process: main() at "
              << (main_at > 0 ? Ms(main_at - s.request_ns) : -1) << " ms, Run() at "
              << (run_at > 0 ? Ms(run_at - s.request_ns) : -1) << " ms\n";
  }

  std::vector<double> restart_gaps, restart_full;
  int64_t restart_lost = 0;
  bool restarts_ok = true;
  for (size_t i = 0; i < restarts.size(); ++i) {
    const RestartRun& r = restarts[i];
    restarts_ok = restarts_ok && r.ok;
    const int64_t next = i + 1 < restarts.size() ? restarts[i + 1].stop_ns : end_ns;
    const int64_t full = FullRateAt(records, r.stop_ns, rate, 0.9, 100000000);
    const Gap gap = LongestGap(records, r.stop_ns, full > 0 ? full : next);
    restart_gaps.push_back(Ms(gap.length_ns));
    restart_full.push_back(full > 0 ? Ms(full - r.stop_ns) : -1);
    restart_lost = std::max(restart_lost, MissingIn(records, n, r.ready_ns, next));
    std::cerr << "swap: restart " << i << ": stop " << Ms(r.stopped_ns - r.stop_ns) << " ms, start "
              << Ms(r.started_ns - r.stopped_ns) << " ms, ready " << Ms(r.ready_ns - r.started_ns)
              << " ms, longest gap " << restart_gaps.back() << " ms ("
              << Ms(gap.from_ns - r.stop_ns) << " .. " << Ms(gap.to_ns - r.stop_ns)
              << " ms after the stop), full rate after " << restart_full.back() << " ms\n";
  }

  auto add = [&](std::string metric, double value, std::string unit, std::optional<double> baseline,
                 std::optional<double> ratio, std::optional<std::string> target,
                 std::optional<bool> met) {
    Figure f;
    f.metric = prefix + std::move(metric);
    f.value = value;
    f.unit = std::move(unit);
    f.baseline = baseline;
    f.ratio = ratio;
    f.target = std::move(target);
    f.met = met;
    reporter.Add(f);
  };
  const double max_gap = *std::max_element(swap_gaps.begin(), swap_gaps.end());
  const double p50_gap = Median(swap_gaps);
  const double restart_gap = Median(restart_gaps);
  add(absl::StrCat("load: reconciles/s (", flags.objects, " objects, requeue ", flags.requeue_ms,
                   " ms)"),
      rate, "reconciles/s", std::nullopt, std::nullopt, ">= 5000/s (reference machine)",
      std::nullopt);
  add("steady: longest gap, no swap", Ms(steady_gap.length_ns), "ms", std::nullopt, std::nullopt,
      std::nullopt, std::nullopt);
  add(absl::StrCat("swaps succeeded (of ", swaps.size(), ")"),
      static_cast<double>(
          std::count_if(swaps.begin(), swaps.end(), [](const SwapRun& s) { return s.ok; })),
      "swaps", std::nullopt, std::nullopt, std::nullopt, swaps_ok);
  add("swap: request -> new instance serving (cut_over) p50", Median(cut_overs), "ms", std::nullopt,
      std::nullopt, std::nullopt, std::nullopt);
  add("swap: request -> new instance serving (cut_over) max",
      *std::max_element(cut_overs.begin(), cut_overs.end()), "ms", std::nullopt, std::nullopt,
      std::nullopt, std::nullopt);
  add("swap: request -> first reconcile by the new process p50", Median(first_new), "ms",
      std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  add("swap: longest gap between reconciles p50", p50_gap, "ms", std::nullopt, std::nullopt,
      std::nullopt, std::nullopt);
  add("swap: longest gap between reconciles max", max_gap, "ms", std::nullopt, std::nullopt,
      "<= 50 ms", max_gap <= 50);
  if (!control_gaps.empty()) {
    const double control_max = *std::max_element(control_gaps.begin(), control_gaps.end());
    add("no swap (control windows, same length): longest gap p50", Median(control_gaps), "ms",
        std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    add("no swap (control windows): longest gap max; ratio swap max / this", control_max, "ms",
        std::nullopt, max_gap / std::max(control_max, 1e-3), std::nullopt, std::nullopt);
  }
  if (!to_main.empty()) {
    add("swap: request -> new process in main() p50", Median(to_main), "ms", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
    add("swap: request -> new process calls Run() (serves) p50", Median(to_run), "ms", std::nullopt,
        std::nullopt, std::nullopt, std::nullopt);
  }
  add("swap: cut-over -> first reconcile by the new process p50", Median(cut_to_first), "ms",
      std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  add("swap: gap between reconciles at the cut-over instant p50", Median(at_cut_over), "ms",
      std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  add("swap: gap between reconciles at the cut-over instant max",
      *std::max_element(at_cut_over.begin(), at_cut_over.end()), "ms", std::nullopt, std::nullopt,
      std::nullopt, std::nullopt);
  // Where each swap's longest gap lay (counts of swaps): before the cut-over only the old
  // instance serves, so such a gap is the machine (the new process starting), not the switch.
  add("swap: longest gap lay before the cut-over", before_cut_over, "swaps", std::nullopt,
      std::nullopt, std::nullopt, std::nullopt);
  add("swap: longest gap spanned the cut-over", across_cut_over, "swaps", std::nullopt,
      std::nullopt, std::nullopt, std::nullopt);
  add("swap: longest gap lay after the cut-over", after_cut_over, "swaps", std::nullopt,
      std::nullopt, std::nullopt, std::nullopt);
  add("swap: objects not reconciled after a swap (max)", static_cast<double>(swap_lost), "keys",
      std::nullopt, std::nullopt, "== 0", swap_lost == 0);
  add("restart: longest gap p50", restart_gap, "ms", std::nullopt, std::nullopt, std::nullopt,
      restarts_ok);
  add("restart: longest gap min", *std::min_element(restart_gaps.begin(), restart_gaps.end()), "ms",
      std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  add("restart: stop -> full rate again (max)",
      *std::max_element(restart_full.begin(), restart_full.end()), "ms", std::nullopt, std::nullopt,
      std::nullopt, std::nullopt);
  add("restart: objects not reconciled after a restart (max)", static_cast<double>(restart_lost),
      "keys", std::nullopt, std::nullopt, "== 0", restart_lost == 0);
  add("restart gap p50 / swap gap max (disruption ratio)", restart_gap / std::max(max_gap, 1e-3),
      "x", max_gap, restart_gap / std::max(max_gap, 1e-3), ">= 20x",
      restart_gap / std::max(max_gap, 1e-3) >= 20);
  add("restart gap p50 / swap gap p50", restart_gap / std::max(p50_gap, 1e-3), "x", p50_gap,
      restart_gap / std::max(p50_gap, 1e-3), std::nullopt, std::nullopt);
  add("during swaps: watch relists", static_cast<double>(relists), "relists", std::nullopt,
      std::nullopt, "== 0", relists == 0);
  add("during swaps: failed reconciles (host side, retried)", static_cast<double>(reconcile_errors),
      "reconciles", std::nullopt, std::nullopt, std::nullopt, std::nullopt);
}

}  // namespace
}  // namespace ctrlhost::bench::swap

int main(int argc, char** argv) { return ctrlhost::bench::swap::Main(argc, argv); }
