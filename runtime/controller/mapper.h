// Mappers: from a watch event of some kind to the keys of the primaries to reconcile.
//
// A controller reconciles objects of one primary kind. Events of the primary kind map to the
// object itself; events of owned kinds map to the owner named by the child's controller owner
// reference; events of watched kinds map as the plugin declared in its `WatchedKind` (owner
// reference, label, field path or enqueue-all). Keys are cache keys: "namespace/name" for a
// namespaced primary, "name" for a cluster-scoped one.
//
// Each mapper also answers the reverse question, "which objects of this kind map to that
// primary?" (`Related`), so the runner can put a watch's objects into the request
// (`WatchedKind.include_in_requests`).
//
// Label-selector and field-path mappers read fields of the primaries. They keep a small index
// of them that the runner feeds from the primary reflector (`ObservePrimary`), so an event of a
// watched object costs a lookup, not a scan and parse of every primary.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Mapper> mapper,
//                    MapperFor(watched_kind, PrimaryKind{"apps", "Deployment", true}, &store));
//   mapper->ObservePrimary(nullptr, primary);           // on every primary event
//   for (const std::string& key : mapper->MapEvent(old_object, new_object)) queue.Add(key);
#ifndef CTRLHOST_RUNTIME_CONTROLLER_MAPPER_H_
#define CTRLHOST_RUNTIME_CONTROLLER_MAPPER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/cache/store.h"

namespace ctrlhost::controller {

// The primary kind as mappers need it.
struct PrimaryKind {
  std::string group;  // "" for the core group
  std::string kind;
  bool namespaced = true;
};

// The apiVersion string of a group/version: "group/version", or "version" for the core group.
std::string ApiVersion(absl::string_view group, absl::string_view version);
// The group part of an apiVersion ("" for "v1").
absl::string_view GroupOf(absl::string_view api_version);

// Thread-safe: every method may be called from any thread (reflector threads call MapEvent and
// ObservePrimary concurrently; runner workers call Related). Implementations that keep an
// index guard it with their own mutex.
class Mapper {
 public:
  virtual ~Mapper() = default;

  // Primary keys `object` maps to (possibly none, possibly duplicated: the queue dedups).
  virtual std::vector<std::string> Map(const cache::Object& object) const = 0;

  // Keys for an event: the union of what the old and the new state map to, so that both the
  // primary an object left and the one it joined are reconciled. Either pointer may be null.
  // Sorted, without duplicates.
  std::vector<std::string> MapEvent(const cache::ObjectPtr& old_object,
                                    const cache::ObjectPtr& new_object) const;

  // Objects of `watched` (the store of this mapper's kind) that map to `primary`.
  virtual std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                                const cache::Store& watched) const = 0;

  // Told about every primary event (old null for adds, new null for deletes), for mappers that
  // index the primaries. The default does nothing.
  virtual void ObservePrimary(const cache::ObjectPtr& old_primary,
                              const cache::ObjectPtr& new_primary);
};

// Maps an object to its own key (events of the primary kind).
std::unique_ptr<Mapper> SelfMapper();

// Maps an object to every owner reference whose apiVersion group and kind are the primary's
// (the version is ignored: an owner reference may name any served version), or only to the one
// with controller: true when `controller_only`. Key: object namespace + owner name (name only
// for a cluster-scoped primary). Owned kinds use this with controller_only = true.
std::unique_ptr<Mapper> OwnerMapper(PrimaryKind primary, bool controller_only);

// Builds the mapper a `WatchedKind` declares. `primaries` (borrowed, must outlive the mapper)
// is the primary kind's store, read by enqueue_all. Errors: kInvalidArgument for a missing
// mapping, an empty label or an unparsable field path.
absl::StatusOr<std::unique_ptr<Mapper>> MapperFor(const pluginpb::WatchedKind& watched,
                                                  PrimaryKind primary,
                                                  const cache::Store* primaries);

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_MAPPER_H_
