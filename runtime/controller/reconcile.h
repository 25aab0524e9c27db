// The seams between the controller runner, the plugin session and the applier.
//
// The runner (runtime/controller) turns queued keys into `pluginpb::ReconcileCall`s, hands them to
// a `Dispatcher` (implemented by a plugin session, runtime/plugin), and gives each response to a
// `ResponseApplier` (implemented by runtime/controller/apply), whose `ApplyOutcome` tells the
// runner what to do with the key next. Keeping these as interfaces lets each piece be tested
// alone (the runner with a fake dispatcher, the applier against the embedded API server) and
// lets the plugin behind a controller change at run time (hot swap) without the runner noticing.
//
// Example (the runner's worker loop, simplified):
//   dispatcher->Dispatch(std::move(call), deadline, [&](DispatchResult r) {
//     ...signal the worker...
//   });
//   context.capabilities = r.capabilities;
//   ApplyOutcome outcome =
//       r.response.ok() ? applier->Apply(context, *r.response) : RetryOutcome(r.response.status());
#ifndef CTRLHOST_RUNTIME_CONTROLLER_RECONCILE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_RECONCILE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/cache/store.h"
#include "runtime/kube/discovery.h"

namespace ctrlhost::controller {

// A kind a controller owns, resolved to its resource.
struct OwnedResource {
  kube::ResourceMapping mapping;
  bool delete_absent = false;  // children of this kind missing from `desired` are deleted
};

// What a controller is and may touch: the plugin's `ControllerSpec` merged with the operator
// file's overrides, kinds resolved through discovery. Immutable once built; shared read-only by
// the runner's workers and the applier.
struct ControllerInfo {
  std::string operator_name;  // the Operator document it comes from ("" in tests)
  std::string plugin;         // plugin name in the operator
  std::string name;           // controller name, unique within the host
  kube::ResourceMapping primary;
  std::vector<OwnedResource> owns;
  std::string finalizer;      // "" when the controller declares none
  std::string field_manager;  // server-side apply manager: "ctrlhost-<name>"
  absl::Duration request_timeout = absl::Seconds(30);  // per reconcile request
  // The operator file's status.conditions: host: the applier writes the standard status
  // conditions (apply/host_status.h) on the primary after each reconcile.
  bool host_status = false;
};

// The capabilities in effect on one plugin connection (plugin.proto's Capability: those both
// sides listed in the handshake).
using Capabilities = std::vector<pluginpb::Capability>;

// One reconcile of one key, as the applier needs to know it.
struct ReconcileContext {
  const ControllerInfo* controller = nullptr;  // borrowed, outlives the call
  std::string namespace_;                      // "" for cluster-scoped primaries
  std::string name;
  cache::ObjectPtr primary;  // the cached primary the request carried; null when it is gone
  // The host's caches of the controller's owned kinds, parallel to `controller->owns`
  // (borrowed, outlive the call). The applier reads the current children there to skip
  // applies that would change nothing and to refuse writes to objects this primary does not
  // control. Empty (e.g. in tests): the applier reads the objects it needs from the server and
  // never skips an apply.
  std::vector<const cache::Store*> owned_stores;
  uint32_t attempt = 0;  // 0 for the first try, then the key's number of retries
  std::string trace_id;
  // The capabilities in effect on the plugin connection that carried the response
  // (DispatchResult::capabilities): the applier refuses a response that uses a feature outside
  // them. nullopt: an answer the host made itself (or a test's), which is not checked.
  std::optional<Capabilities> capabilities;
};

// What the runner does with the key after a reconcile.
enum class OutcomeKind {
  kDone,          // success: forget the key's backoff
  kRequeueAfter,  // success, run again after `requeue_after` (backoff forgotten)
  kRetry,         // retryable failure: requeue with per-key backoff
  kRequeueNow,    // conflict (409): requeue at once, without backoff, to read fresh state
  kTerminal,      // terminal failure: no retry until the object changes
};

// An existing object that a response wanted to apply and may not (NotControlled): the key is
// reconciled again when it is deleted (its owned kind's delete event).
struct BlockingObject {
  int owned_index = -1;  // into ControllerInfo::owns (and the runner's owned stores)
  std::string namespace_;
  std::string name;
};

struct ApplyOutcome {
  OutcomeKind kind = OutcomeKind::kDone;
  absl::Duration requeue_after = absl::ZeroDuration();  // for kRequeueAfter
  // For kRetry: the plugin's Error.retry_after, the least wait before the retry (the runner
  // waits at least this long, capped at the queue's maximum backoff). Zero: the backoff alone.
  absl::Duration retry_after = absl::ZeroDuration();
  absl::Status status;  // why, for kRetry/kRequeueNow/kTerminal
  // The machine-readable reason of a failure, as the Warning event and Reconciled=False carry
  // it (NotControlled, InvalidResponse, WriteRejected, Forbidden, the plugin's error reason,
  // TerminalError, ReconcileError); "" when none applies.
  std::string reason;
  // For a NotControlled refusal: the objects in the way.
  std::vector<BlockingObject> blocked_by;
  bool finalizer_released = false;  // the controller's finalizer was removed
  uint32_t writes = 0;              // API writes made (for metrics and logs)
  uint32_t skipped = 0;  // applies and status writes left out because they would change nothing
};

// What a Dispatcher answers for one call: the plugin's response, or an error status:
// UNAVAILABLE (no ready plugin instance, or its stream broke with the request in flight),
// DEADLINE_EXCEEDED (no answer by the deadline), RESOURCE_EXHAUSTED (in-flight cap reached),
// INVALID_ARGUMENT (malformed response). Every error is retryable from the runner's point of
// view.
//
// Capabilities belong to a connection (docs/protocol.md section 2), and the instance that
// answers a key can change between two calls (a swap, a canary, a route, a crash restart), so
// the session that received a response says which capabilities were in effect on its
// connection; dispatchers in between pass the result on unchanged.
//
// Implicitly constructible from a response or an error status (like absl::StatusOr), so that a
// dispatcher can answer `done(response)` or `done(absl::UnavailableError(...))`.
struct DispatchResult {
  DispatchResult(pluginpb::ReconcileResponse r) : response(std::move(r)) {}
  DispatchResult(absl::Status error) : response(std::move(error)) {}  // `error` is not OK
  DispatchResult(absl::StatusOr<pluginpb::ReconcileResponse> r,
                 std::optional<Capabilities> c = std::nullopt)
      : response(std::move(r)), capabilities(std::move(c)) {}

