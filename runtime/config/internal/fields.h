// The fields of each object of an Operator document, and lookups among a mapping's fields. Not
// a public API: the parser (load.cc, internal/sections.cc) and KnownFieldPaths() share them.
//
// Stateless functions: thread-safe.
#ifndef CTRLHOST_RUNTIME_CONFIG_INTERNAL_FIELDS_H_
#define CTRLHOST_RUNTIME_CONFIG_INTERNAL_FIELDS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/config/internal/yaml_reader.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::config::internal {

// The fields of each object, in the order the docs list them. KnownFieldPaths() and the schema
// test walk these, so a field added here without a schema entry fails that test.
const std::vector<absl::string_view>& TopFields();
const std::vector<absl::string_view>& MetadataFields();
const std::vector<absl::string_view>& SpecFields();
const std::vector<absl::string_view>& PluginFields();
const std::vector<absl::string_view>& ExecFields();
const std::vector<absl::string_view>& EnvVarFields();
const std::vector<absl::string_view>& EndpointFields();
const std::vector<absl::string_view>& TlsFields();
const std::vector<absl::string_view>& ControllerFields();
const std::vector<absl::string_view>& ControllerTasksFields();
const std::vector<absl::string_view>& ControllerStatusFields();
const std::vector<absl::string_view>& ShardingFields();
const std::vector<absl::string_view>& ControllerSchedulingFields();
const std::vector<absl::string_view>& OperatorSchedulingFields();
const std::vector<absl::string_view>& RouteFields();
const std::vector<absl::string_view>& RouteTargetFields();
const std::vector<absl::string_view>& ApiClientFields();
const std::vector<absl::string_view>& LeaderElectionFields();
const std::vector<absl::string_view>& RateLimitFields();
const std::vector<absl::string_view>& RecordFields();
const std::vector<absl::string_view>& ShadowFields();

// The field of `fields` called `name`, or an undefined node.
YAML::Node Get(const std::vector<Field>& fields, absl::string_view name);
bool Has(const std::vector<Field>& fields, absl::string_view name);

// Records an error at `at` unless `value` is a DNS-1123 label.
void CheckDns1123Label(YamlReader& r, const YAML::Node& at, absl::string_view path,
                       const std::string& value);

}  // namespace ctrlhost::config::internal

#endif  // CTRLHOST_RUNTIME_CONFIG_INTERNAL_FIELDS_H_
