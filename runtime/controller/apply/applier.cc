#include "runtime/controller/apply/applier.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/utf8.h"
#include "runtime/controller/apply/conditions.h"
#include "runtime/controller/apply/validate.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

json ParseOrNull(absl::string_view text) {
  return json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
}

// Exception-free access to what the server sent (nlohmann's value() throws on a type mismatch).
const json* Member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}
std::string StringMember(const json& object, const char* key) {
  const json* member = Member(object, key);
  return member != nullptr && member->is_string() ? member->get<std::string>() : "";
}
const json& Metadata(const json& object) {
  static const json* const kEmpty = new json(json::object());
  const json* meta = Member(object, "metadata");
  return meta != nullptr && meta->is_object() ? *meta : *kEmpty;
}

// The server's message with its field causes, which carry the detail for 422s (e.g. a JSON
// Patch `test` that failed).
std::string ServerMessage(const absl::Status& status) {
  std::string message(status.message());
  for (const kube::StatusCause& cause : kube::Details(status).causes) {
    if (absl::StrContains(message, cause.message)) continue;
    absl::StrAppend(&message, "; ", cause.field, cause.field.empty() ? "" : ": ", cause.message);
  }
  return message;
}

InvolvedObject Involved(const ReconcileContext& context) {
  const ControllerInfo& c = *context.controller;
  InvolvedObject object;
  object.api_version = ApiVersionOf(c.primary);
  object.kind = c.primary.kind;
  object.namespace_ = c.primary.namespaced ? context.namespace_ : "";
  object.name = context.name;
  if (context.primary != nullptr) object.uid = std::string(context.primary->uid());
  return object;
}

kube::ResourceRef PrimaryRef(const ReconcileContext& context, bool status) {
  const ControllerInfo& c = *context.controller;
  kube::ResourceRef ref;
  ref.group = c.primary.group;
  ref.version = c.primary.version;
  ref.resource = c.primary.resource;
  ref.namespace_name = c.primary.namespaced ? context.namespace_ : "";
  ref.name = context.name;
  if (status && c.primary.has_status) ref.subresource = "status";
  return ref;
}

std::string Describe(const kube::ResourceRef& ref) {
  return absl::StrCat(ref.resource, ref.group.empty() ? "" : ".", ref.group, " ",
                      ref.namespace_name.empty() ? "" : absl::StrCat(ref.namespace_name, "/"),
                      ref.name);
}

// A JSON Patch whose `test` failed: kube-apiserver (and ours) answer 422, but for the protocol
// it is a conflict with a concurrent change.
bool IsFailedTest(const absl::Status& status) {
  return kube::HttpCode(status) == 422 && absl::StrContains(ServerMessage(status), "test failed");
}

// The Reconciled condition a response implies, if any. Terminal errors set it False; a
// response without error sets it back to True when the request saw it not True.
std::optional<pb::Condition> ReconciledFor(const ReconcileContext& context, const Plan& plan) {
  pb::Condition condition;
  condition.set_type(kReconciledCondition);
  if (plan.has_error) {
    if (plan.error_kind != pb::ERROR_KIND_TERMINAL) return std::nullopt;
    condition.set_status(pb::CONDITION_STATUS_FALSE);
    condition.set_reason(kReasonTerminalError);
    condition.set_message(plan.error_message);
    return condition;
  }
  if (context.primary == nullptr) return std::nullopt;
  const absl::string_view text = context.primary->json();
  if (!absl::StrContains(text, kReconciledCondition)) return std::nullopt;  // cheap pre-check
  const json primary = ParseOrNull(text);
  const json* status = Member(primary, "status");
  const json* conditions = status == nullptr ? nullptr : Member(*status, "conditions");
  const json* seen =
      conditions == nullptr ? nullptr : FindCondition(*conditions, kReconciledCondition);
  if (seen == nullptr || StringMember(*seen, "status") == "True") return std::nullopt;
  condition.set_status(pb::CONDITION_STATUS_TRUE);
  condition.set_reason(kReasonSucceeded);
  return condition;
}

}  // namespace

// The state of one Apply() call. Lives on the caller's stack.
struct Applier::Run {
  Applier* self;
  const ReconcileContext& context;
  ApplyOutcome outcome;

