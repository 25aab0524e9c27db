// ShardScope: which objects of a resource a sharded host caches, and how a reflector restricts
// its list and watch to them.
//
// A host in a shard ring owns some ranges of the 64-bit FNV-1a hash space (KEP-5866's, see
// runtime/kube/shard_selector.h). Its ring sets the ranges here on every view change; each
// reflector of a sharded controller's primary kind (ShardBy::kUid) or owned kinds
// (ShardBy::kOwnerUid: a child follows its controller owner) holds the scope and
//   - asks the server for its ranges only (the `shardSelector` query parameter) when it can
//     (kUid: the server hashes the object's own uid), and checks whether the server applied it
//     (the list's metadata.shardInfo): "server" mode; otherwise
//   - filters every listed and watched object itself: "client" mode (saves cache memory, not
//     watch traffic);
//   - or, on a server without KEP-5866 when the host labels its primaries (EnableLabels), asks
//     for its buckets' label values (`<key> in (b1,b2,...)`): "label" mode. The label is a
//     function of the uid (ShardBucketLabel of its hash); objects whose label is missing or
//     wrong are reported to the mislabeled handler, which queues a fix.
// On a change of the ranges each reflector lists again: objects now in range arrive as adds,
// objects out of range leave the store as deletes.
//
//   auto scope = std::make_shared<watch::ShardScope>();
//   scope->Set({{0, absl::uint128(1) << 63}});   // the lower half
//   options.shard = scope; options.shard_by = watch::ShardBy::kUid;
//
// Thread-safety: thread-safe; mu_ guards the ranges, the labels, the generation, the listeners
// and the mislabeled handler. Listeners are called without mu_ held, on the thread calling Set
// or EnableLabels, and must not block; the mislabeled handler is called without mu_ held on
// reflector threads and must not block either.
#ifndef CTRLHOST_RUNTIME_WATCH_SHARD_SCOPE_H_
#define CTRLHOST_RUNTIME_WATCH_SHARD_SCOPE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/numeric/int128.h"
#include "absl/strings/string_view.h"
#include "runtime/cache/object.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::watch {

// What an object's shard hash is taken of.
enum class ShardBy {
  kUid,       // the object's own metadata.uid (primaries)
  kOwnerUid,  // its controller owner reference's uid; its own uid when it has none (children)
};
absl::string_view ShardByName(ShardBy by);  // "uid", "ownerUid"

struct HashRange {
  uint64_t start = 0;
  absl::uint128 end = 0;  // exclusive; up to 2^64
  bool operator==(const HashRange& o) const { return start == o.start && end == o.end; }
};

// The FNV-1a 64 hash `object` is sharded by (kube::Fnv1a64 of the uid ShardBy names).
uint64_t ShardHashOf(const cache::Object& object, ShardBy by);
bool RangesContain(const std::vector<HashRange>& ranges, uint64_t hash);
// Whether `ranges` hold every hash: a reflector then sends no selector and filters nothing.
bool RangesCoverAll(const std::vector<HashRange>& ranges);
// KEP-5866's selector text for `ranges` over object.metadata.uid, e.g.
// "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')"; "" for no ranges. The
// server refuses more than kube::ShardSelector::kMaxRanges ranges or kMaxBytes of text (about
// 51 ranges with full-width bounds): check with kube::ShardSelector::Parse before sending.
std::string UidShardSelector(const std::vector<HashRange>& ranges);

// The label scheme of mode "label": objects carry `<key>=<bucket>`, bucket = the top
// `bucket_bits` bits of their uid's hash in decimal ("0".."255" for 8 bits).
struct ShardLabels {
  std::string key;      // e.g. "ctrlhost.dev/shard-bucket"
  int bucket_bits = 8;  // 1..16 (EnableLabels clamps)
  bool operator==(const ShardLabels& o) const {
    return key == o.key && bucket_bits == o.bucket_bits;
  }
  bool operator!=(const ShardLabels& o) const { return !(*this == o); }
};
// The label value of `hash`: hash >> (64 - bits), in decimal.
std::string ShardBucketLabel(uint64_t hash, int bits);
// `key in (b1,b2,...)` with every bucket any of `ranges` touches, in increasing order (a range
// that is not bucket-aligned brings its partial buckets: the caller still checks the ranges);
// "" for no ranges.
std::string ShardLabelSelector(const ShardLabels& labels, const std::vector<HashRange>& ranges);
// Whether `object` carries the right bucket label (present, and its uid's bucket).
bool HasShardLabel(const cache::Object& object, const ShardLabels& labels);

class ShardScope {
 public:
  struct Snapshot {
    uint64_t generation = 0;  // 0: never set (nothing is in scope)
    std::vector<HashRange> ranges;
    std::optional<ShardLabels> labels;  // set by EnableLabels: mode "label" is possible
  };

  ShardScope() = default;
  ShardScope(const ShardScope&) = delete;
  ShardScope& operator=(const ShardScope&) = delete;

  // Replaces the ranges; when they differ (and on the first Set, which ends generation 0),
  // bumps the generation and calls every listener. The ranges are normalised first: empty
  // ones dropped, the rest sorted and overlapping or adjacent ones merged, so equal sets of
  // hashes compare equal and selectors stay short.
  void Set(std::vector<HashRange> ranges);
  Snapshot Get() const;
  bool Contains(uint64_t hash) const;

  // The host labels its primaries with `labels` (an empty key: no labels). Meant to be set once,
  // before or after the first Set; after it, a change bumps the generation and calls the
  // listeners, so reflectors list again (with the label selector when the server lacks
  // KEP-5866). `bucket_bits` is clamped to 1..16.
  void EnableLabels(ShardLabels labels);
  // Called (on reflector threads, without locks; it must not block) for each object a reflector
  // in mode "label" received whose bucket label is missing or wrong. Replaces the previous one;
  // an empty function removes it.
  void SetMislabeledHandler(std::function<void(const cache::Object&)> handler);
  void ReportMislabeled(const cache::Object& object) const;

  // `listener` is called after every change. Returns an id for RemoveListener; after
  // RemoveListener returns, the listener is never called again. A listener may call Get,
  // Contains and AddListener, not Set or RemoveListener (they wait for the listeners).
  int AddListener(std::function<void()> listener);
  void RemoveListener(int id);

 private:
  mutable common::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<HashRange> ranges_ ABSL_GUARDED_BY(mu_);
  std::optional<ShardLabels> labels_ ABSL_GUARDED_BY(mu_);
  // Shared, so ReportMislabeled calls it without mu_ while SetMislabeledHandler replaces it.
  std::shared_ptr<const std::function<void(const cache::Object&)>> mislabeled_ ABSL_GUARDED_BY(mu_);
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::pair<int, std::function<void()>>> listeners_ ABSL_GUARDED_BY(mu_);
  // Held by Set and EnableLabels from before the change until its listeners returned (taken before
  // mu_), so RemoveListener waits for a call in progress and Sets call listeners in generation
  // order.
  common::Mutex call_mu_ ABSL_ACQUIRED_BEFORE(mu_);
};

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_SHARD_SCOPE_H_
