// Reflector's label mode (ShardScope::EnableLabels; the contract is at the top of reflector.h):
// selecting a shard by bucket label on a server without KEP-5866, and never mistaking an
// object whose label changed for a deleted one.
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::watch {
namespace {

// Past this many stored objects missing from a label-selected relist, one list without the
// bucket selector confirms them all instead of one name-scoped list each.
constexpr size_t kMaxLabelChecks = 100;

// Both selectors (requirements joined by a comma hold together).
std::string JoinSelectors(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return absl::StrCat(a, ",", b);
}

// Escapes a field selector value (apimachinery's fields.EscapeValue).
std::string EscapeFieldValue(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == ',' || c == '=') out += '\\';
    out += c;
  }
  return out;
}

// A field selector for exactly `object`'s name (and namespace: harmless for a lister-watcher
// scoped to it, needed for one that watches all namespaces).
std::string NameFieldSelector(const cache::Object& object) {
  std::string selector = absl::StrCat("metadata.name=", EscapeFieldValue(object.name()));
  if (!object.namespace_().empty()) {
    absl::StrAppend(&selector, ",metadata.namespace=", EscapeFieldValue(object.namespace_()));
  }
  return selector;
}

}  // namespace

bool Reflector::LabelsUsable(const ShardScope::Snapshot& shard) const {
  return shard.labels.has_value() && options_.shard_by == ShardBy::kUid && !shard.ranges.empty() &&
         !RangesCoverAll(shard.ranges);
}

void Reflector::PlanShardList(const ShardScope::Snapshot& shard, ListOptions* options,
                              Listed* listed) {
  options->shard_selector = ShardSelectorFor(shard.ranges);
  if (!LabelsUsable(shard)) return;
  // The server did not apply the shard selector in this generation, or it is too long for one.
  if (options->shard_selector.empty() || no_shard_selector_generation_ == shard.generation) {
    options->shard_selector.clear();
    UseLabels(shard, options, listed);
  }
}

void Reflector::UseLabels(const ShardScope::Snapshot& shard, ListOptions* options, Listed* listed) {
  options->label_selector =
      JoinSelectors(options_.label_selector, ShardLabelSelector(*shard.labels, shard.ranges));
  options->shard_selector.clear();
  options->continue_token.clear();
  *listed = Listed{};
  listed->label_mode = true;
  no_shard_selector_generation_ = shard.generation;
  if (std::exchange(logged_no_shard_selector_, true)) return;
  common::LogInfo("the server does not filter by shard (KEP-5866); selecting the shard by label",
                  {{"watch", options_.description}, {"label", shard.labels->key}});
}

void Reflector::ReportMislabeled(const cache::Object& object) {
  {
    common::MutexLock lock(&mu_);
    ++metrics_.shard_mislabeled_total;
  }
  options_.shard->ReportMislabeled(object);
}

void Reflector::HandleMislabeledDelete(const cache::ObjectPtr& object) {
  cache::ObjectPtr old;
  {
    common::MutexLock dispatch(&dispatch_mu_);
    store_.SetResourceVersion(std::string(object->resource_version()));
    old = store_.Get(object->key());
    if (old != nullptr) {
      store_.Upsert(object);
      for (const auto& [id, handler] : handlers_) handler->OnUpdate(old, object);
    }
  }
  if (old == nullptr) {
    // Not ours: it left the selector of a host whose bucket its old label named.
    common::MutexLock lock(&mu_);
    ++metrics_.shard_filtered_total;
    return;
  }
  outside_selector_.insert(std::string(object->key()));
  ReportMislabeled(*object);
}

absl::StatusOr<bool> Reflector::KeptAfterDelete(const cache::ObjectPtr& object) {
  cache::ObjectPtr stored = store_.Get(object->key());
  if (stored == nullptr || stored->uid() != object->uid()) return false;
  absl::StatusOr<absl::flat_hash_map<std::string, cache::ObjectPtr>> existing =
      StillExisting({stored});
  if (!existing.ok()) return existing.status();
  auto it = existing->find(stored->uid());
  if (it == existing->end()) return false;  // really deleted
  const cache::ObjectPtr& fresh = it->second;
  {
    common::MutexLock dispatch(&dispatch_mu_);
    store_.SetResourceVersion(std::string(object->resource_version()));
    cache::ObjectPtr old = store_.Upsert(fresh);
    if (old != nullptr && old->resource_version() != fresh->resource_version()) {
      for (const auto& [id, handler] : handlers_) handler->OnUpdate(old, fresh);
    }
  }
  if (!HasShardLabel(*fresh, *label_mode_)) {
    outside_selector_.insert(std::string(fresh->key()));
    ReportMislabeled(*fresh);
  }
  return true;
}

