// Helpers shared by schema.cc and schema_validate.cc (internal to the openapi package).
#ifndef CTRLHOST_RUNTIME_APISERVER_OPENAPI_SCHEMA_INTERNAL_H_
#define CTRLHOST_RUNTIME_APISERVER_OPENAPI_SCHEMA_INTERNAL_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver::openapi::internal {

// Schemas nested deeper than this are not enforced (and not recursed into).
inline constexpr int kMaxSchemaDepth = 100;

// True when `j` is an object with `key` set to boolean true.
inline bool IsTrue(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// The member `key` of `j` when it is an object, else null.
inline const nlohmann::json* ObjectMember(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

inline std::string Child(absl::string_view path, absl::string_view name) {
  return path.empty() ? std::string(name) : absl::StrCat(path, ".", name);
}

inline std::string Index(absl::string_view path, size_t i) {
  return absl::StrCat(path, "[", i, "]");
}

// Fields of a whole object (and of embedded resources) that belong to the server, never pruned
// or checked against the CRD's schema.
inline bool IsTypeMeta(absl::string_view key) {
  return key == "apiVersion" || key == "kind" || key == "metadata";
}

}  // namespace ctrlhost::apiserver::openapi::internal

#endif  // CTRLHOST_RUNTIME_APISERVER_OPENAPI_SCHEMA_INTERNAL_H_
