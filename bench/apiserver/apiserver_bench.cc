// API server benchmark: the embedded Kubernetes-compatible API server started in-process the
// way users run it (HTTPS, bearer token, durable SQLite with synchronous=FULL), driven over
// real keep-alive HTTP connections:
//   (a) creates/s of a custom resource from --clients threads,
//   (b) status merge-patches/s from --clients threads,
//   (c) (b) again while N watchers (--watchers) stream ?watch=true from the starting
//       resourceVersion; every watcher must receive every event exactly once and in order;
//       events delivered/s and the delay from a write's acknowledgement to its event,
// with p50/p99 write latencies, against baselines measured in the same run: raw SQLite inserts
// of the same rows (one row per durable transaction, same synchronous setting, one thread),
// the storage engine alone (Store::Write from the same number of threads, no HTTP), and
// (a)/(b) over plain HTTP to show what TLS costs.
//
//   bazel run -c opt //bench/apiserver:apiserver_bench -- [--json] [--duration=5s]
//       [--clients=8] [--watchers=1,10,100] [--insecure-http] [--sync=full|normal]
//
// --insecure-http runs everything over plain HTTP only (no HTTPS figures). The data lives in
// a fresh directory under $TMPDIR (default /tmp), removed at the end. A default run takes
// about a minute.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/apiserver/baselines.h"
#include "bench/apiserver/http_load.h"
#include "bench/report.h"
#include "runtime/apiserver/server.h"

namespace ctrlhost::bench {
namespace {

constexpr int64_t kPatchObjectsPerClient = 100;

struct Flags {
  absl::Duration duration = absl::Seconds(5);
  int clients = 8;
  std::vector<int> watchers = {1, 10, 100};
  bool insecure_only = false;
  bool sync_full = true;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "apiserver_bench: %s\n", message.c_str());
  std::exit(2);
}

Flags ParseFlags(const std::vector<std::string>& args) {
  Flags flags;
  for (const std::string& arg : args) {
    absl::string_view value;
    auto has = [&](absl::string_view name) {
      if (!absl::StartsWith(arg, name)) return false;
      value = absl::string_view(arg).substr(name.size());
      return true;
    };
    double seconds = 0;
    if (has("--duration=")) {
      if (!absl::ParseDuration(value, &flags.duration) &&
          !(absl::SimpleAtod(value, &seconds) && (flags.duration = absl::Seconds(seconds), true))) {
        Die(absl::StrCat("bad --duration ", value, " (e.g. 5s)"));
      }
      if (flags.duration <= absl::ZeroDuration() || flags.duration > absl::Minutes(10)) {
        Die("--duration must be in (0, 10m]");
      }
    } else if (has("--clients=")) {
      if (!absl::SimpleAtoi(value, &flags.clients) || flags.clients < 1 || flags.clients > 256) {
        Die("--clients must be 1..256");
      }
    } else if (has("--watchers=")) {
      flags.watchers.clear();
      for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        int n = 0;
        if (!absl::SimpleAtoi(part, &n) || n < 1 || n > 1000) {
          Die("--watchers takes a comma-separated list of counts in 1..1000 (e.g. 1,10,100)");
        }
        flags.watchers.push_back(n);
      }
    } else if (arg == "--insecure-http") {
      flags.insecure_only = true;
    } else if (arg == "--sync=full" || arg == "--sync=normal") {
      flags.sync_full = arg == "--sync=full";
    } else {
      Die(absl::StrCat("unknown argument ", arg,
                       " (flags: --json --duration=5s --clients=8 --watchers=1,10,100"
                       " --insecure-http --sync=full|normal)"));
    }
  }
  return flags;
}

