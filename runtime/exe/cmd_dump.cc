#include "runtime/exe/cmd_dump.h"

#include <memory>
#include <optional>

#include "runtime/exe/admin_client.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {

int RunDumpCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags("ctrlhost dump",
                "Prints the state of the running host as YAML: operators, plugins, controllers, "
                "work queues, caches and last errors (the same document as the /debug/dump "
                "endpoint).");
  AdminClientFlags where;
  AddAdminClientFlags(flags, &where);
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
  absl::StatusOr<std::string> target = ResolveAdminTarget(where);
  if (!target.ok()) return UsageError(flags.command(), target.status().message(), err);

  absl::StatusOr<std::unique_ptr<AdminClient>> client =
      AdminClient::Connect(*target, where.timeout);
  if (!client.ok()) return Failure(client.status().message(), err);
  absl::StatusOr<admin::DumpStateResponse> dump = (*client)->DumpState();
  if (!dump.ok()) return Failure(dump.status().message(), err);
  out << dump->yaml();
  if (!dump->yaml().empty() && dump->yaml().back() != '\n') out << "\n";
  return kExitOk;
}

}  // namespace ctrlhost::exe
