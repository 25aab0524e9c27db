// The seam between the reflector and the Kubernetes API client: list and watch one resource.
//
// It mirrors what an HTTP client naturally offers for `GET .../resources?limit=&continue=` and
// `GET .../resources?watch=1&resourceVersion=&timeoutSeconds=&allowWatchBookmarks=true`:
// items stay raw JSON bytes (the cache parses them once), and a watch is a stream of decoded
// `{"type":..., "object":...}` lines.
//
//   ListerWatcher* lw = ...;
//   absl::StatusOr<ListPage> page = lw->List({.limit = 500});
//   absl::StatusOr<std::unique_ptr<WatchStream>> stream =
//       lw->Watch({.resource_version = page->resource_version, .timeout_seconds = 300});
//   while (true) {
//     absl::StatusOr<std::optional<WatchEvent>> event = (*stream)->Next();
//     if (!event.ok() || !event->has_value()) break;   // error, or the server ended the watch
//     Handle(**event);
//   }
#ifndef CTRLHOST_RUNTIME_WATCH_LISTER_WATCHER_H_
#define CTRLHOST_RUNTIME_WATCH_LISTER_WATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::watch {

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;           // 0: no pagination
  std::string continue_token;  // from the previous page
  // KEP-5866's `shardSelector` (kube/shard_selector.h); a server may ignore it (see
  // ListPage::shard_applied), so the caller filters the items itself as well.
  std::string shard_selector;
};

struct ListPage {
  std::vector<std::string> items;  // raw JSON objects
  std::string resource_version;    // the list's metadata.resourceVersion
  std::string continue_token;      // empty on the last page
  // The server applied ListOptions::shard_selector (it echoed it as metadata.shardInfo).
  bool shard_applied = false;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // watch for changes after this version
  int64_t timeout_seconds = 0;   // the server ends the watch after this long; 0: server default
  bool allow_bookmarks = true;
  // Called once when the server has accepted the watch (the answer's headers, before any
  // event), from any thread; never for a watch that failed to connect. Watch() returning a
  // stream proves nothing: the connection may be made later, by the stream.
  std::function<void()> on_established;
  std::string shard_selector;  // as ListOptions::shard_selector (no echo: events are not lists)
};

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };

absl::string_view EventTypeName(EventType type);  // "ADDED", ...

struct WatchEvent {
  EventType type = EventType::kAdded;
  // The raw JSON object; for kError a metav1.Status (e.g. code 410 when the version is gone).
  std::string object;
};

// One open watch. Next() is called by one thread; Close() may be called from any thread,
// concurrently with a blocked Next(), and makes it return promptly.
class WatchStream {
 public:
  virtual ~WatchStream() = default;

  // Blocks for the next event. std::nullopt: the stream ended cleanly (the server's
  // timeoutSeconds, or Close()). Errors: kUnavailable for a broken connection, kDataLoss for
  // a line that is not a watch event, kube::GoneError (410) and any other API error.
  virtual absl::StatusOr<std::optional<WatchEvent>> Next() = 0;
  virtual void Close() = 0;
};

// Thread-safe implementations are required: the registry may share one between threads.
class ListerWatcher {
 public:
  virtual ~ListerWatcher() = default;

  // One page. Errors are kube API errors (api_status.h): kube::GoneError when a continue token
  // expired, kube::NotFoundError when the resource does not exist (yet), kUnavailable when the
  // server cannot be reached.
  virtual absl::StatusOr<ListPage> List(const ListOptions& options) = 0;
  // Errors as for List; a too old resourceVersion may be reported either here (410) or as the
  // stream's first kError event, as real API servers do.
  virtual absl::StatusOr<std::unique_ptr<WatchStream>> Watch(const WatchOptions& options) = 0;
};

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_LISTER_WATCHER_H_
