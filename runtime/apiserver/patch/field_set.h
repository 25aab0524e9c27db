// FieldSet: a set of field paths inside one object, the unit of server-side apply ownership,
// with its wire form FieldsV1 (metadata.managedFields[].fieldsV1).
//
// A path is a list of encoded elements, exactly as FieldsV1 spells them:
//   "f:<field>"           a field of a map, e.g. "f:spec"
//   "k:<json object>"     an item of an associative list, e.g. k:{"name":"web"}
//   "v:<json value>"      an item of a set of primitives, e.g. v:"finalizer.example.com"
//   "i:<index>"           an item by position (accepted when decoding, never produced)
// A path is a *member* when it is owned itself; FieldsV1 writes that as "." (or as an empty
// object for a path without children):
//   {"f:metadata":{"f:labels":{"f:app":{}}},
//    "f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{}}}}}
//
//   FieldSet s;
//   s.Insert({"f:spec", "f:replicas"});
//   s.ToFieldsV1();                          // {"f:spec":{"f:replicas":{}}}
//   FieldSet::PathString({"f:spec", "f:replicas"});  // ".spec.replicas"
//
// A FieldSet is a value type; it is not safe for concurrent mutation.
#ifndef CTRLHOST_RUNTIME_APISERVER_PATCH_FIELD_SET_H_
#define CTRLHOST_RUNTIME_APISERVER_PATCH_FIELD_SET_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::apiserver {

class FieldSet {
 public:
  using Path = std::vector<std::string>;

  // Adds `path` as a member (the empty path is ignored: the object itself is never owned).
  void Insert(const Path& path);
  // Whether `path` is a member.
  bool Has(const Path& path) const;
  // No members at all.
  bool empty() const { return !member_ && children_.empty(); }

  FieldSet Union(const FieldSet& other) const;
  // Members of this set that are not members of `other`.
  FieldSet Difference(const FieldSet& other) const;
  FieldSet Intersection(const FieldSet& other) const;
  // Removes `path` and everything below it.
  void RemoveTree(const Path& path);

  // Every member, in FieldsV1 key order.
  std::vector<Path> Members() const;

  bool member() const { return member_; }
  const std::map<std::string, FieldSet>& children() const { return children_; }
  // The subtree under one element, or nullptr.
  const FieldSet* Child(const std::string& element) const;

  nlohmann::json ToFieldsV1() const;
  // InvalidArgument for anything that is not FieldsV1.
  static absl::StatusOr<FieldSet> FromFieldsV1(const nlohmann::json& fields);

  // The path as Kubernetes prints it in conflicts:
  // .spec.template.spec.containers[name="web"].image, .metadata.finalizers[="x"], .list[0].
  static std::string PathString(const Path& path);

  // Encoded elements.
  static std::string FieldElement(const std::string& name) { return "f:" + name; }
  static std::string KeyElement(const nlohmann::json& key_fields) {
    return "k:" + key_fields.dump();
  }
  static std::string ValueElement(const nlohmann::json& value) { return "v:" + value.dump(); }

  bool operator==(const FieldSet& other) const {
    return member_ == other.member_ && children_ == other.children_;
  }

 private:
  void CollectMembers(Path& prefix, std::vector<Path>* out) const;
  void Prune();

  bool member_ = false;
  std::map<std::string, FieldSet> children_;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PATCH_FIELD_SET_H_
