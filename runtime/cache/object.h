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
//   if (object.ok()) Use((*object)->name(), (*object)->json());
#ifndef CTRLHOST_RUNTIME_CACHE_OBJECT_H_
#define CTRLHOST_RUNTIME_CACHE_OBJECT_H_

#include <cstdint>
#include <memory>
#include <optional>
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

// The parsed part of metadata, as owning strings: what the parser fills and Object::meta()
// returns. Absent fields are empty (generation 0).
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
//
// Memory layout (memory is a product feature): the JSON bytes, the key and every metadata
// string live in one buffer; the fields are offsets into it and the accessors return views
// valid as long as the Object lives. `meta()` materialises a copy for convenience.
class Object {
 public:
  // Copies `json` and `meta` into the compact layout.
  Object(absl::string_view json, const ObjectMeta& meta);
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  // The object's JSON (after stripping, when enabled).
  absl::string_view json() const { return View(json_); }
  // "namespace/name", or "name" for cluster-scoped objects (client-go's MetaNamespaceKey).
  absl::string_view key() const { return View(key_); }
  absl::string_view namespace_() const { return View(namespace_span_); }
  absl::string_view name() const { return View(name_); }
  absl::string_view uid() const { return View(uid_); }
  absl::string_view resource_version() const { return View(resource_version_); }
  absl::string_view deletion_timestamp() const { return View(deletion_timestamp_); }
  int64_t generation() const { return generation_; }
  // Labels sorted by key.
  size_t label_count() const { return labels_.size(); }
  std::pair<absl::string_view, absl::string_view> label(size_t i) const {
    return {View(labels_[i].first), View(labels_[i].second)};
  }
  // The value of label `key`, if present.
  std::optional<absl::string_view> Label(absl::string_view key) const;
  size_t owner_count() const { return owners_.size(); }
  absl::string_view owner_uid(size_t i) const { return View(owners_[i].uid); }
  size_t finalizer_count() const { return finalizers_.size(); }
  absl::string_view finalizer(size_t i) const { return View(finalizers_[i]); }

  // A full copy of the parsed metadata (allocates; not for hot paths).
  ObjectMeta meta() const;
  // Heap bytes this object holds (buffer + vectors + itself), for metrics.
  size_t MemoryBytes() const;

 private:
  struct Span {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  struct OwnerSpans {
    Span api_version, kind, name, uid;
    bool controller = false;
  };
  absl::string_view View(Span s) const {
    return absl::string_view(data_.data() + s.offset, s.size);
  }
  Span Append(absl::string_view s);

  std::string data_;
  Span json_, key_, namespace_span_, name_, uid_, resource_version_, deletion_timestamp_;
  int64_t generation_ = 0;
  std::vector<std::pair<Span, Span>> labels_;
  std::vector<OwnerSpans> owners_;
  std::vector<Span> finalizers_;
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
