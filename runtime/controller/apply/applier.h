// The applier: turns a controller plugin's ReconcileResponse into validated API writes
// (controller::ResponseApplier, see runtime/controller/reconcile.h and README.md).
//
//   kube::Client client(rest.get());
//   apply::Applier applier(&client);
//   ApplyOutcome outcome = applier.Apply(context, response);   // on a runner worker thread
//   if (outcome.kind == OutcomeKind::kRetry) queue.AddRateLimited(key);
//
// Apply() validates the whole response first (validate.h); an invalid one writes nothing of
// the response and is recorded as a Warning event "InvalidResponse" plus the condition
// Reconciled=False (reason "InvalidResponse") on the primary, outcome kTerminal. A valid one is
// written in the protocol's order: desired objects (server-side apply, field manager
// controller.field_manager, force, controller owner reference to the primary), patches, one
// status write (status merge patch + conditions merged by type + the host's Reconciled
// condition), pruning of absent children (delete_absent, only without error), events, finalizer
// release. The first failing write stops the rest; see README.md for the outcome of each error.
// Writes that would change nothing are skipped (no-op applies and status writes, judged
// against the cache: noop.h), and no write touches an object this primary does not control.
//
// Thread-safe: the memory of applied configurations is guarded by applied_mu_; the event
// recorder has its own mutex.
// Calls block on the API server; run them on worker threads, never on gRPC threads.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_APPLIER_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_APPLIER_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/apply/event_recorder.h"
#include "runtime/controller/reconcile.h"
#include "runtime/kube/client.h"

namespace ctrlhost::controller::apply {

// The condition the host owns on every primary whose kind serves a status subresource.
inline constexpr char kReconciledCondition[] = "Reconciled";
// Reasons of Reconciled=False and of the host's own Warning events.
inline constexpr char kReasonInvalidResponse[] = "InvalidResponse";  // refused response
inline constexpr char kReasonTerminalError[] = "TerminalError";      // error kind TERMINAL
inline constexpr char kReasonWriteRejected[] = "WriteRejected";      // server said 400/422
inline constexpr char kReasonReconcileError[] = "ReconcileError";    // event for any error
inline constexpr char kReasonSucceeded[] = "Succeeded";              // Reconciled=True again
inline constexpr char kReasonNotControlled[] = "NotControlled";      // object controlled elsewhere
inline constexpr char kReasonForbidden[] = "Forbidden";              // server said 401/403
inline constexpr char kReasonWriteFailed[] = "WriteFailed";  // server said 5xx (not 503/504)

struct ApplierOptions {
  common::Clock* clock = common::Clock::Real();  // borrowed; condition and event times
  std::string component = "ctrlhost";            // events' source.component
  absl::Duration event_aggregation_window = absl::Minutes(10);
  // How many applied configurations the applier remembers (to skip no-op applies); past it
  // the memory is cleared, which costs one apply per child once.
  size_t max_remembered_applies = 1 << 20;
};

// Thread-safe (see the file comment).
class Applier : public ResponseApplier {
 public:
  // `client` is borrowed and must outlive the applier.
  explicit Applier(kube::Client* client, ApplierOptions options = {});
  Applier(const Applier&) = delete;
  Applier& operator=(const Applier&) = delete;

  ApplyOutcome Apply(const ReconcileContext& context,
                     const pluginpb::ReconcileResponse& response) override;
  // Adds the finalizer with a JSON Patch `test` of the live finalizers + `add` (re-read and
  // retried on a concurrent change, at most 3 times, then kAborted). No-op when the controller
  // has none, the primary has it, or the primary is being deleted. NotFound when it is gone.
  // Tries first with the cached primary's finalizers (no GET on the common path). Returns the
  // patched primary, or null when nothing was written.
  absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(const ReconcileContext& context) override;
  // A Warning event "ReconcileError" and Reconciled=False (reason "TerminalError").
  void RecordTerminal(const ReconcileContext& context, const absl::Status& status) override;

  EventRecorder& events() { return recorder_; }

 private:
  struct Run;
  // Whether `hash` is the configuration last applied by `key`'s field manager to the object
  // with `uid`, and records a new one.
  bool AppliedBefore(const std::string& key, absl::string_view uid, size_t hash);
  void RememberApplied(const std::string& key, std::string uid, size_t hash);

  // Constant after construction.
  kube::Client* const client_;
  const ApplierOptions options_;
  EventRecorder recorder_;  // has its own mutex
  // Log lines for writes the API server refused (403, persistent 5xx): at most a few a second
  // across every controller, whatever a misconfigured RBAC or a plugin's answers cause.
  common::LogLimiter refused_log_{{.per_second = 2, .burst = 20, .clock = options_.clock}};

  // The last configuration applied to each object, keyed by field manager, group, kind,
  // namespace and name: an apply whose configuration is unchanged and whose fields the
  // cached object already holds is skipped. (Fields an apply stops sending are removed by the
  // server, so a covered but different configuration is not a no-op.)
  struct Applied {
    std::string uid;
    size_t hash = 0;
  };
  common::Mutex applied_mu_;
  absl::flat_hash_map<std::string, Applied> applied_ ABSL_GUARDED_BY(applied_mu_);
};

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_APPLIER_H_
