#include "runtime/manager/shard_labeler.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/manager/shard_assignment.h"

namespace ctrlhost::manager {

namespace {

constexpr size_t kMaxFixes = 10000;
constexpr absl::Duration kFirstBackoff = absl::Seconds(1);
constexpr absl::Duration kMaxBackoff = absl::Seconds(30);

std::string KindName(const kube::ResourceMapping& m) {
  return absl::StrCat(m.group.empty() ? "" : m.group + "/", m.version, " ", m.kind);
}

// Wakes the labeler's loop when its unlabelled watch receives an object.
class WakeHandler : public watch::EventHandler {
 public:
  explicit WakeHandler(std::function<void()> wake) : wake_(std::move(wake)) {}
  void OnAdd(const cache::ObjectPtr&, bool) override { wake_(); }
  void OnUpdate(const cache::ObjectPtr&, const cache::ObjectPtr&) override { wake_(); }
  void OnDelete(const cache::ObjectPtr&) override {}

 private:
  const std::function<void()> wake_;
};

}  // namespace

std::string UnlabelledSelector() {
  std::string values;
  for (int b = 0; b < kShardBuckets; ++b) absl::StrAppend(&values, b == 0 ? "" : ",", b);
  return absl::StrCat(kShardBucketLabel, " notin (", values, ")");
}

std::string BucketLabelOf(absl::string_view uid) {
  return absl::StrCat(ShardBucket(kube::Fnv1a64(uid)));
}

ShardLabeler::ShardLabeler(kube::Client* client, watch::ReflectorRegistry* registry)
    : client_(client), registry_(registry) {
  thread_ = std::thread([this] { Loop(); });
}

ShardLabeler::~ShardLabeler() { Stop(); }

void ShardLabeler::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  std::vector<watch::ReflectorHandle> released;
  {
    common::MutexLock lock(&mu_);
    for (auto& kind : kinds_) released.push_back(std::move(kind->unlabelled));
  }
}

void ShardLabeler::AddKind(const kube::ResourceMapping& mapping) {
  {
    common::MutexLock lock(&mu_);
    for (const auto& kind : kinds_) {
      if (kind->mapping.group == mapping.group && kind->mapping.resource == mapping.resource) {
        return;
      }
    }
  }
  // A server that applies KEP-5866's selector needs no labels: one item of half the space.
  kube::ResourceRef ref{
      .group = mapping.group, .version = mapping.version, .resource = mapping.resource};
  kube::ListOptions probe;
  probe.limit = 1;
  probe.shard_selector = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
  // One page (List would page through every object, one per request).
  absl::StatusOr<kube::ObjectList> answer = client_->ListPage(ref, probe);
  auto kind = std::make_unique<Kind>();
  kind->mapping = mapping;
  kind->server_filters = answer.ok() && answer->shard_applied;
  common::LogInfo(kind->server_filters
                      ? "shard labeler: the server filters this kind by uid; no labels needed"
                      : "shard labeler: the server has no shard selector; this kind's objects "
                        "get a bucket label",
                  {{"kind", KindName(mapping)}, {"label", kShardBucketLabel}});
  Kind* added = nullptr;
  {
    common::MutexLock lock(&mu_);
    for (const auto& k : kinds_) {
      if (k->mapping.group == mapping.group && k->mapping.resource == mapping.resource) return;
    }
    kinds_.push_back(std::move(kind));
    if (active_) added = kinds_.back().get();
  }
  if (added != nullptr) Acquire(added);
}

void ShardLabeler::Acquire(Kind* kind) {
  if (kind->server_filters) return;
  // Without mu_: AddHandler replays the watch's objects to the handler, which takes mu_.
  watch::WatchKey key;
  key.group = kind->mapping.group;
  key.version = kind->mapping.version;
  key.kind = kind->mapping.kind;
  key.label_selector = UnlabelledSelector();
  absl::StatusOr<watch::ReflectorHandle> handle = registry_->Acquire(key);
  if (!handle.ok()) {
    common::LogWarning("shard labeler: cannot watch the unlabelled objects",
                       {{"kind", KindName(kind->mapping)}, {"error", handle.status().message()}});
    common::MutexLock lock(&mu_);
    last_error_ =
        absl::StrCat("watch unlabelled ", KindName(kind->mapping), ": ", handle.status().message());
    return;
  }
  (*handle)->AddHandler(std::make_shared<WakeHandler>([this] {
    common::MutexLock lock(&mu_);
    wake_ = true;
    cv_.SignalAll();
  }));
  watch::ReflectorHandle unused;  // released outside mu_ when not kept
  common::MutexLock lock(&mu_);
  if (active_ && !stopping_ && !kind->unlabelled) {
    kind->unlabelled = *std::move(handle);
    wake_ = true;
    cv_.SignalAll();
  } else {
    unused = *std::move(handle);
  }
}

void ShardLabeler::SetActive(bool active) {
  std::vector<watch::ReflectorHandle> released;
  std::vector<Kind*> acquire;
  {
    common::MutexLock lock(&mu_);
    if (active == active_) return;
    active_ = active;
    for (auto& kind : kinds_) {
      if (active) {
        acquire.push_back(kind.get());
      } else {
        released.push_back(std::move(kind->unlabelled));
      }
    }
    wake_ = true;
    cv_.SignalAll();
  }
  for (Kind* kind : acquire) Acquire(kind);
  common::LogInfo(active ? "shard labeler: this host labels the sharded kinds' objects"
                         : "shard labeler: another host labels the sharded kinds' objects",
                  {{"label", kShardBucketLabel}});
  // `released` stops the watches here, outside mu_ (their handlers take it).
}

