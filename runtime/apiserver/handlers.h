// The request handlers of the embedded Kubernetes-compatible API server: discovery and the
// verbs get, list, watch, create, update, patch, delete and deletecollection on every
// registered resource, with Kubernetes semantics (resourceVersion concurrency, generation,
// finalizers and deletionTimestamp, status subresource, label/field selectors, pagination,
// watch with bookmarks). Transport-independent: server.cc adapts HTTP to ApiRequest/ApiResponse,
// and tests can call Handle() directly.
//
// Every write goes through Store::Write. The request thread computes the new object from a
// snapshot of the stored one; the store's writer installs it only if the object is still at the
// snapshot's revision, and otherwise recomputes it against the latest committed state on the
// writer thread. Either way the decision ("does it exist? is the resourceVersion current? what
// does the patch produce?") holds for the state the write commits on: no lost updates.
//
// Thread-safe: Handle() is called concurrently from the HTTP threads. Borrowed pointers (store,
// registry, clock) must outlive the handlers.
#ifndef CTRLHOST_RUNTIME_APISERVER_HANDLERS_H_
#define CTRLHOST_RUNTIME_APISERVER_HANDLERS_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/request_info.h"
#include "runtime/apiserver/resource_registry.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::apiserver {

struct ApiRequest {
  std::string method;
  std::string path;
  // The first value of each query parameter.
  absl::flat_hash_map<std::string, std::string> query;
  std::string content_type;
  std::string accept;
  std::string user_agent;
  std::string body;
};

struct ApiResponse {
  int code = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra response headers (ETag, Cache-Control, Location, Vary).
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for watches: called repeatedly once the headers are sent; writes chunks through
  // `write` (which returns false when the client is gone) and returns false when the stream
  // is over.
  std::function<bool(const std::function<bool(absl::string_view)>& write)> stream;
  // Set for watches besides `stream`: the same stream for an event loop
  // (serving::StreamProducer). `produce` appends what is ready now without ever blocking and
  // returns false when the stream is over; `next_call` is when it must be called again if
  // nothing wakes it (a bookmark, the watch's end). Use either these or `stream`, not both.
  std::function<bool(std::string* out)> produce;
  std::function<absl::Time()> next_call;
};

struct HandlerOptions {
  std::string server_version = "v1.32.0";
  // Longest a watch runs when the client gives no timeoutSeconds (kube: 30-60 min, random).
  absl::Duration max_watch_timeout = absl::Minutes(30);
  // How often an idle watch with allowWatchBookmarks=true gets a BOOKMARK.
  absl::Duration bookmark_interval = absl::Seconds(10);
  // KEP-5866's shardSelector (the ShardedListAndWatch gate); false: ignored, as before 1.36.
  bool shard_selectors = true;
};

// Options of a deletion (metav1.DeleteOptions), from the body or the query string.
struct DeleteOptions {
  std::string propagation_policy;  // "", Orphan, Background, Foreground
  std::string precondition_uid;
  std::string precondition_resource_version;
  bool dry_run = false;
  // The body said orphanDependents: false (deprecated); only changes the answer's code.
  bool orphan_dependents_false = false;
};

struct ObjectFilter;

class ApiHandlers {
 public:
  ApiHandlers(Store* store, ResourceRegistry* registry, common::Clock* clock,
              HandlerOptions options);
  ApiHandlers(const ApiHandlers&) = delete;
  ApiHandlers& operator=(const ApiHandlers&) = delete;

  // Called after a CRD is written so its resource is served before the response returns.
  void SetCrdHook(std::function<void(const nlohmann::json& crd)> hook) {
    crd_hook_ = std::move(hook);
  }

  ApiResponse Handle(const ApiRequest& request);

  // Ends every running watch (server shutdown): each stream is woken and finishes with its last
  // chunk, so clients see the watch end (client-go re-watches) rather than a broken stream.
  // No new watch starts afterwards.
  void StopWatches();
  // Waits until every watch stream has finished (its response written), at most `timeout`.
  // True when none is left.
  bool WaitWatchesDone(absl::Duration timeout);

  // The open watches, so that StopWatches can wake them. Thread-safe.
  class WatchSet {
   public:
    // False after StopAll: the caller must not start the watch.
    bool Add(apiserver::Watch* watch);
    void Remove(apiserver::Watch* watch);
    void StopAll();
    bool WaitEmpty(absl::Duration timeout);

   private:
    common::Mutex mu_;
    common::CondVar cv_;
    absl::flat_hash_set<apiserver::Watch*> watches_ ABSL_GUARDED_BY(mu_);
    bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  };

  // Internal operations for the built-in controllers (garbage collector, namespace and CRD
  // controllers), with the same semantics as the HTTP verbs.
  absl::StatusOr<ObjectPtr> DeleteObject(const ResourceInfo& r, absl::string_view ns,
                                         absl::string_view name, const DeleteOptions& options);
  // Applies `change` to the stored form of an existing object; `change` returns false for "no
  // change". Same server-side rules as an update (generation, finalizer-driven removal).
  absl::StatusOr<ObjectPtr> UpdateStored(
      const ResourceInfo& r, absl::string_view ns, absl::string_view name,
      std::function<absl::StatusOr<bool>(nlohmann::json& stored)> change);

  // The served-version entry whose storage is `key`'s; null for unknown keys.
  ResourcePtr ResourceForKey(absl::string_view key, std::string* ns, std::string* name) const;

 private:
  struct Target;  // a resolved resource request

  absl::StatusOr<ApiResponse> Dispatch(const ApiRequest& req);
  absl::StatusOr<ApiResponse> Discovery(const RequestInfo& info, const ApiRequest& req);
  absl::StatusOr<Target> Resolve(const RequestInfo& info) const;
  absl::StatusOr<ObjectFilter> MakeFilter(const Target& t, const ApiRequest& req) const;

  absl::StatusOr<ApiResponse> Get(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> List(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> Watch(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> Create(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> Update(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> Patch(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> Delete(const Target& t, const ApiRequest& req);
  absl::StatusOr<ApiResponse> DeleteCollection(const Target& t, const ApiRequest& req);
  // The scale subresource of a custom resource (autoscaling/v1 Scale; handlers_scale.cc).
  absl::StatusOr<ApiResponse> Scale(const Target& t, const ApiRequest& req,
                                    const std::string& verb);

  // Applies the server-owned rules of an update of `old` into `updated` (both stored form):
  // immutable fields kept, generation bumped on spec changes, removal when the last finalizer
  // of an object being deleted goes. Returns the store mutation.
  absl::StatusOr<Mutation> FinishUpdate(const ResourceInfo& r, const nlohmann::json& old,
                                        nlohmann::json updated, int64_t revision,
                                        absl::string_view subresource) const;
  // Namespace checks for creating `r` objects in `ns`.
  absl::Status CheckNamespaceWritable(const ResourceInfo& r, absl::string_view ns) const;

  ApiResponse ObjectResponse(int code, const ResourceInfo& r, const StoredObject& stored) const;

  Store* const store_;
  ResourceRegistry* const registry_;
  common::Clock* const clock_;
  const HandlerOptions options_;
  std::function<void(const nlohmann::json&)> crd_hook_;
  std::atomic<bool> stopping_{false};
  WatchSet watches_;
};

// Serializes `j` compactly (invalid UTF-8 replaced rather than throwing).
std::string Dump(const nlohmann::json& j);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_HANDLERS_H_
