// Dot-separated field paths into JSON objects, as plugin.proto's FieldPathMapping and
// LabelMapping.primary_selector_path define them: "spec.configMapName",
// "spec.volumes[].secret.secretName" ("name[]" steps into every element of an array).
//
//   ASSIGN_OR_RETURN(FieldPath path, FieldPath::Parse("spec.volumes[].secret.secretName"));
//   std::vector<std::string> names = path.Strings(object_json);
#ifndef CTRLHOST_RUNTIME_CONTROLLER_FIELD_PATH_H_
#define CTRLHOST_RUNTIME_CONTROLLER_FIELD_PATH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller {

// An immutable value; const methods are thread-safe.
class FieldPath {
 public:
  // Errors: kInvalidArgument for an empty path or segment, or "[]" anywhere but at the end of
  // a segment.
  static absl::StatusOr<FieldPath> Parse(absl::string_view text);

  // Every value the path reaches in `root` (none when a field is missing or has the wrong
  // type). Pointers into `root`.
  std::vector<const nlohmann::json*> Find(const nlohmann::json& root) const;
  // The strings the path reaches: string values, and the string elements of array values.
  std::vector<std::string> Strings(const nlohmann::json& root) const;

  // Removes every member the path reaches from `root` (nothing when it reaches none).
  void Erase(nlohmann::json* root) const;

  const std::string& text() const { return text_; }

 private:
  struct Segment {
    std::string field;
    bool each = false;  // "field[]"
  };
  FieldPath() = default;

  std::string text_;
  std::vector<Segment> segments_;
};

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_FIELD_PATH_H_
