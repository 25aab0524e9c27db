// `ctrlhost run`'s command line resolved into a RunPlan before anything starts (cmd_run.h):
// PlanRun, ResolveLeaderElection, ResolveApiClient, ClusterOriginLine.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/common/paths.h"
#include "runtime/config/load.h"
#include "runtime/exe/cmd_apiserver.h"
#include "runtime/exe/cmd_run.h"
#include "runtime/exe/command.h"
#include "runtime/kube/validation.h"
#include "runtime/plugin/sandbox.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;

absl::Status PathError(absl::string_view what, absl::string_view path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " \"", path, "\": ", why));
}

// Why `path` cannot be used as a readable file, or OK.
absl::Status CheckReadable(absl::string_view what, const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) return PathError(what, path, "permission denied");
  return absl::OkStatus();
}

// The operator files (runtime/config's rules, shared with LoadOperators).
absl::Status ResolveOperatorFiles(const std::string& file, RunPlan* plan) {
  absl::StatusOr<std::vector<std::string>> files = config::ResolveOperatorFiles(file);
  if (!files.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--file ", files.status().message()));
  }
  plan->operator_files = *std::move(files);
  std::error_code error;
  plan->from_directory = fs::is_directory(file, error);
  return absl::OkStatus();
}

absl::Status ResolveKubeconfig(const RunFlags& flags,
                               const std::optional<std::string>& kubeconfig_env,
                               const std::optional<std::string>& service_host_env, RunPlan* plan) {
  if (!flags.kubeconfig.empty()) {
    std::error_code error;
    if (!fs::is_regular_file(flags.kubeconfig, error)) {
      return PathError(
          "--kubeconfig", flags.kubeconfig,
          fs::exists(flags.kubeconfig, error) ? "not a regular file" : "no such file or directory");
    }
    if (absl::Status s = CheckReadable("--kubeconfig", flags.kubeconfig); !s.ok()) return s;
    plan->kubeconfigs = {common::AbsolutePath(flags.kubeconfig)};
    plan->kubeconfig_source = "--kubeconfig";
    return absl::OkStatus();
  }
  if (!kubeconfig_env.has_value() || kubeconfig_env->empty()) {
    if (service_host_env.has_value() && !service_host_env->empty()) {
      plan->in_cluster = true;
      plan->kubeconfig_source = "in-cluster";
    }
    return absl::OkStatus();
  }
  // kubectl semantics: a colon-separated list; files that do not exist are skipped.
  for (absl::string_view part : absl::StrSplit(*kubeconfig_env, ':', absl::SkipEmpty())) {
    std::string path(part);
    std::error_code error;
    if (!fs::is_regular_file(path, error)) continue;
    if (absl::Status s = CheckReadable("$KUBECONFIG file", path); !s.ok()) return s;
    plan->kubeconfigs.push_back(common::AbsolutePath(path));
  }
  if (plan->kubeconfigs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("$KUBECONFIG is \"", *kubeconfig_env,
                     "\" but none of its files exist; unset it to use the embedded API server"));
  }
  plan->kubeconfig_source = "$KUBECONFIG";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunPlan> PlanRun(const RunFlags& flags,
                                const std::optional<std::string>& kubeconfig_env,
                                const std::optional<std::string>& service_host_env,
                                const std::optional<std::string>& pod_namespace) {
  RunPlan plan;
  if (flags.data_dir.empty()) return absl::InvalidArgumentError("--data-dir must not be empty");
  if (absl::Status s = ResolveOperatorFiles(flags.file, &plan); !s.ok()) return s;
  if (absl::Status s = ResolveKubeconfig(flags, kubeconfig_env, service_host_env, &plan); !s.ok())
    return s;
  if (absl::Status s = ValidateHostPort("--metrics-addr", flags.metrics_addr, true); !s.ok()) {
    return s;
  }
  // Every path made absolute here, once: the plugin sandbox, socket addresses and the plugins'
  // environment never see a path relative to a working directory.
  plan.data_dir = common::AbsolutePath(flags.data_dir);
  plan.admin_socket = flags.admin_socket.empty() ? plan.data_dir + "/admin.sock"
                                                 : common::AbsolutePath(flags.admin_socket);
  if (!flags.record.empty()) plan.record_dir = common::AbsolutePath(flags.record);
  plan.metrics_addr = flags.metrics_addr;
  if (!flags.kube_api_qps.empty()) {
    double qps = 0;
    if (!absl::SimpleAtod(flags.kube_api_qps, &qps) || !(qps >= 0 && qps < 1e9)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kube-api-qps: \"", flags.kube_api_qps,
                       "\" is not a number of requests per second (0: no limit)"));
    }
    plan.api_qps = qps;
  }
  if (flags.kube_api_burst > 0) plan.api_burst = static_cast<int>(flags.kube_api_burst);
  if (flags.watch_stale_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--watch-stale-after must be positive");
  }
  plan.watch_stale_after = flags.watch_stale_after;
  const bool can_switch = plugin::CanSwitchUser(kAutoPluginUidBase);
  if (flags.plugin_user == "auto" || (flags.plugin_user.empty() && can_switch)) {
    if (!can_switch) {
      return absl::InvalidArgumentError(
          "--plugin-user auto: the host cannot switch users (it is not root and lacks "
          "CAP_SETUID/CAP_SETGID, or the uids are not mapped in its user namespace)");
    }
    plan.plugin_uid = kAutoPluginUidBase;
    plan.plugin_uid_per_plugin = true;
  } else if (!flags.plugin_user.empty() && flags.plugin_user != "host") {
    const std::vector<std::string> parts = absl::StrSplit(flags.plugin_user, ':');
    uint32_t uid = 0, gid = 0;
    if (parts.size() > 2 || !absl::SimpleAtoi(parts[0], &uid) || uid >= 0xffffffffu ||
        !absl::SimpleAtoi(parts.size() == 2 ? parts[1] : parts[0], &gid) || gid >= 0xffffffffu) {
      return absl::InvalidArgumentError(
          absl::StrCat("--plugin-user: \"", flags.plugin_user,
                       "\" is not UID, UID:GID (numbers), \"auto\" or \"host\""));
    }
    plan.plugin_uid = uid;
    plan.plugin_gid = gid;
  }
  if (absl::Status s = ResolveLeaderElection(flags, {}, pod_namespace, &plan); !s.ok()) return s;
  if (!flags.shard_ring.empty()) {
    manager::ShardRingOptions ring;
    ring.ring = flags.shard_ring;
    ring.lease_namespace = !flags.leader_elect_resource_namespace.empty()
                               ? flags.leader_elect_resource_namespace
                               : pod_namespace.value_or("default");
    if (ring.lease_namespace.empty()) ring.lease_namespace = "default";
    ring.identity = flags.leader_elect_identity.empty() ? manager::DefaultIdentity()
                                                        : flags.leader_elect_identity;
    ring.lease_duration = flags.leader_elect_lease_duration;
    ring.renew_deadline = flags.leader_elect_renew_deadline;
    ring.retry_period = flags.leader_elect_retry_period;
    ring.poll_period = std::min(absl::Milliseconds(500), ring.retry_period);
    if (absl::Status s = manager::ValidateShardRing(ring); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--shard-ring: ", s.message()));
    }
    plan.shard_ring = std::move(ring);
  }
  return plan;
}

