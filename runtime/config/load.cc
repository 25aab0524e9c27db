#include "runtime/config/load.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/common/paths.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/utf8.h"
#include "runtime/common/yaml_json.h"
#include "runtime/config/internal/yaml_reader.h"
#include "runtime/kube/selector.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::config {
namespace {

namespace fs = std::filesystem;
using internal::Field;
using internal::Index;
using internal::IsAbsent;
using internal::Join;
using internal::YamlReader;

// The fields of each object, in the order the docs list them. KnownFieldPaths() and the schema
// test walk these, so a field added here without a schema entry fails that test.
const std::vector<absl::string_view>& TopFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"apiVersion", "kind", "metadata", "spec"};
  return *v;
}
const std::vector<absl::string_view>& MetadataFields() {
  static const auto* const v = new std::vector<absl::string_view>{"name", "labels", "annotations"};
  return *v;
}
const std::vector<absl::string_view>& SpecFields() {
  static const auto* const v = new std::vector<absl::string_view>{
      "plugins", "controllers", "routes", "apiClient", "leaderElection"};
  return *v;
}
const std::vector<absl::string_view>& PluginFields() {
  static const auto* const v = new std::vector<absl::string_view>{
      "name",           "exec",        "endpoint",      "startupTimeout",    "shutdownGracePeriod",
      "requestTimeout", "maxInFlight", "maxCacheBytes", "notServingTimeout", "maxControllers"};
  return *v;
}
const std::vector<absl::string_view>& ExecFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"command", "args", "env", "workingDir"};
  return *v;
}
const std::vector<absl::string_view>& EnvVarFields() {
  static const auto* const v = new std::vector<absl::string_view>{"name", "value"};
  return *v;
}
const std::vector<absl::string_view>& EndpointFields() {
  static const auto* const v = new std::vector<absl::string_view>{"address", "tls"};
  return *v;
}
const std::vector<absl::string_view>& TlsFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"caFile", "certFile", "keyFile", "serverName"};
  return *v;
}
const std::vector<absl::string_view>& ControllerFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"name",       "plugin",         "maxConcurrentReconciles",
                                         "namespaces", "labelSelector",  "resyncPeriod",
                                         "disabled",   "rateLimit",      "sharding",
                                         "status",     "backgroundTasks"};
  return *v;
}
const std::vector<absl::string_view>& ControllerTasksFields() {
  static const auto* const v = new std::vector<absl::string_view>{"enqueueQps", "enqueueBurst"};
  return *v;
}
const std::vector<absl::string_view>& ControllerStatusFields() {
  static const auto* const v = new std::vector<absl::string_view>{"conditions"};
  return *v;
}
const std::vector<absl::string_view>& ShardingFields() {
  static const auto* const v = new std::vector<absl::string_view>{"enabled"};
  return *v;
}
const std::vector<absl::string_view>& RouteFields() {
  static const auto* const v = new std::vector<absl::string_view>{"controller", "to"};
  return *v;
}
const std::vector<absl::string_view>& RouteTargetFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"name", "plugin", "labelSelector"};
  return *v;
}
const std::vector<absl::string_view>& ApiClientFields() {
  static const auto* const v = new std::vector<absl::string_view>{"qps", "burst"};
  return *v;
}
const std::vector<absl::string_view>& LeaderElectionFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"leaseDuration", "renewDeadline",  "retryPeriod",
                                         "leaseName",     "leaseNamespace", "perOperator"};
  return *v;
}
const std::vector<absl::string_view>& RateLimitFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"qps", "burst", "baseDelay", "maxDelay"};
  return *v;
}

constexpr int64_t kMaxCount = 1 << 20;  // bound for counts (in-flight, concurrency, burst)
constexpr int64_t kMaxControllersPerPlugin = 10000;
constexpr int64_t kMaxCacheBytes = int64_t{1} << 50;  // 1 PiB: any real cap fits

