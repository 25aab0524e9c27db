// Result: what a reconcile function answers, built with small helpers and turned into a
// protocol `ReconcileResponse` by the SDK.
//
//   sdk::Result r;
//   nlohmann::json& dep = r.Desire(sdk::NewObject("apps/v1", "Deployment"));  // name, namespace
//   dep["spec"]["replicas"] = 3;                                              // and labels default
//   r.Status()["readyReplicas"] = 2;                                          // to the primary's
//   r.SetCondition("Ready", sdk::ConditionStatus::kFalse, "Progressing", "2/3 ready");
//   r.Event(sdk::EventType::kNormal, "Scaled", "scaled to 3");
//   r.SetRequeueAfter(absl::Seconds(30));
//   return r;
//
//   return sdk::Result::RetryableError("database not reachable");  // backoff, then retry
//   return sdk::Result::TerminalError("spec.image is empty");      // no retry until it changes
//   return sdk::Result::Finalized();                              // finalizer may be released
//
// Contract (docs/protocol.md sections 6-7): desired objects are applied with server-side apply,
// so send the whole intended state every time; the status is a merge patch; conditions merge by
// type; with an error the other outcomes are still applied except `finalized`.
//
// `ToResponse` validates the result against the request before anything is sent (a desired
// object without kind, an invalid condition reason, `finalized` outside a finalizing request,
// outcomes other than events/error/requeue for a gone primary, a negative requeue); the serving
// loop turns a validation failure into a retryable error response, never a crash.
//
// Thread-safety: a Result is a plain value; not safe for concurrent mutation.
#ifndef CTRLHOST_SDK_CPP_RESULT_H_
#define CTRLHOST_SDK_CPP_RESULT_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/request.h"

namespace ctrlhost::sdk {

enum class ConditionStatus { kTrue, kFalse, kUnknown };
enum class EventType { kNormal, kWarning };
enum class PatchType { kJsonPatch, kMergePatch };
enum class ErrorKind { kRetryable, kTerminal };

// {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}} (name omitted when
// empty: it then defaults to the primary's name).
nlohmann::json NewObject(absl::string_view api_version, absl::string_view kind,
                         absl::string_view name = "");

class Result {
 public:
  struct Condition {
    std::string type;
    ConditionStatus status = ConditionStatus::kUnknown;
    std::string reason;
    std::string message;
  };
  struct EventRecord {
    EventType type = EventType::kNormal;
    std::string reason;
    std::string message;
  };
  struct PatchRecord {
    pluginpb::PatchTarget target = pluginpb::PATCH_TARGET_UNSPECIFIED;
    std::string api_version, kind, name;  // PATCH_TARGET_OWNED only
    PatchType type = PatchType::kMergePatch;
    nlohmann::json patch;
    std::string resource_version;  // precondition; empty: none
  };
  struct ErrorRecord {
    ErrorKind kind = ErrorKind::kRetryable;
    std::string message;
    // CamelCase machine-readable reason, at most 128 characters (the host's Warning event and
    // Reconciled=False reason); empty: the host's defaults.
    std::string reason;
    // Retryable errors only: the host retries no sooner than this (capped at its maximum
    // backoff). Negative, or set on a terminal error: ToResponse refuses the result.
    std::optional<absl::Duration> retry_after;
  };

  Result() = default;

  // Factories for the common one-line answers.
  //   return sdk::Result::RetryableError("bucket quota used up", "QuotaExceeded",
  //   absl::Seconds(30));
  static Result RetryableError(absl::string_view message, absl::string_view reason = "",
                               std::optional<absl::Duration> retry_after = std::nullopt);
  static Result TerminalError(absl::string_view message, absl::string_view reason = "");
  // A non-OK status as an error: InvalidArgument, FailedPrecondition, OutOfRange,
  // Unimplemented and PermissionDenied are terminal (retrying the same state cannot help);
  // every other code is retryable. OK gives an empty result.
  static Result FromStatus(const absl::Status& status);
  static Result Finalized();
  static Result Requeue(absl::Duration after);

