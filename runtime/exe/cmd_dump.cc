#include "runtime/exe/cmd_dump.h"

#include <memory>
#include <optional>

#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "runtime/exe/admin_client.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {

int RunDumpCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags("ctrlhost dump",
                "Prints the state of the running host as YAML: operators, plugins, controllers, "
                "work queues, caches and last errors (the same document as the /debug/dump "
                "endpoint).");
  AdminCommand command_line(flags);
  if (std::optional<int> exit = command_line.Parse(args, out, err)) return *exit;
  absl::StatusOr<std::unique_ptr<AdminClient>> client = command_line.Connect();
  if (!client.ok()) return command_line.ConnectFailed(client.status(), err);
  absl::StatusOr<adminpb::DumpStateResponse> dump = (*client)->DumpState();
  if (!dump.ok()) return Failure(dump.status().message(), err);
  out << dump->yaml();
  if (!dump->yaml().empty() && dump->yaml().back() != '\n') out << "\n";
  return kExitOk;
}

}  // namespace ctrlhost::exe
