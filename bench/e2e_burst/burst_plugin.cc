// The e2e-burst benchmark's plugin: for every `Burst` (burst.bench.ctrlhost.dev/v1) it reports
// status {phase: Done, observedGeneration} and nothing else (no children, no finalizer), so a
// reconcile costs the host one status write. Served on $CTRLHOST_PLUGIN_ADDRESS by the C++ SDK;
// the host execs and supervises it like any plugin.
#include "sdk/cpp/sdk.h"

namespace sdk = ctrlhost::sdk;

namespace {

sdk::Result Reconcile(const sdk::Request& req) {
  if (!req.exists() || req.deleting()) return sdk::Result();
  sdk::Result result;
  result.Status()["phase"] = "Done";
  result.Status()["observedGeneration"] = req.generation();
  return result;
}

}  // namespace

int main() {
  sdk::Plugin plugin("burst", "1.0.0");
  plugin.Add(sdk::ControllerBuilder("burst")
                 .For("burst.bench.ctrlhost.dev", "v1", "Burst")
                 .Reconcile(Reconcile));
  return plugin.Run();
}
