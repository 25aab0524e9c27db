// scheduling (issue 28, "Benchmarks"): the host's scheduler against today's FIFO in the same run.
//
//   restart     A host restarted over --objects (50,000) existing Bursts in the embedded API
//               server (one operator, bench/e2e_burst's plugin doing --work-ms of work per
//               reconcile on --workers workers) while a user creates one new Burst per second:
//               each new object's time from its create to its status. Run twice on the same
//               data: with priorities (the default) and with `scheduling: {priorities: false}`
//               (FIFO). Target: p99 <= 1 s with priorities.
//   budget      Two operators on one 50 QPS budget (the host's FairLimiter, real clock): A with
//               a backlog larger than the run (--a-workers requests always waiting), B with 10
//               changes per second, each a reconcile of --b-work-ms plus 1 API request (the
//               applier's status write). B's time to reconcile, p99, alone, with A on
//               fair shares, and with A first come first served (one tenant: today's bucket).
//               Targets: B's p99 <= 2x alone; A gets at least its weighted share.
//   starvation  The starvation case of controller-runtime#3496: high-priority churn above the
//               workers' capacity for --churn-seconds (60); after 2 s, --low-keys low-priority
//               keys are queued (a resync). The oldest low key's wait with aging (max_wait
//               --max-wait, 10 s here so that a 60 s run shows it), with strict priority (no
//               aging) and with FIFO, measured side by side on one WorkQueue each. Target: with
//               aging, the oldest low key runs within max_wait + 1 s.
//
// Flags: --cases=restart,budget,starvation --objects=50000 --workers=8 --work-ms=2
// --seconds=20 (budget) --a-workers=8 --b-work-ms=10 --churn-seconds=60 --low-keys=1000
// --max-wait=10s --json
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/e2e_burst/burst_kind.h"
#include "bench/report.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/common/status_macros.h"
#include "runtime/config/load.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/api_tenant.h"
#include "runtime/kube/client.h"
#include "runtime/kube/fair_limiter.h"
#include "runtime/kube/kubeconfig.h"
#include "runtime/kube/rest_client.h"
#include "runtime/manager/host.h"
#include "runtime/observe/metrics.h"
#include "runtime/queue/work_queue.h"
#include "simdjson.h"

namespace ctrlhost::bench {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::vector<std::string> cases = {"restart", "budget", "starvation"};
  int objects = 50000;
  int workers = 8;
  int work_ms = 2;
  int seconds = 20;
  int a_workers = 8;
  int b_work_ms = 10;
  int churn_seconds = 60;
  int low_keys = 1000;
  absl::Duration max_wait = absl::Seconds(10);
};

double Millis(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

void SleepUntil(absl::Time t) {
  const absl::Duration d = t - absl::Now();
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

// --- restart --------------------------------------------------------------------------------

std::string OperatorYaml(const std::string& plugin, int work_ms, int workers, bool priorities) {
  return absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata: {name: bench}
spec:
  plugins:
  - name: burst
    exec: {command: ")",
                      plugin, R"(", args: ["--work-ms=)", work_ms, R"("]}
    maxInFlight: 1024
  controllers:
  - name: burst
    maxConcurrentReconciles: )",
                      workers, R"(
    rateLimit: {qps: 1000000, burst: 1000000}
    scheduling: {priorities: )",
                      priorities ? "true" : "false", "}\n");
}

absl::StatusOr<std::unique_ptr<manager::Host>> StartHost(const std::string& yaml,
                                                         const fs::path& dir) {
  ASSIGN_OR_RETURN(std::vector<config::OperatorSpec> operators,
                   config::ParseOperators(yaml, "operator.yaml"));
  manager::HostOptions options;
  options.operators = operators;
  options.data_dir = (dir / "data").string();
  options.apiserver.port = 0;
  options.metrics_port = 0;
  options.rest.qps = 0;
  return manager::Host::Start(options);
}

// Sums the host's controller figures: reconciles done, keys queued.
void Progress(manager::Host& host, uint64_t* reconciles, double* queued) {
  observe::Figures figures;
  host.manager().Collect(figures);
  *reconciles = 0;
  *queued = 0;
  for (const observe::ControllerFigures& c : figures.controllers) {
    for (const auto& [result, count] : c.reconcile_total) *reconciles += count;
  }
  for (const observe::QueueFigures& q : figures.queues) *queued += q.depth[0] + q.depth[1];
}

