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
#include <optional>

#include "absl/base/thread_annotations.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/client.h"
#include "runtime/kube/discovery.h"
#include "runtime/watch/lister_watcher.h"
#include "runtime/watch/registry.h"

namespace ctrlhost::watch {

// Thread-safe (the client and discovery are; mu_ guards the resolved collection). `client`
// and `discovery` are borrowed and must outlive this object and every stream it returned.
class KubeListerWatcher : public ListerWatcher {
 public:
  // A known collection: group, version, resource and namespace (empty: all); no name.
  KubeListerWatcher(kube::Client* client, kube::ResourceRef collection);
  // A kind, mapped to its resource through discovery on first use. Until the server serves
  // the kind (a CRD not created yet) List answers kNotFound, so the reflector backs off and
  // tries again; discovery reloads on a miss, so the kind is picked up without a restart.
  // `namespace_` is ignored for cluster-scoped kinds.
  KubeListerWatcher(kube::Client* client, kube::Discovery* discovery, kube::GroupVersionKind gvk,
                    std::string namespace_);

  absl::StatusOr<ListPage> List(const ListOptions& options) override;
  // Returns at once; connection errors, 410 and malformed lines come from Next().
  absl::StatusOr<std::unique_ptr<WatchStream>> Watch(const WatchOptions& options) override;

 private:
  absl::StatusOr<kube::ResourceRef> Collection();

  kube::Client* const client_;
  kube::Discovery* const discovery_;  // nullptr for a known collection
  const kube::GroupVersionKind gvk_;
  const std::string namespace_;

  common::Mutex mu_;
  std::optional<kube::ResourceRef> collection_ ABSL_GUARDED_BY(mu_);
};

// The registry factory for a real API server: each WatchKey becomes a KubeListerWatcher of
// its kind (through `discovery`) in its namespace. Both pointers are borrowed and must outlive
// the registry.
ListerWatcherFactory KubeListerWatcherFactory(kube::Client* client, kube::Discovery* discovery);

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_KUBE_LISTER_WATCHER_H_
