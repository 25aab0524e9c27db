// Request: one reconcile as a plugin's reconcile function sees it.
//
// The host sends a `ReconcileCall` (raw JSON bytes for the primary, its children and related
// objects). The SDK parses every object once, up front, into nlohmann::json and hands the
// reconcile function a `const Request&` with typed accessors, so plugin code never touches the
// protocol messages:
//
//   sdk::Result Reconcile(const sdk::Request& req) {
//     if (!req.exists()) return sdk::Result();           // gone: nothing to do
//     int replicas = req.spec().value("replicas", 1);
//     const nlohmann::json* dep = req.Child("Deployment", req.name());
//     ...
//   }
//
// Level-based: compute the answer from the object, its children and related objects; `reason()`
// is only a hint (docs/protocol.md section 3).
//
// Thread-safety: a Request is immutable after construction and may be read from any thread.
// `cancelled()` reads a flag the SDK sets when the host sends a CancelNotice; it is atomic.
#ifndef CTRLHOST_SDK_CPP_REQUEST_H_
#define CTRLHOST_SDK_CPP_REQUEST_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::sdk {

// One object of a request (a child or a related object), parsed.
struct Object {
  std::string api_version;  // "apps/v1", "v1"
  std::string kind;         // "Deployment"
  nlohmann::json json;      // the whole object

  std::string name() const;
  std::string namespace_() const;
};

class Request {
 public:
  // Parses a call from the host. Fails with InvalidArgument when the primary or any child or
  // related object is not a JSON object (the SDK then answers with a retryable error).
  // `cancelled` (may be null) is the flag the serving loop sets on a CancelNotice.
  static absl::StatusOr<Request> FromCall(const pluginpb::ReconcileCall& call,
                                          std::shared_ptr<const std::atomic<bool>> cancelled = {});

  // The key and the call's metadata.
  const std::string& controller() const { return call_.controller(); }
  const std::string& namespace_() const { return call_.namespace_(); }
  const std::string& name() const { return call_.name(); }
  const std::string& uid() const { return call_.uid(); }
  pluginpb::Reason reason() const { return call_.reason(); }
  absl::string_view reason_name() const;  // "PrimaryChanged", ... ; "Unspecified" if unknown
  uint32_t attempt() const { return call_.attempt(); }
  const std::string& trace_id() const { return call_.trace_id(); }
  // absl::InfiniteFuture() when the host set none.
  absl::Time deadline() const;
  const pluginpb::ReconcileCall& call() const { return call_; }

  // False when the primary is gone (empty object): answer only with events, error or requeue.
  bool exists() const { return object_.is_object(); }
  // True when deletion was requested and this controller's finalizer is still on the object:
  // clean up, then answer Result::Finalized().
  bool finalizing() const { return call_.finalizing(); }
  // True when metadata.deletionTimestamp is set (with or without our finalizer).
  bool deleting() const;

  // The primary (null JSON when gone) and parts of it. Missing parts read as empty objects /
  // zero, never throw.
  const nlohmann::json& object() const { return object_; }
  const nlohmann::json& metadata() const;
  const nlohmann::json& spec() const;
  const nlohmann::json& status() const;
  std::string api_version() const;
  std::string kind() const;
  int64_t generation() const;
  std::string resource_version() const;
  std::map<std::string, std::string> labels() const;
  std::map<std::string, std::string> annotations() const;
  std::optional<std::string> label(absl::string_view key) const;
  std::optional<std::string> annotation(absl::string_view key) const;

  // Owned children (RequestContents.children) and related objects (watches with
  // include_in_requests). `kind` matches Object::kind; an empty `api_version` matches any.
  const std::vector<Object>& children() const { return children_; }
  const std::vector<Object>& related() const { return related_; }
  std::vector<const Object*> ChildrenOfKind(absl::string_view kind,
                                            absl::string_view api_version = "") const;
  std::vector<const Object*> RelatedOfKind(absl::string_view kind,
                                           absl::string_view api_version = "") const;
  // The child of this kind and name (in any namespace it came in), or nullptr.
  const nlohmann::json* Child(absl::string_view kind, absl::string_view name) const;
  const nlohmann::json* Related(absl::string_view kind, absl::string_view name,
                                absl::string_view ns = "") const;

  // True once the host cancelled this request (deadline passed, host draining). Long reconciles
  // may poll it and give up early; the answer is discarded either way.
  bool cancelled() const { return cancelled_ != nullptr && cancelled_->load(); }

 private:
  Request() = default;

  pluginpb::ReconcileCall call_;  // with the object bytes cleared (parsed below)
  nlohmann::json object_;
  std::vector<Object> children_;
  std::vector<Object> related_;
  std::shared_ptr<const std::atomic<bool>> cancelled_;
};

// A JSON value at `path` (dot-separated keys) inside `obj`, or nullptr. Never throws.
const nlohmann::json* FindPath(const nlohmann::json& obj, absl::string_view path);

// metadata.labels (or any string map) as a std::map; non-string values are skipped.
std::map<std::string, std::string> StringMap(const nlohmann::json& obj);

// Parses a JSON object from bytes without throwing; InvalidArgument with the parser's message.
absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view bytes, absl::string_view what);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_REQUEST_H_