// Waits (bounded) until the host has done at least `reconciles` reconciles and its queues are
// empty; returns how long that took.
absl::StatusOr<absl::Duration> WaitDrained(manager::Host& host, uint64_t reconciles,
                                           absl::Duration limit) {
  Stopwatch watch;
  while (true) {
    uint64_t done = 0;
    double queued = 0;
    Progress(host, &done, &queued);
    if (done >= reconciles && queued == 0) return watch.Elapsed();
    if (watch.Elapsed() > limit) {
      return absl::DeadlineExceededError(
          absl::StrCat(done, " of ", reconciles, " reconciles after ", absl::FormatDuration(limit),
                       ", ", queued, " keys queued"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<std::unique_ptr<kube::RestClient>> ClientFor(manager::Host& host, int clients) {
  ASSIGN_OR_RETURN(kube::RestConfig config, kube::LoadKubeconfigFile(host.kubeconfig_path()));
  kube::RestClientOptions options;
  options.qps = 0;
  options.max_idle_connections = clients + 1;
  return kube::RestClient::Create(config, options);
}

std::string BurstJson(absl::string_view name) {
  return absl::StrCat(
      R"({"apiVersion":"burst.bench.ctrlhost.dev/v1","kind":"Burst","metadata":{"name":")", name,
      R"(","namespace":"default"},"spec":{"size":1}})");
}

// The existing objects: created with the controller running (no work per reconcile), until
// every one has its status, then the host stops.
absl::Status Fill(const Flags& flags, const std::string& plugin, const fs::path& dir) {
  ASSIGN_OR_RETURN(std::unique_ptr<manager::Host> host,
                   StartHost(OperatorYaml(plugin, 0, flags.workers, true), dir));
  if (absl::Status s = host->client().Create(kCrds, kBurstCrd).status();
      !s.ok() && !kube::IsAlreadyExists(s)) {
    return s;
  }
  RETURN_IF_ERROR(host->manager().WaitReady(absl::Seconds(60)));
  constexpr int kClients = 8;
  ASSIGN_OR_RETURN(std::unique_ptr<kube::RestClient> rest, ClientFor(*host, kClients));
  kube::Client client(rest.get());
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> creators;
  for (int c = 0; c < kClients; ++c) {
    creators.emplace_back([&] {
      for (int i = next.fetch_add(1); i < flags.objects; i = next.fetch_add(1)) {
        absl::StatusOr<std::string> r = client.Create(kBursts, BurstJson(absl::StrCat("b-", i)));
        // The CRD may take a moment to be served: retry a few times.
        for (int attempt = 0; !r.ok() && attempt < 50; ++attempt) {
          if (kube::IsAlreadyExists(r.status())) break;
          absl::SleepFor(absl::Milliseconds(100));
          r = client.Create(kBursts, BurstJson(absl::StrCat("b-", i)));
        }
        if (!r.ok() && !kube::IsAlreadyExists(r.status())) failed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : creators) t.join();
  if (failed.load() > 0) return absl::InternalError(absl::StrCat(failed.load(), " creates failed"));
  RETURN_IF_ERROR(WaitDrained(*host, flags.objects, absl::Minutes(10)).status());
  rest.reset();
  host->Stop();
  return absl::OkStatus();
}

struct RestartResult {
  std::vector<absl::Duration> latencies;  // new objects: create sent -> status seen
  absl::Duration backlog;                 // host ready -> every existing object reconciled
  int created = 0;
};

// Parses a watch event's object; true with `name` when its status phase is Done.
bool Done(simdjson::ondemand::parser& parser, const std::string& object, std::string* name) {
  simdjson::padded_string padded(object);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return false;
  std::string_view view;
  if (doc["metadata"]["name"].get_string().get(view) != simdjson::SUCCESS) return false;
  *name = std::string(view);
  std::string_view phase;
  if (doc["status"]["phase"].get_string().get(phase) != simdjson::SUCCESS) return false;
  return phase == "Done";
}

// Restarts the host over the filled data with or without priorities; a user creates one new
// object per second until the backlog is done.
absl::StatusOr<RestartResult> Restart(const Flags& flags, const std::string& plugin,
                                      const fs::path& dir, bool priorities) {
  const std::string prefix = priorities ? "new-priority-" : "new-fifo-";
  ASSIGN_OR_RETURN(std::unique_ptr<manager::Host> host,
                   StartHost(OperatorYaml(plugin, flags.work_ms, flags.workers, priorities), dir));
  RETURN_IF_ERROR(host->manager().WaitReady(absl::Seconds(120)));
  Stopwatch since_ready;
  ASSIGN_OR_RETURN(std::unique_ptr<kube::RestClient> rest, ClientFor(*host, 2));
  kube::Client client(rest.get());
  ASSIGN_OR_RETURN(kube::ObjectList list, client.ListPage(kBursts, {.limit = 1}));

  common::Mutex mu;
  std::vector<std::pair<std::string, absl::Time>> sent;  // guarded by mu
  absl::flat_hash_map<std::string, absl::Time> done;     // guarded by mu: the first time
  kube::StreamCanceller canceller;
  std::thread watcher([&] {
    simdjson::ondemand::parser parser;
    kube::WatchOptions options;
    options.resource_version = list.resource_version;
    options.idle_timeout = absl::Minutes(5);
    client
        .Watch(
            kBursts, options,
            [&](kube::WatchEvent event) {
              std::string name;
              if (event.type == "MODIFIED" && Done(parser, event.object, &name) &&
                  absl::StartsWith(name, prefix)) {
                common::MutexLock lock(&mu);
                done.emplace(name, absl::Now());
              }
              return true;
            },
            &canceller)
        .IgnoreError();
  });

  RestartResult result;
  std::atomic<bool> drained{false};
  absl::StatusOr<absl::Duration> backlog = absl::UnknownError("not measured");
  std::thread drain([&] {
    backlog = WaitDrained(*host, flags.objects, absl::Minutes(10));
    drained = true;
  });
  // One new object per second while the backlog lasts (and at least 5).
  for (int i = 0; !drained.load() || i < 5; ++i) {
    const std::string name = absl::StrCat(prefix, i);
    const absl::Time at = absl::Now();
    if (client.Create(kBursts, BurstJson(name)).ok()) {
      common::MutexLock lock(&mu);
      sent.emplace_back(name, at);
      ++result.created;
    }
    SleepUntil(at + absl::Seconds(1));
  }
  drain.join();
  // The last ones get a bounded while to finish.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  auto all_done = [&] {
    common::MutexLock lock(&mu);
    return done.size() >= sent.size();
  };
  while (!all_done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  canceller.Cancel();
  watcher.join();
  RETURN_IF_ERROR(backlog.status());
  result.backlog = *backlog;
  {
    common::MutexLock lock(&mu);
    for (const auto& [name, at] : sent) {
      auto it = done.find(name);
      // Not reconciled within the run: counted as the whole run (it would be worse).
      result.latencies.push_back(it != done.end() ? it->second - at : since_ready.Elapsed());
    }
  }
  rest.reset();
  host->Stop();
  return result;
}

void RunRestartCase(const Flags& flags, const std::string& plugin, const fs::path& root,
                    Reporter& reporter) {
  std::cerr << "scheduling: restart: filling " << flags.objects << " objects\n";
  const fs::path dir = root / "restart";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto failed = [&](const std::string& what, const absl::Status& s) {
    std::cerr << "scheduling: restart: " << what << " failed: " << s << "\n";
    reporter.Add(
        Figure{.metric = "restart: " + what + " ran", .value = 0, .unit = "bool", .met = false});
  };
  if (absl::Status s = Fill(flags, plugin, dir); !s.ok()) return failed("fill", s);
  std::cerr << "scheduling: restart: FIFO\n";
  absl::StatusOr<RestartResult> fifo = Restart(flags, plugin, dir, false);
  if (!fifo.ok()) return failed("FIFO restart", fifo.status());
  std::cerr << "scheduling: restart: priorities\n";
  absl::StatusOr<RestartResult> prio = Restart(flags, plugin, dir, true);
  if (!prio.ok()) return failed("priority restart", prio.status());
  fs::remove_all(dir);

  const double p99 = Millis(Percentile(prio->latencies, 99));
  const double fifo_p99 = Millis(Percentile(fifo->latencies, 99));
  reporter.Add(Figure{.metric = absl::StrCat("restart: new object to status p99 (", flags.objects,
                                             " existing, ", prio->created, " new)"),
                      .value = p99,
                      .unit = "ms",
                      .baseline = fifo_p99,
                      .target = "<= 1000 ms",
                      .met = p99 <= 1000});
  reporter.Add(Figure{.metric = "restart: new object to status p50",
                      .value = Millis(Percentile(prio->latencies, 50)),
                      .unit = "ms",
                      .baseline = Millis(Percentile(fifo->latencies, 50))});
  reporter.Add(Figure{.metric = "restart: backlog of existing objects done after",
                      .value = absl::ToDoubleSeconds(prio->backlog),
                      .unit = "s",
                      .baseline = absl::ToDoubleSeconds(fifo->backlog)});
}

// --- budget ---------------------------------------------------------------------------------

struct BudgetResult {
  std::vector<absl::Duration> b_latencies;  // change -> its reconcile's last request granted
  double a_rate = 0;                        // A's granted requests per second
  double b_rate = 0;
};

// One variant on a limiter of its own: `with_a` adds operator A's backlog; `fair` charges A and
// B as the host does (operators "a" and "b"), otherwise both as one tenant (first come first
// served, as a plain token bucket).
BudgetResult RunBudget(const Flags& flags, bool with_a, bool fair) {
  constexpr double kQps = 50;
  constexpr int kBurst = 100;
  constexpr int kRequestsPerReconcile = 1;  // the applier's status write
  kube::FairLimiter limiter(kQps, kBurst, common::Clock::Real());
  const kube::ApiTenant a = fair ? kube::ApiTenant{"a", "a"} : kube::ApiTenant{"host", "-"};
  const kube::ApiTenant b = fair ? kube::ApiTenant{"b", "b"} : kube::ApiTenant{"host", "-"};
  const absl::Time end = absl::Now() + absl::Seconds(flags.seconds);
  std::atomic<int64_t> a_granted{0}, b_granted{0};
  std::vector<std::thread> threads;
  if (with_a) {
    for (int i = 0; i < flags.a_workers; ++i) {
      threads.emplace_back([&] {
        while (absl::Now() < end) {
          if (limiter.Acquire(a, end).ok()) a_granted.fetch_add(1);
        }
      });
    }
  }
  // B: 10 changes per second, each reconciled by one of 2 workers as soon as one is free.
  common::Mutex mu;
  std::vector<absl::Time> changes;  // guarded by mu: arrival times not yet taken
  std::vector<absl::Duration> latencies;
  std::atomic<bool> stop{false};
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        std::optional<absl::Time> arrived;
        {
          common::MutexLock lock(&mu);
          if (!changes.empty()) {
            arrived = changes.front();
            changes.erase(changes.begin());
          }
        }
        if (!arrived.has_value()) {
          absl::SleepFor(absl::Milliseconds(1));
          continue;
        }
        absl::SleepFor(absl::Milliseconds(flags.b_work_ms));
        bool ok = true;
        for (int r = 0; r < kRequestsPerReconcile && ok; ++r) {
          ok = limiter.Acquire(b, absl::InfiniteFuture()).ok();
          if (ok) b_granted.fetch_add(1);
        }
        common::MutexLock lock(&mu);
        latencies.push_back(absl::Now() - *arrived);
      }
    });
  }
  const absl::Time start = absl::Now();
  for (int i = 0; absl::Now() < end; ++i) {
    {
      common::MutexLock lock(&mu);
      changes.push_back(absl::Now());
    }
    SleepUntil(start + absl::Milliseconds(100) * (i + 1));
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  BudgetResult result;
  result.b_latencies = latencies;
  result.a_rate = static_cast<double>(a_granted.load()) / flags.seconds;
  result.b_rate = static_cast<double>(b_granted.load()) / flags.seconds;
  return result;
}

void RunBudgetCase(const Flags& flags, Reporter& reporter) {
  std::cerr << "scheduling: budget: 3 variants side by side for " << flags.seconds << " s\n";
  BudgetResult alone, fair, fifo;
  std::thread t1([&] { alone = RunBudget(flags, false, true); });
  std::thread t2([&] { fair = RunBudget(flags, true, true); });
  std::thread t3([&] { fifo = RunBudget(flags, true, false); });
  t1.join();
  t2.join();
  t3.join();
  const double alone_p99 = Millis(Percentile(alone.b_latencies, 99));
  const double fair_p99 = Millis(Percentile(fair.b_latencies, 99));
  const double fifo_p99 = Millis(Percentile(fifo.b_latencies, 99));
  reporter.Add(Figure{.metric = "budget: B reconcile p99 with A's backlog, fair shares vs alone",
                      .value = fair_p99,
                      .unit = "ms",
                      .baseline = alone_p99,
                      .target = "<= 2x",
                      .met = fair_p99 <= 2 * alone_p99});
  reporter.Add(Figure{.metric = "budget: B reconcile p99 with A's backlog, first come first served",
                      .value = fifo_p99,
                      .unit = "ms",
                      .baseline = alone_p99});
  // A's weighted share (weights 1:1) is half the budget; B uses less, so A may use the rest.
  reporter.Add(Figure{.metric = absl::StrCat("budget: A's requests per second, fair shares (B: ",
                                             static_cast<int>(fair.b_rate + 0.5), "/s)"),
                      .value = fair.a_rate,
                      .unit = "/s",
                      .target = ">= 25/s",
                      .met = fair.a_rate >= 25});
}

// --- starvation -----------------------------------------------------------------------------

enum class Order { kFifo, kStrict, kAging };

struct StarvationResult {
  absl::Duration oldest_low_wait;   // the first low key queued: its wait (or the rest of the run)
  absl::Duration longest_low_wait;  // over the low keys that ran
  int low_ran = 0;
  std::vector<absl::Duration> high_waits;
};

StarvationResult RunStarvation(const Flags& flags, Order order) {
  constexpr int kWorkers = 4;
  constexpr absl::Duration kWork = absl::Milliseconds(10);  // 400 keys/s capacity
  constexpr int kChurnPerSecond = 600;                      // above it
  queue::WorkQueue::Options options;
  options.qps = 0;
  options.max_wait = order == Order::kAging ? flags.max_wait : absl::InfiniteDuration();
  queue::WorkQueue queue("starvation", options, common::Clock::Real());
  const queue::Priority low =
      order == Order::kFifo ? queue::Priority::kHigh : queue::Priority::kLow;
  const int high_keys = kChurnPerSecond * flags.churn_seconds;
  std::vector<std::atomic<int64_t>> added_ns(flags.low_keys + high_keys);
  constexpr absl::Duration kLowAfter = absl::Seconds(2);
  const absl::Time origin = absl::Now();
  auto now_ns = [&] { return absl::ToInt64Nanoseconds(absl::Now() - origin); };
  common::Mutex mu;
  StarvationResult result;
  result.oldest_low_wait = absl::Seconds(flags.churn_seconds) - kLowAfter;
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (std::optional<queue::WorkQueue::Item> item = queue.Get()) {
        const int64_t at = now_ns();
        int index = 0;
        absl::string_view key = item->key;
        const bool is_low = absl::ConsumePrefix(&key, "low-");
        if (!is_low) absl::ConsumePrefix(&key, "high-");
        if (absl::SimpleAtoi(key, &index)) {
          const absl::Duration wait =
              absl::Nanoseconds(at - added_ns[is_low ? index : flags.low_keys + index].load());
          common::MutexLock lock(&mu);
          if (is_low) {
            ++result.low_ran;
            if (index == 0) result.oldest_low_wait = wait;
            result.longest_low_wait = std::max(result.longest_low_wait, wait);
          } else {
            result.high_waits.push_back(wait);
          }
        }
        absl::SleepFor(kWork);
        queue.Done(*item).IgnoreError();
      }
    });
  }
  for (int i = 0; i < high_keys; ++i) {
    const absl::Time at = origin + absl::Seconds(1) * i / kChurnPerSecond;
    if (at >= origin + kLowAfter && added_ns[0].load() == 0) {
      for (int l = 0; l < flags.low_keys; ++l) {
        added_ns[l] = std::max<int64_t>(1, now_ns());
        queue.Add(absl::StrCat("low-", l), low);
      }
    }
    SleepUntil(at);
    added_ns[flags.low_keys + i] = now_ns();
    queue.Add(absl::StrCat("high-", i), queue::Priority::kHigh);
  }
  queue.ShutDown(queue::ShutdownMode::kAbandon);
  for (std::thread& t : workers) t.join();
  return result;
}

