#include "runtime/cache/store.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::cache {
namespace {

template <typename Map>
void IndexAdd(Map* map, absl::string_view value, const Object* object) {
  auto it = map->find(value);  // heterogeneous: no string is built for an existing value
  if (it == map->end()) it = map->try_emplace(std::string(value)).first;
  it->second.insert(object);
}

template <typename Map>
void IndexRemove(Map* map, absl::string_view value, const Object* object) {
  auto it = map->find(value);
  if (it == map->end()) return;
  it->second.erase(object);
  if (it->second.empty()) map->erase(it);
}

absl::string_view LabelValue(const Object& object, size_t i, std::string* scratch) {
  auto [k, v] = object.label(i);
  scratch->assign(k.data(), k.size());
  scratch->push_back('=');
  scratch->append(v.data(), v.size());
  return *scratch;
}

// Remembers the entry of the last value added to one index map during a Replace, so that
// neighbours in a list (sorted by namespace, often sharing labels) skip the hash lookup.
// Invalidated when the map changed size (an insert may move entries) and by Reset().
class CachedIndexEntry {
 public:
  template <typename Map>
  void Add(Map* map, absl::string_view value, const Object* object) {
    if (set_ == nullptr || map->size() != map_size_ || value != value_) {
      auto it = map->find(value);
      if (it == map->end()) it = map->try_emplace(std::string(value)).first;
      set_ = &it->second;
      value_.assign(value.data(), value.size());
      map_size_ = map->size();
    }
    set_->insert(object);
  }
  void Reset() { set_ = nullptr; }

 private:
  absl::flat_hash_set<const Object*>* set_ = nullptr;
  std::string value_;
  size_t map_size_ = 0;
};

bool SameContent(const Object& a, const Object& b) {
  return a.resource_version() == b.resource_version() && a.json() == b.json();
}

void SortByKey(std::vector<ObjectPtr>* objects) {
  auto by_key = [](const ObjectPtr& a, const ObjectPtr& b) { return a->key() < b->key(); };
  if (!std::is_sorted(objects->begin(), objects->end(), by_key)) {
    std::sort(objects->begin(), objects->end(), by_key);
  }
}

}  // namespace

struct Store::IndexCaches {
  static constexpr size_t kLabels = 4;  // the first labels (sorted by key) of each object
  CachedIndexEntry by_namespace;
  CachedIndexEntry by_label[kLabels];

  void Reset() {
    by_namespace.Reset();
    for (CachedIndexEntry& e : by_label) e.Reset();
  }
};

Store::Store() : state_(std::make_unique<State>()) {}
Store::~Store() = default;

void Store::AddToIndexes(State* state, const Object& object, std::string* scratch) {
  IndexAdd(&state->by_namespace, object.namespace_(), &object);
  for (size_t i = 0; i < object.owner_count(); ++i) {
    if (!object.owner_uid(i).empty()) IndexAdd(&state->by_owner, object.owner_uid(i), &object);
  }
  for (size_t i = 0; i < object.label_count(); ++i) {
    IndexAdd(&state->by_label, LabelValue(object, i, scratch), &object);
  }
  state->memory_bytes += object.MemoryBytes();
  state->json_bytes += object.json().size();
}

void Store::RemoveFromIndexes(State* state, const Object& object, std::string* scratch) {
  IndexRemove(&state->by_namespace, object.namespace_(), &object);
  for (size_t i = 0; i < object.owner_count(); ++i) {
    if (!object.owner_uid(i).empty()) {
      IndexRemove(&state->by_owner, object.owner_uid(i), &object);
    }
  }
  for (size_t i = 0; i < object.label_count(); ++i) {
    IndexRemove(&state->by_label, LabelValue(object, i, scratch), &object);
  }
  state->memory_bytes -= object.MemoryBytes();
  state->json_bytes -= object.json().size();
}

const Store::IndexMap& Store::IndexFor(Index index) const {
  switch (index) {
    case Index::kNamespace:
      return state_->by_namespace;
    case Index::kOwnerUid:
      return state_->by_owner;
    case Index::kLabel:
      break;
  }
  return state_->by_label;
}

ObjectPtr Store::Get(absl::string_view key) const {
  common::ReaderLock lock(&mu_);
  auto it = state_->objects.find(key);
  return it == state_->objects.end() ? nullptr : *it;
}

ObjectPtr Store::Get(absl::string_view namespace_, absl::string_view name) const {
  return Get(ObjectKey(namespace_, name));
}

std::vector<ObjectPtr> Store::List() const {
  common::ReaderLock lock(&mu_);
  return std::vector<ObjectPtr>(state_->objects.begin(), state_->objects.end());
}

std::vector<ObjectPtr> Store::ByIndex(Index index, absl::string_view value) const {
  common::ReaderLock lock(&mu_);
  std::vector<ObjectPtr> out;
  const IndexMap& map = IndexFor(index);
  auto it = map.find(value);
  if (it == map.end()) return out;
  out.reserve(it->second.size());
  for (const Object* indexed : it->second) {
    auto object = state_->objects.find(indexed->key());
    if (object != state_->objects.end()) out.push_back(*object);
  }
  return out;
}

size_t Store::Size() const {
  common::ReaderLock lock(&mu_);
  return state_->objects.size();
}

