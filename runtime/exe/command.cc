#include "runtime/exe/command.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"

namespace ctrlhost::exe {

void AddCommonFlags(FlagSet& flags, CommonFlags* common) {
  flags.BeginSection("Common flags");
  flags
      .AddEnum("log-level", &common->log_level, {"debug", "info", "warning", "error"},
               "Least severe log records written to stderr")
      .ValueName("LEVEL");
  flags
      .AddEnum("log-format", &common->log_format, {"text", "json"},
               "Log record format: text lines or one JSON object per line")
      .ValueName("FORMAT");
}

void ApplyCommonFlags(const CommonFlags& common) {
  common::LogLevel level = common::LogLevel::kInfo;
  // The enum flag admits only names ParseLogLevel knows.
  common::ParseLogLevel(common.log_level, &level);
  common::SetLogLevel(level);
  common::SetLogFormat(common.log_format == "json" ? common::LogFormat::kJson
                                                   : common::LogFormat::kText);
}

std::optional<int> ParseCommandLine(FlagSet& flags, const CommonFlags& common,
                                    const std::vector<std::string>& args, std::ostream& out,
                                    std::ostream& err) {
  absl::StatusOr<ParseOutcome> outcome = flags.Parse(args);
  if (!outcome.ok()) return UsageError(flags.command(), outcome.status().message(), err);
  if (*outcome == ParseOutcome::kHelp) {
    out << flags.HelpText();
    return kExitOk;
  }
  ApplyCommonFlags(common);
  return std::nullopt;
}

int UsageError(absl::string_view command, absl::string_view message, std::ostream& err) {
  err << "error: " << message << "\n"
      << "run \"" << command << " --help\" for usage\n";
  return kExitUsage;
}

int Failure(absl::string_view message, std::ostream& err) {
  err << "error: " << message << "\n";
  return kExitFailure;
}

absl::Status ValidateHostPort(absl::string_view flag, absl::string_view value,
                              bool allow_port_zero) {
  const std::string prefix = absl::StrCat("invalid value \"", value, "\" for ", flag, ": ");
  size_t colon = value.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "expected HOST:PORT"));
  }
  absl::string_view host = value.substr(0, colon);
  absl::string_view port_text = value.substr(colon + 1);
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "missing host (use 0.0.0.0 to listen on every interface)"));
  }
  if (absl::StartsWith(host, "[") != absl::EndsWith(host, "]") ||
      (!absl::StartsWith(host, "[") && absl::StrContains(host, ':'))) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "an IPv6 host must be in brackets, e.g. [::1]:9090"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < (allow_port_zero ? 0 : 1) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "the port must be a number from ",
                                                   allow_port_zero ? 0 : 1, " to 65535"));
  }
  return absl::OkStatus();
}

CommandGroup::CommandGroup(std::string command, std::string description)
    : command_(std::move(command)), description_(std::move(description)) {}

void CommandGroup::Add(absl::string_view name, absl::string_view summary, CommandFn run) {
  entries_.push_back({std::string(name), std::string(summary), std::move(run)});
}

const CommandGroup::Entry* CommandGroup::Find(absl::string_view name) const {
  for (const Entry& entry : entries_) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

std::string CommandGroup::HelpText() const {
  std::string out = absl::StrCat("Usage: ", command_, " COMMAND [flags] [args]\n\n");
  if (!description_.empty()) absl::StrAppend(&out, description_, "\n\n");
  absl::StrAppend(&out, "Commands:\n");
  size_t width = 4;  // "help"
  for (const Entry& entry : entries_) width = std::max(width, entry.name.size());
  for (const Entry& entry : entries_) {
    absl::StrAppend(&out, "  ", entry.name, std::string(width + 3 - entry.name.size(), ' '),
                    entry.summary, "\n");
  }
  if (Find("help") == nullptr) {
    absl::StrAppend(&out, "  help", std::string(width - 1, ' '), "Show help for a command\n");
  }
  absl::StrAppend(&out, "\nRun \"", command_, " COMMAND --help\" for a command's flags.\n");
  return out;
}

int CommandGroup::Run(const std::vector<std::string>& args, std::ostream& out,
                      std::ostream& err) const {
  if (args.empty()) {
    err << HelpText();
    return UsageError(command_, absl::StrCat("missing command for \"", command_, "\""), err);
  }
  const std::string& word = args[0];
  if (word == "-h" || word == "--help") {
    out << HelpText();
    return kExitOk;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (word == "help" && Find("help") == nullptr) {
    if (rest.empty()) {
      out << HelpText();
      return kExitOk;
    }
    // `help plugin swap` is `plugin swap --help`.
    rest.push_back("--help");
    return Run(rest, out, err);
  }
  if (absl::StartsWith(word, "-")) {
    return UsageError(
        command_,
        absl::StrCat("unknown flag ", word, " for \"", command_, "\": flags go after the command (",
                     command_, " COMMAND [flags])"),
        err);
  }
  const Entry* entry = Find(word);
  if (entry == nullptr) {
    std::vector<std::string> names;
    for (const Entry& e : entries_) names.push_back(e.name);
    names.push_back("help");
    std::string best = ClosestMatch(word, names);
    return UsageError(command_,
                      absl::StrCat("unknown command \"", word, "\" for \"", command_, "\"",
                                   best.empty() ? "" : absl::StrCat(" (did you mean ", best, "?)")),
                      err);
  }
  return entry->run(rest, out, err);
}

}  // namespace ctrlhost::exe
