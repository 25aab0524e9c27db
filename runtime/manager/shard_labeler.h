// ShardLabeler: labels the objects of sharded primary kinds with their shard bucket, so that on
// a server without KEP-5866's shard selector (Kubernetes before 1.36) each host of a ring can
// watch its own buckets only, with a label selector (watch/shard_scope.h, mode "label").
//
// The label is `ctrlhost.dev/shard-bucket=<b>`, b the top kShardBucketBits bits of the FNV-1a 64
// hash of the object's uid, in decimal ("0".."255"): a function of the uid alone, so an object
// is labelled once in its life, whatever the ring does, and any host may write it.
//
//   - The ring's first member (in join order) is the *labeller*: for each kind it runs a watch
//     of the objects whose label is missing or not a bucket (`ctrlhost.dev/shard-bucket notin
//     (0,...,255)`) and patches each one (JSON merge patch with the object's uid, so a
//     re-created object is never labelled with its predecessor's bucket; field manager
//     `ctrlhost-sharder`). The objects it fixed leave that watch: it holds only the
//     unlabelled ones.
//   - Every host fixes the wrong bucket values its own watches report (Fix): a value that is
//     a bucket but not the object's own puts the object in another host's watch, which sees
//     the mismatch.
//   - A kind whose server filters by uid itself (probed once with a one-item shard-selected
//     list) is not labelled: no host needs the label there.
// Patches are sent one at a time (bounded by the API server's latency), failures retried with
// backoff (1 s doubling to 30 s) and logged at most once a minute.
//
//   ShardLabeler labeler(&client, &registry);
//   labeler.AddKind(mapping);        // for each sharded primary kind
//   labeler.SetActive(first_member); // on every view change
//   ... labeler.Stop();
//
// Thread-safety: thread-safe. mu_ guards the kinds, the activity, the fixes queued and the
// counters; one worker thread sends the patches without mu_ held.
#ifndef CTRLHOST_RUNTIME_MANAGER_SHARD_LABELER_H_
#define CTRLHOST_RUNTIME_MANAGER_SHARD_LABELER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/cache/object.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/client.h"
#include "runtime/kube/discovery.h"
#include "runtime/watch/registry.h"

namespace ctrlhost::manager {

inline constexpr char kShardBucketLabel[] = "ctrlhost.dev/shard-bucket";
inline constexpr char kShardLabelerFieldManager[] = "ctrlhost-sharder";

// The label selector of the objects whose bucket label is missing or not a bucket.
std::string UnlabelledSelector();
// The bucket label value of an object with `uid`.
std::string BucketLabelOf(absl::string_view uid);

struct ShardLabelerStatus {
  bool active = false;
  std::vector<std::string> kinds;  // "group/version Kind: labelling|server filters|..."
  uint64_t labelled_total = 0;     // patches that succeeded
  uint64_t fixed_total = 0;        // of them, wrong values reported by a watch
  uint64_t failures_total = 0;     // patches that failed (retried)
  size_t pending = 0;              // objects waiting for their label now
  std::string last_error;
};

class ShardLabeler {
 public:
  // `client` (writes) and `registry` (the unlabelled watches) are borrowed and must outlive the
  // labeler.
  ShardLabeler(kube::Client* client, watch::ReflectorRegistry* registry);
  ~ShardLabeler();  // Stop()
  ShardLabeler(const ShardLabeler&) = delete;
  ShardLabeler& operator=(const ShardLabeler&) = delete;

  // A sharded primary kind (idempotent). Probes, outside any lock, whether its server filters
  // by uid; when it does not and this host is the labeller, its unlabelled watch starts.
  void AddKind(const kube::ResourceMapping& mapping);
  // Whether this host is the ring's labeller (its first member). Starts or releases the
  // unlabelled watches.
  void SetActive(bool active);
  // A watch saw `object` with a wrong bucket value: queue its fix (bounded; never blocks).
  void Fix(const cache::Object& object);
  void Stop();
  ShardLabelerStatus Status() const;

 private:
  struct Kind {
    kube::ResourceMapping mapping;
    bool server_filters = false;        // the probe's answer: no labels needed
    watch::ReflectorHandle unlabelled;  // while active and labelling
  };
  struct Pending {
    std::string namespace_, name, uid;
  };
  void Loop();
  // One patch; OK, or the failure (NotFound and a changed uid count as done).
  absl::Status Label(const kube::ResourceMapping& mapping, const Pending& object);
  // Starts `kind`'s unlabelled watch (without mu_ held: its handler takes mu_) and keeps it
  // while this host is active.
  void Acquire(Kind* kind) ABSL_LOCKS_EXCLUDED(mu_);

  kube::Client* const client_;
  watch::ReflectorRegistry* const registry_;

  mutable common::Mutex mu_;
  common::CondVar cv_;
  std::vector<std::unique_ptr<Kind>> kinds_ ABSL_GUARDED_BY(mu_);
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Pending> fixes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> fixes_queued_ ABSL_GUARDED_BY(mu_);  // by uid
  uint64_t labelled_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t fixed_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failures_total_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time last_error_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread thread_;
  bool stopped_ = false;  // Stop's own state
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_SHARD_LABELER_H_
