// The e2e-burst benchmark's controller: for every `Burst` (burst.bench.ctrlhost.dev/v1) it
// reports status {phase: Done, observedGeneration} and nothing else (no children, no
// finalizer), so a reconcile costs the host exactly one status write.
//
//   sdk::Plugin plugin("burst", "1.0.0");
//   plugin.Add(bench::MakeBurstController());
//   return plugin.Run();
//
// Thread-safety: the controller is stateless; its reconcile function may run on any number of
// threads at once.
#ifndef CTRLHOST_BENCH_E2E_BURST_BURST_CONTROLLER_H_
#define CTRLHOST_BENCH_E2E_BURST_BURST_CONTROLLER_H_

#include "absl/time/time.h"
#include "sdk/cpp/controller.h"

namespace ctrlhost::bench {

// The controller "burst"; with `finalizer` it declares kBurstFinalizer, so the host adds it to
// every new Burst before the first reconcile (as for most real operators, e.g. the WebApp).
// With `work` each reconcile first sleeps that long (a controller's own work, e.g. a call to
// an outside service; the scheduling benchmark uses it to build a backlog).
inline constexpr char kBurstFinalizer[] = "burst.bench.ctrlhost.dev/cleanup";
sdk::ControllerBuilder MakeBurstController(bool finalizer = false,
                                           absl::Duration work = absl::ZeroDuration());

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_E2E_BURST_BURST_CONTROLLER_H_
