#include "runtime/cache/store.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::cache {
namespace {

template <typename Map>
void IndexAdd(Map* map, std::string value, absl::string_view key) {
  (*map)[std::move(value)].insert(key);
}

template <typename Map>
void IndexRemove(Map* map, absl::string_view value, absl::string_view key) {
  auto it = map->find(value);
  if (it == map->end()) return;
  it->second.erase(key);
  if (it->second.empty()) map->erase(it);
}

bool SameContent(const Object& a, const Object& b) {
  return a.resource_version() == b.resource_version() && a.json() == b.json();
}

}  // namespace

Store::Store() : state_(std::make_unique<State>()) {}
Store::~Store() = default;

void Store::AddToIndexes(State* state, const Object& object) {
  const absl::string_view key = object.key();
  IndexAdd(&state->by_namespace, std::string(object.namespace_()), key);
  for (size_t i = 0; i < object.owner_count(); ++i) {
    if (!object.owner_uid(i).empty()) {
      IndexAdd(&state->by_owner, std::string(object.owner_uid(i)), key);
    }
  }
  for (size_t i = 0; i < object.label_count(); ++i) {
    auto [k, v] = object.label(i);
    IndexAdd(&state->by_label, absl::StrCat(k, "=", v), key);
  }
  state->memory_bytes += object.MemoryBytes();
  state->json_bytes += object.json().size();
}

void Store::RemoveFromIndexes(State* state, const Object& object) {
  const absl::string_view key = object.key();
  IndexRemove(&state->by_namespace, object.namespace_(), key);
  for (size_t i = 0; i < object.owner_count(); ++i) {
    if (!object.owner_uid(i).empty()) IndexRemove(&state->by_owner, object.owner_uid(i), key);
  }
  for (size_t i = 0; i < object.label_count(); ++i) {
    auto [k, v] = object.label(i);
    IndexRemove(&state->by_label, absl::StrCat(k, "=", v), key);
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
  return it == state_->objects.end() ? nullptr : it->second;
}

ObjectPtr Store::Get(absl::string_view namespace_, absl::string_view name) const {
  return Get(ObjectKey(namespace_, name));
}

std::vector<ObjectPtr> Store::List() const {
  common::ReaderLock lock(&mu_);
  std::vector<ObjectPtr> out;
  out.reserve(state_->objects.size());
  for (const auto& [key, object] : state_->objects) out.push_back(object);
  return out;
}

std::vector<ObjectPtr> Store::ByIndex(Index index, absl::string_view value) const {
  common::ReaderLock lock(&mu_);
  std::vector<ObjectPtr> out;
  const IndexMap& map = IndexFor(index);
  auto it = map.find(value);
  if (it == map.end()) return out;
  out.reserve(it->second.size());
  for (absl::string_view key : it->second) {
    auto object = state_->objects.find(key);
    if (object != state_->objects.end()) out.push_back(object->second);
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
  common::WriterLock lock(&mu_);
  ObjectPtr old;
  auto it = state_->objects.find(object->key());
  if (it != state_->objects.end()) {
    old = std::move(it->second);
    RemoveFromIndexes(state_.get(), *old);
    state_->objects.erase(it);  // the map's key views the old object's key
  }
  AddToIndexes(state_.get(), *object);
  const absl::string_view key = object->key();
  state_->objects.emplace(key, std::move(object));
  return old;
}

ObjectPtr Store::Delete(absl::string_view key) {
  common::WriterLock lock(&mu_);
  auto it = state_->objects.find(key);
  if (it == state_->objects.end()) return nullptr;
  ObjectPtr old = std::move(it->second);
  state_->objects.erase(it);
  RemoveFromIndexes(state_.get(), *old);
  return old;
}

StoreDiff Store::Replace(std::vector<ObjectPtr> objects, std::string resource_version) {
  // Build the new state without the lock. Only this (writer) thread changes state_, so reading
  // the current objects under a shared lock and computing the diff from them is consistent.
  auto next = std::make_unique<State>();
  next->objects.reserve(objects.size());
  for (ObjectPtr& object : objects) {
    if (object == nullptr) continue;
    auto it = next->objects.find(object->key());
    if (it != next->objects.end()) {
      RemoveFromIndexes(next.get(), *it->second);
      next->objects.erase(it);
    }
    AddToIndexes(next.get(), *object);
    const absl::string_view key = object->key();
    next->objects.emplace(key, std::move(object));
  }

  StoreDiff diff;
  {
    common::ReaderLock lock(&mu_);
    for (const auto& [key, object] : next->objects) {
      auto old = state_->objects.find(key);
      if (old == state_->objects.end()) {
        diff.added.push_back(object);
      } else if (!SameContent(*old->second, *object)) {
        diff.updated.emplace_back(old->second, object);
      }
    }
    for (const auto& [key, object] : state_->objects) {
      if (!next->objects.contains(key)) diff.deleted.push_back(object);
    }
  }
  auto by_key = [](const ObjectPtr& a, const ObjectPtr& b) { return a->key() < b->key(); };
  std::sort(diff.added.begin(), diff.added.end(), by_key);
  std::sort(diff.deleted.begin(), diff.deleted.end(), by_key);
  std::sort(diff.updated.begin(), diff.updated.end(),
            [](const auto& a, const auto& b) { return a.second->key() < b.second->key(); });

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
