#include "runtime/apiserver/storage/store.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/storage/internal/log_table.h"
#include "runtime/apiserver/storage/internal/watch_hub.h"
#include "runtime/apiserver/storage/internal/watch_state.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace internal {
namespace {

// Most writes committed in one transaction. Bounds the latency a large queue adds to its
// first write and the memory a batch holds.
constexpr size_t kMaxBatch = 1024;
// Revisions compacted per transaction: bounds how long one compaction step delays writes.
constexpr int64_t kCompactionChunk = 2000;
// Largest value one write may store. The HTTP layer limits bodies far below this; the check
// keeps one oversized write from failing the whole batch it would share with others (SQLite
// refuses blobs above its own limit, 1e9 bytes by default, for the entire transaction).
constexpr size_t kMaxValueBytes = 64 << 20;
// Idle read connections kept open.
constexpr size_t kMaxIdleReaders = 8;

// A write waiting for the writer thread. Lives on the caller's stack until `done`.
struct PendingWrite {
  absl::string_view key;
  const Mutator* mutator;
  // Guarded by StoreCore::queue_mu_.
  absl::StatusOr<ObjectPtr> result = absl::UnknownError("not written");
  bool done = false;
  common::CondVar cv;
};

}  // namespace

// The store's shared state and its writer thread.
//
// Thread-safety: thread-safe. state_mu_ guards the current state (readers share it; the
// writer thread takes it exclusively to publish a committed batch, then the hub's lock inside
// it). queue_mu_ guards the write queue and compaction requests. The SQLite writer connection
// and next_rev_ belong to the writer thread once Open has returned.
class StoreCore {
 public:
  StoreCore(StoreOptions options, std::unique_ptr<LogWriter> writer, LoadedState loaded);
  ~StoreCore();

  absl::StatusOr<ObjectPtr> Write(absl::string_view key, const Mutator& mutator);
  ObjectPtr Get(absl::string_view key) const;
  int64_t Revision() const;
  int64_t CompactedRevision() const;
  absl::StatusOr<Store::ListResult> List(const Store::ListOptions& options) const;
  absl::Status Compact(int64_t revision);
  Store::Stats GetStats() const;

  const std::shared_ptr<WatchHub>& hub() const { return hub_; }
  const std::shared_ptr<ReadPool>& pool() const { return pool_; }
  const LabelExtractor& extract_labels() const { return options_.extract_labels; }

 private:
  class ActiveCall;

  void WriterLoop();
  void ProcessBatch(const std::vector<PendingWrite*>& batch);
  // The object a mutation stores: labels from the mutation when it carries them, else
  // extracted.
  ObjectPtr Build(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                  Mutation mutation) const;
  void CompactionStep();
  // Records committed versions and asks for compaction when history passes its byte budget.
  void BoundHistory(const std::vector<LogEntry>& entries);

  // Constant after construction.
  const StoreOptions options_;
  const std::shared_ptr<ReadPool> pool_;
  const std::shared_ptr<WatchHub> hub_;

  // Writer thread only (after construction).
  std::unique_ptr<LogWriter> writer_;
  int64_t next_rev_;
  int64_t committed_rev_;
  absl::Time next_auto_compaction_;
  // Versions committed since Open that compaction has not dropped yet (revision, bytes), for
  // StoreOptions::retained_history_bytes.
  std::deque<std::pair<int64_t, size_t>> history_;
  size_t history_bytes_ = 0;

  // Current state.
  mutable common::RwMutex state_mu_;
  std::map<std::string, ObjectPtr, std::less<>> objects_ ABSL_GUARDED_BY(state_mu_);
  int64_t revision_ ABSL_GUARDED_BY(state_mu_);
  int64_t compacted_ ABSL_GUARDED_BY(state_mu_);
  int64_t bytes_ ABSL_GUARDED_BY(state_mu_) = 0;

  // Work for the writer thread.
  mutable common::Mutex queue_mu_;
  common::CondVar queue_cv_;    // the writer waits here for work
  common::CondVar compact_cv_;  // Compact() callers wait here
  std::deque<PendingWrite*> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool shutdown_ ABSL_GUARDED_BY(queue_mu_) = false;
  int64_t compact_target_ ABSL_GUARDED_BY(queue_mu_);
  int64_t compact_progress_ ABSL_GUARDED_BY(queue_mu_);
  int64_t compact_failures_ ABSL_GUARDED_BY(queue_mu_) = 0;
  absl::Status compact_error_ ABSL_GUARDED_BY(queue_mu_);

