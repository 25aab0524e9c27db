#include "runtime/controller/field_path.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ctrlhost::controller {

absl::StatusOr<FieldPath> FieldPath::Parse(absl::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("field path is empty");
  FieldPath path;
  path.text_ = std::string(text);
  for (absl::string_view part : absl::StrSplit(text, '.')) {
    Segment segment;
    if (absl::ConsumeSuffix(&part, "[]")) segment.each = true;
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field path \"", text, "\" has an empty field name"));
    }
    if (absl::StrContains(part, '[') || absl::StrContains(part, ']')) {
      return absl::InvalidArgumentError(
          absl::StrCat("field path \"", text, "\": \"[]\" may only end a field name"));
    }
    segment.field = std::string(part);
    path.segments_.push_back(std::move(segment));
  }
  return path;
}

std::vector<const nlohmann::json*> FieldPath::Find(const nlohmann::json& root) const {
  std::vector<const nlohmann::json*> current = {&root};
  std::vector<const nlohmann::json*> next;
  for (const Segment& segment : segments_) {
    next.clear();
    for (const nlohmann::json* value : current) {
      if (!value->is_object()) continue;
      auto it = value->find(segment.field);
      if (it == value->end()) continue;
      if (!segment.each) {
        next.push_back(&*it);
      } else if (it->is_array()) {
        for (const nlohmann::json& element : *it) next.push_back(&element);
      }
    }
    current.swap(next);
    if (current.empty()) break;
  }
  return current;
}

void FieldPath::Erase(nlohmann::json* root) const {
  // Walk to the parents of the last segment, then erase (or empty, for "name[]") there.
  std::vector<nlohmann::json*> current = {root};
  std::vector<nlohmann::json*> next;
  for (size_t i = 0; i + 1 < segments_.size(); ++i) {
    const Segment& segment = segments_[i];
    next.clear();
    for (nlohmann::json* value : current) {
      if (!value->is_object()) continue;
      auto it = value->find(segment.field);
      if (it == value->end()) continue;
      if (!segment.each) {
        next.push_back(&*it);
      } else if (it->is_array()) {
        for (nlohmann::json& element : *it) next.push_back(&element);
      }
    }
    current.swap(next);
  }
  const std::string& last = segments_.back().field;
  for (nlohmann::json* value : current) {
    if (value->is_object()) value->erase(last);
  }
}

std::vector<std::string> FieldPath::Strings(const nlohmann::json& root) const {
  std::vector<std::string> out;
  for (const nlohmann::json* value : Find(root)) {
    if (value->is_string()) {
      out.push_back(value->get<std::string>());
    } else if (value->is_array()) {
      for (const nlohmann::json& element : *value) {
        if (element.is_string()) out.push_back(element.get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace ctrlhost::controller
