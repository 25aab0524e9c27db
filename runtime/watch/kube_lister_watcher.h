// The ListerWatcher of one collection on a real (or the embedded) API server, over
// runtime/kube's dynamic client.
//
//   kube::Client client(rest.get());
//   auto lw = std::make_shared<watch::KubeListerWatcher>(
//       &client, kube::ResourceRef{.version = "v1", .resource = "configmaps"});
//   watch::Reflector reflector(lw, options);
//
// kube::Client::Watch pushes events to a callback on the calling thread; each WatchStream
// here runs it on its own thread and hands events over through a bounded queue (the reading
// thread blocks while the queue is full, so a slow reflector slows the connection down
// instead of growing memory). Close() cancels the HTTP stream.
#ifndef CTRLHOST_RUNTIME_WATCH_KUBE_LISTER_WATCHER_H_
#define CTRLHOST_RUNTIME_WATCH_KUBE_LISTER_WATCHER_H_

#include <memory>

#include "runtime/kube/client.h"
#include "runtime/watch/lister_watcher.h"

namespace ctrlhost::watch {

// Thread-safe (the client is). `client` is borrowed and must outlive this object and every
// stream it returned.
class KubeListerWatcher : public ListerWatcher {
 public:
  // `collection`: group, version, resource and namespace (empty: all); no name.
  KubeListerWatcher(kube::Client* client, kube::ResourceRef collection);

  absl::StatusOr<ListPage> List(const ListOptions& options) override;
  // Returns at once; connection errors, 410 and malformed lines come from Next().
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(const WatchOptions& options) override;

 private:
  kube::Client* const client_;
  const kube::ResourceRef collection_;
};

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_KUBE_LISTER_WATCHER_H_
