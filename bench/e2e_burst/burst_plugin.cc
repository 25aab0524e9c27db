// The e2e-burst benchmark's plugin (see burst_controller.h), served on
// $CTRLHOST_PLUGIN_ADDRESS by the C++ SDK; the host execs and supervises it like any plugin.
#include <cstring>

#include "bench/e2e_burst/burst_controller.h"
#include "sdk/cpp/plugin.h"

// `burst_plugin [--finalizer]`
int main(int argc, char** argv) {
  const bool finalizer = argc > 1 && std::strcmp(argv[1], "--finalizer") == 0;
  ctrlhost::sdk::Plugin plugin("burst", "1.0.0");
  plugin.Add(ctrlhost::bench::MakeBurstController(finalizer));
  return plugin.Run();
}
