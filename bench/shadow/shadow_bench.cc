// Shadow benchmark (issue 27): what a shadow costs the serving path. A PluginSlot dispatches no-op
// reconciles to an in-process test plugin over TCP on 127.0.0.1 with 64 in flight, and the same
// run is measured with a shadow of the same release attached (every call copied to a second test
// plugin, the pairs compared by the ShadowComparator) and without. Rounds alternate (without,
// with, without, ...); each figure is the median over the rounds.
//
//   bazel run -c opt //bench/shadow:shadow_bench -- [--calls=20000] [--rounds=3] [--json]
//
// Both plugins and the host side share this process, as on one small machine they would share
// its cores: the shadow's plugin does the serving plugin's work a second time.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
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
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::bench {
namespace {

constexpr int kInFlight = 64;

struct Args {
  int calls = 20000;
  int rounds = 3;
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

manager::PluginSlot::OptionsFactory Factory(int port) {
  return [port](uint64_t) {
    plugin::SupervisorOptions options;
    options.name = "web";
    options.source.endpoint = absl::StrCat("127.0.0.1:", port);
    options.handshake.deadline = absl::Seconds(30);
    return options;
  };
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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

  auto serving = plugin::testing::TestPlugin::Start("127.0.0.1:0", {});
  auto shadow = plugin::testing::TestPlugin::Start("127.0.0.1:0", {});
  if (!serving.ok() || !shadow.ok()) {
    std::fprintf(stderr, "shadow_bench: test plugins did not start\n");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<manager::PluginSlot>> slot =
      manager::PluginSlot::Start(Factory((*serving)->port()), nullptr, nullptr);
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
  const controller::ControllerInfo webapp = controller::apply::testing::WebAppController();

  Driver driver;
  driver.Go(slot->get(), args.calls / 4);  // warm up
  std::vector<double> rate_without, rate_with, p99_without, p99_with;
  uint64_t compared = 0, same = 0, dropped = 0;
  int failed = 0;
  for (int r = 0; r < args.rounds; ++r) {
    Run without = driver.Go(slot->get(), args.calls);
    rate_without.push_back(without.per_second);
    p99_without.push_back(absl::ToDoubleMilliseconds(without.p99));

    auto comparator = std::make_shared<manager::ShadowComparator>(
        [&webapp](absl::string_view) -> std::optional<controller::ControllerInfo> {
          return webapp;
        },
        manager::ShadowComparator::Options{.plugin = "web"});
    manager::SwapResult started = (*slot)->StartShadow(
        Factory((*shadow)->port()), {.max_in_flight = kInFlight}, comparator, absl::Seconds(30));
    if (!started.status.ok()) {
      std::fprintf(stderr, "shadow_bench: the shadow did not start: %s\n",
                   std::string(started.status.message()).c_str());
      return 1;
    }
    Run with = driver.Go(slot->get(), args.calls);
    rate_with.push_back(with.per_second);
    p99_with.push_back(absl::ToDoubleMilliseconds(with.p99));
    failed += without.failed + with.failed;
    (void)(*slot)->StopShadow(absl::Seconds(10));
    comparator->WaitIdle();
    const manager::ShadowComparator::ControllerFigures total = comparator->Snapshot().Total();
    compared += total.compared;
    same += total.same;
    dropped += total.dropped;
  }
  (*slot)->Stop();

  Figure rate;
  rate.metric = "serving reconciles/s at 64 in flight, shadow attached";
  rate.value = Median(rate_with);
  rate.unit = "/s";
  rate.baseline = Median(rate_without);
  rate.target = ">= 0.9x";
  rate.met = rate.value >= 0.9 * *rate.baseline;
  reporter.Add(rate);
  Figure p99;
  p99.metric = "serving latency p99 at 64 in flight, shadow attached";
  p99.value = Median(p99_with);
  p99.unit = "ms";
  p99.baseline = Median(p99_without);
  p99.target = "<= 1.2x";
  p99.met = p99.value <= 1.2 * *p99.baseline;
  reporter.Add(p99);
  Figure share;
  share.metric = "calls compared (same release: all the same)";
  share.value = static_cast<double>(compared);
  share.unit = "calls";
  share.baseline = static_cast<double>(args.calls) * args.rounds;
  share.met = same == compared;
  share.target = "same = compared";
  reporter.Add(share);
  Figure lost;
  lost.metric = "calls not given to the shadow or not compared (dropped)";
  lost.value = static_cast<double>(dropped);
  lost.unit = "calls";
  reporter.Add(lost);
  Figure errors;
  errors.metric = "serving calls that failed";
  errors.value = failed;
  errors.unit = "calls";
  errors.target = "== 0";
  errors.met = failed == 0;
  reporter.Add(errors);
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
