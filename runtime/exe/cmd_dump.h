// `ctrlhost dump`: prints the running host's state as YAML (operators, plugins, controllers,
// queues, caches, last errors), from the admin API's DumpState.
//
//   $ ctrlhost dump > state.yaml
//
// Thread-compatible.
#ifndef CTRLHOST_RUNTIME_EXE_CMD_DUMP_H_
#define CTRLHOST_RUNTIME_EXE_CMD_DUMP_H_

#include <ostream>
#include <string>
#include <vector>

namespace ctrlhost::exe {

int RunDumpCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_DUMP_H_