bool Store::HasSynced() const {
  common::ReaderLock lock(&mu_);
  return synced_;
}

std::string Store::ResourceVersion() const {
  common::ReaderLock lock(&mu_);
  return resource_version_;
}

size_t Store::MemoryBytes() const {
  common::ReaderLock lock(&mu_);
  return state_->memory_bytes;
}

size_t Store::JsonBytes() const {
  common::ReaderLock lock(&mu_);
  return state_->json_bytes;
}

ObjectPtr Store::Upsert(ObjectPtr object) {
  if (object == nullptr) return nullptr;
  std::string scratch;
  common::WriterLock lock(&mu_);
  ObjectPtr old;
  auto it = state_->objects.find(object->key());
  if (it != state_->objects.end()) {
    old = *it;
    RemoveFromIndexes(state_.get(), *old, &scratch);
    state_->objects.erase(it);
  }
  AddToIndexes(state_.get(), *object, &scratch);
  state_->objects.insert(std::move(object));
  return old;
}

ObjectPtr Store::Delete(absl::string_view key) {
  std::string scratch;
  common::WriterLock lock(&mu_);
  auto it = state_->objects.find(key);
  if (it == state_->objects.end()) return nullptr;
  ObjectPtr old = *it;
  RemoveFromIndexes(state_.get(), *old, &scratch);
  state_->objects.erase(it);
  return old;
}

void Store::AddToIndexesCached(State* state, const Object& object, std::string* scratch,
                               IndexCaches* caches) {
  caches->by_namespace.Add(&state->by_namespace, object.namespace_(), &object);
  for (size_t i = 0; i < object.owner_count(); ++i) {
    if (!object.owner_uid(i).empty()) IndexAdd(&state->by_owner, object.owner_uid(i), &object);
  }
  for (size_t i = 0; i < object.label_count(); ++i) {
    const absl::string_view value = LabelValue(object, i, scratch);
    if (i < IndexCaches::kLabels) {
      caches->by_label[i].Add(&state->by_label, value, &object);
    } else {
      IndexAdd(&state->by_label, value, &object);
    }
  }
  state->memory_bytes += object.MemoryBytes();
  state->json_bytes += object.json().size();
}

StoreDiff Store::Replace(std::vector<ObjectPtr> objects, std::string resource_version) {
  // Build the new state without the lock, in one pass over the list. Only this (writer) thread
  // changes state_, so reading the current objects under a shared lock and computing the diff
  // from them is consistent.
  auto next = std::make_unique<State>();
  next->objects.reserve(objects.size());
  std::string scratch;
  IndexCaches caches;
  bool duplicates = false;
  // Whether the list is sorted by key, checked against the previous object while both are in
  // the CPU cache (a separate pass over 100k objects would miss it on every one).
  bool sorted = true;
  const Object* previous_object = nullptr;
  for (const ObjectPtr& object : objects) {
    if (object == nullptr) continue;
    if (previous_object != nullptr && sorted && object->key() < previous_object->key()) {
      sorted = false;
    }
    previous_object = object.get();
    auto [it, inserted] = next->objects.insert(object);
    if (!inserted) {  // a duplicate key: the last one wins
      duplicates = true;
      RemoveFromIndexes(next.get(), **it, &scratch);  // may erase a cached entry
      caches.Reset();
      next->objects.erase(it);
      next->objects.insert(object);
    }
    AddToIndexesCached(next.get(), *object, &scratch, &caches);
  }

  StoreDiff diff;
  {
    common::ReaderLock lock(&mu_);
    const ObjectSet& current = state_->objects;
    if (current.empty()) diff.added.reserve(next->objects.size());
    absl::flat_hash_set<const Object*> reported;  // only with duplicates in the list
    for (ObjectPtr& object : objects) {
      if (object == nullptr) continue;
      if (duplicates) {
        auto it = next->objects.find(object->key());
        if (it->get() != object.get() || !reported.insert(object.get()).second) continue;
      }
      auto old = current.empty() ? current.end() : current.find(object->key());
      if (old == current.end()) {
        diff.added.push_back(std::move(object));
      } else if (!SameContent(**old, *object)) {
        diff.updated.emplace_back(*old, std::move(object));
      }
    }
    for (const ObjectPtr& old : current) {
      if (!next->objects.contains(old->key())) diff.deleted.push_back(old);
    }
  }
  // Added and updated follow the list, so they are sorted when it is (API server lists are).
  if (!sorted) {
    SortByKey(&diff.added);
    std::sort(diff.updated.begin(), diff.updated.end(),
              [](const auto& a, const auto& b) { return a.second->key() < b.second->key(); });
  }
  SortByKey(&diff.deleted);

  std::unique_ptr<State> previous;
  {
    common::WriterLock lock(&mu_);
    previous = std::move(state_);
    state_ = std::move(next);
    synced_ = true;
    resource_version_ = std::move(resource_version);
  }
  // `previous` (possibly the last references to deleted objects) is freed without the lock.
  return diff;
}

void Store::SetResourceVersion(std::string resource_version) {
  common::WriterLock lock(&mu_);
  resource_version_ = std::move(resource_version);
}

}  // namespace ctrlhost::cache
