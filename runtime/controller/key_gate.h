// The seam between a runner and whatever decides which of a controller's keys this host may
// reconcile: sharding across hosts (runtime/manager/shard_ring.h) implements it.
//
// Keys are owned by their *shard hash*: FNV-1a 64 of the primary object's uid (ShardHash), the
// hash KEP-5866's server-side shard selector filters by, so that a host's cache can hold only
// the objects whose keys are its own. A runner with a gate queues only keys the gate says this
// host owns (events, resyncs, schedules; children and watched objects follow the primary key
// they map to), and brackets every reconcile with Begin/End. A key whose primary's uid the
// runner does not know (never in its cache, not deleted from it) is no host's: its object, if
// it exists, is queued by its owner when that host's cache receives it. Begin decides at the last
// moment, when a worker took the key from the queue: kRun (End must follow), kNotMine (the key
// moved away: the runner forgets it; its new owner queues it), or kWait (this host owns the key but
// may not start it yet, e.g. while its previous owner drains: the runner queues it again after
// `retry_after`).
//
//   switch (gate->Begin(key, ShardHash(primary_uid))) {
//     case KeyGate::kRun: ...reconcile...; gate->End(key); ...
//   }
//
// Thread-safety: implementations are called from reflector and worker threads at once and must
// be thread-safe; no call may block.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_KEY_GATE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_KEY_GATE_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/kube/shard_selector.h"

namespace ctrlhost::controller {

// The shard hash of a key whose primary object has `uid`.
inline uint64_t ShardHash(absl::string_view uid) { return kube::Fnv1a64(uid); }

class KeyGate {
 public:
  enum Verdict { kRun, kNotMine, kWait };

  virtual ~KeyGate() = default;
  // Whether a key with this shard hash is this host's now.
  virtual bool Owns(uint64_t shard_hash) const = 0;
  // Whether a worker may reconcile `key` ("namespace/name", or "name" when cluster-scoped),
  // whose shard hash is `shard_hash`, now; after kRun the caller must call End(key).
  virtual Verdict Begin(absl::string_view key, uint64_t shard_hash) = 0;
  virtual void End(absl::string_view key) = 0;
  // After kWait: how long to wait before trying the key again.
  virtual absl::Duration retry_after() const = 0;
};

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_KEY_GATE_H_