  // Maps a failed write to the outcome and records what needs recording. Returns the outcome.
  ApplyOutcome Failed(const absl::Status& status, const std::string& what, bool targets_primary,
                      bool has_test_op) {
    const std::string message = absl::StrCat(what, ": ", ServerMessage(status));
    const int code = kube::HttpCode(status);
    if (kube::IsConflict(status) || code == 409 || (has_test_op && IsFailedTest(status))) {
      outcome.kind = OutcomeKind::kRequeueNow;
      outcome.status = absl::AbortedError(message);
    } else if (targets_primary && kube::IsNotFound(status)) {
      outcome.kind = OutcomeKind::kDone;  // the primary is gone: nothing left to do
      outcome.status = absl::OkStatus();
    } else if (code == 400 || code == 422) {
      // The API refuses what the plugin sent; repeating it will not help.
      outcome.kind = OutcomeKind::kTerminal;
      outcome.status = absl::InvalidArgumentError(message);
      RecordFailure(kReasonWriteRejected, kReasonWriteRejected, message);
    } else {
      outcome.kind = OutcomeKind::kRetry;
      outcome.status = status.code() == absl::StatusCode::kOk
                           ? absl::UnknownError(message)
                           : absl::Status(status.code(), message);
    }
    return outcome;
  }

  // A Warning event `event_reason` and Reconciled=False with `reason`, best effort.
  void RecordFailure(absl::string_view event_reason, absl::string_view reason,
                     const std::string& message) {
    Event("Warning", event_reason, message);
    if (context.primary == nullptr || !context.controller->primary.has_status) return;
    pb::Condition condition;
    condition.set_type(kReconciledCondition);
    condition.set_status(pb::CONDITION_STATUS_FALSE);
    condition.set_reason(std::string(reason));
    condition.set_message(common::TruncateUtf8(message, 32768));  // never mid-character
    absl::Status written = WriteStatus(std::nullopt, {condition});
    if (!written.ok()) {
      common::LogWarning(
          "could not set the Reconciled condition",
          {{"controller", context.controller->name}, {"name", context.name}, {"error", written}});
    }
  }

  void Event(absl::string_view type, absl::string_view reason, absl::string_view message) {
    absl::Status recorded = self->recorder_.Record(Involved(context), type, reason, message);
    if (recorded.ok()) {
      ++outcome.writes;
    } else {
      common::LogWarning("could not record an event", {{"controller", context.controller->name},
                                                       {"name", context.name},
                                                       {"reason", reason},
                                                       {"error", recorded}});
    }
  }

  // One status write: merge `status` and `conditions` into the primary's status and
  // merge-patch it with the primary's resourceVersion as precondition (a concurrent writer is a
  // 409, never a lost update of status.conditions). The first try uses the cached primary the
  // request carried (no extra GET on the common path); on a conflict the live primary is read
  // and the write is tried once more.
  absl::Status WriteStatus(const std::optional<json>& status,
                           const std::vector<pb::Condition>& conditions) {
    if (context.primary != nullptr) {
      const json cached = ParseOrNull(std::string(context.primary->json()));
      if (cached.is_object()) {
        absl::Status first = PatchStatus(cached, status, conditions);
        if (!kube::IsConflict(first)) return first;
      }
    }
    ASSIGN_OR_RETURN(std::string live_text, self->client_->Get(PrimaryRef(context, false)));
    const json live = ParseOrNull(live_text);
    if (!live.is_object()) return absl::DataLossError("the primary is not a JSON object");
    return PatchStatus(live, status, conditions);
  }

  absl::Status PatchStatus(const json& live, const std::optional<json>& status,
                           const std::vector<pb::Condition>& conditions) {
    const kube::ResourceRef ref = PrimaryRef(context, /*status=*/true);
    const std::string rv = StringMember(Metadata(live), "resourceVersion");
    json body_status = status.has_value() ? *status : json::object();
    if (!conditions.empty()) {
      json base;
      if (auto it = body_status.find("conditions"); it != body_status.end()) {
        base = *it;  // the plugin's status replaces the conditions array first (merge patch)
      } else if (const json* live_status = Member(live, "status")) {
        if (const json* live_conditions = Member(*live_status, "conditions")) {
          base = *live_conditions;
        }
      }
      body_status["conditions"] = MergeConditions(base, conditions, context.primary->generation(),
                                                  self->options_.clock->Now());
    }
    body_status["observedGeneration"] = context.primary->generation();
    json body = {{"metadata", {{"resourceVersion", rv}}}, {"status", std::move(body_status)}};
    ASSIGN_OR_RETURN(std::string patched,
                     self->client_->Patch(ref, kube::PatchType::kMerge, body.dump()));
    (void)patched;
    ++outcome.writes;
    return absl::OkStatus();
  }