void RunStarvationCase(const Flags& flags, Reporter& reporter) {
  std::cerr << "scheduling: starvation: 3 queues side by side for " << flags.churn_seconds
            << " s\n";
  StarvationResult fifo, strict, aging;
  std::thread t1([&] { fifo = RunStarvation(flags, Order::kFifo); });
  std::thread t2([&] { strict = RunStarvation(flags, Order::kStrict); });
  std::thread t3([&] { aging = RunStarvation(flags, Order::kAging); });
  t1.join();
  t2.join();
  t3.join();
  const double bound = absl::ToDoubleSeconds(flags.max_wait) + 1;
  reporter.Add(
      Figure{.metric = absl::StrCat("starvation: oldest low key's wait, aging (maxWait ",
                                    absl::FormatDuration(flags.max_wait), ") vs strict priority"),
             .value = absl::ToDoubleSeconds(aging.oldest_low_wait),
             .unit = "s",
             .baseline = absl::ToDoubleSeconds(strict.oldest_low_wait),
             .target = absl::StrCat("<= ", bound, " s"),
             .met = absl::ToDoubleSeconds(aging.oldest_low_wait) <= bound});
  reporter.Add(Figure{.metric = absl::StrCat("starvation: low keys run of ", flags.low_keys,
                                             ", aging (strict priority: ", strict.low_ran, ")"),
                      .value = static_cast<double>(aging.low_ran),
                      .unit = "keys"});
  reporter.Add(Figure{.metric = "starvation: longest low key wait, aging vs FIFO",
                      .value = absl::ToDoubleSeconds(aging.longest_low_wait),
                      .unit = "s",
                      .baseline = absl::ToDoubleSeconds(fifo.longest_low_wait)});
  reporter.Add(Figure{.metric = "starvation: high key wait p50, aging vs FIFO",
                      .value = Millis(Percentile(aging.high_waits, 50)),
                      .unit = "ms",
                      .baseline = Millis(Percentile(fifo.high_waits, 50))});
}

