// Reading Operator documents: from text (ParseOperators), from a file of one or more YAML
// documents or a directory of *.yaml / *.yml files (LoadOperators).
//
//   absl::StatusOr<std::vector<config::OperatorSpec>> ops = config::LoadOperators("operators/");
//   if (!ops.ok()) std::cerr << ops.status().message();
//   // operators/web.yaml:12:7: spec.plugins[1].exec.command: required
//   // operators/web.yaml:14:9: spec.plugins[1].startupTimout: unknown field (did you mean
//   //   "startupTimeout"?)
//
// Guarantees:
// - A set is accepted whole or refused whole: any error refuses it (the caller keeps running
//   what it had).
// - Errors are InvalidArgument (NotFound / PermissionDenied for paths that cannot be read). The
//   message has one line per problem, "file:line:column: field.path: what", line and column
//   1-based; every problem of every document is reported, not only the first. Unknown fields
//   are errors, with a suggestion when a known field is close.
// - Operator names are unique across the whole set (all files of a directory); plugin names
//   within an operator.
// - Untrusted text never crashes the parser (yaml-cpp exceptions, deep nesting, wrong types all
//   become errors).
//
// Stateless functions: thread-safe.
#ifndef CTRLHOST_RUNTIME_CONFIG_LOAD_H_
#define CTRLHOST_RUNTIME_CONFIG_LOAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/config/operator_spec.h"

namespace ctrlhost::config {

// Every Operator document of a YAML stream ("---" separated; empty documents are skipped).
// `source_name` names the text in messages and locations (usually its path).
absl::StatusOr<std::vector<OperatorSpec>> ParseOperators(absl::string_view text,
                                                         absl::string_view source_name);

// The files `path` stands for: itself when it is a regular file; the *.yaml and *.yml regular
// files directly inside it (not recursively), sorted, when it is a directory. Errors:
// NotFound (missing), PermissionDenied (it, or a file in it, unreadable), InvalidArgument (neither
// file nor directory, or a directory without such files). Messages name the path.
absl::StatusOr<std::vector<std::string>> ResolveOperatorFiles(const std::string& path);

// ResolveOperatorFiles(path), then every file parsed; names unique across all of them.
absl::StatusOr<std::vector<OperatorSpec>> LoadOperators(const std::string& path);

// Every field path the parser accepts, e.g. "spec.plugins[].exec.env[].name" ("[]" for list
// items; map-valued fields such as metadata.labels and the map form of env end at the field).
// For the schema test and the docs.
std::vector<std::string> KnownFieldPaths();

}  // namespace ctrlhost::config

#endif  // CTRLHOST_RUNTIME_CONFIG_LOAD_H_
