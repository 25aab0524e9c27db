// Shadow benchmark (issue 27): what a shadow costs the serving path. A PluginSlot dispatches no-op
// reconciles to the test plugin (runtime/plugin/testing/test_plugin_main, exec'd over a Unix
// socket as the host execs a plugin) with 64 in flight, and the same run is measured without a
// shadow, with a shadow of the same release as the host starts one (its own process under
// SCHED_IDLE: `cpu: idle`, the default) and with one at normal CPU priority (`cpu: normal`).
// Rounds alternate (without, idle, normal, without, ...); each figure is the median over the
// rounds.
//
//   bazel run -c opt //bench/shadow:shadow_bench -- [--calls=100000] [--rounds=5] [--json]
//
// The host side, the serving plugin and the shadow share the machine's cores: the shadow does the
// serving plugin's work a second time, and what it costs the serving path is what it takes of
// the CPU the serving path wants.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/report.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/plugin/supervisor.h"

namespace ctrlhost::bench {
namespace {

constexpr int kInFlight = 64;

struct Args {
  // Rounds of about 2 s: rounds of 0.4 s (20,000 calls) gave ratios from 0.83x to 1.15x.
  int calls = 100000;
  int rounds = 5;
};

struct Run {
  double per_second = 0;
  absl::Duration p99;
  int failed = 0;
};

// Keeps `kInFlight` calls outstanding until `calls` were answered. Thread-safe.
class Driver {
 public:
  Run Go(manager::PluginSlot* slot, int calls) {
    Stopwatch watch;
    int sent = 0;
    while (sent < calls) {
      {
        common::MutexLock lock(&mu_);
        while (in_flight_ >= kInFlight) cv_.Wait(&mu_);
        ++in_flight_;
      }
      const absl::Time start = absl::Now();
      slot->Dispatch(Call(sent), absl::Now() + absl::Seconds(60),
                     [this, start](controller::DispatchResult r) {
                       const absl::Duration took = absl::Now() - start;
                       common::MutexLock lock(&mu_);
                       latencies_.push_back(took);
                       if (!r.response.ok()) ++failed_;
                       --in_flight_;
                       cv_.SignalAll();
                     });
      ++sent;
    }
    common::MutexLock lock(&mu_);
    while (in_flight_ > 0) cv_.Wait(&mu_);
    Run run;
    run.per_second = calls / watch.Seconds();
    run.p99 = Percentile(latencies_, 0.99);
    run.failed = failed_;
    latencies_.clear();
    failed_ = 0;
    return run;
  }

 private:
  static pluginpb::ReconcileCall Call(int i) {
    const std::string name = absl::StrCat("web-", i % 5000);
    pluginpb::ReconcileCall call;
    call.set_controller("webapp");
    call.set_namespace_("team");
    call.set_name(name);
    call.set_object(absl::StrCat(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp","metadata":)",
                                 R"({"name":")", name, R"(","namespace":"team","uid":"u-)", name,
                                 R"("},"status":{}})"));
    return call;
  }

  common::Mutex mu_;
  common::CondVar cv_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Duration> latencies_ ABSL_GUARDED_BY(mu_);
};

