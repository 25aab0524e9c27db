#include "runtime/config/internal/sections.h"

#include <cstdint>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/common/utf8.h"
#include "runtime/config/internal/fields.h"
#include "runtime/kube/selector.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::config::internal {
namespace {

constexpr int64_t kMaxCount = 1 << 20;  // bound for counts (in-flight, concurrency, burst)
constexpr int64_t kMaxControllersPerPlugin = 10000;
constexpr int64_t kMaxCacheBytes = int64_t{1} << 50;  // 1 PiB: any real cap fits

// "host:port" with a port in 1..65535; the host may be a bracketed IPv6 address.
bool SplitHostPort(absl::string_view address, std::string* host) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return false;
  }
  absl::string_view h = address.substr(0, colon);
  if (absl::StartsWith(h, "[")) {
    if (!absl::EndsWith(h, "]") || h.size() < 3) return false;
    h = h.substr(1, h.size() - 2);
  } else if (absl::StrContains(h, ':')) {
    return false;  // unbracketed IPv6
  }
  *host = std::string(h);
  return !host->empty();
}

bool IsLoopback(absl::string_view host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

ExecSpec ParseExec(YamlReader& r, const YAML::Node& node, const std::string& path) {
  ExecSpec exec;
  const std::vector<Field> fields = r.Fields(node, path, ExecFields());
  if (!node.IsMap()) return exec;
  std::optional<std::string> command = r.String(Get(fields, "command"), Join(path, "command"));
  if (!command.has_value() || command->empty()) {
    if (!Has(fields, "command") || command.has_value())
      r.Error(node, Join(path, "command"), "required");
  } else {
    exec.command = *command;
  }
  exec.args = r.StringList(Get(fields, "args"), Join(path, "args"));
  if (auto dir = r.String(Get(fields, "workingDir"), Join(path, "workingDir"))) {
    exec.working_dir = *dir;
  }
  const YAML::Node env = Get(fields, "env");
  const std::string env_path = Join(path, "env");
  absl::flat_hash_map<std::string, int> seen;
  auto add = [&](const YAML::Node& at, const std::string& at_path, std::string name,
                 std::string value) {
    if (name.empty() || absl::StrContains(name, '=') || absl::StrContains(name, '\0')) {
      r.Error(at, at_path, absl::StrCat("invalid environment variable name \"", name, "\""));
      return;
    }
    if (auto [it, inserted] = seen.emplace(name, r.Location(at).line); !inserted) {
      r.Error(at, at_path,
              absl::StrCat("duplicate variable \"", name, "\" (first on line ", it->second, ")"));
      return;
    }
    exec.env.emplace_back(std::move(name), std::move(value));
  };
  if (env.IsMap()) {
    for (auto& [name, value] : r.StringMap(env, env_path)) {
      add(env, Join(env_path, name), name, value);
    }
  } else {
    const std::vector<YAML::Node> items = r.Sequence(env, env_path);
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item_path = Index(env_path, i);
      const std::vector<Field> var = r.Fields(items[i], item_path, EnvVarFields());
      if (!items[i].IsMap()) continue;
      std::optional<std::string> name = r.String(Get(var, "name"), Join(item_path, "name"));
      if (!Has(var, "name")) {
        r.Error(items[i], Join(item_path, "name"), "required");
        continue;
      }
      if (!name.has_value()) continue;
      std::optional<std::string> value = r.String(Get(var, "value"), Join(item_path, "value"));
      add(Get(var, "name"), Join(item_path, "name"), *name, value.value_or(""));
    }
  }
  return exec;
}

