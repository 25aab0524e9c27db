#include "runtime/config/internal/fields.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::config::internal {

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
      "plugins", "controllers", "routes", "apiClient", "leaderElection", "scheduling", "record"};
  return *v;
}
const std::vector<absl::string_view>& PluginFields() {
  static const auto* const v = new std::vector<absl::string_view>{
      "name",           "exec",        "endpoint",      "startupTimeout",    "shutdownGracePeriod",
      "requestTimeout", "maxInFlight", "maxCacheBytes", "notServingTimeout", "maxControllers",
      "shadow"};
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
      new std::vector<absl::string_view>{"name",       "plugin",          "maxConcurrentReconciles",
                                         "namespaces", "labelSelector",   "resyncPeriod",
                                         "disabled",   "rateLimit",       "sharding",
                                         "status",     "backgroundTasks", "scheduling"};
  return *v;
}
const std::vector<absl::string_view>& OperatorSchedulingFields() {
  static const auto* const v = new std::vector<absl::string_view>{"apiWeight"};
  return *v;
}
const std::vector<absl::string_view>& ControllerSchedulingFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"priorities", "maxWait", "apiWeight"};
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
const std::vector<absl::string_view>& ShadowFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"exec", "endpoint", "percent", "maxInFlight", "cpu"};
  return *v;
}
const std::vector<absl::string_view>& RecordFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"dir", "controllers", "maxBytes", "secretData", "cpu"};
  return *v;
}
const std::vector<absl::string_view>& RateLimitFields() {
  static const auto* const v =
      new std::vector<absl::string_view>{"qps", "burst", "baseDelay", "maxDelay"};
  return *v;
}

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

}  // namespace ctrlhost::config::internal