void ShardLabeler::Fix(const cache::Object& object) {
  common::MutexLock lock(&mu_);
  if (stopping_ || fixes_.size() >= kMaxFixes) return;  // seen again at its next event or list
  if (!fixes_queued_.insert(std::string(object.uid())).second) return;
  fixes_.push_back(
      {std::string(object.namespace_()), std::string(object.name()), std::string(object.uid())});
  wake_ = true;
  cv_.SignalAll();
}

absl::Status ShardLabeler::Label(const kube::ResourceMapping& mapping, const Pending& object) {
  kube::ResourceRef ref{.group = mapping.group,
                        .version = mapping.version,
                        .resource = mapping.resource,
                        .namespace_name = mapping.namespaced ? object.namespace_ : "",
                        .name = object.name};
  // The uid in the patch is a precondition: a re-created object (another uid) is refused.
  nlohmann::json patch = {
      {"metadata",
       {{"uid", object.uid}, {"labels", {{kShardBucketLabel, BucketLabelOf(object.uid)}}}}}};
  kube::PatchOptions options;
  options.field_manager = kShardLabelerFieldManager;
  absl::StatusOr<std::string> patched =
      client_->Patch(ref, kube::PatchType::kMerge, patch.dump(), options);
  if (patched.ok() || kube::IsNotFound(patched.status()) || kube::IsConflict(patched.status())) {
    return patched.ok() ? absl::OkStatus() : absl::NotFoundError("gone or re-created");
  }
  return patched.status();
}

void ShardLabeler::Loop() {
  // The resourceVersion each object had when it was labelled: skipped until its watch event
  // takes it out of the unlabelled watch, unless it changed since (unlabelled again).
  absl::flat_hash_map<std::string, std::string> done;
  absl::Duration backoff = kFirstBackoff;
  while (true) {
    std::vector<std::pair<const Kind*, Pending>> work;
    std::vector<Pending> fixes;
    std::vector<const Kind*> labelling;
    {
      common::MutexLock lock(&mu_);
      while (!stopping_ && !wake_) cv_.WaitWithTimeout(&mu_, absl::Seconds(30));
      if (stopping_) return;
      wake_ = false;
      fixes.assign(fixes_.begin(), fixes_.end());
      fixes_.clear();
      fixes_queued_.clear();
      for (const auto& kind : kinds_) {
        if (!kind->server_filters) labelling.push_back(kind.get());
        if (!kind->unlabelled) continue;
        for (const cache::ObjectPtr& o : kind->unlabelled->store().List()) {
          auto it = done.find(o->uid());
          if (it != done.end() && it->second == o->resource_version()) continue;
          work.push_back(
              {kind.get(),
               {std::string(o->namespace_()), std::string(o->name()), std::string(o->uid())}});
        }
      }
      pending_ = work.size() + fixes.size();
    }
    bool failed = false;
    absl::Status error;
    auto finish = [&](const absl::Status& s, bool fix) {
      common::MutexLock lock(&mu_);
      if (pending_ > 0) --pending_;
      if (s.ok()) {
        ++labelled_total_;
        if (fix) ++fixed_total_;
        return;
      }
      if (absl::IsNotFound(s)) return;
      ++failures_total_;
      failed = true;
      error = s;
      last_error_ = std::string(s.message());
    };
    for (const auto& [kind, object] : work) {
      absl::Status s = Label(kind->mapping, object);
      if (s.ok()) {
        // Remember the version seen, so the same event is not patched twice.
        for (const cache::ObjectPtr& o : kind->unlabelled->store().List()) {
          if (o->uid() == object.uid) done[object.uid] = std::string(o->resource_version());
        }
      }
      finish(s, false);
      if (failed) break;
    }
    // Wrong bucket values a watch reported: the kind is not known, so each labelled kind is
    // tried (the uid precondition refuses an object of another kind with the same name).
    for (const Pending& object : fixes) {
      absl::Status s = absl::NotFoundError("no kind");
      for (const Kind* kind : labelling) {
        s = Label(kind->mapping, object);
        if (!absl::IsNotFound(s)) break;
      }
      finish(s, true);
    }
    // Forget what left the unlabelled watches.
    {
      common::MutexLock lock(&mu_);
      absl::flat_hash_set<std::string> present;
      for (const auto& kind : kinds_) {
        if (!kind->unlabelled) continue;
        for (const cache::ObjectPtr& o : kind->unlabelled->store().List()) {
          present.insert(std::string(o->uid()));
        }
      }
      absl::erase_if(done, [&](const auto& entry) { return !present.contains(entry.first); });
      if (failed) {
        const absl::Time now = absl::Now();
        if (now - last_error_log_ >= absl::Minutes(1)) {
          last_error_log_ = now;
          common::LogWarning(
              "shard labeler: a label could not be written; retrying",
              {{"error", error.message()}, {"backoff", absl::FormatDuration(backoff)}});
        }
        cv_.WaitWithTimeout(&mu_, backoff);
        backoff = std::min(2 * backoff, kMaxBackoff);
        wake_ = true;
      } else {
        backoff = kFirstBackoff;
        if (!work.empty()) wake_ = true;  // more may have arrived meanwhile
      }
    }
  }
}

ShardLabelerStatus ShardLabeler::Status() const {
  ShardLabelerStatus status;
  common::MutexLock lock(&mu_);
  status.active = active_;
  for (const auto& kind : kinds_) {
    status.kinds.push_back(absl::StrCat(KindName(kind->mapping), ": ",
                                        kind->server_filters ? "the server filters by uid"
                                        : kind->unlabelled   ? "labelling"
                                                             : "labelled by another host"));
  }
  status.labelled_total = labelled_total_;
  status.fixed_total = fixed_total_;
  status.failures_total = failures_total_;
  status.pending = pending_;
  status.last_error = last_error_;
  return status;
}

}  // namespace ctrlhost::manager