EndpointSpec ParseEndpoint(YamlReader& r, const YAML::Node& node, const std::string& path) {
  EndpointSpec endpoint;
  const std::vector<Field> fields = r.Fields(node, path, EndpointFields());
  if (!node.IsMap()) return endpoint;
  const YAML::Node tls_node = Get(fields, "tls");
  if (!IsAbsent(tls_node)) {
    const std::string tls_path = Join(path, "tls");
    TlsSpec tls;
    const std::vector<Field> tf = r.Fields(tls_node, tls_path, TlsFields());
    tls.ca_file = r.String(Get(tf, "caFile"), Join(tls_path, "caFile")).value_or("");
    tls.cert_file = r.String(Get(tf, "certFile"), Join(tls_path, "certFile")).value_or("");
    tls.key_file = r.String(Get(tf, "keyFile"), Join(tls_path, "keyFile")).value_or("");
    tls.server_name = r.String(Get(tf, "serverName"), Join(tls_path, "serverName")).value_or("");
    if (tls.cert_file.empty() != tls.key_file.empty()) {
      r.Error(tls_node, Join(tls_path, tls.cert_file.empty() ? "certFile" : "keyFile"),
              "required: certFile and keyFile go together");
    }
    endpoint.tls = tls;
  }
  const YAML::Node address = Get(fields, "address");
  const std::string address_path = Join(path, "address");
  std::optional<std::string> value = r.String(address, address_path);
  if (!value.has_value() || value->empty()) {
    if (!Has(fields, "address") || value.has_value()) r.Error(node, address_path, "required");
    return endpoint;
  }
  endpoint.address = *value;
  std::string host;
  absl::string_view a = *value;
  if (absl::ConsumePrefix(&a, "unix://") || absl::ConsumePrefix(&a, "unix:")) {
    if (!absl::StartsWith(a, "/") || a.size() < 2) {
      r.Error(address, address_path,
              absl::StrCat("invalid value \"", *value,
                           "\": a unix address needs an absolute path (unix:///path/to.sock)"));
    }
    return endpoint;
  }
  absl::ConsumePrefix(&a, "dns:///");
  if (!SplitHostPort(a, &host)) {
    r.Error(address, address_path,
            absl::StrCat("invalid value \"", *value,
                         "\": expected host:port, dns:///host:port or unix:///path"));
  } else if (!endpoint.tls.has_value() && !IsLoopback(host)) {
    r.Error(address, address_path,
            absl::StrCat("plaintext is only allowed to unix: addresses and loopback hosts; set ",
                         Join(path, "tls"), " for \"", host, "\""));
  }
  return endpoint;
}

RateLimitSpec ParseRateLimit(YamlReader& r, const YAML::Node& node, const std::string& path) {
  RateLimitSpec limit;
  const std::vector<Field> fields = r.Fields(node, path, RateLimitFields());
  limit.qps = r.Double(Get(fields, "qps"), Join(path, "qps"));
  if (limit.qps.has_value() && !(*limit.qps > 0 && *limit.qps < 1e9)) {
    r.Error(Get(fields, "qps"), Join(path, "qps"), "must be positive (and finite)");
    limit.qps.reset();
  }
  if (auto burst = r.Int(Get(fields, "burst"), Join(path, "burst"), 1, kMaxCount)) {
    limit.burst = static_cast<int>(*burst);
  }
  limit.base_delay = r.Duration(Get(fields, "baseDelay"), Join(path, "baseDelay"), false);
  limit.max_delay = r.Duration(Get(fields, "maxDelay"), Join(path, "maxDelay"), false);
  if (limit.base_delay.has_value() && limit.max_delay.has_value() &&
      *limit.max_delay < *limit.base_delay) {
    r.Error(Get(fields, "maxDelay"), Join(path, "maxDelay"), "must not be less than baseDelay");
  }
  return limit;
}

// The source of a plugin or of its shadow: exactly one of exec and endpoint.
std::variant<ExecSpec, EndpointSpec> ParseSource(YamlReader& r, const YAML::Node& node,
                                                 const std::vector<Field>& fields,
                                                 const std::string& path) {
  const bool has_exec = Has(fields, "exec");
  const bool has_endpoint = Has(fields, "endpoint");
  if (has_exec && has_endpoint) {
    r.Error(Get(fields, "endpoint"), path, "exec and endpoint are mutually exclusive");
  } else if (!has_exec && !has_endpoint) {
    r.Error(node, path, "exactly one of exec or endpoint is required");
  }
  if (has_endpoint && !has_exec) {
    return ParseEndpoint(r, Get(fields, "endpoint"), Join(path, "endpoint"));
  }
  if (has_exec) return ParseExec(r, Get(fields, "exec"), Join(path, "exec"));
  return ExecSpec{};
}

