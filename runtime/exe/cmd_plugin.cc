#include "runtime/exe/cmd_plugin.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "runtime/common/paths.h"
#include "runtime/common/proto_time.h"
#include "runtime/common/utf8.h"
#include "runtime/common/yaml_json.h"
#include "runtime/exe/admin_client.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {
namespace {

constexpr size_t kMaxErrorColumn = 60;

std::string StateName(adminpb::PluginState state) {
  std::string name(absl::StripPrefix(adminpb::PluginState_Name(state), "PLUGIN_STATE_"));
  return name.empty() ? absl::StrCat(static_cast<int>(state)) : name;
}

std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > kMaxErrorColumn)
    text = absl::StrCat(common::Utf8Prefix(text, kMaxErrorColumn - 3), "...");
  return text;
}

std::string PluginLabel(absl::string_view op, absl::string_view name) {
  return absl::StrCat(op, "/", name);
}

// Operator and plugin names from NAME ("OPERATOR/PLUGIN" or "PLUGIN") and --operator.
struct PluginName {
  std::string op;  // empty: look it up
  std::string plugin;
};

absl::StatusOr<PluginName> ParsePluginName(absl::string_view text, const std::string& op_flag) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  if (parts.size() > 2 ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid plugin name \"", text, "\": expected PLUGIN or OPERATOR/PLUGIN"));
  }
  if (parts.size() == 2) {
    if (!op_flag.empty() && op_flag != parts[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("--operator ", op_flag, " contradicts the operator in \"", text, "\""));
    }
    return PluginName{parts[0], parts[1]};
  }
  return PluginName{op_flag, parts[0]};
}

// Finds the operator of a plugin named without one; it must be unique.
absl::Status ResolveOperator(AdminClient& client, PluginName* name) {
  if (!name->op.empty()) return absl::OkStatus();
  absl::StatusOr<adminpb::ListPluginsResponse> plugins = client.ListPlugins({});
  if (!plugins.ok()) return plugins.status();
  std::vector<std::string> operators;
  for (const adminpb::Plugin& plugin : plugins->plugins()) {
    if (plugin.name() == name->plugin) operators.push_back(plugin.operator_());
  }
  if (operators.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no plugin named \"", name->plugin, "\" (see \"ctrlhost plugin list\")"));
  }
  if (operators.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin name \"", name->plugin, "\" is ambiguous: it is in operators ",
                     absl::StrJoin(operators, ", "), "; use OPERATOR/PLUGIN"));
  }
  name->op = operators[0];
  return absl::OkStatus();
}

absl::Status ValidateEndpoint(absl::string_view endpoint) {
  if (absl::StartsWith(endpoint, "unix:///") || absl::StartsWith(endpoint, "dns:///")) {
    return absl::OkStatus();
  }
  return ValidateHostPort("--endpoint", endpoint);
}

}  // namespace

