// Work queue benchmark: the cost of Add + Get + Done per key, as a ratio to the cheapest queue
// there is (a mutex around a std::deque, push + pop) measured in the same run, with 1 thread and
// with several threads sharing the queue; and the heap allocations per key in steady state,
// counted by replacing the global operator new in this binary.
//
//   bazel run -c opt //bench/queue:queue_bench -- [--json] [--scale=0.5] [--threads=N]
//
// Every figure is the median of alternated rounds (ours, baseline, ours, ...), so both see the
// same machine conditions. Keys look like real ones ("namespace-12/object-name-1234", longer than
// std::string's inline buffer), interned by warm-up rounds before timing, as in a controller
// whose objects already exist.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/report.h"
#include "runtime/common/clock.h"
#include "runtime/queue/work_queue.h"

// Counts every heap allocation in the process. Relaxed: only totals over quiet periods are read.
namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace ctrlhost::bench {
namespace {

using queue::WorkQueue;

constexpr int kKeys = 1000;  // distinct keys per batch
constexpr int kRounds = 5;   // alternated rounds per figure

std::vector<std::string> MakeKeys(int n, int salt) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat("namespace-", salt, "/object-name-", i));
  return keys;
}

WorkQueue::Options BenchOptions() {
  WorkQueue::Options options;
  options.max_idle_keys = 1 << 20;  // keep every key interned, as a live controller would
  return options;
}

// The baseline: a plain mutex around a deque of key pointers.
class PlainQueue {
 public:
  void Push(const std::string* key) {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(key);
  }
  const std::string* Pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (items_.empty()) return nullptr;
    const std::string* key = items_.front();
    items_.pop_front();
    return key;
  }

 private:
  std::mutex mu_;
  std::deque<const std::string*> items_;
};

// Holds the timed threads at a start line until all of them run, so that they contend from the
// first key (a thread that started late would otherwise find the others done, and a "2 threads"
// round would measure one thread at a time: the baseline then swung between 36 and 100 ns).
class StartLine {
 public:
  explicit StartLine(int threads) : threads_(threads) {}
  void Arrive() {
    ready_.fetch_add(1);
    while (!go_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  // Waits for every thread to arrive, releases them and starts the clock.
  Stopwatch Release() {
    while (ready_.load() < threads_) std::this_thread::yield();
    Stopwatch watch;
    go_.store(true, std::memory_order_release);
    return watch;
  }

 private:
  const int threads_;
  std::atomic<int> ready_{0};
  std::atomic<bool> go_{false};
};

// A variant of the queue's configuration or use, for the informative figures.
enum class Variant {
  kDefault,       // default options: durations sampled 1 key in 16
  kTimeEveryKey,  // duration_sample_every = 1: three precise clock reads per key (as before)
  kNoDurations,   // record_durations = false
  kFused,         // default options, the worker loop uses DoneAndTryGet
};

// Each thread, `batches` times: adds its kKeys keys, then takes and finishes as many items
// (any thread's). Returns ns per item.
double RunOurs(int threads, int batches, Variant variant) {
  WorkQueue::Options options = BenchOptions();
  options.record_durations = variant != Variant::kNoDurations;
  if (variant == Variant::kTimeEveryKey) options.duration_sample_every = 1;
  const bool fused = variant == Variant::kFused;
  WorkQueue q("bench", options, common::Clock::Real());
  std::vector<std::vector<std::string>> keys;
  for (int t = 0; t < threads; ++t) keys.push_back(MakeKeys(kKeys, t));
  auto body = [&](int t, int n) {
    for (int b = 0; b < n; ++b) {
      for (const std::string& key : keys[t]) q.Add(key);
      if (fused) {
        std::optional<WorkQueue::Item> item = q.TryGet();
        absl::Status status;
        for (int i = 1; item && i < kKeys; ++i) {
          item = q.DoneAndTryGet(*item, &status);
          if (!status.ok()) std::abort();
        }
        if (item && !q.Done(*item).ok()) std::abort();
        continue;
      }
      for (int i = 0; i < kKeys; ++i) {
        std::optional<WorkQueue::Item> item = q.TryGet();
        if (!item) break;  // another thread took it
        if (!q.Done(*item).ok()) std::abort();
      }
    }
  };
  for (int t = 0; t < threads; ++t) body(t, 2);  // warm up: intern every key
  StartLine start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      start.Arrive();
      body(t, batches);
    });
  }
  Stopwatch watch = start.Release();
  for (std::thread& w : workers) w.join();
  const double seconds = watch.Seconds();
  // Leftovers of the last batch (taken by nobody) are not counted as work done.
  const uint64_t items = q.Metrics().gets_total - static_cast<uint64_t>(threads) * 2 * kKeys;
  return seconds * 1e9 / static_cast<double>(items);
}

double RunPlain(int threads, int batches) {
  PlainQueue q;
  std::vector<std::vector<std::string>> keys;
  for (int t = 0; t < threads; ++t) keys.push_back(MakeKeys(kKeys, t));
  std::atomic<uint64_t> popped{0};
  auto body = [&](int t, int n, bool count) {
    uint64_t mine = 0;
    for (int b = 0; b < n; ++b) {
      for (const std::string& key : keys[t]) q.Push(&key);
      for (int i = 0; i < kKeys; ++i) {
        if (q.Pop() == nullptr) break;
        ++mine;
      }
    }
    if (count) popped += mine;
  };
  for (int t = 0; t < threads; ++t) body(t, 2, false);
  StartLine start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      start.Arrive();
      body(t, batches, true);
    });
  }
  Stopwatch watch = start.Release();
  for (std::thread& w : workers) w.join();
  return watch.Seconds() * 1e9 / static_cast<double>(popped.load());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Only the default variant has a target; the others are informative: what timing every key
