// The e2e-burst benchmark's plugin (see burst_controller.h), served on
// $CTRLHOST_PLUGIN_ADDRESS by the C++ SDK; the host execs and supervises it like any plugin.
#include "bench/e2e_burst/burst_controller.h"
#include "sdk/cpp/plugin.h"

int main() {
  ctrlhost::sdk::Plugin plugin("burst", "1.0.0");
  plugin.Add(ctrlhost::bench::MakeBurstController());
  return plugin.Run();
}
