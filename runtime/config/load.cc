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
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/common/paths.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/utf8.h"
#include "runtime/common/yaml_json.h"
#include "runtime/config/internal/fields.h"
#include "runtime/config/internal/sections.h"
#include "runtime/config/internal/yaml_reader.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::config {
namespace {

namespace fs = std::filesystem;
using internal::ApiClientFields;
using internal::CheckDns1123Label;
using internal::ControllerFields;
using internal::ControllerSchedulingFields;
using internal::ControllerStatusFields;
using internal::ControllerTasksFields;
using internal::EndpointFields;
using internal::EnvVarFields;
using internal::ExecFields;
using internal::Field;
using internal::Get;
using internal::Has;
using internal::Index;
using internal::IsAbsent;
using internal::Join;
using internal::LeaderElectionFields;
using internal::MetadataFields;
using internal::OperatorSchedulingFields;
using internal::ParseApiClient;
using internal::ParseController;
using internal::ParseLeaderElection;
using internal::ParsePlugin;
using internal::ParseRoute;
using internal::PluginFields;
using internal::RateLimitFields;
using internal::RouteFields;
using internal::RouteTargetFields;
using internal::ShardingFields;
using internal::SpecFields;
using internal::TlsFields;
using internal::TopFields;
using internal::YamlReader;

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
  if (const YAML::Node record = Get(spec_fields, "record"); !IsAbsent(record)) {
    op.record = internal::ParseRecord(r, record, "spec.record");
  }
  if (const YAML::Node scheduling = Get(spec_fields, "scheduling"); !IsAbsent(scheduling)) {
    const std::vector<Field> scheduling_fields =
        r.Fields(scheduling, "spec.scheduling", OperatorSchedulingFields());
    op.api_weight = internal::ApiWeight(r, scheduling_fields, "spec.scheduling.apiWeight");
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
void MakeSourceAbsolute(std::variant<ExecSpec, EndpointSpec>& source) {
  if (auto* exec = std::get_if<ExecSpec>(&source); exec != nullptr) {
    exec->command = common::AbsoluteCommand(exec->command);
    exec->working_dir = common::AbsolutePath(exec->working_dir);
  } else if (auto* endpoint = std::get_if<EndpointSpec>(&source);
             endpoint != nullptr && endpoint->tls.has_value()) {
    endpoint->tls->ca_file = common::AbsolutePath(endpoint->tls->ca_file);
    endpoint->tls->cert_file = common::AbsolutePath(endpoint->tls->cert_file);
    endpoint->tls->key_file = common::AbsolutePath(endpoint->tls->key_file);
  }
}

void MakePathsAbsolute(std::vector<OperatorSpec>& ops) {
  for (OperatorSpec& op : ops) {
    if (op.record.has_value()) op.record->dir = common::AbsolutePath(op.record->dir);
    for (PluginSpec& plugin : op.plugins) {
      MakeSourceAbsolute(plugin.source);
      if (plugin.shadow.has_value()) MakeSourceAbsolute(plugin.shadow->source);
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
  AddPaths("spec.plugins[].shadow", internal::ShadowFields(), out);
  AddPaths("spec.plugins[].shadow.exec", ExecFields(), out);
  AddPaths("spec.plugins[].shadow.exec.env[]", EnvVarFields(), out);
  AddPaths("spec.plugins[].shadow.endpoint", EndpointFields(), out);
  AddPaths("spec.plugins[].shadow.endpoint.tls", TlsFields(), out);
  AddPaths("spec.controllers[]", ControllerFields(), out);
  AddPaths("spec.controllers[].rateLimit", RateLimitFields(), out);
  AddPaths("spec.controllers[].sharding", ShardingFields(), out);
  AddPaths("spec.controllers[].status", ControllerStatusFields(), out);
  AddPaths("spec.controllers[].backgroundTasks", ControllerTasksFields(), out);
  AddPaths("spec.controllers[].scheduling", ControllerSchedulingFields(), out);
  AddPaths("spec.scheduling", OperatorSchedulingFields(), out);
  AddPaths("spec.routes[]", RouteFields(), out);
  AddPaths("spec.routes[].to[]", RouteTargetFields(), out);
  AddPaths("spec.apiClient", ApiClientFields(), out);
  AddPaths("spec.leaderElection", LeaderElectionFields(), out);
  AddPaths("spec.record", internal::RecordFields(), out);
  return out;
}

}  // namespace ctrlhost::config
