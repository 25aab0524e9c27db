#include "runtime/exe/cmd_plugin.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

namespace {

// Rows as columns padded to their widest cell, two spaces apart; the first row is the header.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows) {
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
  return RenderTable(rows);
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
  bool from_shadow = false;
  std::string min_agreement;  // parsed by SwapUsageProblem into min_agreement_value
  double min_agreement_value = 0;
  int64_t min_compared = 0;
  absl::Duration ready_timeout = absl::ZeroDuration();
};

// The flags that say where a new instance comes from (swap and shadow share them).
void AddSourceFlags(FlagSet& flags, SwapFlags& f) {
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
}

void AddReadyTimeoutFlag(FlagSet& flags, SwapFlags& f) {
  flags
      .AddDuration("ready-timeout", &f.ready_timeout,
                   "How long the new instance may take to become ready (0: the plugin's startup "
                   "deadline from the configuration)")
      .MinDuration(absl::ZeroDuration());
}

void AddSwapFlags(FlagSet& flags, SwapFlags& f) {
  AddSourceFlags(flags, f);
  flags
      .AddInt("canary", &f.canary, 1, 99, "Start the new instance as a canary for PCT% of the keys")
      .ValueName("PCT");
  flags.AddBool("promote-canary", &f.promote, "Make the running canary the serving instance");
  flags.AddBool("abort-canary", &f.abort_canary, "Stop the running canary");
  flags.AddBool("from-shadow", &f.from_shadow,
                "Swap to the running shadow's release if it agreed often enough, then stop the "
                "shadow (see ctrlhost plugin shadow)");
  flags
      .AddString("min-agreement", &f.min_agreement,
                 "With --from-shadow: the least share of compared calls the shadow answered as "
                 "the serving instance did, above 0 and at most 1 (default 0.999)")
      .ValueName("RATIO");
  flags
      .AddInt("min-compared", &f.min_compared, 1, std::numeric_limits<int64_t>::max(),
              "With --from-shadow: the least number of compared calls (default 100)")
      .ValueName("N");
  flags
      .AddInt("expected-generation", &f.expected_generation, 0, std::numeric_limits<int64_t>::max(),
              "Swap only if the serving instance has this generation; 0 means any")
      .ValueName("GEN");
  AddReadyTimeoutFlag(flags, f);
}

// Paths mean what they mean in this shell: the host runs in another working directory.
void MakeSourcePathsAbsolute(SwapFlags& f) {
  f.command = common::AbsoluteCommand(f.command);
  f.working_dir = common::AbsolutePath(f.working_dir);
  f.ca_file = common::AbsolutePath(f.ca_file);
  f.cert_file = common::AbsolutePath(f.cert_file);
  f.key_file = common::AbsolutePath(f.key_file);
}

// What is wrong with the source flags (AddSourceFlags), or nullopt.
std::optional<std::string> SourceUsageProblem(const FlagSet& flags, const SwapFlags& f) {
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
  if (!f.endpoint.empty()) {
    if (absl::Status s = ValidateEndpoint(f.endpoint); !s.ok()) return std::string(s.message());
  }
  return std::nullopt;
}