  common::CondVar idle_cv_;  // the destructor waits here for active_calls_ to reach 0
  int64_t active_calls_ ABSL_GUARDED_BY(queue_mu_) = 0;

  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> writes_{0};

  std::thread thread_;  // last: starts after everything above is initialized
};

StoreCore::StoreCore(StoreOptions options, std::unique_ptr<LogWriter> writer, LoadedState loaded)
    : options_(std::move(options)),
      pool_(std::make_shared<ReadPool>(options_.path, kMaxIdleReaders)),
      hub_(std::make_shared<WatchHub>(options_.watch_window_events, options_.watch_window_bytes,
                                      loaded.revision, options_.clock)),
      writer_(std::move(writer)),
      next_rev_(loaded.revision + 1),
      committed_rev_(loaded.revision),
      next_auto_compaction_(options_.clock->Now() + options_.compaction_interval),
      revision_(loaded.revision),
      compacted_(loaded.compacted),
      compact_target_(loaded.compacted),
      compact_progress_(std::min(loaded.compact_progress, loaded.compacted)) {
  for (ObjectPtr& object : loaded.objects) {
    bytes_ += static_cast<int64_t>(object->value.size());
    std::string key = object->key;
    objects_.emplace_hint(objects_.end(), std::move(key), std::move(object));
  }
  thread_ = std::thread([this] { WriterLoop(); });
}

StoreCore::~StoreCore() {
  {
    common::MutexLock lock(&queue_mu_);
    shutdown_ = true;
  }
  common::LogInfo("storage closing", {{"path", options_.path}});
  queue_cv_.SignalAll();
  compact_cv_.SignalAll();
  thread_.join();
  hub_->Shutdown();
  // Write() and Compact() calls woken above may still be on their way out through queue_mu_.
  common::MutexLock lock(&queue_mu_);
  while (active_calls_ > 0) idle_cv_.Wait(&queue_mu_);
}

// Counts a Write()/Compact() call in progress, so that the destructor waits for it to leave.
class StoreCore::ActiveCall {
 public:
  explicit ActiveCall(StoreCore* core) ABSL_EXCLUSIVE_LOCKS_REQUIRED(core->queue_mu_)
      : core_(core) {
    ++core_->active_calls_;
  }
  ~ActiveCall() ABSL_EXCLUSIVE_LOCKS_REQUIRED(core_->queue_mu_) {
    if (--core_->active_calls_ == 0) core_->idle_cv_.SignalAll();
  }

 private:
  StoreCore* const core_;
};

absl::StatusOr<ObjectPtr> StoreCore::Write(absl::string_view key, const Mutator& mutator) {
  if (!mutator) return absl::InvalidArgumentError("storage write without a mutator");
  PendingWrite write;
  write.key = key;
  write.mutator = &mutator;
  common::MutexLock lock(&queue_mu_);
  if (shutdown_) return absl::UnavailableError("storage is closing");
  ActiveCall active(this);
  queue_.push_back(&write);
  if (queue_.size() == 1) queue_cv_.Signal();
  while (!write.done) write.cv.Wait(&queue_mu_);
  return std::move(write.result);
}

