#include "runtime/exe/cmd_rbac.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/config/load.h"
#include "runtime/config/operator_spec.h"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"
#include "runtime/exe/rbac.h"
#include "runtime/plugin/supervisor.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;

constexpr absl::Duration kStopGrace = absl::Seconds(5);
constexpr absl::Duration kWaitSlack = absl::Seconds(10);
// Unix socket paths are limited to 108 bytes: a long $TMPDIR falls back to /tmp.
constexpr size_t kMaxTmpDirForSockets = 60;

// A private (0700) socket directory, removed with its contents on destruction.
class SocketDir {
 public:
  static absl::StatusOr<std::unique_ptr<SocketDir>> Create() {
    std::string base = "/tmp";
    const char* tmp = std::getenv("TMPDIR");
    if (tmp != nullptr && *tmp != '\0' && std::strlen(tmp) <= kMaxTmpDirForSockets) base = tmp;
    std::string templ = absl::StrCat(base, "/ctrlhost-rbac-XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create a socket directory under ",
                                                        base, ": ", std::strerror(errno)));
    }
    return std::unique_ptr<SocketDir>(new SocketDir(std::move(templ)));
  }
  ~SocketDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  SocketDir(const SocketDir&) = delete;
  SocketDir& operator=(const SocketDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  explicit SocketDir(std::string path) : path_(std::move(path)) {}
  const std::string path_;
};

// Starts the plugin, waits for its Describe answer and stops it again.
absl::StatusOr<pluginpb::DescribeResponse> DescribePlugin(const config::OperatorSpec& op,
                                                          const config::PluginSpec& spec,
                                                          const std::string& socket_dir,
                                                          absl::Duration timeout) {
  plugin::SupervisorOptions options;
  options.name = absl::StrCat(op.name, "-", spec.name);
  if (const config::ExecSpec* exec = spec.exec(); exec != nullptr) {
    options.source.exec.command = exec->command;
    options.source.exec.args = exec->args;
    options.source.exec.env = exec->env;
    options.source.exec.working_dir = exec->working_dir;
  } else if (const config::EndpointSpec* endpoint = spec.endpoint(); endpoint != nullptr) {
    options.source.endpoint = endpoint->address;
    if (endpoint->tls.has_value()) {
      options.source.tls.enabled = true;
      options.source.tls.ca_file = endpoint->tls->ca_file;
      options.source.tls.cert_file = endpoint->tls->cert_file;
      options.source.tls.key_file = endpoint->tls->key_file;
      options.source.tls.server_name = endpoint->tls->server_name;
    }
  }
  options.socket_dir = socket_dir;
  options.handshake.deadline = spec.startup_timeout.value_or(timeout);
  options.default_stop_grace = kStopGrace;
  const std::string where = absl::StrCat("operator ", op.name, ": plugin ", spec.name);
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      plugin::Supervisor::Start(std::move(options));
  if (!supervisor.ok()) {
    return absl::Status(supervisor.status().code(),
                        absl::StrCat(where, ": ", supervisor.status().message()));
  }
  (*supervisor)
      ->WaitFor(
          [](const plugin::PluginStatus& s) { return s.state != plugin::PluginState::kStarting; },
          spec.startup_timeout.value_or(timeout) + kWaitSlack);
  const plugin::PluginStatus status = (*supervisor)->status();
  (*supervisor)->Stop(kStopGrace);
  if (status.state != plugin::PluginState::kReady || status.describe == nullptr) {
    return absl::UnavailableError(absl::StrCat(where, " did not become ready: ",
                                               status.state == plugin::PluginState::kStarting
                                                   ? "timed out"
                                                   : std::string(status.last_error.message())));
  }
  return *status.describe;
}

