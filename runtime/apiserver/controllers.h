// The API server's built-in controllers, run on one background thread fed by a store watch of
// every key:
//   - CRDs: serve the resources of every stored CRD (at start and on change); when a CRD is
//     being deleted, delete its custom resources, then release its cleanup finalizer and stop
//     serving the resource.
//   - Namespaces: when a namespace is being deleted, delete everything in it, then clear
//     spec.finalizers so the namespace goes.
//   - Garbage collection by ownerReferences: dependents whose owners are all gone are deleted
//     (background propagation); the `orphan` finalizer removes the owner references from the
//     dependents first; `foregroundDeletion` deletes the dependents and releases the owner when
//     none is left. At start, dependents of owners that vanished while the server was down are
//     collected too.
//
// Thread-safe: Start/Stop from the owner; SyncCrd from any thread.
#ifndef CTRLHOST_RUNTIME_APISERVER_CONTROLLERS_H_
#define CTRLHOST_RUNTIME_APISERVER_CONTROLLERS_H_

#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/resource_registry.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver {

class Controllers {
 public:
  // Borrowed pointers must outlive this object. `clock` must be the store's clock (the
  // controller thread's waits on the store watch are deadlines on it).
  Controllers(Store* store, ResourceRegistry* registry, ApiHandlers* handlers,
              common::Clock* clock);
  ~Controllers();
  Controllers(const Controllers&) = delete;
  Controllers& operator=(const Controllers&) = delete;

  // Registers the stored CRDs, builds the ownership index and starts the thread.
  absl::Status Start();
  void Stop();

  // Serves (or updates) the resources of `crd` now; called by the handlers after a CRD write
  // so that the resource is usable as soon as the write returns.
  void SyncCrd(const nlohmann::json& crd);

 private:
  void Run();
  void Handle(const WatchEvent& e);
  void Index(const StoredObject* previous, const StoredObject* object);
  void CollectDependents(const std::string& owner_uid);
  void ProcessDeleting(const std::string& key);
  void ProcessNamespace(const std::string& name);
  void ProcessCrd(const std::string& key);
  // Stops serving group/plural if the CRD at `key` is no longer stored.
  void ForgetCrdIfGone(const std::string& key, const std::string& group, const std::string& plural);

  Store* const store_;
  ResourceRegistry* const registry_;
  ApiHandlers* const handlers_;
  common::Clock* const clock_;
  std::unique_ptr<Watch> watch_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  // Serializes registry changes for CRDs (SyncCrd from handler threads, removal on the
  // controller thread) with the store check each makes, so that a late SyncCrd can never
  // re-register the resource of a CRD that was just deleted.
  common::Mutex crd_mu_;

  // State below is touched only by the controller thread (and Start before it runs).
  absl::flat_hash_map<std::string, std::string> uid_to_key_;
  // owner uid -> dependent keys.
  absl::flat_hash_map<std::string, std::set<std::string>> dependents_;
  // key -> owner uids (to undo the index on change).
  absl::flat_hash_map<std::string, std::vector<std::string>> owners_of_;
};

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_CONTROLLERS_H_