std::string FormatPluginTable(const adminpb::ListPluginsResponse& plugins) {
  std::vector<std::vector<std::string>> rows = {{"OPERATOR", "NAME", "STATE", "HEALTH",
                                                 "GENERATION", "VERSION", "INFLIGHT", "QUEUED",
                                                 "RESTARTS", "CANARY", "LAST-ERROR"}};
  for (const adminpb::Plugin& p : plugins.plugins()) {
    std::string canary = "-";
    if (p.has_canary()) {
      canary = absl::StrCat("gen ", p.canary().swap_generation(), " ", p.canary().percent(), "% ",
                            StateName(p.canary().state()));
    }
    std::string health = p.health().empty() ? "-" : p.health();
    if (!p.health().empty() && p.health() != "SERVING") {
      absl::StrAppend(&health, " (", p.waiting_requests(), " waiting)");
    }
    rows.push_back({p.operator_(), p.name(), StateName(p.state()), health,
                    absl::StrCat(p.swap_generation()),
                    p.reported_version().empty() ? "-" : p.reported_version(),
                    absl::StrCat(p.work().in_flight(), "/", p.work().max_in_flight()),
                    absl::StrCat(p.work().queued()), absl::StrCat(p.restarts()), canary,
                    p.last_error().message().empty() ? "-" : OneLine(p.last_error().message())});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

absl::StatusOr<std::string> FormatPluginsJson(const adminpb::ListPluginsResponse& plugins) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  if (!google::protobuf::util::MessageToJsonString(plugins, &json, options).ok()) {
    return absl::InternalError("cannot render the plugins as JSON");
  }
  return json;
}

absl::StatusOr<std::string> FormatPluginsYaml(const adminpb::ListPluginsResponse& plugins) {
  absl::StatusOr<std::string> json = FormatPluginsJson(plugins);
  if (!json.ok()) return json.status();
  nlohmann::json parsed = nlohmann::json::parse(*json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return absl::InternalError("cannot render the plugins as YAML");
  return common::JsonToYaml(parsed);
}

int RunPluginListCommand(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err) {
  FlagSet flags("ctrlhost plugin list",
                "Lists the plugins of the running host with their state, the generation of the "
                "serving instance, the version it reported, its work in flight and queued, "
                "unplanned restarts, a running canary and the last error.");
  std::string op;
  std::string output = "table";
  flags.AddString("operator", &op, "Only this operator's plugins").ValueName("NAME");
  flags.AddEnum("output", &output, {"table", "yaml", "json"}, "Output format").Short('o');
  AdminCommand command_line(flags);
  if (std::optional<int> exit = command_line.Parse(args, out, err)) return *exit;
  absl::StatusOr<std::unique_ptr<AdminClient>> client = command_line.Connect();
  if (!client.ok()) return command_line.ConnectFailed(client.status(), err);
  adminpb::ListPluginsRequest request;
  request.set_operator_(op);
  absl::StatusOr<adminpb::ListPluginsResponse> plugins = (*client)->ListPlugins(request);
  if (!plugins.ok()) return Failure(plugins.status().message(), err);

  if (output == "table") {
    if (plugins->plugins().empty()) {
      err << (op.empty() ? std::string("no plugins") : absl::StrCat("no plugins in operator ", op))
          << "\n";
      return kExitOk;
    }
    out << FormatPluginTable(*plugins);
    return kExitOk;
  }
  absl::StatusOr<std::string> text =
      output == "json" ? FormatPluginsJson(*plugins) : FormatPluginsYaml(*plugins);
  if (!text.ok()) return Failure(text.status().message(), err);
  out << *text;
  if (text->empty() || text->back() != '\n') out << "\n";
  return kExitOk;
}

namespace {

// The flags of `ctrlhost plugin swap`.
struct SwapFlags {
  std::string op, command, working_dir, endpoint, ca_file, cert_file, key_file, server_name;
  std::vector<std::string> command_args, env;
  int64_t canary = 0;
  int64_t expected_generation = 0;
  bool promote = false, abort_canary = false;
  absl::Duration ready_timeout = absl::ZeroDuration();
};

void AddSwapFlags(FlagSet& flags, SwapFlags& f) {
  flags.AddString("operator", &f.op, "Operator of the plugin, instead of OPERATOR/ in NAME")
      .ValueName("NAME");
  flags.AddString("command", &f.command, "Executable of the new instance (path, or name in PATH)")
      .ValueName("CMD");
  flags.AddStrings("arg", &f.command_args, "Argument for --command, in order").ValueName("ARG");
  flags.AddStrings("env", &f.env, "Environment variable for --command").ValueName("KEY=VALUE");
  flags.AddString("working-dir", &f.working_dir, "Working directory for --command")
      .ValueName("DIR");
  flags
      .AddString("endpoint", &f.endpoint,
                 "Address of a plugin running elsewhere, instead of --command")
      .ValueName("HOST:PORT");
  flags.AddString("ca-file", &f.ca_file, "CA bundle (PEM) that verifies --endpoint's certificate")
      .ValueName("PATH");
  flags
      .AddString("cert-file", &f.cert_file, "Client certificate (PEM) for mutual TLS to --endpoint")
      .ValueName("PATH");
  flags.AddString("key-file", &f.key_file, "Client key (PEM) for mutual TLS to --endpoint")
      .ValueName("PATH");
  flags
      .AddString("server-name", &f.server_name,
                 "Name expected in --endpoint's certificate (default: its host)")
      .ValueName("NAME");
  flags
      .AddInt("canary", &f.canary, 1, 99, "Start the new instance as a canary for PCT% of the keys")
      .ValueName("PCT");
  flags.AddBool("promote-canary", &f.promote, "Make the running canary the serving instance");
  flags.AddBool("abort-canary", &f.abort_canary, "Stop the running canary");
  flags
      .AddInt("expected-generation", &f.expected_generation, 0, std::numeric_limits<int64_t>::max(),
              "Swap only if the serving instance has this generation; 0 means any")
      .ValueName("GEN");
  flags
      .AddDuration("ready-timeout", &f.ready_timeout,
                   "How long the new instance may take to become ready (0: the plugin's startup "
                   "deadline from the configuration)")
      .MinDuration(absl::ZeroDuration());
}

// What is wrong with the combination of flags (a usage error), or nullopt.
std::optional<std::string> SwapUsageProblem(const FlagSet& flags, const SwapFlags& f) {
  // Exactly one action.
  std::vector<std::string> actions;
  if (flags.IsSet("command")) actions.push_back("--command");
  if (flags.IsSet("endpoint")) actions.push_back("--endpoint");
  if (f.promote) actions.push_back("--promote-canary");
  if (f.abort_canary) actions.push_back("--abort-canary");
  if (actions.empty()) {
    return "one of --command, --endpoint, --promote-canary or --abort-canary is required";
  }
  if (actions.size() > 1) {
    return absl::StrCat(absl::StrJoin(actions, " and "), " are mutually exclusive");
  }
  if (f.command.empty() && flags.IsSet("command")) return "--command must not be empty";
  if (f.endpoint.empty() && flags.IsSet("endpoint")) return "--endpoint must not be empty";
  for (const char* name : {"arg", "env", "working-dir"}) {
    if (flags.IsSet(name) && f.command.empty()) {
      return absl::StrCat("--", name, " needs --command");
    }
  }
  for (const char* name : {"ca-file", "cert-file", "key-file", "server-name"}) {
    if (flags.IsSet(name) && f.endpoint.empty()) {
      return absl::StrCat("--", name, " needs --endpoint");
    }
  }
  if (f.cert_file.empty() != f.key_file.empty()) {
    return "--cert-file and --key-file go together";
  }
  if (flags.IsSet("canary") && f.command.empty() && f.endpoint.empty()) {
    return "--canary needs --command or --endpoint";
  }
  if (!f.endpoint.empty()) {
    if (absl::Status s = ValidateEndpoint(f.endpoint); !s.ok()) return std::string(s.message());
  }
  return std::nullopt;
}

// The new instance's source from --command or --endpoint (empty for the canary actions);
// InvalidArgument for a malformed --env.
absl::StatusOr<adminpb::PluginSource> SwapSource(const SwapFlags& f) {
  adminpb::PluginSource source;
  if (!f.command.empty()) {
    adminpb::ExecSource* exec = source.mutable_exec();
    exec->set_command(f.command);
    for (const std::string& arg : f.command_args) exec->add_args(arg);
    exec->set_working_dir(f.working_dir);
    for (const std::string& pair : f.env) {
      std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
      if (kv.first.empty() || pair.find('=') == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid value \"", pair, "\" for --env: expected KEY=VALUE"));
      }
      (*exec->mutable_env())[kv.first] = kv.second;
    }
  } else if (!f.endpoint.empty()) {
    adminpb::EndpointSource* remote = source.mutable_endpoint();
    remote->set_address(f.endpoint);
    if (!f.ca_file.empty() || !f.cert_file.empty() || !f.server_name.empty()) {
      remote->mutable_tls()->set_ca_file(f.ca_file);
      remote->mutable_tls()->set_cert_file(f.cert_file);
      remote->mutable_tls()->set_key_file(f.key_file);
      remote->mutable_tls()->set_server_name(f.server_name);
    }
  }
  return source;
}

// Prints the outcome of a swap the host answered; the exit code.
int ReportSwap(const adminpb::SwapPluginRequest& request,
               const adminpb::SwapPluginResponse& response, const SwapFlags& f,
               const std::string& label, std::ostream& out, std::ostream& err) {
  if (response.has_failed()) {
    const adminpb::SwapFailed& failed = response.failed();
    const std::string reason(absl::StripPrefix(adminpb::SwapFailureReason_Name(failed.reason()),
                                               "SWAP_FAILURE_REASON_"));
    err << "error: swap of plugin " << label << " failed (" << reason << "): " << failed.message()
        << "\n"
        << "generation " << failed.attempted_generation() << " was not started; generation "
        << failed.serving_generation() << " still serves\n";
    if (!failed.output_tail().empty()) {
      err << "last output of the failed instance:\n";
      for (const std::string& line : failed.output_tail()) err << "  " << line << "\n";
    }
    return kExitFailure;
  }
  if (!response.has_succeeded()) {
    return Failure(absl::StrCat("swap of plugin ", label, ": the host gave no result"), err);
  }
  const adminpb::SwapSucceeded& succeeded = response.succeeded();
  if (request.has_start_canary()) {
    out << "plugin " << label << ": canary generation " << succeeded.swap_generation()
        << " is ready and serves " << f.canary << "% of the keys\n";
  } else {
    out << "plugin " << label << ": "
        << (f.promote        ? "canary promoted, "
            : f.abort_canary ? "canary aborted, "
                             : "swapped, ")
        << "generation " << succeeded.swap_generation() << " serves";
    if (succeeded.draining_generation() != 0) {
      out << ", generation " << succeeded.draining_generation() << " is draining";
    }
    out << "\n";
  }
  return kExitOk;
}

}  // namespace

