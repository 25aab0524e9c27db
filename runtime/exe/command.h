// Plumbing shared by the `ctrlhost` subcommands: the flags every subcommand has (--log-level,
// --log-format), the uniform handling of help and usage errors, and CommandGroup, which
// dispatches a command word ("run", "plugin") to its handler.
//
//   int RunVersionCommand(const std::vector<std::string>& args, std::ostream& out,
//                         std::ostream& err) {
//     FlagSet flags("ctrlhost version", "Prints version information.");
//     CommonFlags common;
//     AddCommonFlags(flags, &common);
//     if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
//     ...
//   }
//
// Exit codes (flags.h): 0 success (and --help), 1 the command failed at run time, 2 the command
// line was wrong and nothing was done. Usage errors print the message and a pointer to --help:
//
//   error: unknown flag --kubconfig for "ctrlhost run" (did you mean --kubeconfig?)
//   run "ctrlhost run --help" for usage
//
// Thread-compatible: commands run on the main thread.
#ifndef CTRLHOST_RUNTIME_EXE_COMMAND_H_
#define CTRLHOST_RUNTIME_EXE_COMMAND_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {

// A subcommand's entry point: `args` are the words after the command words. Output goes to
// `out`, diagnostics to `err` (log records go to the process log, stderr by default).
using CommandFn =
    std::function<int(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)>;

// --log-level and --log-format, present on every subcommand.
struct CommonFlags {
  std::string log_level = "info";
  std::string log_format = "text";
};

// Declares the common flags in their own help section; call after the command's own flags.
void AddCommonFlags(FlagSet& flags, CommonFlags* common);

// Installs the parsed log level and format in runtime/common/logging.
void ApplyCommonFlags(const CommonFlags& common);

// Parses `args` into `flags`. Returns nullopt when the command should go on (common flags
// already applied); otherwise the exit code after printing help to `out` (0) or the usage error
// to `err` (2).
std::optional<int> ParseCommandLine(FlagSet& flags, const CommonFlags& common,
                                    const std::vector<std::string>& args, std::ostream& out,
                                    std::ostream& err);

// Prints a usage error for `command` ("ctrlhost run") and returns kExitUsage.
int UsageError(absl::string_view command, absl::string_view message, std::ostream& err);

// Prints a run-time failure ("error: ...") and returns kExitFailure.
int Failure(absl::string_view message, std::ostream& err);

// Checks that `value` is HOST:PORT: HOST a name, an IPv4 address or a bracketed IPv6 address
// ("[::1]"), PORT 1..65535 (0 too when `allow_port_zero`). `flag` ("--metrics-addr") names the
// flag in the InvalidArgument error.
absl::Status ValidateHostPort(absl::string_view flag, absl::string_view value,
                              bool allow_port_zero = false);

// A command made of subcommands: `ctrlhost` itself and `ctrlhost plugin`. Handles `-h`/`--help`,
// `help [SUBCOMMAND...]`, a missing subcommand (help on stderr, exit 2) and an unknown one
// (with a "did you mean").
//
// Thread-compatible.
class CommandGroup {
 public:
  CommandGroup(std::string command, std::string description);

  // `summary` is the one-line description shown in the group's help.
  void Add(absl::string_view name, absl::string_view summary, CommandFn run);

  int Run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) const;

  std::string HelpText() const;

 private:
  struct Entry {
    std::string name;
    std::string summary;
    CommandFn run;
  };
  const Entry* Find(absl::string_view name) const;

  const std::string command_;
  const std::string description_;
  std::vector<Entry> entries_;
};

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_COMMAND_H_
