// Typed, error-collecting reads of yaml-cpp nodes for the Operator parser: every problem is
// recorded as "file:line:column: field.path: message" and reading goes on, so one pass reports
// everything wrong with a document. Not a public API.
//
// Thread-compatible (one reader per parse).
#ifndef CTRLHOST_RUNTIME_CONFIG_INTERNAL_YAML_READER_H_
#define CTRLHOST_RUNTIME_CONFIG_INTERNAL_YAML_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/config/operator_spec.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::config::internal {

// A mapping's fields by name, in document order, with the key node (for positions).
struct Field {
  std::string name;
  YAML::Node key;
  YAML::Node value;
};

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  SourceLocation Location(const YAML::Node& node) const;
  void Error(const SourceLocation& at, absl::string_view path, absl::string_view message);
  void Error(const YAML::Node& at, absl::string_view path, absl::string_view message) {
    Error(Location(at), path, message);
  }
  // Every problem so far, "file:line:column: path: message", in document order (by line and
  // column; ties in the order found), at most 50 of them plus a line saying more were cut.
  std::vector<std::string> errors() const;

  // The fields of mapping `node` at `path`. Unknown names (not in `known`), duplicates and
  // non-string keys are errors; a node that is not a mapping is an error and yields nothing.
  std::vector<Field> Fields(const YAML::Node& node, absl::string_view path,
                            const std::vector<absl::string_view>& known);

  // Typed scalars. A null value (`key:` or `key: null`) yields nullopt without an error: absent
  // and null mean the same. A wrong type is an error and yields nullopt.
  std::optional<std::string> String(const YAML::Node& node, absl::string_view path);
  std::optional<int64_t> Int(const YAML::Node& node, absl::string_view path, int64_t min,
                             int64_t max);
  std::optional<double> Double(const YAML::Node& node, absl::string_view path);
  std::optional<bool> Bool(const YAML::Node& node, absl::string_view path);
  // A Go duration string ("30s", "1m30s", "250ms"); `allow_zero` admits "0s" / 0.
  std::optional<absl::Duration> Duration(const YAML::Node& node, absl::string_view path,
                                         bool allow_zero);
  // A sequence (null: empty). Not a sequence: error and nothing.
  std::vector<YAML::Node> Sequence(const YAML::Node& node, absl::string_view path);
  std::vector<std::string> StringList(const YAML::Node& node, absl::string_view path);
  // A mapping of strings to strings, in document order.
  std::vector<std::pair<std::string, std::string>> StringMap(const YAML::Node& node,
                                                             absl::string_view path);

 private:
  const std::string file_;
  struct Problem {
    SourceLocation at;
    std::string text;
  };
  std::vector<Problem> errors_;
};

// True for null, ~, empty and plain "null" scalars (and yaml-cpp's Null nodes).
bool IsAbsent(const YAML::Node& node);

// The closest of `candidates` to `name` if it is close enough to be a likely typo.
std::optional<std::string> DidYouMean(absl::string_view name,
                                      const std::vector<absl::string_view>& candidates);

// "spec.plugins" + 1 -> "spec.plugins[1]"; "spec" + "name" -> "spec.name".
std::string Index(absl::string_view path, size_t i);
std::string Join(absl::string_view path, absl::string_view field);

}  // namespace ctrlhost::config::internal

#endif  // CTRLHOST_RUNTIME_CONFIG_INTERNAL_YAML_READER_H_