void StoreCore::WriterLoop() {
  std::vector<PendingWrite*> batch;
  for (;;) {
    batch.clear();
    {
      common::MutexLock lock(&queue_mu_);
      for (;;) {
        if (shutdown_) {
          for (PendingWrite* write : queue_) {
            write->result = absl::UnavailableError("storage closed before the write was applied");
            write->done = true;
            write->cv.Signal();
          }
          queue_.clear();
          return;
        }
        if (!queue_.empty() || compact_target_ > compact_progress_) break;
        if (options_.compaction_interval > absl::ZeroDuration()) {
          if (options_.clock->Now() >= next_auto_compaction_) {
            next_auto_compaction_ = options_.clock->Now() + options_.compaction_interval;
            const int64_t target = committed_rev_ - options_.retained_revisions;
            if (target > compact_target_) {
              compact_target_ = target;
              break;
            }
            continue;
          }
          options_.clock->WaitWithDeadline(&queue_mu_, &queue_cv_, next_auto_compaction_);
        } else {
          queue_cv_.Wait(&queue_mu_);
        }
      }
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    if (!batch.empty()) ProcessBatch(batch);
    CompactionStep();
  }
}

void StoreCore::ProcessBatch(const std::vector<PendingWrite*>& batch) {
  std::vector<absl::StatusOr<ObjectPtr>> results;
  results.reserve(batch.size());
  std::vector<LogEntry> entries;
  std::vector<WatchEvent> events;
  // Keys written earlier in this batch: later mutators see them. nullptr = deleted.
  absl::flat_hash_map<std::string, ObjectPtr> overlay;
  int64_t rev = next_rev_;

  for (PendingWrite* write : batch) {
    ObjectPtr current;
    if (auto it = overlay.find(write->key); it != overlay.end()) {
      current = it->second;
    } else {
      current = Get(write->key);
    }
    absl::StatusOr<ObjectPtr> result;
    try {
      absl::StatusOr<Mutation> mutation = (*write->mutator)(current.get(), rev);
      if (!mutation.ok()) {
        result = mutation.status();
      } else if (mutation->op == Mutation::Op::kNoop) {
        result = current;
      } else if (mutation->value.size() > kMaxValueBytes) {
        result = kube::RequestEntityTooLargeError(absl::StrCat(
            "object is ", mutation->value.size(), " bytes; the storage limit is ", kMaxValueBytes));
      } else if (mutation->op == Mutation::Op::kPut) {
        ObjectPtr object =
            Build(write->key, current ? current->create_revision : rev, rev, std::move(*mutation));
        entries.push_back({rev, object->key, current == nullptr, false, object->create_revision,
                           current ? current->mod_revision : 0, object->value});
        events.push_back(
            {current ? WatchEvent::Type::kModified : WatchEvent::Type::kAdded, object, current});
        overlay[object->key] = object;
        result = std::move(object);
        ++rev;
      } else if (current == nullptr) {
        result = absl::FailedPreconditionError(
            absl::StrCat("storage: delete of absent key ", write->key));
      } else {
        if (mutation->value.empty()) {
          mutation->value = current->value;
          mutation->labels = current->labels;
        }
        ObjectPtr object = Build(write->key, current->create_revision, rev, std::move(*mutation));
        entries.push_back({rev, object->key, false, true, object->create_revision,
                           current->mod_revision, object->value});
        events.push_back({WatchEvent::Type::kDeleted, object, current});
        overlay[object->key] = nullptr;
        result = std::move(object);
        ++rev;
      }
    } catch (const std::exception& e) {
      result = absl::InternalError(
          absl::StrCat("storage: mutator for ", write->key, " threw: ", e.what()));
    } catch (...) {
      result = absl::InternalError(absl::StrCat("storage: mutator for ", write->key, " threw"));
    }
    results.push_back(std::move(result));
  }

  if (!entries.empty()) {
    // Revisions handed to mutators are never handed out again, even if the commit fails: a
    // failed COMMIT may still have reached the disk.
    next_rev_ = rev;
    absl::Status status = writer_->Append(entries);
    if (!status.ok()) {
      common::LogError("storage commit failed", {{"writes", batch.size()}, {"error", status}});
      // Every decision in the batch may rest on an earlier write of it that is now lost.
      for (auto& result : results) {
        result =
            absl::Status(status.code(), absl::StrCat("storage commit failed: ", status.message()));
      }
    } else {
      commits_.fetch_add(1, std::memory_order_relaxed);
      writes_.fetch_add(static_cast<int64_t>(entries.size()), std::memory_order_relaxed);
      committed_rev_ = rev - 1;
      common::WriterLock lock(&state_mu_);
      for (const WatchEvent& event : events) {
        if (event.previous) bytes_ -= static_cast<int64_t>(event.previous->value.size());
        if (event.type == WatchEvent::Type::kDeleted) {
          objects_.erase(event.object->key);
        } else {
          bytes_ += static_cast<int64_t>(event.object->value.size());
          objects_.insert_or_assign(event.object->key, event.object);
        }
      }
      revision_ = committed_rev_;
      hub_->Publish(std::move(events), committed_rev_);
    }
    if (status.ok()) BoundHistory(entries);
    if (status.ok() && options_.on_publish) options_.on_publish();
  }

  common::MutexLock lock(&queue_mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->result = std::move(results[i]);
    batch[i]->done = true;
    batch[i]->cv.Signal();
  }
}

ObjectPtr StoreCore::Build(absl::string_view key, int64_t create_revision, int64_t mod_revision,
                           Mutation mutation) const {
  if (mutation.labels.has_value()) {
    return MakeObject(key, create_revision, mod_revision, std::move(mutation.value),
                      *std::move(mutation.labels));
  }
  return MakeObject(key, create_revision, mod_revision, std::move(mutation.value),
                    options_.extract_labels);
}

void StoreCore::BoundHistory(const std::vector<LogEntry>& entries) {
  if (options_.retained_history_bytes == 0) return;
  const int64_t compacted = CompactedRevision();
  for (const LogEntry& e : entries) {
    history_.emplace_back(e.rev, e.value.size());
    history_bytes_ += e.value.size();
  }
  int64_t target = 0;
  while (!history_.empty() && (history_.front().first <= compacted ||
                               history_bytes_ > options_.retained_history_bytes)) {
    if (history_.front().first > compacted) target = history_.front().first;
    history_bytes_ -= history_.front().second;
    history_.pop_front();
  }
  if (target == 0) return;
  common::MutexLock lock(&queue_mu_);
  if (target > compact_target_) {
    common::LogDebug("storage history past its byte budget: compacting",
                     {{"revision", target}, {"budget_bytes", options_.retained_history_bytes}});
    compact_target_ = target;
  }
}

void StoreCore::CompactionStep() {
  int64_t target;
  int64_t progress;
  {
    common::MutexLock lock(&queue_mu_);
    target = compact_target_;
    progress = compact_progress_;
  }
  if (target <= progress) return;

  absl::Status status;
  if (CompactedRevision() < target) {
    // Recorded before any row goes, so a reader's snapshot either predates the compaction or
    // refuses revisions at or below the target.
    status = writer_->StartCompaction(target, committed_rev_);
    if (status.ok()) {
      common::WriterLock lock(&state_mu_);
      compacted_ = target;
    }
  }
  const int64_t to = std::min(target, progress + kCompactionChunk);
  if (status.ok()) {
    absl::StatusOr<int64_t> deleted = writer_->CompactChunk(progress, to);
    status = deleted.status();
  }

  common::MutexLock lock(&queue_mu_);
  if (!status.ok()) {
    common::LogError("storage compaction failed", {{"target", target}, {"error", status}});
    compact_error_ = status;
    ++compact_failures_;
    compact_target_ = compact_progress_;
  } else {
    compact_progress_ = to;
    if (to == target) common::LogDebug("storage compacted", {{"revision", target}});
  }
  compact_cv_.SignalAll();
}

absl::Status StoreCore::Compact(int64_t revision) {
  if (revision > Revision()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot compact to revision ", revision,
                                                   " above the current revision ", Revision()));
  }
  if (revision <= CompactedRevision()) return absl::OkStatus();
  common::MutexLock lock(&queue_mu_);
  if (shutdown_) return absl::UnavailableError("storage is closing");
  ActiveCall active(this);
  const int64_t failures = compact_failures_;
  compact_target_ = std::max(compact_target_, revision);
  queue_cv_.Signal();
  for (;;) {
    if (shutdown_) return absl::UnavailableError("storage is closing");
    if (compact_failures_ != failures) return compact_error_;
    if (compact_progress_ >= revision) return absl::OkStatus();
    compact_cv_.Wait(&queue_mu_);
  }
}

