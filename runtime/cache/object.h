// Immutable cached Kubernetes objects: the raw JSON bytes plus the metadata the host needs.
//
// A cached object is created once by the reflector (the single writer of a store) and then
// shared read-only by every reader as `std::shared_ptr<const Object>`. Only the metadata the
// host indexes and compares is parsed; the rest stays as bytes and goes to plugins unchanged.
// By default `metadata.managedFields` and the
// `kubectl.kubernetes.io/last-applied-configuration` annotation are stripped before storing
// (they are often half of an object's size and the host never reads them).
//
//   cache::ObjectParser parser;                      // one per writer thread
//   absl::StatusOr<std::shared_ptr<const cache::Object>> object = parser.Parse(json);
//   if (object.ok()) Use((*object)->meta().name, (*object)->json());
#ifndef CTRLHOST_RUNTIME_CACHE_OBJECT_H_
#define CTRLHOST_RUNTIME_CACHE_OBJECT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::cache {

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;

  bool operator==(const OwnerReference& o) const {
    return api_version == o.api_version && kind == o.kind && name == o.name && uid == o.uid &&
           controller == o.controller;
  }
};

// The parsed part of metadata. Absent fields are empty (generation 0).
struct ObjectMeta {
  std::string namespace_;  // empty for cluster-scoped objects
  std::string name;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  // Sorted by key (the server's order is not significant); keys are unique.
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<OwnerReference> owner_references;
  std::string deletion_timestamp;  // RFC 3339 as sent; empty when not being deleted
  std::vector<std::string> finalizers;
};

// Thread-safe: immutable after construction.
class Object {
 public:
  Object(std::string json, ObjectMeta meta);
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  // The object's JSON (after stripping, when enabled). Valid as long as the Object lives.
  absl::string_view json() const { return json_; }
  const ObjectMeta& meta() const { return meta_; }
  // "namespace/name", or "name" for cluster-scoped objects (client-go's MetaNamespaceKey).
  const std::string& key() const { return key_; }
  // The value of label `key`, or nullptr.
  const std::string* Label(absl::string_view key) const;
  // Approximate bytes this object holds on the heap (JSON + parsed metadata), for metrics.
  size_t MemoryBytes() const;

 private:
  const std::string json_;
  const ObjectMeta meta_;
  const std::string key_;
};

std::string ObjectKey(absl::string_view namespace_, absl::string_view name);

struct ParseOptions {
  // Remove metadata.managedFields.
  bool strip_managed_fields = true;
  // Remove the kubectl.kubernetes.io/last-applied-configuration annotation (and the
  // annotations map if it becomes empty).
  bool strip_last_applied = true;
};

// Parses objects with simdjson's DOM parser (see README.md for the measurement behind the
// choice). Not thread-safe: it reuses its parse buffers; use one per thread.
class ObjectParser {
 public:
  explicit ObjectParser(ParseOptions options = {});
  ~ObjectParser();
  ObjectParser(const ObjectParser&) = delete;
  ObjectParser& operator=(const ObjectParser&) = delete;

  // Errors: kInvalidArgument when `json` is not a JSON object, has no metadata.name, or a
  // metadata field has the wrong type. Never crashes on any input.
  absl::StatusOr<std::shared_ptr<const Object>> Parse(absl::string_view json);

  // Only metadata.resourceVersion (e.g. of a watch BOOKMARK, which carries nothing else).
  // Errors: kInvalidArgument when it is missing or `json` is not an object.
  absl::StatusOr<std::string> ParseResourceVersion(absl::string_view json);

 private:
  struct Impl;
  const ParseOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctrlhost::cache

#endif  // CTRLHOST_RUNTIME_CACHE_OBJECT_H_
