// Reflector's lists (the contract is at the top of reflector.h): a complete list replaces the
// store; the scope's selectors, and the fallbacks when a server ignores or refuses them.
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/kube/api_status.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::watch {

absl::Status Reflector::ListAndReplace() {
  // The scope first: a change from here on is seen by ShardMoved after the list.
  ShardScope::Snapshot shard;
  if (options_.shard != nullptr) {
    {
      common::MutexLock lock(&mu_);
      shard_wakeup_ = false;
    }
    shard = options_.shard->Get();
  }
  const bool nothing_in_scope = options_.shard != nullptr && shard.ranges.empty();
  Listed listed;
  absl::flat_hash_set<std::string> outside_selector;
  ListOptions list_options{options_.label_selector, options_.field_selector, options_.page_size, "",
                           ""};
  if (!nothing_in_scope) {
    if (options_.shard != nullptr) PlanShardList(shard, &list_options, &listed);
    absl::Status status = ListPages(shard, &list_options, &listed);
    if (status.ok() && listed.label_mode) {
      status = KeepRelabeled(shard, &listed.objects, &outside_selector);
    }
    if (!status.ok()) return status;
  }
  bool initial;
  size_t added, updated, deleted;
  {
    common::MutexLock dispatch(&dispatch_mu_);
    initial = !store_.HasSynced();
    cache::StoreDiff diff = store_.Replace(std::move(listed.objects), listed.resource_version);
    Dispatch(diff, initial);
    added = diff.added.size();
    updated = diff.updated.size();
    deleted = diff.deleted.size();
  }
  label_selector_ = list_options.label_selector;
  outside_selector_ = std::move(outside_selector);
  if (options_.shard != nullptr) {
    listed_shard_ = shard;
    shard_selector_ = list_options.shard_selector;
    label_mode_ = listed.label_mode ? shard.labels : std::nullopt;
    const absl::string_view mode = nothing_in_scope                      ? ""
                                   : listed.label_mode                   ? "label"
                                   : list_options.shard_selector.empty() ? "client"
                                   : listed.shard_applied                ? "server"
                                                                         : "client";
    RecordShardList(shard, mode, listed.filtered);
  }
  common::MutexLock lock(&mu_);
  metrics_.parse_errors_total += listed.parse_errors;
  ++metrics_.lists_total;
  if (!initial) ++metrics_.relists_total;
  if (std::exchange(relist_after_gone_, false)) {
    common::LogInfo("relisted after 410 Gone", {{"watch", options_.description},
                                                {"objects", store_.Size()},
                                                {"added", added},
                                                {"updated", updated},
                                                {"deleted", deleted},
                                                {"resource_version", listed.resource_version}});
  }
  initial_list_dispatched_ = true;
  cv_.SignalAll();  // WaitForSync
  return absl::OkStatus();
}

absl::Status Reflector::ListPages(const ShardScope::Snapshot& shard, ListOptions* options,
                                  Listed* out) {
  bool restarted = false;
  while (true) {
    if (Stopping()) return absl::CancelledError("reflector stopping");
    absl::StatusOr<ListPage> page = lister_watcher_->List(*options);
    const bool first_page = options->continue_token.empty();
    if (!page.ok() && page.status().code() == absl::StatusCode::kInvalidArgument &&
        !options->shard_selector.empty() && first_page) {
      // A server with other limits (or grammar) refused the selector: labels, or filter alone.
      common::LogWarning(LabelsUsable(shard)
                             ? "the server refused the shard selector; selecting by label"
                             : "the server refused the shard selector; filtering client-side",
                         {{"watch", options_.description}, {"error", page.status().message()}});
      options->shard_selector.clear();
      if (LabelsUsable(shard)) UseLabels(shard, options, out);
      continue;
    }
    if (page.ok() && first_page && !options->shard_selector.empty() && !page->shard_applied &&
        LabelsUsable(shard)) {
      UseLabels(shard, options, out);  // a server without KEP-5866: list again by label
      continue;
    }
    if (!page.ok()) {
      // An expired continue token: start the list over once (a fresh snapshot).
      if (kube::IsGone(page.status()) && !first_page && !restarted) {
        restarted = true;
        *out = Listed{{}, "", false, out->label_mode, out->parse_errors, 0};
        options->continue_token.clear();
        continue;
      }
      return page.status();
    }
    if (first_page) out->shard_applied = page->shard_applied;
    for (const std::string& item : page->items) {
      absl::StatusOr<cache::ObjectPtr> object = parser_.Parse(item);
      if (!object.ok()) {
        // Skipped rather than retried: a server that keeps sending it would stall the cache.
        ++out->parse_errors;
        common::LogError("skipping an unparsable listed object",
                         {{"watch", options_.description}, {"error", object.status()}});
        continue;
      }
      if (out->label_mode && !HasShardLabel(**object, *shard.labels)) ReportMislabeled(**object);
      if (options_.shard != nullptr &&
          !RangesContain(shard.ranges, ShardHashOf(**object, options_.shard_by))) {
        ++out->filtered;
        continue;
      }
      out->objects.push_back(*std::move(object));
    }
    if (out->resource_version.empty()) out->resource_version = page->resource_version;
    if (page->continue_token.empty()) return absl::OkStatus();
    options->continue_token = std::move(page->continue_token);
  }
}

absl::StatusOr<std::vector<cache::ObjectPtr>> Reflector::ListAllItems(ListOptions options) {
  std::vector<cache::ObjectPtr> objects;
  bool restarted = false;
  while (true) {
    if (Stopping()) return absl::CancelledError("reflector stopping");
    absl::StatusOr<ListPage> page = lister_watcher_->List(options);
    if (!page.ok()) {
      if (kube::IsGone(page.status()) && !options.continue_token.empty() && !restarted) {
        restarted = true;
        objects.clear();
        options.continue_token.clear();
        continue;
      }
      return page.status();
    }
    for (const std::string& item : page->items) {
      absl::StatusOr<cache::ObjectPtr> object = parser_.Parse(item);
      if (object.ok()) objects.push_back(*std::move(object));
    }
    if (page->continue_token.empty()) return objects;
    options.continue_token = std::move(page->continue_token);
  }
}

}  // namespace ctrlhost::watch
