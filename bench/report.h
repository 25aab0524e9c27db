// Reporting for ctrlhost benchmarks: every benchmark prints figures, each a measured value and,
// where it makes sense, the same quantity for a baseline measured in the same run, their ratio
// and the target the figure must meet.
//
// Ratios to a same-run baseline are what we compare across machines and runs: absolute numbers
// on a shared, noisy machine move by tens of percent, while the ratio of two things measured
// side by side moves much less. See bench/README.md.
//
//   int main(int argc, char** argv) {
//     bench::Reporter reporter("storage", argc, argv);   // understands --json
//     bench::Figure figure;
//     figure.metric = "create throughput";
//     figure.value = 5200;
//     figure.unit = "ops/s";
//     figure.baseline = 21000;            // raw SQLite inserts, same run
//     figure.target = ">= 5000/s";
//     figure.met = figure.value >= 5000;
//     reporter.Add(figure);
//     return reporter.Finish();           // prints; 1 if any figure missed its target
//   }
//
// Text output (default) is a table on stdout; with --json, one JSON object per figure per line:
//   {"bench":"storage","metric":"create throughput","value":5200,"unit":"ops/s",
//    "baseline":21000,"ratio":0.2476,"target":">= 5000/s","met":true}
// (absent optional fields are omitted).
//
// Thread-safety: Reporter is thread-compatible (add figures from one thread); Stopwatch is
// thread-compatible; the free functions are thread-safe.
#ifndef CTRLHOST_BENCH_REPORT_H_
#define CTRLHOST_BENCH_REPORT_H_

#include <time.h>

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ctrlhost::bench {

// One reported number.
struct Figure {
  std::string metric;  // what was measured: "watch fan-out latency p99"
  double value = 0;
  std::string unit;  // "ops/s", "ms", "MiB", "x"
  // The same quantity for the reference measured in the same run (e.g. raw SQLite for storage).
  std::optional<double> baseline;
  // value / baseline unless set explicitly (e.g. when lower is better and the ratio is inverted).
  std::optional<double> ratio;
  // Human-readable goal: ">= 5000/s", "<= 3x".
  std::optional<std::string> target;
  // Whether the target was met; set by the benchmark, which knows the comparison.
  std::optional<bool> met;

  // ratio if set, else value / baseline when a non-zero baseline is set.
  std::optional<double> EffectiveRatio() const;
};

// Collects figures and prints them. Thread-compatible (add figures from one thread). Recognises
// `--json` in argv (other arguments are left to the benchmark: see args()).
class Reporter {
 public:
  Reporter(std::string bench_name, int argc, char** argv);
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  bool json() const { return json_; }
  // argv[1..] without the arguments the reporter consumed.
  const std::vector<std::string>& args() const { return args_; }

  void Add(Figure figure);
  const std::vector<Figure>& figures() const { return figures_; }

  // Writes the figures to `out` (table or JSON lines).
  void Print(std::ostream& out) const;
  // Prints to stdout; returns the process exit code: 1 if any figure has met == false, else 0.
  int Finish() const;

  // One figure as a JSON line (no trailing newline).
  std::string FormatJson(const Figure& figure) const;
  std::string FormatTable() const;

 private:
  const std::string bench_name_;
  bool json_ = false;
  std::vector<std::string> args_;
  std::vector<Figure> figures_;
};

// The p-th percentile (0 <= p <= 100) of `samples` by the nearest-rank method: the smallest
// sample with at least p% of the samples at or below it. 0 for an empty vector. Takes a copy
// because it sorts.
absl::Duration Percentile(std::vector<absl::Duration> samples, double p);

// A binary built with this benchmark (one of its `data`), by its path in the workspace, e.g.
// "runtime/exe/ctrlhost": in the benchmark's runfiles (bazel run), or beside it in bazel-bin
// (tools/bench runs bazel-bin/bench/<dir>/<name>). nullopt when neither has it.
std::optional<std::string> FindBuiltBinary(const char* argv0, const std::string& rel);

// Measures elapsed time on the monotonic clock from construction or the last Restart().
// Thread-compatible.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void Restart() { start_ = std::chrono::steady_clock::now(); }
  absl::Duration Elapsed() const {
    return absl::FromChrono(std::chrono::steady_clock::now() - start_);
  }
  // Elapsed time in (fractional) seconds, handy for rates: ops / watch.Seconds().
  double Seconds() const { return absl::ToDoubleSeconds(Elapsed()); }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Measures the CPU time of the whole process (every thread, user and system) from construction or
// the last Restart(): what a figure costs in CPU, which load on a noisy machine moves far less than
// a rate. Thread-compatible.
class CpuStopwatch {
 public:
  CpuStopwatch() : start_(Now()) {}
  void Restart() { start_ = Now(); }
  absl::Duration Elapsed() const { return Now() - start_; }

 private:
  static absl::Duration Now() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return absl::DurationFromTimespec(ts);
  }
  absl::Duration start_;
};

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_REPORT_H_
