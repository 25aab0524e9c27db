// YAML <-> JSON conversion with YAML 1.2 core-schema typing.
//
// yaml-cpp hands out every scalar as a string; Kubernetes and our config files need real types
// (`replicas: 3` is a number, `enabled: true` a boolean, `"3"` a string, `~`/`null` null).
// Plain (unquoted) scalars are typed by the core schema; quoted or block scalars stay strings.
//
//   ASSIGN_OR_RETURN(nlohmann::json obj, common::YamlToJson(body));
//   std::string yaml = common::JsonToYaml(obj);
//
// Errors name the line and column (1-based) of the problem.
//
// Limits (untrusted input): nesting deeper than kMaxYamlNestingDepth (200) levels is an error
// ("yaml: line L column C: nesting deeper than 200 levels", found before yaml-cpp builds the
// tree, whose own recursion guard would only say "bad file" at 2000), and so is a document
// whose aliases expand it past twice its text plus 64 KiB (nodes + scalar bytes), so that a
// "billion laughs" body of a few hundred bytes cannot build gigabytes of JSON.
#ifndef CTRLHOST_RUNTIME_COMMON_YAML_JSON_H_
#define CTRLHOST_RUNTIME_COMMON_YAML_JSON_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::common {

// Deepest nesting of sequences and mappings accepted in a YAML document.
inline constexpr int kMaxYamlNestingDepth = 200;

// One YAML document to JSON. An empty document is null. Several documents are an error.
absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view yaml);

// Every document of a YAML stream ("---" separated), skipping empty ones.
absl::StatusOr<std::vector<nlohmann::json>> YamlDocumentsToJson(absl::string_view yaml);

// The checks a YAML stream of untrusted text must pass before yaml-cpp's LoadAll, for parsers
// that load it themselves (the two functions above make them): no control characters but tab,
// LF and CR, no nesting deeper than kMaxYamlNestingDepth, and a stream on which LoadAll returns
// (yaml-cpp 0.7 loops for ever, allocating, on some short inputs such as `"x",`).
// InvalidArgument "yaml: line L[ column C]: ..." otherwise.
// A syntax error passes: LoadAll throws it (YAML::Exception, with its position) and ends.
absl::Status CheckYamlStream(absl::string_view yaml);

// A JSON value as block-style YAML. Strings that would read back as another type are quoted.
std::string JsonToYaml(const nlohmann::json& value);

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_YAML_JSON_H_
