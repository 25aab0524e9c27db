// Reflector's sharding (ReflectorOptions::shard; the contract is at the top of reflector.h):
// the scope's listener, the selector it sends, and the bookkeeping of a sharded list.
#include <string>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::watch {

bool Reflector::ShardMoved() const {
  return options_.shard != nullptr && options_.shard->Get().generation != listed_shard_.generation;
}

bool Reflector::WaitForShardChange() {
  common::MutexLock lock(&mu_);
  state_ = ReflectorState::kWatching;
  while (!stopping_ && !shard_wakeup_) cv_.Wait(&mu_);
  shard_wakeup_ = false;
  return !stopping_;
}

void Reflector::OnShardChange() {
  common::MutexLock lock(&mu_);
  shard_wakeup_ = true;
  if (stream_ != nullptr) stream_->Close();
  cv_.SignalAll();
}

std::string Reflector::ShardSelectorFor(const std::vector<HashRange>& ranges) const {
  if (options_.shard_by != ShardBy::kUid || RangesCoverAll(ranges)) return "";
  std::string selector = UidShardSelector(ranges);
  // Past the limits of KEP-5866's selectors (many ranges): a server would refuse it.
  if (!kube::ShardSelector::Parse(selector).ok()) return "";
  return selector;
}

void Reflector::RecordShardList(const ShardScope::Snapshot& shard, absl::string_view mode,
                                uint64_t filtered) {
  common::MutexLock lock(&mu_);
  metrics_.shard_generation = shard.generation;
  metrics_.shard_filtered_total += filtered;
  if (mode.empty() || metrics_.shard_mode == mode) return;  // nothing listed: mode unknown
  metrics_.shard_mode = std::string(mode);
  common::LogInfo("reflector: caching only this host's shard",
                  {{"watch", options_.description},
                   {"mode", mode},
                   {"by", ShardByName(options_.shard_by)},
                   {"ranges", shard.ranges.size()},
                   {"generation", shard.generation}});
}

}  // namespace ctrlhost::watch
