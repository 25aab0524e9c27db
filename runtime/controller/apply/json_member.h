// Exception-free reads of JSON the API server (or a plugin) sent, for the applier and the
// host-computed status: nlohmann's value() and get<T>() throw on a type mismatch, and
// untrusted input must become an error or a default, never an exception.
//
//   const json* meta = Member(object, "metadata");
//   std::string name = meta != nullptr ? StringMember(*meta, "name") : "";
//
// Pure functions, thread-compatible.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_JSON_MEMBER_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_JSON_MEMBER_H_

#include <string>

#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {

// The member `key` of `object`; nullptr when absent or when `object` is no object. The pointer
// borrows from `object`.
inline const nlohmann::json* Member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// The string member `key` of `object`; "" when absent or not a string.
inline std::string StringMember(const nlohmann::json& object, const char* key) {
  const nlohmann::json* member = Member(object, key);
  return member != nullptr && member->is_string() ? member->get<std::string>() : "";
}

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_JSON_MEMBER_H_
