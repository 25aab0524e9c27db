// The private state of a Watch, shared by store.cc (which creates it) and watch.cc.
#ifndef CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_WATCH_STATE_H_
#define CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_WATCH_STATE_H_

#include <atomic>
#include <memory>
#include <string>

#include "runtime/apiserver/storage/internal/log_table.h"
#include "runtime/apiserver/storage/internal/watch_hub.h"
#include "runtime/apiserver/storage/store.h"

namespace ctrlhost::apiserver {

struct Watch::State {
  // Constant after construction. The hub and pool are shared with the store so that a Watch
  // may outlive it.
  std::shared_ptr<internal::WatchHub> hub;
  std::shared_ptr<internal::ReadPool> pool;
  internal::LabelExtractor extract_labels;
  std::string prefix;
  // Set by Stop() from any thread, under the hub's lock so that no wakeup is lost.
  std::atomic<bool> stopped{false};
  // The consumer thread's only.
  internal::WatchCursor cursor;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_STORAGE_INTERNAL_WATCH_STATE_H_