template <typename T>
T OrDie(absl::StatusOr<T> value, absl::string_view what) {
  if (!value.ok()) Die(absl::StrCat(what, ": ", value.status().ToString()));
  return *std::move(value);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// One in-process API server and the endpoint its users would use.
struct Server {
  std::unique_ptr<apiserver::ApiServer> server;
  Endpoint endpoint;
  std::string scheme;
};

Server StartServer(const std::string& data_dir, bool insecure, bool sync_full) {
  apiserver::ApiServerOptions options;
  options.data_dir = data_dir;
  options.port = 0;
  options.insecure_http = insecure;
  options.sync_full = sync_full;
  Server s;
  s.server = OrDie(apiserver::ApiServer::Start(options), "start the API server");
  s.scheme = insecure ? "HTTP" : "HTTPS";
  s.endpoint.url = absl::StrCat(insecure ? "http" : "https", "://127.0.0.1:", s.server->port());
  if (!insecure) {
    // As a user's client finds them: the token and CA the server wrote in its data directory.
    s.endpoint.token = ReadFile(data_dir + "/token");
    s.endpoint.ca_path = data_dir + "/ca.crt";
  }
  absl::Status setup = SetUpBenchResource(s.endpoint);
  if (!setup.ok()) Die(absl::StrCat("set up: ", setup.ToString()));
  return s;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

struct Totals {
  int64_t errors = 0;
  std::string first_error;
  void Count(const WriteRun& run, absl::string_view phase) {
    errors += run.errors;
    if (first_error.empty() && !run.first_error.empty()) {
      first_error = absl::StrCat(phase, ": ", run.first_error);
    }
  }
};

// The N-watcher phase's results.
struct FanOutRun {
  int watchers = 0;
  WriteRun writes;
  int complete = 0;  // watchers that got every event once, in order
  std::string first_problem;
  double delivered_per_second = 0;
  std::vector<absl::Duration> delays;  // write ack -> event received, clamped at 0
};

FanOutRun WatchPhase(const Endpoint& endpoint, const Flags& flags, int watchers,
                     const std::vector<int64_t>& patch_objects, const std::string& prefix) {
  FanOutRun out;
  out.watchers = watchers;
  const int64_t from = OrDie(TouchSentinel(endpoint), "touch the sentinel");
  std::unique_ptr<WatchFleet> fleet =
      OrDie(WatchFleet::Start(endpoint, watchers, from), "start watchers");
  WriteOptions options;
  options.kind = WriteKind::kStatusPatch;
  options.clients = flags.clients;
  options.duration = flags.duration;
  options.name_prefix = prefix;
  options.patch_objects = patch_objects;
  const int64_t start = NowNanos();
  out.writes = OrDie(RunWriters(endpoint, options), "watch-phase writers");
  const absl::StatusOr<int64_t> end = TouchSentinel(endpoint);
  if (!end.ok()) out.first_problem = end.status().ToString();
  fleet->WaitForSentinel(absl::Now() + absl::Seconds(60));

  absl::flat_hash_set<int64_t> expected;
  absl::flat_hash_map<int64_t, int64_t> ack_at;
  expected.reserve(out.writes.acks.size());
  ack_at.reserve(out.writes.acks.size());
  for (const auto& [rv, at] : out.writes.acks) {
    expected.insert(rv);
    ack_at[rv] = at;
  }
  int64_t delivered = 0;
  int64_t last_done = start;
  for (const auto& w : fleet->watchers()) {
    absl::Status s = w->status.ok() ? w->checker.Verify(expected) : w->status;
    if (s.ok()) {
      ++out.complete;
    } else if (out.first_problem.empty()) {
      out.first_problem = s.ToString();
    }
    delivered += w->checker.count();
    if (w->saw_sentinel) last_done = std::max(last_done, w->sentinel_nanos);
    for (const auto& [rv, at] : w->received) {
      auto it = ack_at.find(rv);
      if (it == ack_at.end()) continue;
      // An event may reach a watcher before its writer has read the response: delay 0.
      out.delays.push_back(absl::Nanoseconds(std::max<int64_t>(0, at - it->second)));
    }
  }
  const double seconds = static_cast<double>(last_done - start) / 1e9;
  out.delivered_per_second = seconds > 0 ? delivered / seconds : 0;
  return out;
}

void AddRate(Reporter& reporter, const std::string& metric, double value,
             std::optional<double> baseline, bool with_target) {
  Figure f;
  f.metric = metric;
  f.value = value;
  f.unit = "writes/s";
  f.baseline = baseline;
  if (with_target) {
    f.target = ">= 5000/s";
    f.met = value >= 5000;
  }
  reporter.Add(f);
}

void AddLatencies(Reporter& reporter, const std::string& what,
                  const std::vector<absl::Duration>& samples,
                  const std::vector<absl::Duration>* baseline) {
  for (double p : {50.0, 99.0}) {
    Figure f;
    f.metric = absl::StrCat(what, " p", static_cast<int>(p));
    f.value = Ms(Percentile(samples, p));
    f.unit = "ms";
    if (baseline != nullptr) f.baseline = Ms(Percentile(*baseline, p));
    reporter.Add(f);
  }
}

int Main(int argc, char** argv) {
  Reporter reporter("apiserver", argc, argv);
  const Flags flags = ParseFlags(reporter.args());
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                          "/ctrlhost-apiserver-bench-XXXXXX");
  if (mkdtemp(dir_template.data()) == nullptr) Die("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string clients = absl::StrCat(flags.clients, " clients");
  Totals totals;

  Server main = StartServer(dir + "/main", flags.insecure_only, flags.sync_full);
  const std::string scheme = main.scheme;
  // Warm up (connections, code paths, SQLite pages) and learn the stored object's bytes.
  WriteOptions warm;
  warm.clients = flags.clients;
  warm.duration = std::min(absl::Seconds(1), flags.duration);
  warm.name_prefix = "warm-";
  const WriteRun warmup = OrDie(RunWriters(main.endpoint, warm), "warm-up");
  totals.Count(warmup, "warm-up");
  if (warmup.sample_body.empty())
    Die(absl::StrCat("every warm-up write failed: ", warmup.first_error));
  const std::string& row = warmup.sample_body;

  // Raw SQLite is measured in two halves, before and after the server runs, and pooled: the
  // disk's fsync time drifts during a run on a shared machine.
  RateRun raw = OrDie(RawSqliteInserts(dir + "/raw1.db", flags.sync_full, flags.duration / 2, row),
                      "raw SQLite");
  const RateRun store =
      OrDie(StoreOnlyWrites(dir + "/store.db", flags.sync_full, flags.clients, flags.duration, row),
            "store-only writes");

  WriteOptions create;
  create.clients = flags.clients;
  create.duration = flags.duration;
  create.name_prefix = "main-";
  const WriteRun creates = OrDie(RunWriters(main.endpoint, create), "creates");
  totals.Count(creates, "creates");
  WriteOptions patch = create;
  patch.kind = WriteKind::kStatusPatch;
  for (int64_t n : creates.per_client) {
    patch.patch_objects.push_back(std::min(n, kPatchObjectsPerClient));
  }
  const WriteRun patches = OrDie(RunWriters(main.endpoint, patch), "status patches");
  totals.Count(patches, "status patches");
  std::vector<FanOutRun> fanouts;
  for (int n : flags.watchers) {
    fanouts.push_back(WatchPhase(main.endpoint, flags, n, patch.patch_objects, "main-"));
    totals.Count(fanouts.back().writes, absl::StrCat(n, "-watcher phase"));
  }
  main.server->Stop();
  main.server.reset();

  std::optional<WriteRun> plain_creates;
  std::optional<WriteRun> plain_patches;
  if (!flags.insecure_only) {
    Server plain = StartServer(dir + "/plain", /*insecure=*/true, flags.sync_full);
    create.name_prefix = "plain-";
    plain_creates = OrDie(RunWriters(plain.endpoint, create), "plain-HTTP creates");
    totals.Count(*plain_creates, "plain-HTTP creates");
    patch.name_prefix = "plain-";
    patch.patch_objects.clear();
    for (int64_t n : plain_creates->per_client) {
      patch.patch_objects.push_back(std::min(n, kPatchObjectsPerClient));
    }
    plain_patches = OrDie(RunWriters(plain.endpoint, patch), "plain-HTTP status patches");
    totals.Count(*plain_patches, "plain-HTTP status patches");
  }
  const RateRun raw_after = OrDie(
      RawSqliteInserts(dir + "/raw2.db", flags.sync_full, flags.duration / 2, row), "raw SQLite");
  std::filesystem::remove_all(dir);
  raw.operations += raw_after.operations;
  raw.elapsed += raw_after.elapsed;
  raw.latencies.insert(raw.latencies.end(), raw_after.latencies.begin(), raw_after.latencies.end());
  const double raw_rate = raw.PerSecond();
  const std::string sync = flags.sync_full ? "sync FULL" : "sync NORMAL";

  // Throughput: ratio to raw SQLite, one durable row per transaction, same rows, same run.
  AddRate(reporter, absl::StrCat("creates/s, ", clients, " (", scheme, ", ", sync, ")"),
          creates.PerSecond(), raw_rate, true);
  AddRate(reporter, absl::StrCat("status patches/s, ", clients, " (", scheme, ")"),
          patches.PerSecond(), raw_rate, true);
  AddLatencies(reporter, absl::StrCat("create latency (", scheme, ")"), creates.latencies,
               &raw.latencies);
  AddLatencies(reporter, absl::StrCat("status patch latency (", scheme, ")"), patches.latencies,
               &raw.latencies);
  for (const FanOutRun& run : fanouts) {
    const std::string n = absl::StrCat(run.watchers, run.watchers == 1 ? " watcher" : " watchers");
    // Baseline: the same writes with no watcher, so the ratio is what watchers cost.
    AddRate(reporter, absl::StrCat("status patches/s with ", n, " (baseline: no watchers)"),
            run.writes.PerSecond(), patches.PerSecond(), true);
    Figure f;
    f.metric = absl::StrCat("watchers that got every event once, in order (", n, ")");
    f.value = run.complete;
    f.unit = "watchers";
    f.target = absl::StrCat("= ", run.watchers);
    f.met = run.complete == run.watchers;
    reporter.Add(f);
    if (!run.first_problem.empty()) {
      std::fprintf(stderr, "apiserver_bench: %s: %s\n", n.c_str(), run.first_problem.c_str());
    }
    f = Figure();
    f.metric = absl::StrCat("watch events/s delivered (", n, "; baseline: writes/s x N)");
    f.value = run.delivered_per_second;
    f.unit = "events/s";
    f.baseline = run.writes.PerSecond() * run.watchers;
    reporter.Add(f);
    AddLatencies(reporter, absl::StrCat("watch delay, write ack -> event (", n, ")"), run.delays,
                 nullptr);
    AddLatencies(reporter, absl::StrCat("status patch latency with ", n), run.writes.latencies,
                 nullptr);
  }

  Figure f;
  f.metric = absl::StrCat("Store::Write alone, ", clients, " (no HTTP; baseline raw SQLite)");
  f.value = store.PerSecond();
  f.unit = "writes/s";
  f.baseline = raw_rate;
  reporter.Add(f);
  f = Figure();
  f.metric = absl::StrCat("creates/s over ", scheme, " (baseline: Store::Write alone)");
  f.value = creates.PerSecond();
  f.unit = "writes/s";
  f.baseline = store.PerSecond();
  reporter.Add(f);
  AddLatencies(reporter, "Store::Write latency", store.latencies, &raw.latencies);
  if (plain_creates.has_value()) {
    AddRate(reporter, "creates/s over plain HTTP (baseline: HTTPS)", plain_creates->PerSecond(),
            creates.PerSecond(), false);
    AddRate(reporter, "status patches/s over plain HTTP (baseline: HTTPS)",
            plain_patches->PerSecond(), patches.PerSecond(), false);
    AddLatencies(reporter, "create latency (plain HTTP)", plain_creates->latencies,
                 &creates.latencies);
  }
  f = Figure();
  f.metric = absl::StrCat("raw SQLite inserts/s, 1 row per transaction (", sync, ")");
  f.value = raw_rate;
  f.unit = "rows/s";
  reporter.Add(f);
  AddLatencies(reporter, "raw SQLite commit latency", raw.latencies, nullptr);
  f = Figure();
  f.metric = "stored object size";
  f.value = static_cast<double>(row.size());
  f.unit = "bytes";
  reporter.Add(f);
  f = Figure();
  f.metric = "failed writes, all phases";
  f.value = static_cast<double>(totals.errors);
  f.unit = "writes";
  f.target = "= 0";
  f.met = totals.errors == 0;
  reporter.Add(f);
  if (!totals.first_error.empty()) {
    std::fprintf(stderr, "apiserver_bench: first failed write: %s\n", totals.first_error.c_str());
  }
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