// --- main -----------------------------------------------------------------------------------

bool ParseFlags(const std::vector<std::string>& args, Flags* flags) {
  for (const std::string& arg : args) {
    std::pair<std::string, std::string> kv = absl::StrSplit(arg, absl::MaxSplits('=', 1));
    const std::string& v = kv.second;
    bool ok = false;
    if (kv.first == "--cases") {
      flags->cases = absl::StrSplit(v, ',', absl::SkipEmpty());
      ok = !flags->cases.empty();
      for (const std::string& c : flags->cases) {
        ok = ok && (c == "restart" || c == "budget" || c == "starvation");
      }
    } else if (kv.first == "--objects") {
      ok = absl::SimpleAtoi(v, &flags->objects) && flags->objects > 0;
    } else if (kv.first == "--workers") {
      ok = absl::SimpleAtoi(v, &flags->workers) && flags->workers > 0;
    } else if (kv.first == "--work-ms") {
      ok = absl::SimpleAtoi(v, &flags->work_ms) && flags->work_ms >= 0;
    } else if (kv.first == "--seconds") {
      ok = absl::SimpleAtoi(v, &flags->seconds) && flags->seconds > 0;
    } else if (kv.first == "--a-workers") {
      ok = absl::SimpleAtoi(v, &flags->a_workers) && flags->a_workers > 0;
    } else if (kv.first == "--b-work-ms") {
      ok = absl::SimpleAtoi(v, &flags->b_work_ms) && flags->b_work_ms >= 0;
    } else if (kv.first == "--churn-seconds") {
      ok = absl::SimpleAtoi(v, &flags->churn_seconds) && flags->churn_seconds > 0;
    } else if (kv.first == "--low-keys") {
      ok = absl::SimpleAtoi(v, &flags->low_keys) && flags->low_keys > 0;
    } else if (kv.first == "--max-wait") {
      ok = absl::ParseDuration(v, &flags->max_wait) && flags->max_wait > absl::ZeroDuration();
    }
    if (!ok) {
      std::cerr << "scheduling: bad flag " << arg
                << " (see the comment atop scheduling_bench.cc)\n";
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Reporter reporter("scheduling", argc, argv);
  Flags flags;
  if (!ParseFlags(reporter.args(), &flags)) return 2;
  auto wants = [&](absl::string_view c) {
    return std::find(flags.cases.begin(), flags.cases.end(), c) != flags.cases.end();
  };
  if (wants("restart")) {
    // The plugin sits in bazel-bin next to e2e-burst's benchmark.
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const fs::path plugin = self.parent_path().parent_path() / "e2e_burst" / "burst_plugin";
    if (ec || !fs::exists(plugin)) {
      std::cerr << "scheduling: plugin not found: " << plugin << "\n";
      return 1;
    }
    const char* tmp = std::getenv("TMPDIR");
    const fs::path root =
        fs::path(tmp != nullptr ? tmp : "/tmp") / absl::StrCat("scheduling-", getpid());
    RunRestartCase(flags, plugin.string(), root, reporter);
    fs::remove_all(root);
  }
  if (wants("budget")) RunBudgetCase(flags, reporter);
  if (wants("starvation")) RunStarvationCase(flags, reporter);
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
