// One reflector per (GVK, namespace, label selector, field selector, stripping) however many
// controllers ask for it, shared through reference-counted handles.
//
//   watch::ReflectorRegistry registry(factory, defaults);
//   absl::StatusOr<watch::ReflectorHandle> pods = registry.Acquire(
//       {.group = "", .version = "v1", .kind = "Pod", .namespace_ = "default"});
//   (*pods)->AddHandler(handler);        // the shared reflector
//   pods->Release();                     // or let the handle go; the last one stops it
#ifndef CTRLHOST_RUNTIME_WATCH_REGISTRY_H_
#define CTRLHOST_RUNTIME_WATCH_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/common/mutex.h"
#include "runtime/watch/lister_watcher.h"
#include "runtime/watch/reflector.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::watch {

// What makes two watches the same watch.
struct WatchKey {
  std::string group;
  std::string version;
  std::string kind;
  std::string namespace_;  // empty: all namespaces (or cluster-scoped)
  std::string label_selector;
  std::string field_selector;
  bool strip_managed_fields = true;
  bool strip_last_applied = true;
  // Cache only this shard (ReflectorOptions::shard). Keys are equal only with the same scope
  // (by pointer) and, with one, the same `shard_by`: an unsharded watch and a sharded one, or
  // two rings' shards, never share a cache.
  std::shared_ptr<ShardScope> shard;
  ShardBy shard_by = ShardBy::kUid;

  // e.g. "apps/v1 Deployment ns=default labels=app=web shard=uid" (for logs and metrics).
  std::string ToString() const;

  bool operator==(const WatchKey& o) const {
    return group == o.group && version == o.version && kind == o.kind &&
           namespace_ == o.namespace_ && label_selector == o.label_selector &&
           field_selector == o.field_selector && strip_managed_fields == o.strip_managed_fields &&
           strip_last_applied == o.strip_last_applied && shard == o.shard &&
           EffectiveShardBy() == o.EffectiveShardBy();
  }
  template <typename H>
  friend H AbslHashValue(H h, const WatchKey& k) {
    return H::combine(std::move(h), k.group, k.version, k.kind, k.namespace_, k.label_selector,
                      k.field_selector, k.strip_managed_fields, k.strip_last_applied, k.shard.get(),
                      k.EffectiveShardBy());
  }

 private:
  // shard_by means nothing without a scope.
  ShardBy EffectiveShardBy() const { return shard != nullptr ? shard_by : ShardBy::kUid; }
};

// Makes the ListerWatcher for a key (scoped to its namespace; the reflector passes the
// selectors). Errors (e.g. an unknown kind) are returned by Acquire.
using ListerWatcherFactory =
    std::function<absl::StatusOr<std::shared_ptr<ListerWatcher>>(const WatchKey& key)>;

class ReflectorRegistry;

// A counted reference to a shared, started reflector. Move-only; not thread-safe itself (one
// owner), but handles of one reflector may live on different threads.
class ReflectorHandle {
 public:
  ReflectorHandle() = default;
  ~ReflectorHandle() { Release(); }
  ReflectorHandle(ReflectorHandle&& other) noexcept { *this = std::move(other); }
  ReflectorHandle& operator=(ReflectorHandle&& other) noexcept;
  ReflectorHandle(const ReflectorHandle&) = delete;
  ReflectorHandle& operator=(const ReflectorHandle&) = delete;

  Reflector* get() const { return reflector_.get(); }
  Reflector* operator->() const { return reflector_.get(); }
  explicit operator bool() const { return reflector_ != nullptr; }
  // Drops the reference now; the last one stops the reflector (joining its thread).
  void Release();

 private:
  friend class ReflectorRegistry;
  ReflectorHandle(ReflectorRegistry* registry, WatchKey key, std::shared_ptr<Reflector> r)
      : registry_(registry), key_(std::move(key)), reflector_(std::move(r)) {}

  ReflectorRegistry* registry_ = nullptr;  // borrowed; outlives every handle
  WatchKey key_;
  std::shared_ptr<Reflector> reflector_;
};

// Thread-safe. mu_ guards entries_. The registry must outlive its handles. Reflectors are
// started outside mu_ and stopped outside it, so a slow stop never blocks other keys.
class ReflectorRegistry {
 public:
  // `defaults` apply to every reflector; selectors, stripping and description come from the
  // key.
  ReflectorRegistry(ListerWatcherFactory factory, ReflectorOptions defaults);
  ~ReflectorRegistry();
  ReflectorRegistry(const ReflectorRegistry&) = delete;
  ReflectorRegistry& operator=(const ReflectorRegistry&) = delete;

  // The running reflector for `key`, created and started on first use.
  absl::StatusOr<ReflectorHandle> Acquire(const WatchKey& key);

  size_t size() const;                      // reflectors alive
  int RefCount(const WatchKey& key) const;  // 0 when none
  std::vector<ReflectorMetrics> Metrics() const;

 private:
  friend class ReflectorHandle;
  struct Entry {
    std::shared_ptr<Reflector> reflector;
    int refs = 0;
  };
  void Release(const WatchKey& key, const Reflector* reflector);

  const ListerWatcherFactory factory_;
  const ReflectorOptions defaults_;

  mutable common::Mutex mu_;
  absl::flat_hash_map<WatchKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_REGISTRY_H_