// A `cpu` field: true for "normal"; false for "idle" (the default, which `idle_means`
// explains in the error for any other value) and when absent.
bool NormalCpu(YamlReader& r, const std::vector<Field>& fields, const std::string& path,
               absl::string_view idle_means) {
  const std::optional<std::string> cpu = r.String(Get(fields, "cpu"), Join(path, "cpu"));
  if (!cpu.has_value() || *cpu == "idle") return false;
  if (*cpu == "normal") return true;
  r.Error(Get(fields, "cpu"), Join(path, "cpu"),
          absl::StrCat("invalid value \"", *cpu, "\": \"idle\" (the default: ", idle_means,
                       ") or \"normal\""));
  return false;
}

ShadowSpec ParseShadow(YamlReader& r, const YAML::Node& node, const std::string& path) {
  ShadowSpec shadow;
  shadow.location = r.Location(node);
  const std::vector<Field> fields = r.Fields(node, path, ShadowFields());
  if (!node.IsMap()) return shadow;
  shadow.source = ParseSource(r, node, fields, path);
  if (auto n = r.Int(Get(fields, "percent"), Join(path, "percent"), 1, 100)) {
    shadow.percent = static_cast<int>(*n);
  }
  if (auto n = r.Int(Get(fields, "maxInFlight"), Join(path, "maxInFlight"), 1, kMaxCount)) {
    shadow.max_in_flight = static_cast<int>(*n);
  }
  if (Has(fields, "cpu") && std::holds_alternative<EndpointSpec>(shadow.source)) {
    r.Error(Get(fields, "cpu"), Join(path, "cpu"),
            "applies to an exec'd shadow: a remote shadow's CPU is not the host's to set");
  }
  shadow.normal_cpu =
      NormalCpu(r, fields, path, "an exec'd shadow gets only CPU time nothing else wants");
  return shadow;
}

}  // namespace

std::optional<PluginSpec> ParsePlugin(YamlReader& r, const YAML::Node& node,
                                      const std::string& path) {
  PluginSpec plugin;
  plugin.location = r.Location(node);
  const std::vector<Field> fields = r.Fields(node, path, PluginFields());
  if (!node.IsMap()) return std::nullopt;
  std::optional<std::string> name = r.String(Get(fields, "name"), Join(path, "name"));
  if (!Has(fields, "name")) r.Error(node, Join(path, "name"), "required");
  if (name.has_value()) {
    CheckDns1123Label(r, Get(fields, "name"), Join(path, "name"), *name);
    plugin.name = *name;
  }
  plugin.source = ParseSource(r, node, fields, path);
  if (const YAML::Node shadow = Get(fields, "shadow"); !IsAbsent(shadow)) {
    plugin.shadow = ParseShadow(r, shadow, Join(path, "shadow"));
  }
  plugin.startup_timeout =
      r.Duration(Get(fields, "startupTimeout"), Join(path, "startupTimeout"), false);
  plugin.shutdown_grace_period =
      r.Duration(Get(fields, "shutdownGracePeriod"), Join(path, "shutdownGracePeriod"), true);
  plugin.request_timeout =
      r.Duration(Get(fields, "requestTimeout"), Join(path, "requestTimeout"), false);
  plugin.not_serving_timeout =
      r.Duration(Get(fields, "notServingTimeout"), Join(path, "notServingTimeout"), true);
  if (auto n = r.Int(Get(fields, "maxInFlight"), Join(path, "maxInFlight"), 1, kMaxCount)) {
    plugin.max_in_flight = static_cast<int>(*n);
  }
  if (auto n =
          r.Int(Get(fields, "maxCacheBytes"), Join(path, "maxCacheBytes"), 1, kMaxCacheBytes)) {
    plugin.max_cache_bytes = *n;
  }
  if (auto n = r.Int(Get(fields, "maxControllers"), Join(path, "maxControllers"), 1,
                     kMaxControllersPerPlugin)) {
    plugin.max_controllers = static_cast<int>(*n);
  }
  return plugin;
}