int RunPluginSwapCommand(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err) {
  FlagSet flags(
      "ctrlhost plugin swap",
      "Replaces a running plugin by a new instance without stopping its controllers: the new "
      "instance starts next to the old one, and once it is ready the old one receives no new "
      "work and drains. With --canary the new instance serves only that share of the keys until "
      "--promote-canary or --abort-canary. NAME is OPERATOR/PLUGIN, or PLUGIN when that name is "
      "unique. If the new instance fails to become ready the old one keeps serving and the "
      "command exits 1.");
  std::vector<std::string> positionals;
  flags.SetPositionals("NAME", 1, 1, &positionals);
  SwapFlags f;
  AddSwapFlags(flags, f);
  AdminCommand command_line(flags);
  if (std::optional<int> exit = command_line.Parse(args, out, err)) return *exit;
  auto usage = [&](absl::string_view message) { return UsageError(flags.command(), message, err); };
  if (std::optional<std::string> problem = SwapUsageProblem(flags, f)) return usage(*problem);
  // Paths mean what they mean in this shell: the host runs in another working directory.
  f.command = common::AbsoluteCommand(f.command);
  f.working_dir = common::AbsolutePath(f.working_dir);
  f.ca_file = common::AbsolutePath(f.ca_file);
  f.cert_file = common::AbsolutePath(f.cert_file);
  f.key_file = common::AbsolutePath(f.key_file);
  adminpb::SwapPluginRequest request;
  absl::StatusOr<adminpb::PluginSource> source = SwapSource(f);
  if (!source.ok()) return usage(source.status().message());
  if (f.promote) {
    request.mutable_promote_canary();
  } else if (f.abort_canary) {
    request.mutable_abort_canary();
  } else if (f.canary > 0) {
    *request.mutable_start_canary()->mutable_source() = *source;
    request.mutable_start_canary()->set_percent(static_cast<uint32_t>(f.canary));
  } else {
    *request.mutable_replace() = *source;
  }
  absl::StatusOr<PluginName> name = ParsePluginName(positionals[0], f.op);
  if (!name.ok()) return usage(name.status().message());
  request.set_expected_generation(static_cast<uint64_t>(f.expected_generation));
  if (f.ready_timeout > absl::ZeroDuration()) {
    *request.mutable_ready_timeout() = common::ToProtoDuration(f.ready_timeout);
  }

  absl::StatusOr<std::unique_ptr<AdminClient>> client = command_line.Connect();
  if (!client.ok()) return command_line.ConnectFailed(client.status(), err);
  if (absl::Status s = ResolveOperator(**client, &*name); !s.ok()) return Failure(s.message(), err);
  request.set_operator_(name->op);
  request.set_plugin(name->plugin);
  const std::string label = PluginLabel(name->op, name->plugin);

  // The host answers once the new instance is ready or has failed: wait for that, plus the
  // usual timeout. Without --ready-timeout the configured startup deadline applies, which the
  // CLI does not know; a minute covers sane configurations.
  const absl::Duration deadline =
      (f.ready_timeout > absl::ZeroDuration() ? f.ready_timeout : absl::Minutes(1)) +
      command_line.where().timeout;
  absl::StatusOr<adminpb::SwapPluginResponse> response = (*client)->SwapPlugin(request, deadline);
  if (!response.ok()) {
    return Failure(
        absl::StrCat("swap of plugin ", label, " refused: ", response.status().message()), err);
  }
  return ReportSwap(request, *response, f, label, out, err);
}

int RunPluginCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CommandGroup group("ctrlhost plugin",
                     "Inspects and hot-swaps the plugins of a running host (\"ctrlhost run\") "
                     "through its admin API.");
  group.Add("list", "List plugins with their state, generation and load", RunPluginListCommand);
  group.Add("swap", "Replace a running plugin by a new instance, fully or as a canary",
            RunPluginSwapCommand);
  return group.Run(args, out, err);
}

}  // namespace ctrlhost::exe
