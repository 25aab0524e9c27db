// The swap benchmark's plugin: for every `Tick` (ticks.swap.bench.ctrlhost.dev/v1) it appends a
// record (bench/swap/record.h) to $SWAP_BENCH_RECORD and answers Result::Requeue(
// $SWAP_BENCH_REQUEUE_MS +-50%, uniformly random), with no writes: the host reconciles every object
// again and again, so reconciles run continuously without API traffic. $SWAP_BENCH_VERSION (v1, v2)
// only changes the version it declares: v1 and v2 are the same binary with another environment.
// $SWAP_BENCH_WORKERS sizes the SDK's worker pool (default 32).
//
// Why the jitter: objects created together and requeued after one fixed delay stay in phase, so
// the load comes in waves with idle gaps between them (the gap figure would measure the waves).
// A random delay spreads every object's phase, so completions form a steady stream whose gaps
// are the host's and the machine's, not the workload's.
//
// Served on $CTRLHOST_PLUGIN_ADDRESS by the C++ SDK; the host execs and supervises it.
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "bench/swap/record.h"
#include "sdk/cpp/plugin.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"

namespace {

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace

int main() {
  namespace swap = ctrlhost::bench::swap;
  namespace sdk = ctrlhost::sdk;
  static swap::RecordWriter writer;
  const std::string path = Env("SWAP_BENCH_RECORD", "");
  if (path.empty()) {
    std::cerr << "swap_plugin: SWAP_BENCH_RECORD is not set\n";
    return 2;
  }
  if (absl::Status s = writer.Open(path); !s.ok()) {
    std::cerr << "swap_plugin: " << s << "\n";
    return 2;
  }
  (void)writer.Append(swap::kMarkerMain);  // best effort: markers only explain the timeline
  int requeue_ms = 100, workers = 32;
  if (!absl::SimpleAtoi(Env("SWAP_BENCH_REQUEUE_MS", "100"), &requeue_ms) || requeue_ms < 0 ||
      !absl::SimpleAtoi(Env("SWAP_BENCH_WORKERS", "32"), &workers) || workers < 1) {
    std::cerr << "swap_plugin: bad SWAP_BENCH_REQUEUE_MS or SWAP_BENCH_WORKERS\n";
    return 2;
  }
  static const double requeue_ms_base = requeue_ms;

  sdk::PluginOptions options;
  options.workers = workers;
  sdk::Plugin plugin("swap", Env("SWAP_BENCH_VERSION", "v1"), options);
  sdk::ControllerBuilder controller("tick");
  controller.For("swap.bench.ctrlhost.dev", "v1", "Tick")
      .MaxConcurrent(static_cast<uint32_t>(workers))
      .Reconcile([](const sdk::Request& req) {
        if (!req.exists() || req.deleting()) return sdk::Result();
        uint32_t index = 0;
        if (swap::ParseIndex(req.name(), &index)) {
          if (absl::Status s = writer.Append(index); !s.ok()) {
            return sdk::Result::RetryableError(s.ToString());
          }
        }
        thread_local std::minstd_rand rng(std::random_device{}());
        std::uniform_real_distribution<double> factor(0.5, 1.5);
        return sdk::Result::Requeue(absl::Milliseconds(requeue_ms_base * factor(rng)));
      });
  plugin.Add(controller);
  (void)writer.Append(swap::kMarkerRun);
  return plugin.Run();
}
