// The e2e-burst benchmark's plugin (see burst_controller.h), served on
// $CTRLHOST_PLUGIN_ADDRESS by the C++ SDK; the host execs and supervises it like any plugin.
#include <cstring>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "bench/e2e_burst/burst_controller.h"
#include "sdk/cpp/plugin.h"

// `burst_plugin [--finalizer] [--work-ms=N]`
int main(int argc, char** argv) {
  bool finalizer = false;
  int work_ms = 0;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--finalizer") {
      finalizer = true;
      continue;
    }
    if (!absl::ConsumePrefix(&arg, "--work-ms=") || !absl::SimpleAtoi(arg, &work_ms) ||
        work_ms < 0) {
      std::cerr << "burst_plugin: bad argument " << argv[i]
                << " (usage: burst_plugin [--finalizer] [--work-ms=N])\n";
      return 2;
    }
  }
  ctrlhost::sdk::PluginOptions options;
  // Reconciles that take time (--work-ms) run side by side, as many as the host sends.
  if (work_ms > 0) options.workers = 64;
  ctrlhost::sdk::Plugin plugin("burst", "1.0.0", options);
  plugin.Add(ctrlhost::bench::MakeBurstController(finalizer, absl::Milliseconds(work_ms)));
  return plugin.Run();
}