std::optional<double> ApiWeight(YamlReader& r, const std::vector<Field>& fields,
                                const std::string& path) {
  const YAML::Node node = Get(fields, "apiWeight");
  std::optional<double> weight = r.Double(node, path);
  if (weight.has_value() && !(*weight > 0 && *weight <= 1e6)) {
    r.Error(node, path,
            "must be positive and at most 1000000: a share of the API budget relative to the "
            "others");
    return std::nullopt;
  }
  return weight;
}

ApiClientSpec ParseApiClient(YamlReader& r, const YAML::Node& node, const std::string& path) {
  ApiClientSpec client;
  const std::vector<Field> fields = r.Fields(node, path, ApiClientFields());
  client.qps = r.Double(Get(fields, "qps"), Join(path, "qps"));
  if (client.qps.has_value() && !(*client.qps >= 0 && *client.qps < 1e9)) {
    r.Error(Get(fields, "qps"), Join(path, "qps"), "must be 0 (no limit) or positive (and finite)");
    client.qps.reset();
  }
  if (auto burst = r.Int(Get(fields, "burst"), Join(path, "burst"), 1, kMaxCount)) {
    client.burst = static_cast<int>(*burst);
  }
  return client;
}

LeaderElectionSpec ParseLeaderElection(YamlReader& r, const YAML::Node& node,
                                       const std::string& path) {
  LeaderElectionSpec le;
  le.location = r.Location(node);
  const std::vector<Field> fields = r.Fields(node, path, LeaderElectionFields());
  le.lease_duration = r.Duration(Get(fields, "leaseDuration"), Join(path, "leaseDuration"), false);
  le.renew_deadline = r.Duration(Get(fields, "renewDeadline"), Join(path, "renewDeadline"), false);
  le.retry_period = r.Duration(Get(fields, "retryPeriod"), Join(path, "retryPeriod"), false);
  le.per_operator = r.Bool(Get(fields, "perOperator"), Join(path, "perOperator")).value_or(false);
  if (le.lease_duration.has_value() && le.renew_deadline.has_value() &&
      *le.lease_duration <= *le.renew_deadline) {
    r.Error(Get(fields, "leaseDuration"), Join(path, "leaseDuration"),
            absl::StrCat(absl::FormatDuration(*le.lease_duration),
                         " must be greater than renewDeadline (",
                         absl::FormatDuration(*le.renew_deadline), ")"));
  }
  if (le.renew_deadline.has_value() && le.retry_period.has_value() &&
      *le.renew_deadline <= *le.retry_period * 1.2) {
    r.Error(Get(fields, "renewDeadline"), Join(path, "renewDeadline"),
            absl::StrCat(absl::FormatDuration(*le.renew_deadline),
                         " must be greater than 1.2 x retryPeriod (",
                         absl::FormatDuration(*le.retry_period), ")"));
  }
  if (std::optional<std::string> name = r.String(Get(fields, "leaseName"), Join(path, "leaseName"));
      name.has_value()) {
    std::vector<std::string> problems = kube::IsDns1123Subdomain(*name);
    if (!problems.empty()) {
      r.Error(Get(fields, "leaseName"), Join(path, "leaseName"),
              absl::StrCat("invalid value \"", *name, "\": ", absl::StrJoin(problems, "; ")));
    } else {
      le.lease_name = *name;
    }
  }
  if (std::optional<std::string> ns =
          r.String(Get(fields, "leaseNamespace"), Join(path, "leaseNamespace"));
      ns.has_value()) {
    if (kube::IsDns1123Label(*ns).empty()) {
      le.lease_namespace = *ns;
    } else {
      CheckDns1123Label(r, Get(fields, "leaseNamespace"), Join(path, "leaseNamespace"), *ns);
    }
  }
  return le;
}

