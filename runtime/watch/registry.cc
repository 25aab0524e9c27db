#include "runtime/watch/registry.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"

namespace ctrlhost::watch {

std::string WatchKey::ToString() const {
  std::string out = group.empty() ? version : absl::StrCat(group, "/", version);
  absl::StrAppend(&out, " ", kind);
  if (!namespace_.empty()) absl::StrAppend(&out, " ns=", namespace_);
  if (!label_selector.empty()) absl::StrAppend(&out, " labels=", label_selector);
  if (!field_selector.empty()) absl::StrAppend(&out, " fields=", field_selector);
  if (!strip_managed_fields || !strip_last_applied) absl::StrAppend(&out, " unstripped");
  if (shard != nullptr) absl::StrAppend(&out, " shard=", ShardByName(shard_by));
  return out;
}

ReflectorHandle& ReflectorHandle::operator=(ReflectorHandle&& other) noexcept {
  if (this != &other) {
    Release();
    registry_ = std::exchange(other.registry_, nullptr);
    key_ = std::move(other.key_);
    reflector_ = std::move(other.reflector_);
  }
  return *this;
}

void ReflectorHandle::Release() {
  if (reflector_ == nullptr) return;
  std::shared_ptr<Reflector> reflector = std::move(reflector_);
  reflector_ = nullptr;
  registry_->Release(key_, reflector.get());
}

ReflectorRegistry::ReflectorRegistry(ListerWatcherFactory factory, ReflectorOptions defaults)
    : factory_(std::move(factory)), defaults_(std::move(defaults)) {}

ReflectorRegistry::~ReflectorRegistry() {
  absl::flat_hash_map<WatchKey, Entry> entries;
  {
    common::MutexLock lock(&mu_);
    entries.swap(entries_);
  }
  for (auto& [key, entry] : entries) {
    common::LogWarning("reflector registry destroyed with live handles",
                       {{"watch", key.ToString()}, {"handles", entry.refs}});
    entry.reflector->Stop();
  }
}

absl::StatusOr<ReflectorHandle> ReflectorRegistry::Acquire(const WatchKey& key) {
  {
    common::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      ++it->second.refs;
      return ReflectorHandle(this, key, it->second.reflector);
    }
  }
  // Created without the lock: the factory may do discovery over the network.
  absl::StatusOr<std::shared_ptr<ListerWatcher>> lister_watcher = factory_(key);
  if (!lister_watcher.ok()) return lister_watcher.status();
  ReflectorOptions options = defaults_;
  options.description = key.ToString();
  options.label_selector = key.label_selector;
  options.field_selector = key.field_selector;
  options.parse.strip_managed_fields = key.strip_managed_fields;
  options.parse.strip_last_applied = key.strip_last_applied;
  options.shard = key.shard;
  options.shard_by = key.shard_by;
  auto created = std::make_shared<Reflector>(*std::move(lister_watcher), std::move(options));

  std::shared_ptr<Reflector> reflector;
  {
    common::MutexLock lock(&mu_);
    Entry& entry = entries_[key];
    if (entry.reflector == nullptr) entry.reflector = created;  // else another thread won
    ++entry.refs;
    reflector = entry.reflector;
  }
  if (reflector == created) {
    reflector->Start();
    common::LogInfo("watch started", {{"watch", key.ToString()}});
  }
  // A losing `created` was never started; dropping it is cheap.
  return ReflectorHandle(this, key, std::move(reflector));
}

void ReflectorRegistry::Release(const WatchKey& key, const Reflector* reflector) {
  std::shared_ptr<Reflector> unused;
  {
    common::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.reflector.get() != reflector) return;
    if (--it->second.refs > 0) return;
    unused = std::move(it->second.reflector);
    entries_.erase(it);
  }
  unused->Stop();  // joins: done without the lock
  common::LogInfo("watch stopped (no more users)", {{"watch", key.ToString()}});
}

size_t ReflectorRegistry::size() const {
  common::MutexLock lock(&mu_);
  return entries_.size();
}

int ReflectorRegistry::RefCount(const WatchKey& key) const {
  common::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.refs;
}

std::vector<ReflectorMetrics> ReflectorRegistry::Metrics() const {
  std::vector<std::shared_ptr<Reflector>> reflectors;
  {
    common::MutexLock lock(&mu_);
    for (const auto& [key, entry] : entries_) reflectors.push_back(entry.reflector);
  }
  std::vector<ReflectorMetrics> out;
  for (const auto& reflector : reflectors) out.push_back(reflector->Metrics());
  return out;
}

}  // namespace ctrlhost::watch
