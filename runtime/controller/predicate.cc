#include "runtime/controller/predicate.h"

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller {
namespace {

nlohmann::json ParseJson(absl::string_view json) {
  return nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
}

// metadata.annotations of `object`, null when absent; discarded when the JSON does not parse.
nlohmann::json AnnotationsOf(const cache::Object& object) {
  nlohmann::json json = ParseJson(object.json());
  if (json.is_discarded()) return json;
  if (!json.is_object()) return nlohmann::json::value_t::discarded;
  auto meta = json.find("metadata");
  if (meta == json.end() || !meta->is_object()) return nullptr;
  auto annotations = meta->find("annotations");
  if (annotations == meta->end()) return nullptr;
  return std::move(*annotations);
}

// The object without the parts that change on every write (and without `status` unless
// `keep_status`).
nlohmann::json WithoutBookkeeping(const cache::Object& object, bool keep_status) {
  nlohmann::json json = ParseJson(object.json());
  if (json.is_discarded() || !json.is_object()) return nlohmann::json::value_t::discarded;
  if (!keep_status) json.erase("status");
  auto meta = json.find("metadata");
  if (meta != json.end() && meta->is_object()) {
    meta->erase("resourceVersion");
    meta->erase("managedFields");
  }
  return json;
}

bool SameParsedMetadata(const cache::Object& a, const cache::Object& b) {
  if (a.generation() != b.generation() || a.deletion_timestamp() != b.deletion_timestamp() ||
      a.label_count() != b.label_count() || a.finalizer_count() != b.finalizer_count() ||
      a.owner_count() != b.owner_count()) {
    return false;
  }
  for (size_t i = 0; i < a.label_count(); ++i) {
    if (a.label(i) != b.label(i)) return false;
  }
  for (size_t i = 0; i < a.finalizer_count(); ++i) {
    if (a.finalizer(i) != b.finalizer(i)) return false;
  }
  if (a.owner_count() > 0 && a.meta().owner_references != b.meta().owner_references) {
    return false;
  }
  return true;
}

}  // namespace

bool MetadataChanged(const cache::Object& old_object, const cache::Object& new_object) {
  if (!SameParsedMetadata(old_object, new_object)) return true;
  nlohmann::json old_annotations = AnnotationsOf(old_object);
  nlohmann::json new_annotations = AnnotationsOf(new_object);
  if (old_annotations.is_discarded() || new_annotations.is_discarded()) return true;
  return old_annotations != new_annotations;
}

bool ChangedBesidesStatus(const cache::Object& old_object, const cache::Object& new_object) {
  if (old_object.json() == new_object.json()) return false;
  nlohmann::json a = WithoutBookkeeping(old_object, /*keep_status=*/false);
  nlohmann::json b = WithoutBookkeeping(new_object, /*keep_status=*/false);
  if (a.is_discarded() || b.is_discarded()) return true;
  return a != b;
}

bool OnlyBookkeepingChanged(const cache::Object& old_object, const cache::Object& new_object) {
  if (old_object.json() == new_object.json()) return true;
  nlohmann::json a = WithoutBookkeeping(old_object, /*keep_status=*/true);
  nlohmann::json b = WithoutBookkeeping(new_object, /*keep_status=*/true);
  if (a.is_discarded() || b.is_discarded()) return false;
  return a == b;
}

bool PrimaryUpdateTriggers(const pluginpb::Predicates& predicates, const cache::Object& old_object,
                           const cache::Object& new_object) {
  if (predicates.primary_status_changes()) return !OnlyBookkeepingChanged(old_object, new_object);
  if (MetadataChanged(old_object, new_object)) return true;
  if (old_object.generation() == 0 && new_object.generation() == 0) {
    return ChangedBesidesStatus(old_object, new_object);
  }
  return false;
}

bool ChildUpdateTriggers(const pluginpb::Predicates& predicates, const cache::Object& old_object,
                         const cache::Object& new_object) {
  if (!predicates.ignore_child_status_changes()) {
    return !OnlyBookkeepingChanged(old_object, new_object);
  }
  return ChangedBesidesStatus(old_object, new_object);
}

}  // namespace ctrlhost::controller
