// Field ownership for server-side apply: metadata.managedFields entries, the field sets of
// objects, their differences, and RecordUpdate for non-apply writes.
//
// After every create, update or (non-apply) patch the API server calls RecordUpdate so the
// writer owns what it changed; ServerSideApply (apply.h) then reports conflicts against it:
//
//   nlohmann::json next = ...;  // the object about to be stored
//   RecordUpdate(&next, &live, "kubectl-edit", "apps/v1", clock->Now(), /*subresource=*/"");
//
// Simplified compared with Kubernetes' structured-merge-diff (see also apply.h):
// - Structure comes from MergeStrategy (built-in kinds), not an OpenAPI schema: lists with a
//   merge key are associative (keyed by that one key; Kubernetes keys container ports and
//   service ports by port *and* protocol), merge lists of primitives are sets, every other list
//   is atomic. Custom resources have no strategy: all their lists are atomic, maps granular.
// - Maps never carry "." entries (Kubernetes writes "." for a map[string]X it created, not for a
//   struct; without a schema the two are indistinguishable). An empty map or list is owned as a
//   leaf. List items always carry ".".
// - One entry per (manager, operation, subresource): an Update entry is not split by
//   apiVersion, and there is no cap of ten Update entries ("ancient-changes").
// - No version conversion: fields sets are compared as written whatever their apiVersion.
//
// Thread-safety: free functions on values; callers own the objects they pass.
#ifndef CTRLHOST_RUNTIME_APISERVER_PATCH_MANAGED_FIELDS_H_
#define CTRLHOST_RUNTIME_APISERVER_PATCH_MANAGED_FIELDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/patch/field_set.h"
#include "runtime/apiserver/patch/merge_strategy.h"

namespace ctrlhost::apiserver {

// One metadata.managedFields entry.
struct ManagedFieldsEntry {
  std::string manager;
  std::string operation;  // "Apply" or "Update"
  std::string api_version;
  std::string time;         // RFC 3339, seconds precision, UTC
  std::string subresource;  // "" or e.g. "status"
  FieldSet fields;

  bool SameOwner(absl::string_view m, absl::string_view op, absl::string_view sub) const {
    return manager == m && operation == op && subresource == sub;
  }
};

// The entries of object.metadata.managedFields (none when absent). InvalidArgument when they
// are not well-formed (callers reset them, as kube-apiserver does).
absl::StatusOr<std::vector<ManagedFieldsEntry>> DecodeManagedFields(const nlohmann::json& object);

// Writes `entries` into object.metadata.managedFields in kube-apiserver's order (operation,
// time, manager, apiVersion, subresource), dropping entries that own nothing; removes the field
// when none is left.
void EncodeManagedFields(std::vector<ManagedFieldsEntry> entries, nlohmann::json* object);

// RFC 3339 as managedFields stores it: "2024-05-01T10:00:00Z".
std::string FormatManagedFieldsTime(absl::Time t);

// The strategy node for the object's own kind (from apiVersion/kind), or nullptr.
const MergeStrategy::Node* StrategyRootFor(const nlohmann::json& object);

// The fields of `value`, walking maps, associative lists and sets per `node` (nullptr: maps
// granular, lists atomic). Null values are skipped. Identity and server-owned metadata
// (apiVersion, kind, metadata.name/namespace/uid/resourceVersion/generation/
// creationTimestamp/selfLink/managedFields) are never included.
absl::StatusOr<FieldSet> FieldSetOf(const nlohmann::json& value, const MergeStrategy::Node* node);

// What changed from `before` to `after` (either may be null: absent).
struct FieldDiff {
  FieldSet added;
  FieldSet modified;
  FieldSet removed;
};
absl::StatusOr<FieldDiff> DiffFields(const nlohmann::json* before, const nlohmann::json& after,
                                     const MergeStrategy::Node* node);

// After a create (`old_object == nullptr`), update or non-apply patch: gives `manager` (an
// "Update" entry for `subresource`) the fields the write added or changed, and takes them from
// every other entry; fields the write removed are owned by nobody any more. The entries are read
// from `new_object` when it carries any (a client may send them back), else from `old_object`.
// Entries that cannot be decoded are reset. The strategy comes from the object's apiVersion/kind
// (BuiltinMergeStrategy). A write that changes nothing leaves ownership as it was.
void RecordUpdate(nlohmann::json* new_object, const nlohmann::json* old_object,
                  absl::string_view manager, absl::string_view api_version, absl::Time now,
                  absl::string_view subresource);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PATCH_MANAGED_FIELDS_H_
