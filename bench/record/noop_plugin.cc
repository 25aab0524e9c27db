// The record benchmark's plugin (bench/record/record_bench.cc, replay part): the controller
// "webapp" of the recording it replays, built with the C++ SDK, answering every call with an
// empty ReconcileResponse (what the recording holds as the answers). Served on
// $CTRLHOST_PLUGIN_ADDRESS; `ctrlhost replay` and the benchmark's in-process Supervisor start it
// as the host starts plugins.
#include "sdk/cpp/controller.h"
#include "sdk/cpp/plugin.h"
#include "sdk/cpp/result.h"

int main() {
  namespace sdk = ctrlhost::sdk;
  sdk::Plugin plugin("record-noop", "1.0.0");
  plugin.Add(sdk::ControllerBuilder("webapp")
                 .For("ctrlhost.dev", "v1", "WebApp")
                 .Owns("", "v1", "ConfigMap")
                 .Owns("apps", "v1", "Deployment")
                 .Finalizer("ctrlhost.dev/cleanup")
                 .Reconcile([](const sdk::Request&) { return sdk::Result(); }));
  return plugin.Run();
}
