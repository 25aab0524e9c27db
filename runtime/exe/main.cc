// The `ctrlhost` executable: wiring only. Each subcommand lives in its own cmd_<name> library.
#include <iostream>
#include <string>
#include <vector>

#include "runtime/common/absl_deadlock.h"
#include "runtime/common/heap_trim.h"
#include "runtime/exe/cmd_apiserver.h"
#include "runtime/exe/cmd_dump.h"
#include "runtime/exe/cmd_offline.h"
#include "runtime/exe/cmd_plugin.h"
#include "runtime/exe/cmd_rbac.h"
#include "runtime/exe/cmd_replay.h"
#include "runtime/exe/cmd_run.h"
#include "runtime/exe/cmd_version.h"
#include "runtime/exe/command.h"
#include "runtime/serving/connection_server.h"

int main(int argc, char** argv) {
  using namespace ctrlhost::exe;  // NOLINT(build/namespaces): wiring file
  // Debian's Abseil checks every lock gRPC takes for lock-order cycles and aborts on one, real
  // or not; release builds of Abseil do not (absl_deadlock.h).
  ctrlhost::common::TurnOffAbslDeadlockDetection();
  // The soft limit of open files is often 1,024 while the hard one is far higher: servers that
  // hold connections and watches need the hard one (the Go runtime raises it the same way).
  ctrlhost::serving::RaiseOpenFileLimit();
  // Large heap blocks in mappings of their own, given back when freed (heap_trim.h).
  ctrlhost::common::FixMmapThreshold();
  CommandGroup ctrlhost("ctrlhost",
                        "ctrlhost runs Kubernetes-style operators whose controllers are "
                        "out-of-process gRPC plugins.");
  ctrlhost.Add("run", "Run operators from Operator files", RunRunCommand);
  ctrlhost.Add("apiserver", "Run the embedded Kubernetes-compatible API server",
               RunApiServerCommand);
  ctrlhost.Add("plugin", "List and hot-swap the plugins of a running host", RunPluginCommand);
  ctrlhost.Add("dump", "Print the state of a running host as YAML", RunDumpCommand);
  ctrlhost.Add("rbac", "Print the least-privilege RBAC for the operators in a file",
               RunRbacCommand);
  ctrlhost.Add("test", "Run one reconcile of a plugin against fixture files", RunTestCommand);
  ctrlhost.Add("replay", "Replay a recording of reconciles against a plugin and compare answers",
               RunReplayCommand);
  ctrlhost.Add("version", "Print version information", RunVersionCommand);

  std::vector<std::string> args(argv + 1, argv + argc);
  return ctrlhost.Run(args, std::cout, std::cerr);
}