absl::StatusOr<absl::flat_hash_map<std::string, cache::ObjectPtr>> Reflector::StillExisting(
    const std::vector<cache::ObjectPtr>& stored) {
  // The reflector's own selectors still apply: an object that left them is gone for it.
  std::vector<ListOptions> checks;
  if (stored.size() <= kMaxLabelChecks) {
    for (const cache::ObjectPtr& object : stored) {
      checks.push_back({options_.label_selector,
                        JoinSelectors(options_.field_selector, NameFieldSelector(*object)), 0, "",
                        ""});
    }
  } else {
    checks.push_back(
        {options_.label_selector, options_.field_selector, options_.page_size, "", ""});
  }
  absl::flat_hash_set<absl::string_view> uids;
  for (const cache::ObjectPtr& object : stored) uids.insert(object->uid());
  absl::flat_hash_map<std::string, cache::ObjectPtr> existing;
  for (ListOptions& check : checks) {
    absl::StatusOr<std::vector<cache::ObjectPtr>> found = ListAllItems(std::move(check));
    {
      common::MutexLock lock(&mu_);
      ++metrics_.shard_label_checks_total;
    }
    if (!found.ok()) return found.status();
    for (cache::ObjectPtr& object : *found) {
      if (!uids.contains(object->uid())) continue;  // another object, or one re-created
      std::string uid(object->uid());
      existing[uid] = std::move(object);
    }
  }
  return existing;
}

absl::Status Reflector::KeepRelabeled(const ShardScope::Snapshot& shard,
                                      std::vector<cache::ObjectPtr>* objects,
                                      absl::flat_hash_set<std::string>* outside) {
  if (!store_.HasSynced()) return absl::OkStatus();
  std::vector<cache::ObjectPtr> missing;
  {
    absl::flat_hash_set<absl::string_view> listed;
    for (const cache::ObjectPtr& object : *objects) listed.insert(object->key());
    for (cache::ObjectPtr& stored : store_.List()) {
      // Objects out of range leave as always; the others may only have lost their label.
      if (listed.contains(stored->key()) ||
          !RangesContain(shard.ranges, ShardHashOf(*stored, ShardBy::kUid))) {
        continue;
      }
      missing.push_back(std::move(stored));
    }
  }
  if (missing.empty()) return absl::OkStatus();
  absl::StatusOr<absl::flat_hash_map<std::string, cache::ObjectPtr>> existing =
      StillExisting(missing);
  if (!existing.ok()) return existing.status();
  size_t kept = 0;
  for (const cache::ObjectPtr& stored : missing) {
    auto it = existing->find(stored->uid());
    if (it == existing->end()) continue;  // deleted (or re-created: another uid)
    if (!HasShardLabel(*it->second, *shard.labels)) {
      ReportMislabeled(*it->second);
      outside->insert(std::string(stored->key()));
    }
    objects->push_back(it->second);
    ++kept;
  }
  common::LogInfo(
      "relist by label: confirmed the stored objects it did not return",
      {{"watch", options_.description}, {"missing", missing.size()}, {"still_exist", kept}});
  return absl::OkStatus();
}

void Reflector::ConfirmOutsideSelector() {
  std::vector<cache::ObjectPtr> stored;
  for (auto it = outside_selector_.begin(); it != outside_selector_.end();) {
    cache::ObjectPtr object = store_.Get(*it);
    if (object == nullptr) {
      outside_selector_.erase(it++);
    } else {
      stored.push_back(std::move(object));
      ++it;
    }
  }
  if (stored.empty()) return;
  absl::StatusOr<absl::flat_hash_map<std::string, cache::ObjectPtr>> existing =
      StillExisting(stored);
  if (!existing.ok()) {
    // Asked again at the next watch; the watch itself is not held up.
    common::LogWarning("could not confirm objects outside the label selector",
                       {{"watch", options_.description}, {"error", existing.status()}});
    return;
  }
  for (const cache::ObjectPtr& object : stored) {
    if (existing->contains(object->uid())) continue;  // still waiting for its label
    // Deleted while outside the selector: no event told us.
    outside_selector_.erase(std::string(object->key()));
    common::MutexLock dispatch(&dispatch_mu_);
    cache::ObjectPtr old = store_.Delete(object->key());
    if (old == nullptr) continue;
    for (const auto& [id, handler] : handlers_) handler->OnDelete(old);
  }
}

}  // namespace ctrlhost::watch
