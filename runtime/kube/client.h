// Dynamic Kubernetes client: CRUD, list, watch and patch on any resource, addressed by
// (group, version, resource, namespace, name), with raw JSON bytes in and out. The host's cache
// parses the bytes itself (simdjson), so nothing here builds a JSON tree of an object: list
// items and watch events are cut out of the response with simdjson On Demand.
//
//   ASSIGN_OR_RETURN(auto rest, kube::RestClient::Create(config));
//   kube::Client client(rest.get());
//   kube::ResourceRef cm{.version = "v1", .resource = "configmaps", .namespace_name = "a"};
//   ASSIGN_OR_RETURN(kube::ObjectList list, client.List(cm));   // follows `continue`
//   kube::WatchOptions w{.resource_version = list.resource_version};
//   absl::Status end = client.Watch(cm, w, [](kube::WatchEvent e) { ...; return true; });
//
// Errors are the API server's (kube::IsNotFound, IsConflict, IsGone...). A watch that receives
// an ERROR event returns it as a status (410 Gone → kube::IsGone: relist); a malformed event
// line ends the watch with kDataLoss (never a crash).
#ifndef CTRLHOST_RUNTIME_KUBE_CLIENT_H_
#define CTRLHOST_RUNTIME_KUBE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/kube/rest_client.h"

namespace ctrlhost::kube {

// What a request addresses. An empty `name` is the collection; an empty `namespace_name` is
// all namespaces (or a cluster-scoped resource); `subresource` is e.g. "status".
struct ResourceRef {
  std::string group;  // "" for the core group
  std::string version;
  std::string resource;  // plural, lower case: "configmaps"
  std::string namespace_name;
  std::string name;
  std::string subresource;
};

// The URL path of `ref` ("/api/v1/namespaces/a/configmaps/x/status").
std::string ResourcePath(const ResourceRef& ref);
// `value` percent-encoded for a query string.
std::string QueryEscape(absl::string_view value);

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 500;                            // page size; 0: no limit (one page)
  std::string resource_version;                   // "" (most recent) or "0" (any)
  absl::Duration timeout = absl::ZeroDuration();  // per page; 0: the transport's default
  // KEP-5866 (kube/shard_selector.h), sent as `shardSelector`; a server without the feature
  // ignores it (then ObjectList::shard_applied is false), an invalid one answers 422.
  std::string shard_selector;
};

struct ObjectList {
  std::vector<std::string> items;  // raw JSON of each item (no kind/apiVersion added)
  std::string resource_version;    // of the list (the first page's, as client-go's pager)
  std::string continue_token;      // set only by ListPage when more pages remain
  // The server echoed a shard selector (metadata.shardInfo, KEP-5866): the items are that
  // shard only. False when none was sent or the server does not support it.
  bool shard_applied = false;
};

struct WatchOptions {
  std::string resource_version;  // start after this; "" = current state as ADDED events first
  std::string label_selector;
  std::string field_selector;
  std::string shard_selector;   // KEP-5866, as ListOptions::shard_selector
  int64_t timeout_seconds = 0;  // server-side end of the watch; 0: server default
  bool allow_bookmarks = true;
  // Streaming list (KEP-3157): the current state as ADDED events, then a BOOKMARK annotated
  // `k8s.io/initial-events-end: "true"`, then changes. Sets resourceVersionMatch=NotOlderThan.
  bool send_initial_events = false;
  // Client-side bound on how long the stream may stay silent (connect and each read).
  absl::Duration idle_timeout = absl::Minutes(10);
  // Called once, on the thread running the watch, when the server answers 2xx (before any
  // event): the watch is established. Never called for a watch that could not connect.
  std::function<void()> on_established;
};

struct WatchEvent {
  std::string type;    // ADDED, MODIFIED, DELETED, BOOKMARK
  std::string object;  // raw JSON of the object
};

enum class PatchType { kJson, kMerge, kStrategicMerge, kApply };

struct PatchOptions {
  std::string field_manager;  // required for kApply
  bool force = false;         // apply: take ownership of conflicting fields
};

struct DeleteOptions {
  std::string propagation_policy;  // "", "Orphan", "Background", "Foreground"
  std::string precondition_uid;
  std::string precondition_resource_version;
  int64_t grace_period_seconds = -1;  // -1: server default
};

// Thread-safe (stateless over a thread-safe RestClient). The RestClient is borrowed and must
// outlive the Client.
class Client {
 public:
  explicit Client(RestClient* rest) : rest_(rest) {}

  absl::StatusOr<std::string> Get(const ResourceRef& ref);
  // One page: `continue_token` continues a previous page.
  absl::StatusOr<ObjectList> ListPage(const ResourceRef& ref, const ListOptions& options,
                                      absl::string_view continue_token = "");
  // Every page, concatenated. When the continue token expires (410) the error is returned:
  // the caller relists.
  absl::StatusOr<ObjectList> List(const ResourceRef& ref, const ListOptions& options = {});

  // Streams events to `on_event` (on the calling thread, in order) until the server ends the
  // watch (OK), `on_event` returns false (OK), `canceller` is cancelled (OK), an ERROR event
  // arrives (its status, e.g. kube::IsGone) or a line is malformed (kDataLoss).
  absl::Status Watch(const ResourceRef& ref, const WatchOptions& options,
                     const std::function<bool(WatchEvent event)>& on_event,
                     StreamCanceller* canceller = nullptr);

  // `object` is raw JSON; `ref.name` empty (the name comes from the body).
  absl::StatusOr<std::string> Create(const ResourceRef& ref, absl::string_view object);
  // PUT; the body's metadata.resourceVersion is the optimistic-concurrency precondition.
  absl::StatusOr<std::string> Update(const ResourceRef& ref, absl::string_view object);
  absl::StatusOr<std::string> Patch(const ResourceRef& ref, PatchType type, absl::string_view patch,
                                    const PatchOptions& options = {});
  // The server's answer: the object (still present with deletionTimestamp, finalizers) or a
  // Status.
  absl::StatusOr<std::string> Delete(const ResourceRef& ref, const DeleteOptions& options = {});

  RestClient* rest() const { return rest_; }

 private:
  RestClient* const rest_;
};

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_CLIENT_H_