namespace {

// The per-operator half of ResolveLeaderElection (see cmd_run.h).
absl::Status ResolveOperatorLeases(const RunFlags& flags,
                                   const std::vector<const config::OperatorSpec*>& per_operator,
                                   const std::vector<std::string>& without,
                                   const std::optional<std::string>& pod_namespace, RunPlan* plan) {
  auto given = [&flags](absl::string_view name) {
    return flags.leader_elect_given.count(std::string(name)) > 0;
  };
  if (given("leader-elect") && !flags.leader_elect) return absl::OkStatus();  // all off
  const config::OperatorSpec& first = *per_operator.front();
  const std::string first_block =
      absl::StrCat(first.leader_election->location.ToString(), ": operator ", first.name,
                   ": spec.leaderElection.perOperator");
  if (!without.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        first_block,
        ": once an operator has a Lease of its own, every operator of the host "
        "must (spec.leaderElection: {perOperator: true}); an operator without one would run on "
        "every host: ",
        absl::StrJoin(without, ", ")));
  }
  if (flags.leader_elect) {
    return absl::InvalidArgumentError(
        absl::StrCat(first_block,
                     " and --leader-elect exclude each other (the host-wide Lease would decide "
                     "for operators that have their own)"));
  }
  if (!flags.shard_ring.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard-ring and ", first_block,
                     " exclude each other: a host that does not hold an "
                     "operator's Lease would never run its share of that operator's keys"));
  }
  const std::string identity = flags.leader_elect_identity.empty() ? manager::DefaultIdentity()
                                                                   : flags.leader_elect_identity;
  std::map<std::string, std::string> lease_owner;  // "ns/name" -> the block that names it
  for (const config::OperatorSpec* op : per_operator) {
    const config::LeaderElectionSpec& block = *op->leader_election;
    const std::string where =
        absl::StrCat(block.location.ToString(), ": operator ", op->name, ": spec.leaderElection");
    manager::LeaderElectionOptions le;
    le.lease_name =
        !block.lease_name.empty() ? block.lease_name : absl::StrCat("ctrlhost-", op->name);
    if (std::vector<std::string> problems = kube::IsDns1123Subdomain(le.lease_name);
        !problems.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the default Lease name \"", le.lease_name,
                       "\" is invalid (set leaseName): ", absl::StrJoin(problems, "; ")));
    }
    if (!block.lease_namespace.empty()) {
      le.lease_namespace = block.lease_namespace;
    } else if (!flags.leader_elect_resource_namespace.empty()) {
      le.lease_namespace = flags.leader_elect_resource_namespace;
    } else {
      le.lease_namespace = pod_namespace.value_or("default");
    }
    if (le.lease_namespace.empty()) le.lease_namespace = "default";
    le.identity = identity;
    le.lease_duration = block.lease_duration.value_or(flags.leader_elect_lease_duration);
    le.renew_deadline = block.renew_deadline.value_or(flags.leader_elect_renew_deadline);
    le.retry_period = block.retry_period.value_or(flags.leader_elect_retry_period);
    if (absl::Status s = manager::ValidateLeaderElection(le); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " merged with the --leader-elect-* flags and their defaults: ", s.message()));
    }
    const std::string lease = absl::StrCat(le.lease_namespace, "/", le.lease_name);
    if (auto [it, fresh] = lease_owner.emplace(lease, where); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": Lease ", lease,
                                                     " is already the Lease of ", it->second,
                                                     " (each operator needs its own)"));
    }
    plan->operator_leases[op->name] = std::move(le);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ResolveLeaderElection(const RunFlags& flags,
                                   const std::vector<config::OperatorSpec>& operators,
                                   const std::optional<std::string>& pod_namespace, RunPlan* plan) {
  auto given = [&flags](absl::string_view name) {
    return flags.leader_elect_given.count(std::string(name)) > 0;
  };
  // The documents' blocks merged: a field set by two documents must have one value.
  config::LeaderElectionSpec file;
  std::vector<std::string> blocks;  // "file:line:column" of each block
  std::vector<std::string> conflicts;
  std::map<std::string, std::string> origin;  // field -> the block that set it first
  std::vector<const config::OperatorSpec*> per_operator;
  std::vector<std::string> without;  // operators without a Lease of their own
  for (const config::OperatorSpec& op : operators) {
    if (op.leader_election.has_value() && op.leader_election->per_operator) {
      per_operator.push_back(&op);
      continue;
    }
    without.push_back(absl::StrCat(op.name, " (", op.location.ToString(), ")"));
    if (!op.leader_election.has_value()) continue;
    const config::LeaderElectionSpec& le = *op.leader_election;
    blocks.push_back(le.location.ToString());
    auto merge = [&](absl::string_view field, auto& into, const auto& value, const auto& unset,
                     auto format) {
      if (value == unset) return;
      if (into == unset) {
        into = value;
        origin[std::string(field)] = le.location.ToString();
      } else if (into != value) {
        conflicts.push_back(absl::StrCat(le.location.ToString(), ": spec.leaderElection.", field,
                                         ": ", format(value), " differs from ", format(into),
                                         " set at ", origin[std::string(field)],
                                         " (the host has one Lease for all its operators)"));
      }
    };
    auto duration = [](const std::optional<absl::Duration>& d) { return absl::FormatDuration(*d); };
    auto text = [](const std::string& v) { return absl::StrCat("\"", v, "\""); };
    const std::optional<absl::Duration> no_duration;
    const std::string no_text;
    merge("leaseDuration", file.lease_duration, le.lease_duration, no_duration, duration);
    merge("renewDeadline", file.renew_deadline, le.renew_deadline, no_duration, duration);
    merge("retryPeriod", file.retry_period, le.retry_period, no_duration, duration);
    merge("leaseName", file.lease_name, le.lease_name, no_text, text);
    merge("leaseNamespace", file.lease_namespace, le.lease_namespace, no_text, text);
  }
  if (!conflicts.empty()) return absl::InvalidArgumentError(absl::StrJoin(conflicts, "\n"));

  plan->leader_election.reset();
  plan->operator_leases.clear();
  if (!per_operator.empty()) {
    return ResolveOperatorLeases(flags, per_operator, without, pod_namespace, plan);
  }
  const bool enabled =
      given("leader-elect") ? flags.leader_elect : (flags.leader_elect || !blocks.empty());
  if (!enabled) return absl::OkStatus();
  if (!flags.shard_ring.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard-ring and ",
        flags.leader_elect
            ? "--leader-elect"
            : absl::StrCat("spec.leaderElection (", absl::StrJoin(blocks, ", "), ")"),
        " exclude each other: with leader election only the leader dispatches, so the standbys' "
        "shares of the keys would never run"));
  }
  manager::LeaderElectionOptions le;
  le.lease_name = !given("leader-elect-resource-name") && !file.lease_name.empty()
                      ? file.lease_name
                      : flags.leader_elect_resource_name;
  if (!flags.leader_elect_resource_namespace.empty() &&
      (given("leader-elect-resource-namespace") || file.lease_namespace.empty())) {
    le.lease_namespace = flags.leader_elect_resource_namespace;
  } else if (!file.lease_namespace.empty()) {
    le.lease_namespace = file.lease_namespace;
  } else {
    le.lease_namespace = pod_namespace.value_or("default");
  }
  if (le.lease_namespace.empty()) le.lease_namespace = "default";
  le.identity = flags.leader_elect_identity.empty() ? manager::DefaultIdentity()
                                                    : flags.leader_elect_identity;
  auto pick = [&](absl::string_view flag, absl::Duration from_flag,
                  const std::optional<absl::Duration>& from_file) {
    return !given(flag) && from_file.has_value() ? *from_file : from_flag;
  };
  le.lease_duration =
      pick("leader-elect-lease-duration", flags.leader_elect_lease_duration, file.lease_duration);
  le.renew_deadline =
      pick("leader-elect-renew-deadline", flags.leader_elect_renew_deadline, file.renew_deadline);
  le.retry_period =
      pick("leader-elect-retry-period", flags.leader_elect_retry_period, file.retry_period);
  if (absl::Status s = manager::ValidateLeaderElection(le); !s.ok()) {
    return absl::InvalidArgumentError(
        blocks.empty() ? absl::StrCat("--leader-elect-*: ", s.message())
                       : absl::StrCat(absl::StrJoin(blocks, ", "),
                                      ": spec.leaderElection merged with the --leader-elect-* "
                                      "flags and their defaults: ",
                                      s.message()));
  }
  plan->leader_election = std::move(le);
  return absl::OkStatus();
}