  // Deletes the primary's children of delete_absent kinds that `plan` does not apply.
  std::optional<ApplyOutcome> Prune(const Plan& plan) {
    const ControllerInfo& c = *context.controller;
    absl::flat_hash_set<std::string> desired;
    for (const PlannedApply& a : plan.applies) {
      desired.insert(
          absl::StrCat(a.group, "/", a.kind, "/", a.ref.namespace_name, "/", a.ref.name));
    }
    const std::string primary_uid(context.primary->uid());
    for (const OwnedResource& owned : c.owns) {
      if (!owned.delete_absent) continue;
      kube::ResourceRef list_ref;
      list_ref.group = owned.mapping.group;
      list_ref.version = owned.mapping.version;
      list_ref.resource = owned.mapping.resource;
      if (owned.mapping.namespaced) list_ref.namespace_name = ChildNamespace(context);
      absl::StatusOr<kube::ObjectList> list = self->client_->List(list_ref);
      if (!list.ok()) {
        return Failed(list.status(), absl::StrCat("listing ", owned.mapping.resource), false,
                      false);
      }
      for (const std::string& item_text : list->items) {
        const json item = ParseOrNull(item_text);
        if (!item.is_object()) continue;
        const json& meta = Metadata(item);
        if (Member(meta, "deletionTimestamp") != nullptr) continue;
        bool ours = false;
        const json* owners = Member(meta, "ownerReferences");
        if (owners != nullptr && owners->is_array()) {
          for (const json& ref : *owners) {
            const json* controller = Member(ref, "controller");
            if (StringMember(ref, "uid") == primary_uid && controller != nullptr &&
                *controller == true) {
              ours = true;
            }
          }
        }
        if (!ours) continue;
        kube::ResourceRef child = list_ref;
        child.namespace_name = StringMember(meta, "namespace");
        child.name = StringMember(meta, "name");
        if (desired.contains(absl::StrCat(owned.mapping.group, "/", owned.mapping.kind, "/",
                                          child.namespace_name, "/", child.name))) {
          continue;
        }
        kube::DeleteOptions options;
        options.propagation_policy = "Background";
        options.precondition_uid = StringMember(meta, "uid");
        absl::StatusOr<std::string> deleted = self->client_->Delete(child, options);
        if (deleted.ok()) {
          ++outcome.writes;
        } else if (!kube::IsNotFound(deleted.status())) {
          return Failed(deleted.status(), absl::StrCat("deleting absent child ", Describe(child)),
                        false, false);
        }
      }
    }
    return std::nullopt;
  }

  // Removes the controller's finalizer, testing that the finalizers are still those the
  // request saw (a concurrent change is a conflict: requeue and look again).
  std::optional<ApplyOutcome> ReleaseFinalizer() {
    const std::string& finalizer = context.controller->finalizer;
    json seen = json::array();
    json remaining = json::array();
    for (size_t i = 0; i < context.primary->finalizer_count(); ++i) {
      const std::string f(context.primary->finalizer(i));
      seen.push_back(f);
      if (f != finalizer) remaining.push_back(f);
    }
    const json patch = json::array(
        {json{{"op", "test"}, {"path", "/metadata/finalizers"}, {"value", seen}},
         json{{"op", "replace"}, {"path", "/metadata/finalizers"}, {"value", remaining}}});
    const kube::ResourceRef ref = PrimaryRef(context, false);
    absl::StatusOr<std::string> patched =
        self->client_->Patch(ref, kube::PatchType::kJson, patch.dump());
    if (!patched.ok()) {
      if (kube::IsNotFound(patched.status())) {
        outcome.finalizer_released = true;  // gone: nothing holds it any more
        return std::nullopt;
      }
      return Failed(patched.status(), "releasing the finalizer", true, true);
    }
    ++outcome.writes;
    outcome.finalizer_released = true;
    return std::nullopt;
  }
};

Applier::Applier(kube::Client* client, ApplierOptions options)
    : client_(client),
      options_(std::move(options)),
      recorder_(client,
                EventRecorderOptions{.clock = options_.clock,
                                     .component = options_.component,
                                     .aggregation_window = options_.event_aggregation_window}) {}

