// The parsers of the sections of an Operator document's spec: plugins (with their exec or
// endpoint), controllers (with rate limit, sharding, status, background tasks), routes, the API
// client and leader election. Not a public API: load.cc parses the document around them.
//
// Each records every problem it finds in `r` (at `path`, e.g. "spec.plugins[1]") and goes on,
// so that one pass reports everything wrong; a std::nullopt result means the node was not a
// mapping and nothing of it could be read.
//
// Stateless functions: thread-compatible (one YamlReader per parse).
#ifndef CTRLHOST_RUNTIME_CONFIG_INTERNAL_SECTIONS_H_
#define CTRLHOST_RUNTIME_CONFIG_INTERNAL_SECTIONS_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "runtime/config/internal/yaml_reader.h"
#include "runtime/config/operator_spec.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::config::internal {

std::optional<PluginSpec> ParsePlugin(YamlReader& r, const YAML::Node& node,
                                      const std::string& path);

std::optional<ControllerSpec> ParseController(YamlReader& r, const YAML::Node& node,
                                              const std::string& path);

// One controller's routes. `plugin_lines` maps the operator's plugin names to their lines.
// Overlaps that the text alone proves (the same selector twice, a catch-all beside another
// route) are errors here; the host detects the rest per object.
std::optional<RouteSpec> ParseRoute(YamlReader& r, const YAML::Node& node, const std::string& path,
                                    const absl::flat_hash_map<std::string, int>& plugin_lines);

ApiClientSpec ParseApiClient(YamlReader& r, const YAML::Node& node, const std::string& path);
// The `apiWeight` of a scheduling block (`fields`), checked: > 0 and at most 1e6.
std::optional<double> ApiWeight(YamlReader& r, const std::vector<Field>& fields,
                                const std::string& path);

// The rules of manager::ValidateLeaderElection (the --leader-elect-* flags) between the fields
// the block sets; the merged values are checked again by exe::ResolveLeaderElection.
LeaderElectionSpec ParseLeaderElection(YamlReader& r, const YAML::Node& node,
                                       const std::string& path);

// spec.record: `dir` required, `controllers` names unique, maxBytes >= 1 MiB, secretData
// "digest" or "include".
RecordSpec ParseRecord(YamlReader& r, const YAML::Node& node, const std::string& path);

}  // namespace ctrlhost::config::internal

#endif  // CTRLHOST_RUNTIME_CONFIG_INTERNAL_SECTIONS_H_
