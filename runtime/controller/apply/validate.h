// Validation of a plugin's ReconcileResponse against what its controller may touch, producing
// the write plan the applier executes. Pure: no I/O, no clock, so every rule is unit-tested.
//
//   absl::StatusOr<apply::Plan> plan = apply::ValidateResponse(context, response);
//   if (!plan.ok()) { /* kInvalidArgument naming the item: record "InvalidResponse" */ }
//
// Rules (the whole response is checked before anything is written; the first violation is
// reported, e.g. "desired_objects[2]: kind apps/v1 StatefulSet is not owned by controller web"):
// - desired_objects: a JSON object with apiVersion, kind and metadata.name; the kind is the
//   primary's (then the name and namespace must be the primary's) or one of `owns` (matched by
//   group and kind; any version of that kind is addressed through the owned resource). A
//   namespaced owned object lives in the primary's namespace (filled in when omitted); for a
//   Namespace primary, in the namespace it names; for another cluster-scoped primary it must
//   name its namespace. A cluster-scoped owned kind must name none. No duplicates, and no
//   controller ownerReference to an object other than the primary. Versions ([a-z0-9]+), names
//   (valid path segments: no '/', '%', "." or "..") and namespaces (DNS labels) are checked
//   because they go into request paths; each kind's own naming rule is the server's.
// - patches: target and type set; PRIMARY / PRIMARY_STATUS name nothing or the primary;
//   OWNED names an owned kind and a name and must not touch metadata.ownerReferences (nor
//   replace metadata or the whole object): ownership is the host's to set; a JSON Patch is an
//   array of well-formed RFC 6902 operations, a merge patch an object. (That an OWNED target
//   is controlled by this primary needs the current object: the applier checks it.)
// - status, conditions and PRIMARY_STATUS patches only for a primary kind with a status
//   subresource ("status: kind v1 ConfigMap has no status subresource, so it has no status to
//   write; record the outcome with an event instead").
// - status: a JSON object. conditions: type (<= 316 chars), status set, reason matching
//   ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (<= 1024), message <= 32768; no type twice.
// - events: type set, reason non-empty (<= 128). requeue_after: a valid, non-negative
//   Duration. error: kind set when present; reason empty or CamelCase as a condition reason
//   (<= 128, as it is also an event reason); retry_after only on a retryable error, a valid,
//   non-negative Duration.
// - finalized: only when the primary is being deleted with the controller's finalizer on it,
//   and with no error.
// - a gone primary (context.primary null) allows only events, error and requeue_after.
// - sizes (kMaxWriteBytes, kMaxResponseWriteBytes below), checked first, on the raw text. The
//   plan keeps event messages and the error message up to 32 KiB (a longer error message is
//   cut and says how long it was).
// - capabilities (checked next, when context.capabilities is set: the set in effect on the
//   plugin connection that carried the response): desired_objects needs
//   CAPABILITY_SERVER_SIDE_APPLY, conditions CAPABILITY_CONDITIONS, task_enqueue / task_status
//   CAPABILITY_BACKGROUND_TASKS, e.g. "conditions: requires CAPABILITY_CONDITIONS, which is not
//   in effect on this plugin connection". task_enqueue / task_status are refused in any answer
//   to a request even with it (they travel alone, with request_id 0).
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_VALIDATE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_VALIDATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/reconcile.h"
#include "runtime/kube/client.h"

namespace ctrlhost::controller::apply {

// Size limits on what one response may ask the host to write (docs/protocol.md section 9),
// checked on the raw text before anything in the response is parsed:
// - each desired object, each patch, and the status write (`status` plus the `conditions`):
//   at most kMaxWriteBytes, the request body kube-apiserver accepts (3 MiB; the embedded server
//   has the same limit): a larger write could only be refused by the server;
// - all of them together, with the events: at most kMaxResponseWriteBytes. This bounds what
//   validating and applying one answer costs the host: parsed JSON takes several times its text
//   (up to ~10x for objects of many small fields).
inline constexpr size_t kMaxWriteBytes = 3u << 20;
inline constexpr size_t kMaxResponseWriteBytes = 16u << 20;

// One server-side apply of a desired object. `object` already carries the controller owner
// reference (unless it is the primary) and its namespace.
struct PlannedApply {
  kube::ResourceRef ref;
  nlohmann::json object;
  bool is_primary = false;
  std::string group;  // of the kind, to match children when pruning
  std::string kind;
  int owned_index = -1;  // into controller->owns (and context.owned_stores); -1 for the primary
};

// One patch, with the resourceVersion precondition folded into `body`.
struct PlannedPatch {
  kube::ResourceRef ref;
  kube::PatchType type = kube::PatchType::kMerge;
  std::string body;
  bool targets_primary = false;  // PRIMARY or PRIMARY_STATUS
  bool has_test_op = false;      // a failing JSON Patch `test` is a conflict, not invalid
  std::string what;              // "patches[1]" for messages
  int owned_index = -1;          // OWNED: into controller->owns (and context.owned_stores)
  nlohmann::json parsed;  // `body` parsed, for an OWNED JSON Patch only (the applier pins its
                          // target by uid); null otherwise
};

// A validated response, ready to write. Borrow-free: it owns copies of everything it needs.
struct Plan {
  std::vector<PlannedApply> applies;
  std::vector<PlannedPatch> patches;
  std::optional<nlohmann::json> status;  // merge patch relative to .status
  std::vector<pluginpb::Condition> conditions;
  std::vector<pluginpb::Event> events;
  std::optional<absl::Duration> requeue_after;
  bool has_error = false;
  pluginpb::ErrorKind error_kind = pluginpb::ERROR_KIND_UNSPECIFIED;
  std::string error_message;
  std::string error_reason;                         // "" when the plugin gave none
  std::optional<absl::Duration> error_retry_after;  // retryable errors only
  bool finalized = false;
};

// The apiVersion of `mapping` ("v1", "apps/v1").
std::string ApiVersionOf(const kube::ResourceMapping& mapping);

// The namespace namespaced children of the primary live in: the primary's namespace, or for a
// Namespace primary its own name; "" for other cluster-scoped primaries (children must name one).
std::string ChildNamespace(const ReconcileContext& context);

// The message of the NotControlled refusal of desired_objects[`index`] (`apply`), whose target
// exists with `controller_uid` as its controller ("" when it has none): the applier's, and
// `ctrlhost test --check`'s for a fixture the primary does not control. E.g.
// "desired_objects[0]: ConfigMap configmaps team/web exists and has no controller; WebApp
// team/web does not adopt it (the protocol has no adoption): delete it (WebApp team/web is
// reconciled again when it is gone) or rename the child".
std::string NotControlledMessage(const ReconcileContext& context, size_t index,
                                 const PlannedApply& apply, absl::string_view controller_uid);

// kInvalidArgument with a message naming the offending item; the Plan otherwise.
// `context.controller` must be set.
absl::StatusOr<Plan> ValidateResponse(const ReconcileContext& context,
                                      const pluginpb::ReconcileResponse& response);

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_VALIDATE_H_