ObjectPtr StoreCore::Get(absl::string_view key) const {
  common::ReaderLock lock(&state_mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

int64_t StoreCore::Revision() const {
  common::ReaderLock lock(&state_mu_);
  return revision_;
}

int64_t StoreCore::CompactedRevision() const {
  common::ReaderLock lock(&state_mu_);
  return compacted_;
}

absl::StatusOr<Store::ListResult> StoreCore::List(const Store::ListOptions& options) const {
  Store::ListResult result;
  {
    common::ReaderLock lock(&state_mu_);
    if (options.revision != 0) {
      if (options.revision > revision_) {
        return TooLargeResourceVersionError(options.revision, revision_);
      }
      if (options.revision <= compacted_) {
        return kube::GoneError(
            absl::StrCat("The resourceVersion for the provided list is too old: ", options.revision,
                         " (compacted at ", compacted_, ")"));
      }
    }
    if (options.revision == 0 || options.revision == revision_) {
      result.revision = revision_;
      auto it = objects_.lower_bound(options.prefix);
      if (!options.after_key.empty() && options.after_key >= options.prefix) {
        it = objects_.upper_bound(options.after_key);
      }
      for (; it != objects_.end() && absl::StartsWith(it->first, options.prefix); ++it) {
        if (options.filter && !options.filter(*it->second)) continue;
        if (options.limit > 0 && result.items.size() == options.limit) {
          result.more = true;
          break;
        }
        result.items.push_back(it->second);
      }
      if (!result.items.empty()) result.last_key = result.items.back()->key;
      return result;
    }
  }
  // A past revision: history, from a read connection (never waits for the writer).
  ASSIGN_OR_RETURN(ReadPool::Lease lease, pool_->Acquire());
  return ListAtRevision(lease.db(), options, options_.extract_labels);
}

Store::Stats StoreCore::GetStats() const {
  Store::Stats stats;
  {
    common::ReaderLock lock(&state_mu_);
    stats.revision = revision_;
    stats.compacted_revision = compacted_;
    stats.objects = static_cast<int64_t>(objects_.size());
    stats.bytes = bytes_;
  }
  stats.commits = commits_.load(std::memory_order_relaxed);
  stats.writes = writes_.load(std::memory_order_relaxed);
  stats.watchers = hub_->watchers();
  stats.watch_window_bytes = hub_->ring_bytes();
  {
    common::MutexLock lock(&queue_mu_);
    stats.queued_writes = static_cast<int64_t>(queue_.size());
  }
  return stats;
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Store>> Store::Open(StoreOptions options) {
  if (options.path.empty()) return absl::InvalidArgumentError("storage: empty database path");
  if (options.retained_revisions < 0) {
    return absl::InvalidArgumentError("storage: retained_revisions must not be negative");
  }
  if (options.compaction_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("storage: compaction_interval must not be negative");
  }
  if (options.clock == nullptr) options.clock = common::Clock::Real();
  ASSIGN_OR_RETURN(std::unique_ptr<internal::LogWriter> writer,
                   internal::LogWriter::Open(options.path, options.sync_full));
  ASSIGN_OR_RETURN(internal::LoadedState loaded, writer->Load(options.extract_labels));
  common::LogInfo("storage opened", {{"path", options.path},
                                     {"objects", loaded.objects.size()},
                                     {"revision", loaded.revision},
                                     {"compacted", loaded.compacted}});
  return std::unique_ptr<Store>(new Store(std::make_unique<internal::StoreCore>(
      std::move(options), std::move(writer), std::move(loaded))));
}

Store::Store(std::unique_ptr<internal::StoreCore> core) : core_(std::move(core)) {}

Store::~Store() = default;

absl::StatusOr<ObjectPtr> Store::Write(absl::string_view key, Mutator mutator) {
  return core_->Write(key, mutator);
}

ObjectPtr Store::Get(absl::string_view key) const { return core_->Get(key); }

int64_t Store::Revision() const { return core_->Revision(); }

int64_t Store::CompactedRevision() const { return core_->CompactedRevision(); }

absl::StatusOr<Store::ListResult> Store::List(const ListOptions& options) const {
  return core_->List(options);
}

absl::StatusOr<std::unique_ptr<apiserver::Watch>> Store::Watch(absl::string_view prefix,
                                                               int64_t from_revision) {
  auto state = std::make_unique<apiserver::Watch::State>();
  state->hub = core_->hub();
  state->pool = core_->pool();
  state->extract_labels = core_->extract_labels();
  state->prefix = std::string(prefix);
  RETURN_IF_ERROR(state->hub->Register(from_revision, core_->CompactedRevision(), &state->cursor));
  return std::unique_ptr<apiserver::Watch>(new apiserver::Watch(std::move(state)));
}

absl::Status Store::Compact(int64_t revision) { return core_->Compact(revision); }

Store::Stats Store::GetStats() const { return core_->GetStats(); }

}  // namespace ctrlhost::apiserver
