#include "runtime/watch/shard_scope.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/kube/shard_selector.h"

namespace ctrlhost::watch {
namespace {

const absl::uint128 kHashSpaceEnd = absl::uint128(1) << 64;

// Sorted by start, without empty ranges, overlapping and adjacent ones merged.
std::vector<HashRange> Normalize(std::vector<HashRange> ranges) {
  ranges.erase(std::remove_if(ranges.begin(), ranges.end(),
                              [](const HashRange& r) { return absl::uint128(r.start) >= r.end; }),
               ranges.end());
  std::sort(ranges.begin(), ranges.end(),
            [](const HashRange& a, const HashRange& b) { return a.start < b.start; });
  std::vector<HashRange> out;
  for (HashRange& r : ranges) {
    r.end = std::min(r.end, kHashSpaceEnd);
    if (!out.empty() && absl::uint128(r.start) <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

absl::string_view ShardByName(ShardBy by) { return by == ShardBy::kOwnerUid ? "ownerUid" : "uid"; }

uint64_t ShardHashOf(const cache::Object& object, ShardBy by) {
  if (by == ShardBy::kOwnerUid) {
    for (size_t i = 0; i < object.owner_count(); ++i) {
      if (object.owner_is_controller(i)) return kube::Fnv1a64(object.owner_uid(i));
    }
  }
  return kube::Fnv1a64(object.uid());
}

bool RangesContain(const std::vector<HashRange>& ranges, uint64_t hash) {
  for (const HashRange& r : ranges) {
    if (hash >= r.start && absl::uint128(hash) < r.end) return true;
  }
  return false;
}

bool RangesCoverAll(const std::vector<HashRange>& ranges) {
  std::vector<HashRange> merged = Normalize(ranges);
  return merged.size() == 1 && merged[0].start == 0 && merged[0].end >= kHashSpaceEnd;
}

std::string UidShardSelector(const std::vector<HashRange>& ranges) {
  std::vector<kube::ShardSelector::Range> converted;
  converted.reserve(ranges.size());
  for (const HashRange& r : ranges) converted.push_back({r.start, r.end});
  return kube::ShardSelector::Format(kube::ShardSelector::Field::kUid, converted);
}

std::string ShardBucketLabel(uint64_t hash, int bits) {
  bits = std::clamp(bits, 1, 64);
  return absl::StrCat(hash >> (64 - bits));
}

std::string ShardLabelSelector(const ShardLabels& labels, const std::vector<HashRange>& ranges) {
  const int shift = 64 - std::clamp(labels.bucket_bits, 1, 16);
  std::vector<uint64_t> buckets;
  for (const HashRange& r : Normalize(ranges)) {
    const uint64_t last = static_cast<uint64_t>(r.end - 1) >> shift;
    for (uint64_t b = r.start >> shift; b <= last; ++b) {
      if (buckets.empty() || buckets.back() < b) buckets.push_back(b);
      if (b == last) break;  // the last bucket of the whole space: ++b would wrap
    }
  }
  if (buckets.empty()) return "";
  std::string out = absl::StrCat(labels.key, " in (");
  for (size_t i = 0; i < buckets.size(); ++i) absl::StrAppend(&out, i == 0 ? "" : ",", buckets[i]);
  out += ")";
  return out;
}

bool HasShardLabel(const cache::Object& object, const ShardLabels& labels) {
  std::optional<absl::string_view> value = object.Label(labels.key);
  return value.has_value() &&
         *value == ShardBucketLabel(ShardHashOf(object, ShardBy::kUid), labels.bucket_bits);
}

void ShardScope::Set(std::vector<HashRange> ranges) {
  ranges = Normalize(std::move(ranges));
  common::MutexLock calls(&call_mu_);
  std::vector<std::function<void()>> listeners;
  {
    common::MutexLock lock(&mu_);
    if (generation_ != 0 && ranges == ranges_) return;
    ranges_ = std::move(ranges);
    ++generation_;
    listeners.reserve(listeners_.size());
    for (const auto& [id, listener] : listeners_) listeners.push_back(listener);
  }
  for (const auto& listener : listeners) listener();
}

ShardScope::Snapshot ShardScope::Get() const {
  common::MutexLock lock(&mu_);
  return Snapshot{generation_, ranges_, labels_};
}

void ShardScope::EnableLabels(ShardLabels labels) {
  std::optional<ShardLabels> wanted;
  if (!labels.key.empty()) {
    labels.bucket_bits = std::clamp(labels.bucket_bits, 1, 16);
    wanted = std::move(labels);
  }
  common::MutexLock calls(&call_mu_);
  std::vector<std::function<void()>> listeners;
  {
    common::MutexLock lock(&mu_);
    if (wanted == labels_) return;
    labels_ = std::move(wanted);
    // Before the first Set nothing was listed: the first Set ends generation 0 as usual.
    if (generation_ == 0) return;
    ++generation_;
    listeners.reserve(listeners_.size());
    for (const auto& [id, listener] : listeners_) listeners.push_back(listener);
  }
  for (const auto& listener : listeners) listener();
}

void ShardScope::SetMislabeledHandler(std::function<void(const cache::Object&)> handler) {
  auto shared =
      handler
          ? std::make_shared<const std::function<void(const cache::Object&)>>(std::move(handler))
          : nullptr;
  common::MutexLock lock(&mu_);
  mislabeled_ = std::move(shared);
}

void ShardScope::ReportMislabeled(const cache::Object& object) const {
  std::shared_ptr<const std::function<void(const cache::Object&)>> handler;
  {
    common::MutexLock lock(&mu_);
    handler = mislabeled_;
  }
  if (handler != nullptr) (*handler)(object);
}

bool ShardScope::Contains(uint64_t hash) const {
  common::MutexLock lock(&mu_);
  return RangesContain(ranges_, hash);
}

int ShardScope::AddListener(std::function<void()> listener) {
  common::MutexLock lock(&mu_);
  const int id = next_id_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void ShardScope::RemoveListener(int id) {
  std::function<void()> removed;  // destroyed without the locks
  {
    common::MutexLock lock(&mu_);
    for (auto it = listeners_.begin(); it != listeners_.end(); ++it) {
      if (it->first == id) {
        removed = std::move(it->second);
        listeners_.erase(it);
        break;
      }
    }
  }
  // A Set that copied the listener before the erase calls it under call_mu_: wait for it.
  common::MutexLock calls(&call_mu_);
}

}  // namespace ctrlhost::watch