RecordSpec ParseRecord(YamlReader& r, const YAML::Node& node, const std::string& path) {
  RecordSpec record;
  record.location = r.Location(node);
  const std::vector<Field> fields = r.Fields(node, path, RecordFields());
  if (!node.IsMap()) return record;
  std::optional<std::string> dir = r.String(Get(fields, "dir"), Join(path, "dir"));
  if (!dir.has_value() || dir->empty()) {
    if (!Has(fields, "dir") || dir.has_value()) {
      r.Error(node, Join(path, "dir"), "required: the directory the recordings are written to");
    }
  } else {
    record.dir = *dir;
  }
  record.controllers = r.StringList(Get(fields, "controllers"), Join(path, "controllers"));
  absl::flat_hash_set<std::string> seen;
  for (const std::string& c : record.controllers) {
    if (c.empty() || !seen.insert(c).second) {
      r.Error(Get(fields, "controllers"), Join(path, "controllers"),
              c.empty() ? "a controller name is empty"
                        : absl::StrCat("controller \"", c, "\" is listed twice"));
    }
  }
  record.max_bytes =
      r.Int(Get(fields, "maxBytes"), Join(path, "maxBytes"), int64_t{1} << 20, int64_t{1} << 40);
  if (std::optional<std::string> secret =
          r.String(Get(fields, "secretData"), Join(path, "secretData"));
      secret.has_value()) {
    if (*secret == "include") {
      record.secret_data = true;
    } else if (*secret != "digest") {
      r.Error(Get(fields, "secretData"), Join(path, "secretData"),
              absl::StrCat("invalid value \"", *secret,
                           "\": \"digest\" (the default: Secret values recorded as SHA-256 "
                           "digests) or \"include\" (recorded as they are)"));
    }
  }
  record.normal_cpu =
      NormalCpu(r, fields, path, "files are written on CPU time the reconciles do not want");
  return record;
}