// The operator file's override for controller `name` of plugin `plugin_name`, if any.
const config::ControllerSpec* OverrideFor(const config::OperatorSpec& op,
                                          const std::string& plugin_name, const std::string& name) {
  for (const config::ControllerSpec& c : op.controllers) {
    if (c.name == name && (c.plugin.empty() || c.plugin == plugin_name)) return &c;
  }
  return nullptr;
}

}  // namespace

int RunRbacCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags("ctrlhost rbac",
                "Prints the least-privilege RBAC the host needs for the operators in a file: a "
                "ClusterRole and/or namespaced Roles, bound to the host's ServiceAccount. Starts "
                "each plugin once to read what it declares.");
  std::string file;
  RbacOptions options;
  absl::Duration timeout = absl::Seconds(30);
  flags.AddString("file", &file, "Operator file, or a directory of .yaml/.yml files")
      .Short('f')
      .Required();
  flags.AddString("name", &options.name, "Name of the ClusterRole, Roles and their bindings");
  flags.AddString("service-account", &options.service_account,
                  "The host's ServiceAccount (the subject of the bindings)");
  flags
      .AddString("namespace", &options.service_account_namespace,
                 "Namespace of the host's ServiceAccount")
      .Short('n');
  bool leader_elect = false;
  std::string lease_namespace;
  flags.AddBool("leader-elect", &leader_elect,
                "Add what `ctrlhost run --leader-elect` needs: get, watch, create and update on "
                "coordination.k8s.io leases, in a Role in the Lease's namespace");
  flags
      .AddString("leader-elect-resource-namespace", &lease_namespace,
                 "Namespace of the Lease (as for ctrlhost run; in a Pod that is $POD_NAMESPACE, "
                 "the host's own namespace)")
      .ValueName("NAMESPACE")
      .DefaultText("--namespace");
  flags.AddDuration("timeout", &timeout, "Deadline for each plugin to start and describe itself")
      .MinDuration(absl::Milliseconds(1));
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;
  for (const auto& [flag, value] :
       {std::make_pair("--name", &options.name),
        std::make_pair("--service-account", &options.service_account),
        std::make_pair("--namespace", &options.service_account_namespace)}) {
    if (value->empty())
      return UsageError(flags.command(), absl::StrCat(flag, " must not be empty"), err);
  }

  if (!leader_elect && !lease_namespace.empty()) {
    return UsageError(flags.command(), "--leader-elect-resource-namespace needs --leader-elect",
                      err);
  }
  absl::StatusOr<std::vector<config::OperatorSpec>> operators = config::LoadOperators(file);
  if (!operators.ok()) return Failure(operators.status().message(), err);
  absl::StatusOr<std::unique_ptr<SocketDir>> socket_dir = SocketDir::Create();
  if (!socket_dir.ok()) return Failure(socket_dir.status().message(), err);

  std::vector<DeclaredController> controllers;
  for (const config::OperatorSpec& op : *operators) {
    for (const config::PluginSpec& plugin_spec : op.plugins) {
      absl::StatusOr<pluginpb::DescribeResponse> describe =
          DescribePlugin(op, plugin_spec, (*socket_dir)->path(), timeout);
      if (!describe.ok()) return Failure(describe.status().message(), err);
      for (const pluginpb::ControllerSpec& spec : describe->controllers()) {
        const config::ControllerSpec* override = OverrideFor(op, plugin_spec.name, spec.name());
        if (override != nullptr && override->disabled) continue;
        DeclaredController c;
        c.spec = spec;
        c.namespaces.assign(spec.namespaces().begin(), spec.namespaces().end());
        if (override != nullptr && !override->namespaces.empty()) {
          c.namespaces = override->namespaces;
        }
        controllers.push_back(std::move(c));
      }
    }
  }
  ScopedRules rules = DeriveRules(controllers);
  if (leader_elect) {
    AddLeaderElectionRules(
        lease_namespace.empty() ? options.service_account_namespace : lease_namespace, rules);
  }
  out << RenderRbac(options, rules);
  return kExitOk;
}

}  // namespace ctrlhost::exe
