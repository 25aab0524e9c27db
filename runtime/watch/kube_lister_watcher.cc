#include "runtime/watch/kube_lister_watcher.h"

#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/rest_client.h"

namespace ctrlhost::watch {
namespace {

// Events read ahead of the reflector; beyond this the HTTP reader waits.
constexpr size_t kMaxQueued = 1024;

std::optional<EventType> ParseEventType(absl::string_view type) {
  if (type == "ADDED") return EventType::kAdded;
  if (type == "MODIFIED") return EventType::kModified;
  if (type == "DELETED") return EventType::kDeleted;
  if (type == "BOOKMARK") return EventType::kBookmark;
  if (type == "ERROR") return EventType::kError;
  return std::nullopt;
}

// Thread-safe as WatchStream requires. mu_ guards the queue and the end state; the reader
// thread runs kube::Client::Watch until the server ends it, it fails, or Close() cancels it.
class KubeWatchStream : public WatchStream {
 public:
  KubeWatchStream(kube::Client* client, kube::ResourceRef ref, kube::WatchOptions options) {
    reader_ = std::thread([this, client, ref = std::move(ref), options = std::move(options)] {
      absl::Status status = client->Watch(
          ref, options, [this](kube::WatchEvent event) { return Enqueue(std::move(event)); },
          &canceller_);
      common::MutexLock lock(&mu_);
      ended_ = true;
      end_status_ = std::move(status);
      cv_.SignalAll();
    });
  }

  ~KubeWatchStream() override {
    Close();
    reader_.join();
  }

  absl::StatusOr<std::optional<WatchEvent>> Next() override {
    common::MutexLock lock(&mu_);
    while (queue_.empty() && !ended_ && !closed_) cv_.Wait(&mu_);
    if (closed_) return std::optional<WatchEvent>();
    if (!queue_.empty()) {
      kube::WatchEvent event = std::move(queue_.front());
      queue_.pop_front();
      cv_.SignalAll();  // room for the reader
      std::optional<EventType> type = ParseEventType(event.type);
      if (!type.has_value()) {
        return absl::DataLossError(absl::StrCat("unknown watch event type \"", event.type, "\""));
      }
      return std::optional<WatchEvent>(WatchEvent{*type, std::move(event.object)});
    }
    if (!end_status_.ok()) return end_status_;
    return std::optional<WatchEvent>();
  }

  void Close() override {
    canceller_.Cancel();
    common::MutexLock lock(&mu_);
    closed_ = true;
    cv_.SignalAll();
  }

 private:
  bool Enqueue(kube::WatchEvent event) {
    common::MutexLock lock(&mu_);
    while (queue_.size() >= kMaxQueued && !closed_) cv_.Wait(&mu_);
    if (closed_) return false;
    queue_.push_back(std::move(event));
    cv_.SignalAll();
    return true;
  }

  kube::StreamCanceller canceller_;  // thread-safe itself
  common::Mutex mu_;
  common::CondVar cv_;
  std::deque<kube::WatchEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;  // started last, joined in the destructor
};

}  // namespace

KubeListerWatcher::KubeListerWatcher(kube::Client* client, kube::ResourceRef collection)
    : client_(client), discovery_(nullptr), collection_(std::move(collection)) {}

KubeListerWatcher::KubeListerWatcher(kube::Client* client, kube::Discovery* discovery,
                                     kube::GroupVersionKind gvk, std::string namespace_)
    : client_(client),
      discovery_(discovery),
      gvk_(std::move(gvk)),
      namespace_(std::move(namespace_)) {}

absl::StatusOr<kube::ResourceRef> KubeListerWatcher::Collection() {
  {
    common::MutexLock lock(&mu_);
    if (collection_.has_value()) return *collection_;
  }
  // Without the lock: discovery may go to the server.
  absl::StatusOr<kube::ResourceMapping> mapping = discovery_->MappingFor(gvk_);
  if (!mapping.ok()) return mapping.status();
  kube::ResourceRef ref;
  ref.group = mapping->group;
  ref.version = mapping->version;
  ref.resource = mapping->resource;
  if (mapping->namespaced) ref.namespace_name = namespace_;
  common::MutexLock lock(&mu_);
  collection_ = ref;
  return ref;
}

absl::StatusOr<ListPage> KubeListerWatcher::List(const ListOptions& options) {
  absl::StatusOr<kube::ResourceRef> collection = Collection();
  if (!collection.ok()) return collection.status();
  kube::ListOptions list_options;
  list_options.label_selector = options.label_selector;
  list_options.field_selector = options.field_selector;
  list_options.shard_selector = options.shard_selector;
  list_options.limit = options.limit;
  absl::StatusOr<kube::ObjectList> list =
      client_->ListPage(*collection, list_options, options.continue_token);
  if (!list.ok()) return list.status();
  ListPage page;
  page.items = std::move(list->items);
  page.resource_version = std::move(list->resource_version);
  page.continue_token = std::move(list->continue_token);
  page.shard_applied = list->shard_applied;
  return page;
}

absl::StatusOr<std::unique_ptr<WatchStream>> KubeListerWatcher::Watch(const WatchOptions& options) {
  absl::StatusOr<kube::ResourceRef> collection = Collection();
  if (!collection.ok()) return collection.status();
  kube::WatchOptions watch_options;
  watch_options.resource_version = options.resource_version;
  watch_options.label_selector = options.label_selector;
  watch_options.field_selector = options.field_selector;
  watch_options.shard_selector = options.shard_selector;
  watch_options.timeout_seconds = options.timeout_seconds;
  watch_options.allow_bookmarks = options.allow_bookmarks;
  watch_options.on_established = options.on_established;
  return std::unique_ptr<WatchStream>(
      std::make_unique<KubeWatchStream>(client_, *std::move(collection), std::move(watch_options)));
}

ListerWatcherFactory KubeListerWatcherFactory(kube::Client* client, kube::Discovery* discovery) {
  return
      [client, discovery](const WatchKey& key) -> absl::StatusOr<std::shared_ptr<ListerWatcher>> {
        return std::shared_ptr<ListerWatcher>(std::make_shared<KubeListerWatcher>(
            client, discovery, kube::GroupVersionKind{key.group, key.version, key.kind},
            key.namespace_));
      };
}

}  // namespace ctrlhost::watch