std::optional<ControllerSpec> ParseController(YamlReader& r, const YAML::Node& node,
                                              const std::string& path) {
  ControllerSpec controller;
  controller.location = r.Location(node);
  const std::vector<Field> fields = r.Fields(node, path, ControllerFields());
  if (!node.IsMap()) return std::nullopt;
  std::optional<std::string> name = r.String(Get(fields, "name"), Join(path, "name"));
  if (!name.has_value() || name->empty()) {
    if (!Has(fields, "name") || name.has_value()) r.Error(node, Join(path, "name"), "required");
  } else {
    controller.name = *name;
  }
  controller.plugin = r.String(Get(fields, "plugin"), Join(path, "plugin")).value_or("");
  if (auto n = r.Int(Get(fields, "maxConcurrentReconciles"), Join(path, "maxConcurrentReconciles"),
                     1, kMaxCount)) {
    controller.max_concurrent_reconciles = static_cast<int>(*n);
  }
  const std::string ns_path = Join(path, "namespaces");
  const std::vector<YAML::Node> ns_nodes = r.Sequence(Get(fields, "namespaces"), ns_path);
  for (size_t i = 0; i < ns_nodes.size(); ++i) {
    std::optional<std::string> ns = r.String(ns_nodes[i], Index(ns_path, i));
    if (!ns.has_value()) {
      if (IsAbsent(ns_nodes[i])) r.Error(ns_nodes[i], Index(ns_path, i), "must not be null");
      continue;
    }
    CheckDns1123Label(r, ns_nodes[i], Index(ns_path, i), *ns);
    if (std::find(controller.namespaces.begin(), controller.namespaces.end(), *ns) !=
        controller.namespaces.end()) {
      r.Error(ns_nodes[i], Index(ns_path, i), absl::StrCat("duplicate namespace \"", *ns, "\""));
      continue;
    }
    controller.namespaces.push_back(*ns);
  }
  const YAML::Node selector = Get(fields, "labelSelector");
  if (auto s = r.String(selector, Join(path, "labelSelector"))) {
    if (absl::StatusOr<kube::LabelSelector> parsed = kube::LabelSelector::Parse(*s); !parsed.ok()) {
      r.Error(selector, Join(path, "labelSelector"), parsed.status().message());
    }
    controller.label_selector = *s;
  }
  controller.resync_period =
      r.Duration(Get(fields, "resyncPeriod"), Join(path, "resyncPeriod"), true);
  controller.disabled = r.Bool(Get(fields, "disabled"), Join(path, "disabled")).value_or(false);
  if (const YAML::Node limit = Get(fields, "rateLimit"); !IsAbsent(limit)) {
    controller.rate_limit = ParseRateLimit(r, limit, Join(path, "rateLimit"));
  }
  if (const YAML::Node sharding = Get(fields, "sharding"); !IsAbsent(sharding)) {
    const std::string sharding_path = Join(path, "sharding");
    const std::vector<Field> sharding_fields = r.Fields(sharding, sharding_path, ShardingFields());
    controller.sharded =
        r.Bool(Get(sharding_fields, "enabled"), Join(sharding_path, "enabled")).value_or(false);
  }
  if (const YAML::Node status = Get(fields, "status"); !IsAbsent(status)) {
    const std::string status_path = Join(path, "status");
    const std::vector<Field> status_fields =
        r.Fields(status, status_path, ControllerStatusFields());
    const YAML::Node conditions = Get(status_fields, "conditions");
    const std::string conditions_path = Join(status_path, "conditions");
    if (std::optional<std::string> who = r.String(conditions, conditions_path)) {
      if (*who == "host") {
        controller.host_status = true;
      } else if (*who != "plugin") {
        r.Error(conditions, conditions_path,
                absl::StrCat("must be \"host\" or \"plugin\", not \"", *who, "\""));
      }
    }
  }
  if (const YAML::Node tasks = Get(fields, "backgroundTasks"); !IsAbsent(tasks)) {
    const std::string tasks_path = Join(path, "backgroundTasks");
    const std::vector<Field> tasks_fields = r.Fields(tasks, tasks_path, ControllerTasksFields());
    const YAML::Node qps = Get(tasks_fields, "enqueueQps");
    controller.task_enqueue_qps = r.Double(qps, Join(tasks_path, "enqueueQps"));
    if (controller.task_enqueue_qps.has_value() &&
        !(*controller.task_enqueue_qps > 0 && *controller.task_enqueue_qps < 1e9)) {
      r.Error(qps, Join(tasks_path, "enqueueQps"),
              "must be positive (and finite): enqueues per second of the controller's tasks");
      controller.task_enqueue_qps.reset();
    }
    if (auto burst = r.Int(Get(tasks_fields, "enqueueBurst"), Join(tasks_path, "enqueueBurst"), 1,
                           kMaxCount)) {
      controller.task_enqueue_burst = static_cast<int>(*burst);
    }
  }
  if (const YAML::Node scheduling = Get(fields, "scheduling"); !IsAbsent(scheduling)) {
    const std::string scheduling_path = Join(path, "scheduling");
    const std::vector<Field> scheduling_fields =
        r.Fields(scheduling, scheduling_path, ControllerSchedulingFields());
    controller.priorities =
        r.Bool(Get(scheduling_fields, "priorities"), Join(scheduling_path, "priorities"));
    const YAML::Node max_wait = Get(scheduling_fields, "maxWait");
    controller.max_wait = r.Duration(max_wait, Join(scheduling_path, "maxWait"), false);
    controller.api_weight = ApiWeight(r, scheduling_fields, Join(scheduling_path, "apiWeight"));
  }
  return controller;
}

