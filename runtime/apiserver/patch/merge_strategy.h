// Merge strategies: how the fields of one built-in kind are merged by a strategic merge patch
// and by server-side apply.
//
// Kubernetes declares these with Go struct tags on the typed API objects
// (`patchStrategy:"merge" patchMergeKey:"name"`); ctrlhost has no Go types, so the strategies of
// the built-in kinds the embedded API server serves are written down here as a tree of field
// paths. Custom resources have no strategy (nullptr): strategic merge patch is refused for them
// and server-side apply treats their lists as atomic.
//
//   const MergeStrategy* s = BuiltinMergeStrategy("apps", "Deployment");
//   const MergeStrategy::Node* containers =
//       s->root().Find("spec.template.spec.containers");
//   containers->strategy.merge_key;  // "name"
//
// Paths are field names separated by '.'; list items are transparent, so the ports of a
// container are "spec.template.spec.containers.ports".
#ifndef CTRLHOST_RUNTIME_APISERVER_PATCH_MERGE_STRATEGY_H_
#define CTRLHOST_RUNTIME_APISERVER_PATCH_MERGE_STRATEGY_H_

#include <map>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace ctrlhost::apiserver {

// The patch strategy of one field, as Kubernetes' struct tags declare it.
struct FieldStrategy {
  // patchStrategy contains "merge": maps are merged (the default for maps anyway); lists are
  // merged by `merge_key` (lists of objects) or as sets (lists of primitives).
  bool merge = false;
  // patchStrategy contains "retainKeys": a `$retainKeys` directive is expected in patches.
  bool retain_keys = false;
  // patchStrategy "replace": the field's value is replaced whole, never merged.
  bool replace = false;
  // patchMergeKey of a list of objects merged by key; empty for primitive lists.
  std::string merge_key;

  // A list of objects merged item by item, matched on `merge_key`.
  bool IsAssociativeList() const { return merge && !merge_key.empty(); }
  // A list of primitives merged as a set.
  bool IsPrimitiveSet() const { return merge && merge_key.empty(); }
};

// A tree of field strategies for one kind. Immutable after construction, so safe to share
// between threads; the built-in ones live for the whole process.
class MergeStrategy {
 public:
  struct Node {
    FieldStrategy strategy;
    std::map<std::string, std::unique_ptr<Node>, std::less<>> children;

    // The child for field `name`, or nullptr when it has no declared strategy (maps merge,
    // lists are atomic).
    const Node* Child(absl::string_view name) const;
    // The node at a '.'-separated path below this one, or nullptr.
    const Node* Find(absl::string_view path) const;
  };

  MergeStrategy() = default;
  MergeStrategy(const MergeStrategy&) = delete;
  MergeStrategy& operator=(const MergeStrategy&) = delete;
  MergeStrategy(MergeStrategy&&) = default;
  MergeStrategy& operator=(MergeStrategy&&) = default;

  // Declares the strategy of the field at `path` (creating intermediate nodes).
  MergeStrategy& Set(absl::string_view path, FieldStrategy strategy);
  // Declares the ObjectMeta strategies (ownerReferences by uid, finalizers as a set) under
  // `prefix` ("" for the object's own metadata, "spec.template" for a pod template).
  MergeStrategy& AddObjectMeta(absl::string_view prefix);

  const Node& root() const { return root_; }

 private:
  Node root_;
};

// The strategy of a built-in kind the embedded API server serves ("" is the core group), or
// nullptr for anything else (custom resources). ConfigMap, Secret, Namespace, ServiceAccount,
// Service, Event (core and events.k8s.io), Deployment (apps) and Lease (coordination.k8s.io).
const MergeStrategy* BuiltinMergeStrategy(absl::string_view group, absl::string_view kind);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PATCH_MERGE_STRATEGY_H_
