#include "bench/e2e_burst/burst_controller.h"

#include "absl/time/clock.h"
#include "sdk/cpp/request.h"
#include "sdk/cpp/result.h"

namespace ctrlhost::bench {
namespace {

sdk::Result Reconcile(const sdk::Request& req) {
  // Nothing to report for an object that is gone or going.
  if (req.finalizing()) return sdk::Result::Finalized();
  if (!req.exists() || req.deleting()) return sdk::Result();
  sdk::Result result;
  result.Status()["phase"] = "Done";
  result.Status()["observedGeneration"] = req.generation();
  return result;
}

}  // namespace

sdk::ControllerBuilder MakeBurstController(bool finalizer, absl::Duration work) {
  sdk::ControllerBuilder builder("burst");
  builder.For("burst.bench.ctrlhost.dev", "v1", "Burst").Reconcile([work](const sdk::Request& req) {
    if (work > absl::ZeroDuration()) absl::SleepFor(work);
    return Reconcile(req);
  });
  if (finalizer) builder.Finalizer(kBurstFinalizer);
  return builder;
}

}  // namespace ctrlhost::bench