std::optional<RouteSpec> ParseRoute(YamlReader& r, const YAML::Node& node, const std::string& path,
                                    const absl::flat_hash_map<std::string, int>& plugin_lines) {
  RouteSpec route;
  route.location = r.Location(node);
  const std::vector<Field> fields = r.Fields(node, path, RouteFields());
  if (!node.IsMap()) return std::nullopt;
  std::optional<std::string> controller =
      r.String(Get(fields, "controller"), Join(path, "controller"));
  if (!controller.has_value() || controller->empty()) {
    if (!Has(fields, "controller") || controller.has_value()) {
      r.Error(node, Join(path, "controller"), "required");
    }
  } else {
    route.controller = *controller;
  }
  const std::string to_path = Join(path, "to");
  const YAML::Node to = Get(fields, "to");
  if (IsAbsent(to) || (to.IsSequence() && to.size() == 0)) {
    r.Error(node, to_path, "required: at least one route");
  }
  const std::vector<YAML::Node> items = r.Sequence(to, to_path);
  struct Seen {
    std::string path;
    int line;
    std::string name;
  };
  absl::flat_hash_map<std::string, Seen> names;      // route name -> first
  absl::flat_hash_map<std::string, Seen> selectors;  // canonical selector -> first
  std::optional<Seen> catch_all;
  YAML::Node catch_all_node;
  bool second_catch_all = false;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item_path = Index(to_path, i);
    const std::vector<Field> tf = r.Fields(items[i], item_path, RouteTargetFields());
    if (!items[i].IsMap()) continue;
    RouteTargetSpec target;
    target.location = r.Location(items[i]);
    std::optional<std::string> plugin = r.String(Get(tf, "plugin"), Join(item_path, "plugin"));
    if (!plugin.has_value() || plugin->empty()) {
      if (!Has(tf, "plugin") || plugin.has_value()) {
        r.Error(items[i], Join(item_path, "plugin"), "required");
      }
    } else {
      target.plugin = *plugin;
      if (!plugin_lines.contains(*plugin)) {
        r.Error(Get(tf, "plugin"), Join(item_path, "plugin"),
                absl::StrCat("no plugin \"", *plugin, "\" in spec.plugins"));
      }
    }
    target.name = target.plugin;
    if (auto name = r.String(Get(tf, "name"), Join(item_path, "name"))) {
      CheckDns1123Label(r, Get(tf, "name"), Join(item_path, "name"), *name);
      target.name = *name;
    }
    const Seen me{item_path, target.location.line, target.name};
    if (!target.name.empty()) {
      if (auto [it, inserted] = names.emplace(target.name, me); !inserted) {
        r.Error(IsAbsent(Get(tf, "name")) ? items[i] : Get(tf, "name"), Join(item_path, "name"),
                absl::StrCat("duplicate route name \"", target.name, "\" (first on line ",
                             it->second.line, "); routes to the same plugin need a name each"));
      }
    }
    const YAML::Node selector = Get(tf, "labelSelector");
    const std::string selector_path = Join(item_path, "labelSelector");
    std::optional<std::string> text = r.String(selector, selector_path);
    std::optional<std::string> canonical;
    if (text.has_value()) {
      absl::StatusOr<kube::LabelSelector> parsed = kube::LabelSelector::Parse(*text);
      if (!parsed.ok()) {
        r.Error(selector, selector_path, parsed.status().message());
      } else if (!parsed->Empty()) {
        canonical = parsed->ToString();
        target.label_selector = *text;
      }
    }
    if (canonical.has_value()) {
      if (auto [it, inserted] = selectors.emplace(*canonical, me); !inserted) {
        r.Error(selector, selector_path,
                absl::StrCat("the same selector as route \"", it->second.name, "\" (",
                             it->second.path, ", line ", it->second.line,
                             "): every object it matches would match both"));
      }
    } else if (!text.has_value() || text->empty() || IsAbsent(selector)) {
      if (catch_all.has_value()) {
        second_catch_all = true;
        r.Error(items[i], item_path,
                absl::StrCat("a second route without labelSelector (the first is route \"",
                             catch_all->name, "\", line ", catch_all->line,
                             "): both match every object"));
      } else {
        catch_all = me;
        catch_all_node = items[i];
      }
    }
    route.to.push_back(std::move(target));
  }
  if (catch_all.has_value() && !second_catch_all && route.to.size() > 1) {
    const Seen& c = *catch_all;
    r.Error(catch_all_node, c.path,
            absl::StrCat("route \"", c.name,
                         "\" has no labelSelector, so it matches every object and overlaps the "
                         "other routes of controller \"",
                         route.controller,
                         "\"; give every route a selector (e.g. \"version=v2\" and "
                         "\"version!=v2\")"));
  }
  return route;
}

}  // namespace ctrlhost::config::internal
