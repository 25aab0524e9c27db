// Shared by the dispatch benchmarks (bench/dispatch, bench/sdk_dispatch): the ~1 KiB reconcile
// call every one of them sends, and a latency collector for closed-loop runs.
//
//   Collector collector(total);
//   for (int i = 0; i < in_flight && collector.TryStart(); ++i) Send();
//   ... on each answer: if (collector.RecordAndClaim(latency, ok)) Send();
//   Measured m = collector.Wait(start);
//
// A callback must not touch anything the waiting thread owns after its last Record: Wait may
// return (and the caller free the loop's state) as soon as the last answer is recorded. Share
// the state with the callbacks (shared_ptr) or start the next request only when
// RecordAndClaim says one remains (then an answer is still outstanding).
#ifndef CTRLHOST_BENCH_DISPATCH_HARNESS_H_
#define CTRLHOST_BENCH_DISPATCH_HARNESS_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::bench {

// A WebApp-like primary of ~1 KiB for controller "echo".
pluginpb::ReconcileCall MakeCall();

struct Measured {
  double per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  int errors = 0;
};

// Collects latencies from any thread and signals when `total` answers arrived. Thread-safe:
// mu_ guards everything below it.
class Collector {
 public:
  explicit Collector(int total);
  // Records one answer; returns true while more requests should be started.
  bool Record(absl::Duration latency, bool ok = true);
  // Records one answer and claims the next request in one step: true when the caller must
  // start one more (so the run cannot be complete yet).
  bool RecordAndClaim(absl::Duration latency, bool ok = true);
  // Claims one of the `total` requests; false once all were claimed.
  bool TryStart();
  // Blocks until every answer arrived; rates are measured from `start`.
  Measured Wait(absl::Time start);

 private:
  const int total_;
  common::Mutex mu_;
  common::CondVar cv_;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> latencies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_DISPATCH_HARNESS_H_
