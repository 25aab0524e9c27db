#include "runtime/apiserver/patch/field_set.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ctrlhost::apiserver {

using nlohmann::json;

void FieldSet::Insert(const Path& path) {
  if (path.empty()) return;
  FieldSet* node = this;
  for (const std::string& element : path) node = &node->children_[element];
  node->member_ = true;
}

bool FieldSet::Has(const Path& path) const {
  const FieldSet* node = this;
  for (const std::string& element : path) {
    node = node->Child(element);
    if (node == nullptr) return false;
  }
  return node->member_;
}

const FieldSet* FieldSet::Child(const std::string& element) const {
  auto it = children_.find(element);
  return it == children_.end() ? nullptr : &it->second;
}

void FieldSet::Prune() {
  for (auto it = children_.begin(); it != children_.end();) {
    it = it->second.empty() ? children_.erase(it) : std::next(it);
  }
}

FieldSet FieldSet::Union(const FieldSet& other) const {
  FieldSet out = *this;
  out.member_ = member_ || other.member_;
  for (const auto& [element, child] : other.children_) {
    auto it = out.children_.find(element);
    if (it == out.children_.end()) {
      out.children_.emplace(element, child);
    } else {
      it->second = it->second.Union(child);
    }
  }
  return out;
}

FieldSet FieldSet::Difference(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && !other.member_;
  for (const auto& [element, child] : children_) {
    const FieldSet* theirs = other.Child(element);
    out.children_.emplace(element, theirs == nullptr ? child : child.Difference(*theirs));
  }
  out.Prune();
  return out;
}

FieldSet FieldSet::Intersection(const FieldSet& other) const {
  FieldSet out;
  out.member_ = member_ && other.member_;
  for (const auto& [element, child] : children_) {
    if (const FieldSet* theirs = other.Child(element); theirs != nullptr) {
      out.children_.emplace(element, child.Intersection(*theirs));
    }
  }
  out.Prune();
  return out;
}

void FieldSet::RemoveTree(const Path& path) {
  if (path.empty()) {
    *this = FieldSet();
    return;
  }
  std::vector<FieldSet*> chain = {this};
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    auto it = chain.back()->children_.find(path[i]);
    if (it == chain.back()->children_.end()) return;
    chain.push_back(&it->second);
  }
  chain.back()->children_.erase(path.back());
  // Bottom-up: pruning a parent first would free the children still in `chain`.
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) (*it)->Prune();
}

void FieldSet::CollectMembers(Path& prefix, std::vector<Path>* out) const {
  if (member_ && !prefix.empty()) out->push_back(prefix);
  for (const auto& [element, child] : children_) {
    prefix.push_back(element);
    child.CollectMembers(prefix, out);
    prefix.pop_back();
  }
}

std::vector<FieldSet::Path> FieldSet::Members() const {
  std::vector<Path> out;
  Path prefix;
  CollectMembers(prefix, &out);
  return out;
}

json FieldSet::ToFieldsV1() const {
  json out = json::object();
  if (member_ && !children_.empty()) out["."] = json::object();
  for (const auto& [element, child] : children_) out[element] = child.ToFieldsV1();
  return out;
}

absl::StatusOr<FieldSet> FieldSet::FromFieldsV1(const json& fields) {
  if (!fields.is_object()) {
    return absl::InvalidArgumentError("fieldsV1: expected an object");
  }
  FieldSet out;
  for (const auto& [element, child] : fields.items()) {
    if (element == ".") {
      out.member_ = true;
      continue;
    }
    if (!(absl::StartsWith(element, "f:") || absl::StartsWith(element, "k:") ||
          absl::StartsWith(element, "v:") || absl::StartsWith(element, "i:"))) {
      return absl::InvalidArgumentError(
          absl::StrCat("fieldsV1: unknown path element \"", element, "\""));
    }
    absl::StatusOr<FieldSet> sub = FromFieldsV1(child);
    if (!sub.ok()) return sub.status();
    // A leaf ({}) is a member; a node with children is one only when it says ".".
    if (sub->children_.empty()) sub->member_ = true;
    out.children_.emplace(element, *std::move(sub));
  }
  return out;
}

std::string FieldSet::PathString(const Path& path) {
  std::string out;
  for (const std::string& element : path) {
    const std::string body = element.substr(2);
    if (absl::StartsWith(element, "f:")) {
      absl::StrAppend(&out, ".", body);
    } else if (absl::StartsWith(element, "k:")) {
      json key = json::parse(body, nullptr, /*allow_exceptions=*/false);
      if (!key.is_object()) {
        absl::StrAppend(&out, "[", body, "]");
        continue;
      }
      std::vector<std::string> parts;
      for (const auto& [name, value] : key.items()) {
        parts.push_back(absl::StrCat(name, "=", value.dump()));
      }
      absl::StrAppend(&out, "[", absl::StrJoin(parts, ","), "]");
    } else if (absl::StartsWith(element, "v:")) {
      absl::StrAppend(&out, "[=", body, "]");
    } else {
      absl::StrAppend(&out, "[", body, "]");
    }
  }
  return out;
}

}  // namespace ctrlhost::apiserver