// The field of `fields` called `name`, or an undefined node.
YAML::Node Get(const std::vector<Field>& fields, absl::string_view name) {
  for (const Field& f : fields) {
    if (f.name == name) return f.value;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool Has(const std::vector<Field>& fields, absl::string_view name) {
  return !IsAbsent(Get(fields, name));
}

void CheckDns1123Label(YamlReader& r, const YAML::Node& at, absl::string_view path,
                       const std::string& value) {
  std::vector<std::string> problems = kube::IsDns1123Label(value);
  if (!problems.empty()) {
    r.Error(at, path,
            absl::StrCat("invalid value \"", value, "\": ", absl::StrJoin(problems, "; ")));
  }
}

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
  const bool has_exec = Has(fields, "exec");
  const bool has_endpoint = Has(fields, "endpoint");
  if (has_exec && has_endpoint) {
    r.Error(Get(fields, "endpoint"), path, "exec and endpoint are mutually exclusive");
  } else if (!has_exec && !has_endpoint) {
    r.Error(node, path, "exactly one of exec or endpoint is required");
  }
  if (has_exec) {
    plugin.source = ParseExec(r, Get(fields, "exec"), Join(path, "exec"));
  } else if (has_endpoint) {
    plugin.source = ParseEndpoint(r, Get(fields, "endpoint"), Join(path, "endpoint"));
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

// The rules of manager::ValidateLeaderElection (the --leader-elect-* flags) between the fields
// the block sets; the merged values are checked again by exe::ResolveLeaderElection.
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
  return controller;
}

// One controller's routes. Overlaps that the text alone proves (the same selector twice, a
// catch-all beside another route) are errors here; the host detects the rest per object.
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

void ParseMetadata(YamlReader& r, const YAML::Node& node, OperatorSpec& op) {
  const std::vector<Field> fields = r.Fields(node, "metadata", MetadataFields());
  if (!node.IsMap()) return;
  std::optional<std::string> name = r.String(Get(fields, "name"), "metadata.name");
  if (!Has(fields, "name")) r.Error(node, "metadata.name", "required");
  if (name.has_value()) {
    CheckDns1123Label(r, Get(fields, "name"), "metadata.name", *name);
    op.name = *name;
  }
  for (auto& [k, v] : r.StringMap(Get(fields, "labels"), "metadata.labels")) {
    for (const std::string& p : kube::IsQualifiedName(k)) {
      r.Error(Get(fields, "labels"), Join("metadata.labels", k), p);
    }
    for (const std::string& p : kube::IsValidLabelValue(v)) {
      r.Error(Get(fields, "labels"), Join("metadata.labels", k), p);
    }
    op.labels[k] = v;
  }
  for (auto& [k, v] : r.StringMap(Get(fields, "annotations"), "metadata.annotations")) {
    op.annotations[k] = v;
  }
}

std::optional<OperatorSpec> ParseDocument(YamlReader& r, const YAML::Node& doc) {
  OperatorSpec op;
  op.location = r.Location(doc);
  const std::vector<Field> fields = r.Fields(doc, "", TopFields());
  if (!doc.IsMap()) return std::nullopt;
  const YAML::Node api_version = Get(fields, "apiVersion");
  std::optional<std::string> v = r.String(api_version, "apiVersion");
  if (!Has(fields, "apiVersion")) {
    r.Error(doc, "apiVersion", absl::StrCat("required (\"", kApiVersion, "\")"));
  } else if (v.has_value() && *v != kApiVersion) {
    r.Error(api_version, "apiVersion",
            absl::StrCat("unsupported value \"", *v, "\": supported: \"", kApiVersion, "\""));
  }
  const YAML::Node kind = Get(fields, "kind");
  std::optional<std::string> k = r.String(kind, "kind");
  if (!Has(fields, "kind")) {
    r.Error(doc, "kind", absl::StrCat("required (\"", kKind, "\")"));
  } else if (k.has_value() && *k != kKind) {
    r.Error(kind, "kind",
            absl::StrCat("unsupported value \"", *k, "\": supported: \"", kKind, "\""));
  }
  if (!Has(fields, "metadata")) {
    r.Error(doc, "metadata", "required");
  } else {
    ParseMetadata(r, Get(fields, "metadata"), op);
  }
  const YAML::Node spec = Get(fields, "spec");
  if (IsAbsent(spec)) {
    r.Error(doc, "spec", "required");
    return op;
  }
  const std::vector<Field> spec_fields = r.Fields(spec, "spec", SpecFields());
  if (!spec.IsMap()) return op;
  const std::vector<YAML::Node> plugins = r.Sequence(Get(spec_fields, "plugins"), "spec.plugins");
  if (const YAML::Node p = Get(spec_fields, "plugins");
      IsAbsent(p) || (p.IsSequence() && p.size() == 0)) {
    r.Error(spec, "spec.plugins", "required: at least one plugin");
  }
  absl::flat_hash_map<std::string, int> plugin_lines;
  for (size_t i = 0; i < plugins.size(); ++i) {
    const std::string path = Index("spec.plugins", i);
    std::optional<PluginSpec> plugin = ParsePlugin(r, plugins[i], path);
    if (!plugin.has_value()) continue;
    if (!plugin->name.empty()) {
      if (auto [it, inserted] = plugin_lines.emplace(plugin->name, plugin->location.line);
          !inserted) {
        r.Error(plugins[i], Join(path, "name"),
                absl::StrCat("duplicate plugin name \"", plugin->name, "\" (first on line ",
                             it->second, ")"));
      }
    }
    op.plugins.push_back(std::move(*plugin));
  }
  const std::vector<YAML::Node> controllers =
      r.Sequence(Get(spec_fields, "controllers"), "spec.controllers");
  absl::flat_hash_map<std::string, int> controller_lines;
  for (size_t i = 0; i < controllers.size(); ++i) {
    const std::string path = Index("spec.controllers", i);
    std::optional<ControllerSpec> c = ParseController(r, controllers[i], path);
    if (!c.has_value()) continue;
    if (!c->plugin.empty() && plugin_lines.find(c->plugin) == plugin_lines.end()) {
      r.Error(controllers[i], Join(path, "plugin"),
              absl::StrCat("no plugin \"", c->plugin, "\" in spec.plugins"));
    }
    const std::string key = absl::StrCat(c->plugin, "/", c->name);
    if (auto [it, inserted] = controller_lines.emplace(key, c->location.line); !inserted) {
      r.Error(controllers[i], path,
              absl::StrCat("duplicate overrides for controller \"", c->name, "\"",
                           c->plugin.empty() ? "" : absl::StrCat(" of plugin \"", c->plugin, "\""),
                           " (first on line ", it->second, ")"));
    }
    op.controllers.push_back(std::move(*c));
  }
  const std::vector<YAML::Node> routes = r.Sequence(Get(spec_fields, "routes"), "spec.routes");
  absl::flat_hash_map<std::string, int> route_lines;
  for (size_t i = 0; i < routes.size(); ++i) {
    const std::string path = Index("spec.routes", i);
    std::optional<RouteSpec> route = ParseRoute(r, routes[i], path, plugin_lines);
    if (!route.has_value()) continue;
    if (!route->controller.empty()) {
      if (auto [it, inserted] = route_lines.emplace(route->controller, route->location.line);
          !inserted) {
        r.Error(routes[i], Join(path, "controller"),
                absl::StrCat("duplicate routes for controller \"", route->controller,
                             "\" (first on line ", it->second, ")"));
      }
    }
    op.routes.push_back(std::move(*route));
  }
  if (const YAML::Node client = Get(spec_fields, "apiClient"); !IsAbsent(client)) {
    op.api_client = ParseApiClient(r, client, "spec.apiClient");
  }
  if (const YAML::Node le = Get(spec_fields, "leaderElection"); !IsAbsent(le)) {
    op.leader_election = ParseLeaderElection(r, le, "spec.leaderElection");
  }
  return op;
}

// Refuses a second operator of the same name (each duplicate is one error).
void CheckUniqueNames(const std::vector<OperatorSpec>& ops, std::vector<std::string>& errors) {
  absl::flat_hash_map<std::string, const OperatorSpec*> first;
  for (const OperatorSpec& op : ops) {
    if (op.name.empty()) continue;
    auto [it, inserted] = first.emplace(op.name, &op);
    if (!inserted) {
      errors.push_back(absl::StrCat(op.location.ToString(), ": metadata.name: operator \"", op.name,
                                    "\" is already defined at ", it->second->location.ToString()));
    }
  }
}

// Parses every document of `text`, appending specs and errors (duplicate names unchecked).
// Returns the number of documents that were not empty.
size_t ParseInto(absl::string_view text, absl::string_view raw_source_name,
                 std::vector<OperatorSpec>& ops, std::vector<std::string>& errors) {
  // The name goes into every message and location: a file name is any bytes but '/' and NUL
  // (invalid UTF-8, a newline that would forge a line of the error list, terminal escapes).
  const std::string source_name = common::EscapeUnprintable(raw_source_name);
  YamlReader r{source_name};
  size_t documents = 0;
  // Streams yaml-cpp's LoadAll would never return from, and control characters, are refused
  // first (found by tools/fuzz, operator_file).
  if (absl::Status s = common::CheckYamlStream(text); !s.ok()) {
    r.Error(SourceLocation{source_name, 0, 0}, "",
            absl::StrCat("invalid YAML: ", absl::StripPrefix(s.message(), "yaml: ")));
    text = absl::string_view();  // parse nothing: only the error is reported
  }
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    for (const YAML::Node& doc : docs) {
      if (IsAbsent(doc)) continue;  // an empty document (e.g. a trailing ---)
      ++documents;
      if (std::optional<OperatorSpec> op = ParseDocument(r, doc)) ops.push_back(std::move(*op));
    }
  } catch (const YAML::Exception& e) {
    SourceLocation at{source_name, 0, 0};
    if (!e.mark.is_null()) at = {source_name, e.mark.line + 1, e.mark.column + 1};
    r.Error(at, "", absl::StrCat("invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    r.Error(SourceLocation{source_name, 0, 0}, "", absl::StrCat("invalid YAML: ", e.what()));
  }
  const bool failed = !r.errors().empty();
  for (std::string& e : r.errors()) errors.push_back(std::move(e));
  return failed ? std::max<size_t>(documents, 1) : documents;
}

absl::StatusOr<std::vector<OperatorSpec>> Finish(std::vector<OperatorSpec> ops,
                                                 std::vector<std::string> errors) {
  CheckUniqueNames(ops, errors);
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return ops;
}

// Paths in a file are relative to the host's working directory (operator_spec.h): made absolute
// here, once, so that a plugin's working_dir cannot change what its command names and nothing
// downstream (sandbox, plugin environment) sees a relative path.
void MakePathsAbsolute(std::vector<OperatorSpec>& ops) {
  for (OperatorSpec& op : ops) {
    for (PluginSpec& plugin : op.plugins) {
      if (auto* exec = std::get_if<ExecSpec>(&plugin.source); exec != nullptr) {
        exec->command = common::AbsoluteCommand(exec->command);
        exec->working_dir = common::AbsolutePath(exec->working_dir);
      } else if (auto* endpoint = std::get_if<EndpointSpec>(&plugin.source);
                 endpoint != nullptr && endpoint->tls.has_value()) {
        endpoint->tls->ca_file = common::AbsolutePath(endpoint->tls->ca_file);
        endpoint->tls->cert_file = common::AbsolutePath(endpoint->tls->cert_file);
        endpoint->tls->key_file = common::AbsolutePath(endpoint->tls->key_file);
      }
    }
  }
}

absl::Status PathError(absl::StatusCode code, const std::string& path, absl::string_view why) {
  return absl::Status(code, absl::StrCat("\"", common::EscapeUnprintable(path), "\": ", why));
}

void AddPaths(const std::string& prefix, const std::vector<absl::string_view>& fields,
              std::vector<std::string>& out) {
  for (absl::string_view f : fields) out.push_back(Join(prefix, f));
}

}  // namespace

absl::StatusOr<std::vector<OperatorSpec>> ParseOperators(absl::string_view text,
                                                         absl::string_view source_name) {
  std::vector<OperatorSpec> ops;
  std::vector<std::string> errors;
  ParseInto(text, source_name, ops, errors);
  return Finish(std::move(ops), std::move(errors));
}

absl::StatusOr<std::vector<std::string>> ResolveOperatorFiles(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status)) {
    return PathError(absl::StatusCode::kNotFound, path, "no such file or directory");
  }
  const bool directory = fs::is_directory(status);
  if (!directory && !fs::is_regular_file(status)) {
    return PathError(absl::StatusCode::kInvalidArgument, path, "not a regular file or a directory");
  }
  if (access(path.c_str(), directory ? (R_OK | X_OK) : R_OK) != 0) {
    return PathError(absl::StatusCode::kPermissionDenied, path, "permission denied");
  }
  if (!directory) return std::vector<std::string>{path};
  std::vector<std::string> files;
  // One level only: a directory of operator documents, not a tree.
  for (fs::directory_iterator it(path, error), end; !error && it != end; it.increment(error)) {
    std::error_code entry_error;
    const std::string extension = it->path().extension().string();
    if (!it->is_regular_file(entry_error) || (extension != ".yaml" && extension != ".yml")) {
      continue;
    }
    std::string file = it->path().string();
    if (access(file.c_str(), R_OK) != 0) {
      return PathError(absl::StatusCode::kPermissionDenied, file, "permission denied");
    }
    files.push_back(std::move(file));
  }
  if (error) return PathError(absl::StatusCode::kInvalidArgument, path, error.message());
  if (files.empty()) {
    return PathError(absl::StatusCode::kInvalidArgument, path,
                     "the directory contains no .yaml or .yml files");
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<std::vector<OperatorSpec>> LoadOperators(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, ResolveOperatorFiles(path));
  std::vector<OperatorSpec> ops;
  std::vector<std::string> errors;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in.is_open()) {
      return PathError(access(file.c_str(), R_OK) != 0 ? absl::StatusCode::kPermissionDenied
                                                       : absl::StatusCode::kNotFound,
                       file, "cannot be opened");
    }
    std::stringstream text;
    text << in.rdbuf();
    if (in.bad()) return PathError(absl::StatusCode::kDataLoss, file, "read error");
    // A file is read to run operators: one with none (empty, or only comments) is a mistake,
    // or an editor half-way through writing it. Refused, so the running set stays as it was.
    if (ParseInto(text.str(), file, ops, errors) == 0) {
      errors.push_back(absl::StrCat(common::EscapeUnprintable(file),
                                    ": no Operator document (the file is empty or holds only "
                                    "comments)"));
    }
  }
  MakePathsAbsolute(ops);
  return Finish(std::move(ops), std::move(errors));
}