// An exec'd test plugin whose socket lives in `socket_dir`.
manager::PluginSlot::OptionsFactory Factory(const std::string& command,
                                            const std::string& socket_dir) {
  return [command, socket_dir](uint64_t) {
    plugin::SupervisorOptions options;
    options.name = "web";
    options.source.exec.command = command;
    options.socket_dir = socket_dir;
    options.handshake.deadline = absl::Seconds(30);
    return options;
  };
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The rounds of one setting: rates, p99s and the shadow's figures.
struct Series {
  std::vector<double> rates;
  std::vector<double> p99s;
  uint64_t compared = 0;
  uint64_t same = 0;
  uint64_t dropped = 0;
  int failed = 0;
  void Add(const Run& run) {
    rates.push_back(run.per_second);
    p99s.push_back(absl::ToDoubleMilliseconds(run.p99));
    failed += run.failed;
  }
};

// One round with a shadow of the same release attached (`idle`: at SCHED_IDLE, as by default).
absl::Status RoundWithShadow(manager::PluginSlot* slot,
                             const manager::PluginSlot::OptionsFactory& factory, bool idle,
                             int calls, Driver& driver, Series& series) {
  static const controller::ControllerInfo* const webapp =
      new controller::ControllerInfo(controller::apply::testing::WebAppController());
  auto comparator = std::make_shared<manager::ShadowComparator>(
      [](absl::string_view) -> std::optional<controller::ControllerInfo> { return *webapp; },
      manager::ShadowComparator::Options{.plugin = "web", .idle_cpu = idle});
  manager::SwapResult started = slot->StartShadow(
      factory, {.max_in_flight = kInFlight, .idle_cpu = idle}, comparator, absl::Seconds(30));
  if (!started.status.ok()) {
    return absl::Status(started.status.code(),
                        absl::StrCat("the shadow did not start: ", started.status.message()));
  }
  series.Add(driver.Go(slot, calls));
  (void)slot->StopShadow(absl::Seconds(10));
  comparator->WaitIdle();
  const manager::ShadowComparator::ControllerFigures total = comparator->Snapshot().Total();
  series.compared += total.compared;
  series.same += total.same;
  series.dropped += total.dropped;
  return absl::OkStatus();
}

// The figures of `with` against `without`; only the default setting has targets.
void Report(Reporter& reporter, const Args& args, const Series& without, const Series& with,
            const std::string& what, bool targets) {
  Figure rate;
  rate.metric = absl::StrCat("serving reconciles/s at 64 in flight, ", what);
  rate.value = Median(with.rates);
  rate.unit = "/s";
  rate.baseline = Median(without.rates);
  Figure p99;
  p99.metric = absl::StrCat("serving latency p99 at 64 in flight, ", what);
  p99.value = Median(with.p99s);
  p99.unit = "ms";
  p99.baseline = Median(without.p99s);
  if (targets) {
    rate.target = ">= 0.9x";
    rate.met = rate.value >= 0.9 * *rate.baseline;
    p99.target = "<= 1.2x";
    p99.met = p99.value <= 1.2 * *p99.baseline;
  }
  reporter.Add(rate);
  reporter.Add(p99);
  Figure share;
  share.metric = absl::StrCat("calls compared, ", what);
  share.value = static_cast<double>(with.compared);
  share.unit = "calls";
  share.baseline = static_cast<double>(args.calls) * static_cast<double>(with.rates.size());
  share.target = "same = compared";
  share.met = with.same == with.compared;
  reporter.Add(share);
  Figure lost;
  lost.metric = absl::StrCat("calls dropped for the shadow (behind), ", what);
  lost.value = static_cast<double>(with.dropped);
  lost.unit = "calls";
  reporter.Add(lost);
}

int Main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--calls=")) {
      if (!absl::SimpleAtoi(a, &args.calls) || args.calls < 100) {
        std::fprintf(stderr, "shadow_bench: --calls wants a number >= 100\n");
        return 2;
      }
    } else if (absl::ConsumePrefix(&a, "--rounds=")) {
      if (!absl::SimpleAtoi(a, &args.rounds) || args.rounds < 1) {
        std::fprintf(stderr, "shadow_bench: --rounds wants a number >= 1\n");
        return 2;
      }
    }
  }
  Reporter reporter("shadow", argc, argv);

  const std::optional<std::string> command =
      FindBuiltBinary(argv[0], "runtime/plugin/testing/test_plugin_main");
  if (!command.has_value()) {
    std::fprintf(stderr, "shadow_bench: runtime/plugin/testing/test_plugin_main not found\n");
    return 1;
  }
  char dir_template[] = "/tmp/shadow_bench.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::fprintf(stderr, "shadow_bench: mkdtemp failed\n");
    return 1;
  }
  const std::string socket_dir = dir_template;
  const manager::PluginSlot::OptionsFactory factory = Factory(*command, socket_dir);
  absl::StatusOr<std::unique_ptr<manager::PluginSlot>> slot =
      manager::PluginSlot::Start(factory, nullptr, nullptr);
  if (!slot.ok()) {
    std::fprintf(stderr, "shadow_bench: %s\n", std::string(slot.status().message()).c_str());
    return 1;
  }
  for (int i = 0; i < 3000 && (*slot)->status().state != plugin::PluginState::kReady; ++i) {
    usleep(10000);
  }
  if ((*slot)->status().state != plugin::PluginState::kReady) {
    std::fprintf(stderr, "shadow_bench: the serving plugin did not become ready\n");
    return 1;
  }

  Driver driver;
  driver.Go(slot->get(), args.calls / 4);  // warm up
  Series without, idle, normal;
  for (int r = 0; r < args.rounds; ++r) {
    without.Add(driver.Go(slot->get(), args.calls));
    for (Series* series : {&idle, &normal}) {
      absl::Status s =
          RoundWithShadow(slot->get(), factory, series == &idle, args.calls, driver, *series);
      if (!s.ok()) {
        std::fprintf(stderr, "shadow_bench: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
  }
  (*slot)->Stop();
  std::error_code ec;
  std::filesystem::remove_all(socket_dir, ec);

  Report(reporter, args, without, idle, "shadow attached (cpu: idle, the default)", true);
  Report(reporter, args, without, normal, "shadow attached (cpu: normal)", false);
  Figure errors;
  errors.metric = "serving calls that failed";
  errors.value = without.failed + idle.failed + normal.failed;
  errors.unit = "calls";
  errors.target = "== 0";
  errors.met = errors.value == 0;
  reporter.Add(errors);
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