// What is wrong with the combination of flags (a usage error), or nullopt.
std::optional<std::string> SwapUsageProblem(const FlagSet& flags, SwapFlags& f) {
  // Exactly one action.
  std::vector<std::string> actions;
  if (flags.IsSet("command")) actions.push_back("--command");
  if (flags.IsSet("endpoint")) actions.push_back("--endpoint");
  if (f.promote) actions.push_back("--promote-canary");
  if (f.abort_canary) actions.push_back("--abort-canary");
  if (f.from_shadow) actions.push_back("--from-shadow");
  if (actions.empty()) {
    return "one of --command, --endpoint, --promote-canary, --abort-canary or --from-shadow is "
           "required";
  }
  if (actions.size() > 1) {
    return absl::StrCat(absl::StrJoin(actions, " and "), " are mutually exclusive");
  }
  if (std::optional<std::string> problem = SourceUsageProblem(flags, f)) return problem;
  if (flags.IsSet("canary") && f.command.empty() && f.endpoint.empty()) {
    return "--canary needs --command or --endpoint";
  }
  for (const char* name : {"min-agreement", "min-compared"}) {
    if (flags.IsSet(name) && !f.from_shadow) {
      return absl::StrCat("--", name, " needs --from-shadow");
    }
  }
  if (flags.IsSet("min-agreement")) {
    if (!absl::SimpleAtod(f.min_agreement, &f.min_agreement_value) ||
        !(f.min_agreement_value > 0 && f.min_agreement_value <= 1)) {
      return absl::StrCat("invalid value \"", f.min_agreement,
                          "\" for --min-agreement: expected a number above 0, at most 1");
    }
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
            : f.from_shadow  ? "the shadow's release promoted, "
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
      "--promote-canary or --abort-canary. With --from-shadow it swaps to the release of the "
      "running shadow (ctrlhost plugin shadow) if the shadow agreed often enough, else changes "
      "nothing and exits 1. NAME is OPERATOR/PLUGIN, or PLUGIN when that name is unique. If the "
      "new instance fails to become ready the old one keeps serving and the command exits 1.");
  std::vector<std::string> positionals;
  flags.SetPositionals("NAME", 1, 1, &positionals);
  SwapFlags f;
  AddSwapFlags(flags, f);
  AdminCommand command_line(flags);
  if (std::optional<int> exit = command_line.Parse(args, out, err)) return *exit;
  auto usage = [&](absl::string_view message) { return UsageError(flags.command(), message, err); };
  if (std::optional<std::string> problem = SwapUsageProblem(flags, f)) return usage(*problem);
  MakeSourcePathsAbsolute(f);
  adminpb::SwapPluginRequest request;
  absl::StatusOr<adminpb::PluginSource> source = SwapSource(f);
  if (!source.ok()) return usage(source.status().message());
  if (f.promote) {
    request.mutable_promote_canary();
  } else if (f.abort_canary) {
    request.mutable_abort_canary();
  } else if (f.from_shadow) {
    adminpb::PromoteShadow* promote = request.mutable_promote_shadow();
    if (flags.IsSet("min-agreement")) promote->set_min_agreement(f.min_agreement_value);
    promote->set_min_compared(static_cast<uint64_t>(f.min_compared));
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

std::string FormatShadow(const adminpb::Plugin& plugin) {
  const std::string label = PluginLabel(plugin.operator_(), plugin.name());
  if (!plugin.has_shadow()) {
    return absl::StrCat("plugin ", label, " has no shadow\n");
  }
  const adminpb::Shadow& shadow = plugin.shadow();
  std::string out =
      absl::StrCat("plugin ", label, ": shadow generation ", shadow.swap_generation(), " ",
                   StateName(shadow.state()), ", ", shadow.percent(), "% of the keys, ",
                   shadow.restarts(), shadow.restarts() == 1 ? " restart" : " restarts");
  if (shadow.source().has_exec()) {
    absl::StrAppend(&out, ", command ", shadow.source().exec().command(), ", cpu ",
                    shadow.idle_cpu() ? "idle" : "normal");
  } else if (shadow.source().has_endpoint()) {
    absl::StrAppend(&out, ", endpoint ", shadow.source().endpoint().address());
  }
  absl::StrAppend(&out, "\n");
  if (!shadow.last_error().message().empty()) {
    absl::StrAppend(&out, "last error: ", OneLine(shadow.last_error().message()), "\n");
  }
  std::vector<std::vector<std::string>> rows = {
      {"CONTROLLER", "COMPARED", "SAME", "DIFFERENT", "SHADOW-ERRORS", "DROPPED", "AGREEMENT"}};
  for (const adminpb::ShadowFigures& f : shadow.controllers()) {
    rows.push_back({f.controller(), absl::StrCat(f.compared()), absl::StrCat(f.same()),
                    absl::StrCat(f.different()), absl::StrCat(f.shadow_errors()),
                    absl::StrCat(f.dropped()),
                    f.compared() == 0 ? "-" : absl::StrFormat("%.2f%%", 100 * f.agreement())});
  }
  if (rows.size() == 1) {
    absl::StrAppend(&out, "no call compared yet\n");
  } else {
    absl::StrAppend(&out, RenderTable(rows));
  }
  if (!shadow.differences().empty()) {
    absl::StrAppend(&out,
                    "last differences, oldest first (JSON Patch from the serving answer to "
                    "the shadow's):\n");
    for (const adminpb::ShadowDifference& d : shadow.differences()) {
      const absl::Time at = absl::FromUnixSeconds(d.at().seconds());
      absl::StrAppend(&out, "  ", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", at, absl::UTCTimeZone()),
                      " ", d.controller(), " ", d.key(), ": ", d.differs(), "\n    ", d.patch(),
                      "\n");
    }
  }
  return out;
}

// What is wrong with the flags of `plugin shadow` (a usage error), or nullopt. `start`: a
// source was given.
std::optional<std::string> ShadowUsageProblem(const FlagSet& flags, const SwapFlags& f, bool start,
                                              bool stop) {
  if (flags.IsSet("command") && flags.IsSet("endpoint")) {
    return "--command and --endpoint are mutually exclusive";
  }
  if (stop && start) return "--stop and a new shadow's source are mutually exclusive";
  if (std::optional<std::string> problem = SourceUsageProblem(flags, f)) return problem;
  if (flags.IsSet("cpu") && flags.IsSet("endpoint")) {
    return "--cpu needs --command: a remote shadow's CPU is not the host's to set";
  }
  for (const char* name : {"percent", "max-in-flight", "cpu", "ready-timeout"}) {
    if (flags.IsSet(name) && !start) {
      return absl::StrCat("--", name, " needs --command or --endpoint");
    }
  }
  return std::nullopt;
}

int RunPluginShadowCommand(const std::vector<std::string>& args, std::ostream& out,
                           std::ostream& err) {
  FlagSet flags(
      "ctrlhost plugin shadow",
      "Runs another release of a plugin beside the serving instance as its shadow: it receives "
      "a copy of every call (or of --percent of the keys), its answers are compared with the "
      "serving instance's by what the host would write, and nothing it answers is applied. "
      "With --command or --endpoint it starts one; --stop stops it; with neither it prints how "
      "often the shadow agreed, per controller, and its last differences. Promote it with "
      "ctrlhost plugin swap NAME --from-shadow. NAME is OPERATOR/PLUGIN, or PLUGIN when that "
      "name is unique.");
  std::vector<std::string> positionals;
  flags.SetPositionals("NAME", 1, 1, &positionals);
  SwapFlags f;
  AddSourceFlags(flags, f);
  int64_t percent = 100;
  int64_t max_in_flight = 64;
  bool stop = false;
  flags.AddInt("percent", &percent, 1, 100, "Share of the keys whose calls the shadow gets")
      .ValueName("PCT");
  flags
      .AddInt("max-in-flight", &max_in_flight, 1, 4096,
              "Calls at the shadow at once; more are not given to it (counted as dropped)")
      .ValueName("N");
  std::string cpu = "idle";
  flags.AddEnum("cpu", &cpu, {"idle", "normal"},
                "CPU priority of an exec'd shadow: idle (only CPU time nothing else wants) or "
                "normal");
  flags.AddBool("stop", &stop, "Stop the running shadow");
  AddReadyTimeoutFlag(flags, f);
  AdminCommand command_line(flags);
  if (std::optional<int> exit = command_line.Parse(args, out, err)) return *exit;
  auto usage = [&](absl::string_view message) { return UsageError(flags.command(), message, err); };
  const bool start = flags.IsSet("command") || flags.IsSet("endpoint");
  if (std::optional<std::string> problem = ShadowUsageProblem(flags, f, start, stop)) {
    return usage(*problem);
  }
  MakeSourcePathsAbsolute(f);
  absl::StatusOr<adminpb::PluginSource> source = SwapSource(f);
  if (!source.ok()) return usage(source.status().message());
  absl::StatusOr<PluginName> name = ParsePluginName(positionals[0], f.op);
  if (!name.ok()) return usage(name.status().message());

  absl::StatusOr<std::unique_ptr<AdminClient>> client = command_line.Connect();
  if (!client.ok()) return command_line.ConnectFailed(client.status(), err);
  if (absl::Status s = ResolveOperator(**client, &*name); !s.ok()) return Failure(s.message(), err);
  const std::string label = PluginLabel(name->op, name->plugin);

  if (!start && !stop) {
    adminpb::ListPluginsRequest list;
    list.set_operator_(name->op);
    absl::StatusOr<adminpb::ListPluginsResponse> plugins = (*client)->ListPlugins(list);
    if (!plugins.ok()) return Failure(plugins.status().message(), err);
    for (const adminpb::Plugin& p : plugins->plugins()) {
      if (p.name() == name->plugin) {
        out << FormatShadow(p);
        return kExitOk;
      }
    }
    return Failure(absl::StrCat("no plugin ", label), err);
  }

  adminpb::SwapPluginRequest request;
  request.set_operator_(name->op);
  request.set_plugin(name->plugin);
  if (stop) {
    request.mutable_stop_shadow();
  } else {
    adminpb::StartShadow* shadow = request.mutable_start_shadow();
    *shadow->mutable_source() = *source;
    shadow->set_percent(static_cast<uint32_t>(percent));
    shadow->set_max_in_flight(static_cast<uint32_t>(max_in_flight));
    shadow->set_normal_cpu(cpu == "normal");
    if (f.ready_timeout > absl::ZeroDuration()) {
      *request.mutable_ready_timeout() = common::ToProtoDuration(f.ready_timeout);
    }
  }
  const absl::Duration deadline =
      (f.ready_timeout > absl::ZeroDuration() ? f.ready_timeout : absl::Minutes(1)) +
      command_line.where().timeout;
  absl::StatusOr<adminpb::SwapPluginResponse> response = (*client)->SwapPlugin(request, deadline);
  if (!response.ok()) {
    return Failure(
        absl::StrCat("shadow of plugin ", label, " refused: ", response.status().message()), err);
  }
  if (response->has_failed()) {
    const adminpb::SwapFailed& failed = response->failed();
    err << "error: the shadow of plugin " << label << " did not start ("
        << absl::StripPrefix(adminpb::SwapFailureReason_Name(failed.reason()),
                             "SWAP_FAILURE_REASON_")
        << "): " << failed.message() << "\n";
    for (const std::string& line : failed.output_tail()) err << "  " << line << "\n";
    return kExitFailure;
  }
  if (stop) {
    out << "plugin " << label << ": shadow stopped\n";
  } else {
    out << "plugin " << label << ": shadow generation " << response->succeeded().swap_generation()
        << " is ready and gets " << percent << "% of the calls; nothing it answers is applied\n";
  }
  return kExitOk;
}

int RunPluginCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CommandGroup group("ctrlhost plugin",
                     "Inspects and hot-swaps the plugins of a running host (\"ctrlhost run\") "
                     "through its admin API.");
  group.Add("list", "List plugins with their state, generation and load", RunPluginListCommand);
  group.Add("swap", "Replace a running plugin by a new instance, fully or as a canary",
            RunPluginSwapCommand);
  group.Add("shadow",
            "Run another release beside a plugin on a copy of its calls and compare the answers",
            RunPluginShadowCommand);
  return group.Run(args, out, err);
}

}  // namespace ctrlhost::exe