std::vector<std::string> KnownFieldPaths() {
  std::vector<std::string> out;
  AddPaths("", TopFields(), out);
  AddPaths("metadata", MetadataFields(), out);
  AddPaths("spec", SpecFields(), out);
  AddPaths("spec.plugins[]", PluginFields(), out);
  AddPaths("spec.plugins[].exec", ExecFields(), out);
  AddPaths("spec.plugins[].exec.env[]", EnvVarFields(), out);
  AddPaths("spec.plugins[].endpoint", EndpointFields(), out);
  AddPaths("spec.plugins[].endpoint.tls", TlsFields(), out);
  AddPaths("spec.controllers[]", ControllerFields(), out);
  AddPaths("spec.controllers[].rateLimit", RateLimitFields(), out);
  AddPaths("spec.controllers[].sharding", ShardingFields(), out);
  AddPaths("spec.controllers[].status", ControllerStatusFields(), out);
  AddPaths("spec.controllers[].backgroundTasks", ControllerTasksFields(), out);
  AddPaths("spec.routes[]", RouteFields(), out);
  AddPaths("spec.routes[].to[]", RouteTargetFields(), out);
  AddPaths("spec.apiClient", ApiClientFields(), out);
  AddPaths("spec.leaderElection", LeaderElectionFields(), out);
  return out;
}

}  // namespace ctrlhost::config
