#include "runtime/watch/lister_watcher.h"

namespace ctrlhost::watch {

absl::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
    case EventType::kBookmark:
      return "BOOKMARK";
    case EventType::kError:
      break;
  }
  return "ERROR";
}

}  // namespace ctrlhost::watch