ApplyOutcome Applier::Apply(const ReconcileContext& context,
                            const pb::ReconcileResponse& response) {
  Run run{this, context, {}};
  absl::StatusOr<Plan> validated = ValidateResponse(context, response);
  if (!validated.ok()) {
    const std::string message = std::string(validated.status().message());
    run.RecordFailure(
        kReasonInvalidResponse, kReasonInvalidResponse,
        absl::StrCat("invalid response from controller ",
                     context.controller == nullptr ? "" : context.controller->name, ": ", message));
    run.outcome.kind = OutcomeKind::kTerminal;
    run.outcome.status = validated.status();
    return run.outcome;
  }
  const Plan& plan = *validated;
  const ControllerInfo& c = *context.controller;

  for (const PlannedApply& a : plan.applies) {
    kube::PatchOptions options;
    options.field_manager = c.field_manager;
    options.force = true;
    absl::StatusOr<std::string> applied =
        client_->Patch(a.ref, kube::PatchType::kApply, a.object.dump(), options);
    if (!applied.ok()) {
      return run.Failed(applied.status(), absl::StrCat("applying ", Describe(a.ref)), a.is_primary,
                        false);
    }
    ++run.outcome.writes;
  }
  for (const PlannedPatch& p : plan.patches) {
    absl::StatusOr<std::string> patched = client_->Patch(p.ref, p.type, p.body);
    if (!patched.ok()) {
      return run.Failed(patched.status(), absl::StrCat(p.what, " (", Describe(p.ref), ")"),
                        p.targets_primary, p.has_test_op);
    }
    ++run.outcome.writes;
  }
  std::vector<pb::Condition> conditions = plan.conditions;
  if (std::optional<pb::Condition> reconciled = ReconciledFor(context, plan);
      reconciled.has_value() && c.primary.has_status) {
    bool given = false;  // the plugin's own Reconciled condition wins
    for (const pb::Condition& condition : conditions)
      given |= condition.type() == kReconciledCondition;
    if (!given) conditions.push_back(*reconciled);
  }
  if (plan.status.has_value() || !conditions.empty()) {
    absl::Status written = run.WriteStatus(plan.status, conditions);
    if (!written.ok()) return run.Failed(written, "writing the status", true, false);
  }
  if (!plan.has_error && context.primary != nullptr) {
    if (std::optional<ApplyOutcome> failed = run.Prune(plan)) return *failed;
  }
  for (const pb::Event& event : plan.events) {
    run.Event(event.type() == pb::EVENT_TYPE_WARNING ? "Warning" : "Normal", event.reason(),
              event.message());
  }
  if (plan.has_error) run.Event("Warning", kReasonReconcileError, plan.error_message);
  if (plan.finalized) {
    if (std::optional<ApplyOutcome> failed = run.ReleaseFinalizer()) return *failed;
  }

  if (plan.has_error && plan.error_kind == pb::ERROR_KIND_TERMINAL) {
    run.outcome.kind = OutcomeKind::kTerminal;
    run.outcome.status = absl::FailedPreconditionError(plan.error_message);
  } else if (plan.has_error) {
    run.outcome.kind = OutcomeKind::kRetry;
    run.outcome.status = absl::UnavailableError(plan.error_message);
  } else if (plan.requeue_after.has_value()) {
    run.outcome.kind = OutcomeKind::kRequeueAfter;
    run.outcome.requeue_after = *plan.requeue_after;
  } else {
    run.outcome.kind = OutcomeKind::kDone;
  }
  return run.outcome;
}

absl::Status Applier::EnsureFinalizer(const ReconcileContext& context) {
  if (context.controller == nullptr) return absl::InvalidArgumentError("no controller");
  const std::string& finalizer = context.controller->finalizer;
  if (finalizer.empty()) return absl::OkStatus();
  const kube::ResourceRef ref = PrimaryRef(context, false);
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSIGN_OR_RETURN(std::string live_text, client_->Get(ref));
    const json live = ParseOrNull(live_text);
    if (!live.is_object()) return absl::DataLossError("the primary is not a JSON object");
    const json& meta = Metadata(live);
    // Kubernetes refuses new finalizers on an object being deleted; there is nothing to guard.
    if (Member(meta, "deletionTimestamp") != nullptr) return absl::OkStatus();
    json patch = json::array();
    auto finalizers = meta.find("finalizers");
    if (finalizers != meta.end() && finalizers->is_array()) {
      for (const json& f : *finalizers) {
        if (f == finalizer) return absl::OkStatus();
      }
      patch.push_back({{"op", "test"}, {"path", "/metadata/finalizers"}, {"value", *finalizers}});
      patch.push_back({{"op", "add"}, {"path", "/metadata/finalizers/-"}, {"value", finalizer}});
    } else {
      // json-patch (v4, as kube-apiserver) lets `test` of a missing member against null pass.
      patch.push_back({{"op", "test"}, {"path", "/metadata/finalizers"}, {"value", nullptr}});
      patch.push_back(
          {{"op", "add"}, {"path", "/metadata/finalizers"}, {"value", json::array({finalizer})}});
    }
    absl::StatusOr<std::string> patched = client_->Patch(ref, kube::PatchType::kJson, patch.dump());
    if (patched.ok()) return absl::OkStatus();
    if (!IsFailedTest(patched.status()) && !kube::IsConflict(patched.status())) {
      return patched.status();
    }
  }
  return absl::AbortedError(absl::StrCat("adding finalizer ", finalizer, " to ", Describe(ref),
                                         ": the finalizers kept changing"));
}

void Applier::RecordTerminal(const ReconcileContext& context, const absl::Status& status) {
  if (context.controller == nullptr) return;
  Run run{this, context, {}};
  run.RecordFailure(kReasonReconcileError, kReasonTerminalError, std::string(status.message()));
}

}  // namespace ctrlhost::controller::apply
