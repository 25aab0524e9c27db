// An indexed store of cached objects with one writer and many readers.
//
// The reflector (runtime/watch) is the only writer; any number of threads read. Readers get
// `std::shared_ptr<const Object>`: immutable objects that stay valid after the store moved on.
// Reads take a shared lock that the writer holds only to swap pointers in the maps: Replace
// builds its new maps and computes the differences without the lock, then swaps them in, so a
// relist of 100k objects never blocks readers for longer than a few pointer swaps.
//
// Built-in indexes: by namespace, by owner uid (every ownerReference) and by label ("key=value").
//
//   cache::Store store;
//   store.Upsert(object);                                      // writer only
//   auto pods = store.ByIndex(cache::Index::kNamespace, "default");
//   auto children = store.ByIndex(cache::Index::kOwnerUid, parent->meta().uid);
//   auto web = store.ByIndex(cache::Index::kLabel, "app=web");
#ifndef CTRLHOST_RUNTIME_CACHE_STORE_H_
#define CTRLHOST_RUNTIME_CACHE_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "runtime/cache/object.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::cache {

using ObjectPtr = std::shared_ptr<const Object>;

enum class Index { kNamespace, kOwnerUid, kLabel };

// What changed between two states of a store, in key order within each list (Replace keeps
// the list's order when it is already sorted by key, as API server lists are, and sorts
// otherwise).
struct StoreDiff {
  std::vector<ObjectPtr> added;
  std::vector<std::pair<ObjectPtr, ObjectPtr>> updated;  // {old, new}
  std::vector<ObjectPtr> deleted;                        // the last known state

  bool empty() const { return added.empty() && updated.empty() && deleted.empty(); }
};

// Thread-safe. Reader methods (const) may be called from any thread at any time. Writer
// methods (Upsert, Delete, Replace, SetResourceVersion) must be called by one thread at a time
// (the owning reflector); they are still safe against concurrent readers. mu_ guards all state.
class Store {
 public:
  Store();
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // --- Readers.
  // nullptr when absent. `key` is "namespace/name" or "name" (see ObjectKey).
  ObjectPtr Get(absl::string_view key) const;
  ObjectPtr Get(absl::string_view namespace_, absl::string_view name) const;
  // All objects, in no particular order.
  std::vector<ObjectPtr> List() const;
  // Objects whose index value equals `value`, in no particular order. For kLabel the value is
  // "key=value".
  std::vector<ObjectPtr> ByIndex(Index index, absl::string_view value) const;
  size_t Size() const;
  // True once the first complete list was stored (and forever after).
  bool HasSynced() const;
  // The resourceVersion the store is current with (from the last list, event or bookmark).
  std::string ResourceVersion() const;
  // Sum of Object::MemoryBytes() over stored objects.
  size_t MemoryBytes() const;
  // Sum of the stored objects' JSON sizes.
  size_t JsonBytes() const;

  // --- Writer.
  // Inserts or replaces the object with the same key; returns the previous one (or nullptr).
  ObjectPtr Upsert(ObjectPtr object);
  // Removes `key`; returns the removed object (or nullptr).
  ObjectPtr Delete(absl::string_view key);
  // Atomically replaces the whole content (a relist) and marks the store synced. Returns the
  // exact differences to the previous content: an object counts as updated when its
  // resourceVersion or bytes changed. Objects with duplicate keys: the last one wins.
  StoreDiff Replace(std::vector<ObjectPtr> objects, std::string resource_version);
  void SetResourceVersion(std::string resource_version);

 private:
  // The object set is keyed by each object's key(): 16 bytes per slot (the shared pointer)
  // instead of a key view plus the pointer. Lookups by key are heterogeneous.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(absl::string_view key) const { return absl::Hash<absl::string_view>{}(key); }
    size_t operator()(const ObjectPtr& o) const { return (*this)(o->key()); }
  };
  struct KeyEq {
    using is_transparent = void;
    static absl::string_view Key(absl::string_view key) { return key; }
    static absl::string_view Key(const ObjectPtr& o) { return o->key(); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Key(a) == Key(b);
    }
  };
  using ObjectSet = absl::flat_hash_set<ObjectPtr, KeyHash, KeyEq>;
  // Index entries are the indexed objects' addresses (8 bytes, hashed without reading the
  // object); an object leaves the indexes before the set drops its last reference.
  using IndexMap = absl::flat_hash_map<std::string, absl::flat_hash_set<const Object*>>;
  struct State {
    ObjectSet objects;
    IndexMap by_namespace;
    IndexMap by_owner;
    IndexMap by_label;
    size_t memory_bytes = 0;
    size_t json_bytes = 0;
  };

  // `scratch` is reused to build "key=value" label index values without allocating.
  static void AddToIndexes(State* state, const Object& object, std::string* scratch);
  static void RemoveFromIndexes(State* state, const Object& object, std::string* scratch);
  // AddToIndexes for Replace's bulk build, reusing the index entries of the previous object.
  struct IndexCaches;
  static void AddToIndexesCached(State* state, const Object& object, std::string* scratch,
                                 IndexCaches* caches);
  const IndexMap& IndexFor(Index index) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable common::RwMutex mu_;
  std::unique_ptr<State> state_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;
  std::string resource_version_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::cache

#endif  // CTRLHOST_RUNTIME_CACHE_STORE_H_