// costs (the behaviour before sampling), what no duration metrics save, what the fused
// DoneAndTryGet saves.
void AddRatioFigure(Reporter& reporter, int threads, int batches,
                    Variant variant = Variant::kDefault) {
  std::vector<double> ours, plain;
  for (int r = 0; r < kRounds; ++r) {
    ours.push_back(RunOurs(threads, batches, variant));
    plain.push_back(RunPlain(threads, batches));
  }
  const char* suffix = "";
  if (variant == Variant::kTimeEveryKey) suffix = ", every key timed";
  if (variant == Variant::kNoDurations) suffix = ", no durations";
  if (variant == Variant::kFused) suffix = ", DoneAndTryGet";
  Figure f;
  f.metric = absl::StrCat("add+get+done per key, ", threads, threads == 1 ? " thread" : " threads",
                          suffix);
  f.value = Median(ours);
  f.unit = "ns";
  f.baseline = Median(plain);
  if (variant == Variant::kDefault) {
    f.target = "<= 3x";
    f.met = f.value <= 3 * *f.baseline;
  }
  reporter.Add(f);
}

// Heap allocations per Add+Get+Done once the keys are interned (target: none).
void AddAllocationFigure(Reporter& reporter, int batches) {
  WorkQueue q("bench", BenchOptions(), common::Clock::Real());
  const std::vector<std::string> keys = MakeKeys(kKeys, 0);
  auto round = [&] {
    for (const std::string& key : keys) q.Add(key);
    while (std::optional<WorkQueue::Item> item = q.TryGet()) {
      if (!q.Done(*item).ok()) std::abort();
    }
    // Re-adds while processing and delayed adds take the same slots.
    q.Add(keys[0]);
    std::optional<WorkQueue::Item> item = q.TryGet();
    q.Add(keys[0]);
    q.AddAfter(keys[1], absl::Nanoseconds(1));
    if (!item || !q.Done(*item).ok()) std::abort();
    while (std::optional<WorkQueue::Item> next = q.TryGet()) {
      if (!q.Done(*next).ok()) std::abort();
    }
  };
  for (int i = 0; i < 3; ++i) round();
  const uint64_t before = g_allocations.load();
  for (int i = 0; i < batches; ++i) round();
  const uint64_t allocations = g_allocations.load() - before;
  Figure f;
  f.metric = "heap allocations per key, steady state";
  f.value = static_cast<double>(allocations) / (static_cast<double>(batches) * (kKeys + 2));
  f.unit = "allocs";
  f.target = "== 0";
  f.met = allocations == 0;
  reporter.Add(f);
}

// Informative: AddAfter with an already-due deadline, then Get + Done (heap in and out).
void AddDelayedFigure(Reporter& reporter, int batches) {
  WorkQueue q("bench", BenchOptions(), common::Clock::Real());
  const std::vector<std::string> keys = MakeKeys(kKeys, 0);
  auto round = [&] {
    for (const std::string& key : keys) q.AddAfter(key, absl::Nanoseconds(1));
    while (q.NextDeadline() != absl::InfiniteFuture() || q.Len() > 0) {
      if (std::optional<WorkQueue::Item> item = q.TryGet()) {
        if (!q.Done(*item).ok()) std::abort();
      }
    }
  };
  round();
  Stopwatch watch;
  for (int i = 0; i < batches; ++i) round();
  Figure f;
  f.metric = "addafter+get+done per key, 1 thread";
  f.value = watch.Seconds() * 1e9 / (static_cast<double>(batches) * kKeys);
  f.unit = "ns";
  reporter.Add(f);
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) {
  using namespace ctrlhost::bench;  // NOLINT: main only
  Reporter reporter("queue", argc, argv);
  double scale = 1.0;
  int only_threads = 0;  // --threads=N: only the ratio figure for N threads (for profiling)
  for (const std::string& arg : reporter.args()) {
    if (absl::StartsWith(arg, "--threads=") &&
        (!absl::SimpleAtoi(arg.substr(10), &only_threads) || only_threads <= 0)) {
      std::fprintf(stderr, "queue_bench: bad %s\n", arg.c_str());
      return 2;
    }
    if (absl::StartsWith(arg, "--scale=") &&
        (!absl::SimpleAtod(arg.substr(8), &scale) || scale <= 0)) {
      std::fprintf(stderr, "queue_bench: bad %s\n", arg.c_str());
      return 2;
    }
  }
  const int batches = std::max(1, static_cast<int>(400 * scale));
  if (only_threads > 0) {
    AddRatioFigure(reporter, only_threads, batches / only_threads + 1);
    return reporter.Finish();
  }
  AddRatioFigure(reporter, 1, batches);
  AddRatioFigure(reporter, 2, batches / 2 + 1);
  AddRatioFigure(reporter, 4, batches / 4 + 1);
  AddRatioFigure(reporter, 1, batches, Variant::kTimeEveryKey);
  AddRatioFigure(reporter, 1, batches, Variant::kNoDurations);
  AddRatioFigure(reporter, 1, batches, Variant::kFused);
  AddAllocationFigure(reporter, batches / 4 + 1);
  AddDelayedFigure(reporter, batches / 4 + 1);
  return reporter.Finish();
}