  // Adds an object the controller wants to exist and returns it for further edits (the reference
  // stays valid until the next Desire). Defaults filled in by ToResponse when absent:
  // metadata.name = the primary's name, metadata.namespace = the primary's namespace (when the
  // primary is namespaced), metadata.labels = the primary's labels, except on an object of the
  // primary's own kind (group and kind): such a child would match the controller's label selector
  // and be reconciled as a primary too.
  nlohmann::json& Desire(nlohmann::json object);

  // The status merge patch, built in place: r.Status()["phase"] = "Ready".
  nlohmann::json& Status();
  // Merges `patch` into the status patch (RFC 7386 composition; nulls delete fields).
  void MergeStatus(const nlohmann::json& patch);

  // Sets (replaces by type) a condition.
  void SetCondition(absl::string_view type, ConditionStatus status, absl::string_view reason,
                    absl::string_view message = "");
  void SetCondition(absl::string_view type, bool status, absl::string_view reason,
                    absl::string_view message = "") {
    SetCondition(type, status ? ConditionStatus::kTrue : ConditionStatus::kFalse, reason, message);
  }
  void Event(EventType type, absl::string_view reason, absl::string_view message);

  // Imperative patches, applied by the host in the order added, after desired objects.
  void PatchPrimary(PatchType type, nlohmann::json patch, absl::string_view resource_version = "");
  void PatchPrimaryStatus(PatchType type, nlohmann::json patch,
                          absl::string_view resource_version = "");
  void PatchOwned(absl::string_view api_version, absl::string_view kind, absl::string_view name,
                  PatchType type, nlohmann::json patch, absl::string_view resource_version = "");

  void SetRequeueAfter(absl::Duration after) { requeue_after_ = after; }
  void SetError(ErrorKind kind, absl::string_view message, absl::string_view reason = "",
                std::optional<absl::Duration> retry_after = std::nullopt);
  void ClearError() { error_.reset(); }
  void SetFinalized(bool finalized = true) { finalized_ = finalized; }

  // Read access (tests, layers built on Result).
  const std::vector<nlohmann::json>& desired() const { return desired_; }
  const std::optional<nlohmann::json>& status() const { return status_; }
  const std::vector<Condition>& conditions() const { return conditions_; }
  const std::vector<EventRecord>& events() const { return events_; }
  const std::vector<PatchRecord>& patches() const { return patches_; }
  const std::optional<absl::Duration>& requeue_after() const { return requeue_after_; }
  const std::optional<ErrorRecord>& error() const { return error_; }
  bool finalized() const { return finalized_; }

  // Appends another result's outcomes (desired, patches, events, conditions by type, status
  // merged; the earliest requeue; the first error; finalized only if both say so).
  void Merge(Result other);

  // Validates against `request` and builds the wire answer. `capabilities` are the ones in
  // effect (an outcome that needs one that is not, e.g. desired objects without server-side
  // apply, is an error). FailedPrecondition / InvalidArgument with a precise message on failure.
  absl::StatusOr<pluginpb::ReconcileResponse> ToResponse(
      const Request& request, uint64_t request_id,
      const std::set<pluginpb::Capability>& capabilities) const;

 private:
  std::vector<nlohmann::json> desired_;
  std::optional<nlohmann::json> status_;
  std::vector<Condition> conditions_;
  std::vector<EventRecord> events_;
  std::vector<PatchRecord> patches_;
  std::optional<absl::Duration> requeue_after_;
  std::optional<ErrorRecord> error_;
  bool finalized_ = false;
};

// Composes two JSON merge patches (RFC 7386) into one that has the effect of applying `base`
// then `patch`: objects merge key by key, nulls are kept (they delete on apply).
void ComposeMergePatch(nlohmann::json* base, const nlohmann::json& patch);

// The reason of the terminal error the serving loop answers instead of a response above the
// message limit (it would not shrink on a retry).
inline constexpr char kResponseTooLarge[] = "ResponseTooLarge";

// The answer the serving loop sends when a reconcile could not produce a valid response.
// `reason` must be empty or CamelCase.
pluginpb::ReconcileResponse ErrorResponse(uint64_t request_id, pluginpb::ErrorKind kind,
                                          absl::string_view message, absl::string_view reason = "");

// Every capability the SDK can use; what it advertises in Describe.
std::set<pluginpb::Capability> AllSdkCapabilities();

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_RESULT_H_
