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
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

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

namespace internal {

// Views of one object's parsed metadata, as ObjectParser collects them (pointing into its parse
// buffers, valid until its next parse); Object copies them into its own buffer.
struct MetaViews {
  struct Owner {
    absl::string_view api_version, kind, name, uid;
    bool controller = false;
  };
  absl::string_view namespace_, name, uid, resource_version, deletion_timestamp;
  int64_t generation = 0;
  std::vector<std::pair<absl::string_view, absl::string_view>> labels;  // sorted, unique keys
  std::vector<Owner> owners;
  std::vector<absl::string_view> finalizers;

  void Clear();
};

}  // namespace internal

// Thread-safe: immutable after construction.
//
// Memory layout (memory is a product feature): one heap buffer holds the label, owner and
// finalizer span tables followed by the JSON bytes, the key and every metadata string; the
// fields are 32-bit offsets into it and the accessors return views valid as long as the Object
// lives. `meta()` materialises a copy for convenience.
class Object {
 public:
  // Copies `json` and `meta` into the compact layout. `meta.labels` must be sorted by key.
  Object(absl::string_view json, const ObjectMeta& meta);
  // The same from views; the JSON is the concatenation of `json_pieces` (ObjectParser passes
  // the input's byte ranges around stripped members, copied once, here).
  Object(absl::Span<const absl::string_view> json_pieces, const internal::MetaViews& meta);
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
  size_t label_count() const { return label_count_; }
  std::pair<absl::string_view, absl::string_view> label(size_t i) const {
    const LabelSpans l = Read<LabelSpans>(i * sizeof(LabelSpans));
    return {View(l.key), View(l.value)};
  }
  // The value of label `key`, if present.
  std::optional<absl::string_view> Label(absl::string_view key) const;
  size_t owner_count() const { return owner_count_; }
  absl::string_view owner_uid(size_t i) const { return View(Owner(i).uid); }
  // Whether owner reference `i` is the managing controller (`controller: true`).
  bool owner_is_controller(size_t i) const { return Owner(i).controller != 0; }
  size_t finalizer_count() const { return finalizer_count_; }
  absl::string_view finalizer(size_t i) const {
    return View(Read<Span>(FinalizersOffset() + i * sizeof(Span)));
  }

  // A full copy of the parsed metadata (allocates; not for hot paths).
  ObjectMeta meta() const;
  // Heap bytes this object holds (its buffer and itself), for metrics.
  size_t MemoryBytes() const;

 private:
  struct Span {
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  struct LabelSpans {
    Span key, value;
  };
  struct OwnerSpans {
    Span api_version, kind, name, uid;
    uint32_t controller = 0;
  };
  absl::string_view View(Span s) const { return absl::string_view(data_.get() + s.offset, s.size); }
  // Tables live at the start of data_; memcpy keeps the reads free of alignment and aliasing
  // assumptions (compilers turn it into plain loads).
  template <typename T>
  T Read(size_t offset) const {
    T t;
    std::memcpy(&t, data_.get() + offset, sizeof(T));
    return t;
  }
  size_t OwnersOffset() const { return label_count_ * sizeof(LabelSpans); }
  size_t FinalizersOffset() const { return OwnersOffset() + owner_count_ * sizeof(OwnerSpans); }
  OwnerSpans Owner(size_t i) const {
    return Read<OwnerSpans>(OwnersOffset() + i * sizeof(OwnerSpans));
  }

  std::unique_ptr<char[]> data_;
  uint32_t data_size_ = 0;
  uint32_t label_count_ = 0;
  uint32_t owner_count_ = 0;
  uint32_t finalizer_count_ = 0;
  Span json_, key_, namespace_span_, name_, uid_, resource_version_, deletion_timestamp_;
  int64_t generation_ = 0;
};

std::string ObjectKey(absl::string_view namespace_, absl::string_view name);

// The largest object ObjectParser accepts (Object's offsets are 32-bit; real objects are at
// most a few MB).
inline constexpr size_t kMaxObjectBytes = size_t{1} << 30;

struct ParseOptions {
  // Remove metadata.managedFields.
  bool strip_managed_fields = true;
  // Remove the kubectl.kubernetes.io/last-applied-configuration annotation (and the
  // annotations map if it becomes empty).
  bool strip_last_applied = true;
};

// Parses objects with simdjson's DOM parser (see README.md for the measurement behind the
// choice): the whole document is validated, the metadata read in one pass over its members,
// and stripped members are cut out of the input bytes (strip.h), never re-serialised.
// Not thread-safe: it reuses its parse buffers; use one per thread.
class ObjectParser {
 public:
  explicit ObjectParser(ParseOptions options = {});
  ~ObjectParser();
  ObjectParser(const ObjectParser&) = delete;
  ObjectParser& operator=(const ObjectParser&) = delete;

  // Errors: kInvalidArgument when `json` is not a JSON object, has no metadata.name, a
  // metadata field has the wrong type, or it is larger than kMaxObjectBytes. Never crashes on
  // any input.
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