config::ApiClientSpec ResolveApiClient(const RunPlan& plan,
                                       const std::vector<config::OperatorSpec>& operators) {
  config::ApiClientSpec client;
  for (const config::OperatorSpec& op : operators) {
    if (!op.api_client.has_value()) continue;
    if (std::optional<double> qps = op.api_client->qps; qps.has_value()) {
      const bool unlimited = *qps == 0 || (client.qps.has_value() && *client.qps == 0);
      client.qps = unlimited ? 0 : std::max(*qps, client.qps.value_or(0));
    }
    if (std::optional<int> burst = op.api_client->burst; burst.has_value()) {
      client.burst = std::max(*burst, client.burst.value_or(0));
    }
  }
  if (plan.api_qps.has_value()) client.qps = plan.api_qps;
  if (plan.api_burst.has_value()) client.burst = plan.api_burst;
  return client;
}

std::string ClusterOriginLine(const RunPlan& plan, const std::string& api_url) {
  if (plan.in_cluster) {
    return absl::StrCat("cluster: ", api_url,
                        " in-cluster (the Pod's service account, $KUBERNETES_SERVICE_HOST)");
  }
  if (plan.kubeconfigs.empty()) return "";
  const std::string files = absl::StrJoin(plan.kubeconfigs, ":");
  if (plan.kubeconfig_source == "$KUBECONFIG") {
    return absl::StrCat("cluster: ", api_url, " from $KUBECONFIG=", files,
                        " (not the embedded API server; unset KUBECONFIG to use it)");
  }
  return absl::StrCat("cluster: ", api_url, " from ", plan.kubeconfig_source, " ", files);
}

}  // namespace ctrlhost::exe