  absl::StatusOr<pluginpb::ReconcileResponse> response;
  // The capabilities in effect on the plugin connection that carried `response` (set by
  // plugin::Session). nullopt for an answer the host made itself (e.g. RouteDispatcher's
  // AmbiguousRoute answer) or a test's fake: the applier does not check those against
  // capabilities.
  std::optional<Capabilities> capabilities;
};

// Receives a Dispatcher's answer (see DispatchResult).
using ReconcileCallback = std::function<void(DispatchResult)>;

// Sends reconcile calls to whatever serves a controller now. Thread-safe. `done` is called
// exactly once per Dispatch, from any thread (possibly inline, before Dispatch returns, for
// immediate errors); it must not block.
class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  // `call.controller` names the controller; the dispatcher assigns request ids.
  virtual void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                        ReconcileCallback done) = 0;
};

// Receives every reconcile a runner made (RunnerOptions::recorder): the call as it was sent,
// the dispatcher's answer, what the applier did with it and how long the whole reconcile took.
// record::Recorder (record/recorder.h) writes them to files for `ctrlhost replay`. Thread-safe:
// called on the runner's worker threads; must not block on I/O.
//
// The dispatch moves the call to the plugin, so the runner first asks the recorder to Capture
// what it will keep of it (record::Recorder: the call already serialized into the record's
// frame, which costs less than a copy), then hands that and the answer (moved in) to Record.
class ReconcileRecorder {
 public:
  virtual ~ReconcileRecorder() = default;
  // Called just before the dispatch; the result, opaque to the caller, goes to Record.
  virtual std::string Capture(const pluginpb::ReconcileCall& call) = 0;
  virtual void Record(std::string captured_call, DispatchResult answer, const ApplyOutcome& outcome,
                      absl::Duration took) = 0;
};

// Turns a plugin's response into API writes. Thread-safe; calls block on the API server (they
// run on the runner's worker threads, never on gRPC threads).
class ResponseApplier {
 public:
  virtual ~ResponseApplier() = default;
  // Validates the whole response against what `context.controller` may touch, then writes it.
  // Never throws, never crashes on malformed input (that is a kTerminal outcome).
  virtual ApplyOutcome Apply(const ReconcileContext& context,
                             const pluginpb::ReconcileResponse& response) = 0;
  // Adds the controller's finalizer to the live primary when it has none yet (the runner calls
  // it before the first reconcile of an object that is not being deleted). Returns the primary
  // as the server answered the write (parsed like a cached object), so that the request and
  // the status write that follow carry its new resourceVersion instead of the cached one that
  // predates the finalizer (that would make every first status write a 409 Conflict);
  // null when nothing was written (no finalizer declared, already present, being deleted).
  // NotFound when the primary is gone.
  virtual absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(const ReconcileContext& context) = 0;
  // Records a terminal failure the runner detected itself (e.g. the plugin's answers keep
  // being malformed) as a Warning event and a condition on the primary. Best effort.
  virtual void RecordTerminal(const ReconcileContext& context, const absl::Status& status) = 0;
};

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_RECONCILE_H_
