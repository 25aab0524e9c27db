#include "runtime/apiserver/openapi/schema.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/apiserver/openapi/schema_internal.h"

namespace ctrlhost::apiserver::openapi {
namespace {

using internal::Child;
using internal::Index;
using internal::IsTrue;
using internal::IsTypeMeta;
using internal::kMaxSchemaDepth;
using internal::ObjectMember;
using nlohmann::json;

void PruneNode(const json& schema, json& value, const std::string& path, int depth,
               std::vector<std::string>& pruned);

// Prunes the fields of object `obj` described by `schema`. `keep_type_meta`: the object is a
// whole resource (the root, or an x-kubernetes-embedded-resource).
void PruneFields(const json& schema, json& obj, const std::string& path, bool keep_type_meta,
                 int depth, std::vector<std::string>& pruned) {
  auto props_it = schema.find("properties");
  const json* props = ObjectMember(schema, "properties");
  const json* additional = ObjectMember(schema, "additionalProperties");
  // A malformed `properties` (not an object) says nothing, so nothing is dropped for it.
  const bool keep_unknown = IsTrue(schema, "x-kubernetes-preserve-unknown-fields") ||
                            IsTrue(schema, "additionalProperties") ||
                            (props_it != schema.end() && props == nullptr) ||
                            // Untyped and undescribed (never structural): says nothing either.
                            (!schema.contains("type") && props_it == schema.end() &&
                             !schema.contains("additionalProperties"));
  std::vector<std::string> erase;
  for (auto& [key, value] : obj.items()) {
    if (keep_type_meta && IsTypeMeta(key)) continue;
    const json* sub = nullptr;
    if (props != nullptr) {
      auto it = props->find(key);
      if (it != props->end()) sub = &*it;
    }
    if (sub == nullptr) sub = additional;
    if (sub != nullptr) {
      // A null where the schema does not allow one is dropped, as if never sent.
      if (value.is_null() && sub->is_object() && !IsTrue(*sub, "nullable")) {
        erase.push_back(key);
        continue;
      }
      PruneNode(*sub, value, Child(path, key), depth + 1, pruned);
    } else if (!keep_unknown) {
      erase.push_back(key);
      pruned.push_back(Child(path, key));
    }
  }
  for (const std::string& key : erase) obj.erase(key);
}

void PruneNode(const json& schema, json& value, const std::string& path, int depth,
               std::vector<std::string>& pruned) {
  if (depth > kMaxSchemaDepth || !schema.is_object()) return;
  if (value.is_object()) {
    PruneFields(schema, value, path, IsTrue(schema, "x-kubernetes-embedded-resource"), depth,
                pruned);
  } else if (value.is_array()) {
    auto items = schema.find("items");
    if (items == schema.end() || !items->is_object()) return;
    for (size_t i = 0; i < value.size(); ++i) {
      PruneNode(*items, value[i], Index(path, i), depth + 1, pruned);
    }
  }
}

void DefaultNode(const json& schema, json& value, bool root, int depth) {
  if (depth > kMaxSchemaDepth || !schema.is_object()) return;
  if (value.is_object()) {
    const json* props = ObjectMember(schema, "properties");
    if (props != nullptr) {
      for (auto& [name, sub] : props->items()) {
        if (root && IsTypeMeta(name)) continue;
        if (!sub.is_object()) continue;
        auto def = sub.find("default");
        auto field = value.find(name);
        if (def != sub.end() &&
            (field == value.end() || (field->is_null() && !IsTrue(sub, "nullable")))) {
          value[name] = *def;
        }
        field = value.find(name);
        if (field != value.end()) DefaultNode(sub, *field, false, depth + 1);
      }
    }
    if (const json* additional = ObjectMember(schema, "additionalProperties")) {
      for (auto& [key, v] : value.items()) {
        if (props != nullptr && props->contains(key)) continue;
        if (root && IsTypeMeta(key)) continue;
        DefaultNode(*additional, v, false, depth + 1);
      }
    }
  } else if (value.is_array()) {
    const json* items = ObjectMember(schema, "items");
    if (items == nullptr) return;
    for (json& v : value) DefaultNode(*items, v, false, depth + 1);
  }
}

std::string MetadataName(const json& object) {
  const json* meta = ObjectMember(object, "metadata");
  if (meta == nullptr) return "";
  auto it = meta->find("name");
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

absl::StatusOr<FieldValidation> ParseFieldValidation(absl::string_view value) {
  if (value.empty() || value == "Warn") return FieldValidation::kWarn;
  if (value == "Ignore") return FieldValidation::kIgnore;
  if (value == "Strict") return FieldValidation::kStrict;
  return kube::BadRequestError(absl::StrCat("fieldValidation parameter unsupported: ", value,
                                            ", must be one of: Ignore, Warn or Strict"));
}

std::vector<std::string> Prune(const json& schema, json& object) {
  std::vector<std::string> pruned;
  if (!schema.is_object() || !object.is_object()) return pruned;
  PruneFields(schema, object, "", /*keep_type_meta=*/true, 0, pruned);
  return pruned;
}

void ApplyDefaults(const json& schema, json& object) {
  if (!object.is_object()) return;
  DefaultNode(schema, object, /*root=*/true, 0);
}

absl::StatusOr<std::vector<std::string>> PrepareCustomResource(const json& schema,
                                                               absl::string_view group,
                                                               absl::string_view kind,
                                                               FieldValidation mode, json& object) {
  std::vector<std::string> warnings;
  if (schema.is_null()) return warnings;
  std::vector<std::string> pruned = Prune(schema, object);
  if (!pruned.empty() && mode == FieldValidation::kStrict) {
    std::vector<std::string> parts;
    for (const std::string& p : pruned)
      parts.push_back(absl::StrCat("unknown field ", kube::GoQuote(p)));
    return kube::BadRequestError(
        absl::StrCat("strict decoding error: ", absl::StrJoin(parts, ", ")));
  }
  if (mode == FieldValidation::kWarn) {
    for (const std::string& p : pruned) {
      warnings.push_back(absl::StrCat("unknown field ", kube::GoQuote(p)));
    }
  }
  ApplyDefaults(schema, object);
  std::vector<kube::StatusCause> causes = Validate(schema, object);
  if (!causes.empty()) return kube::InvalidError(group, kind, MetadataName(object), causes);
  return warnings;
}

}  // namespace ctrlhost::apiserver::openapi
