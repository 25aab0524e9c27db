#include "runtime/controller/apply/applier.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "runtime/cache/object.h"
#include "runtime/cache/store.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/utf8.h"
#include "runtime/controller/apply/conditions.h"
#include "runtime/controller/apply/host_status.h"
#include "runtime/controller/apply/json_member.h"
#include "runtime/controller/apply/noop.h"
#include "runtime/controller/apply/validate.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

json ParseOrNull(absl::string_view text) {
  return json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
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
std::optional<pluginpb::Condition> ReconciledFor(const ReconcileContext& context,
                                                 const Plan& plan) {
  pluginpb::Condition condition;
  condition.set_type(kReconciledCondition);
  if (plan.has_error) {
    if (plan.error_kind != pluginpb::ERROR_KIND_TERMINAL) return std::nullopt;
    condition.set_status(pluginpb::CONDITION_STATUS_FALSE);
    condition.set_reason(plan.error_reason.empty() ? kReasonTerminalError : plan.error_reason);
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
  condition.set_status(pluginpb::CONDITION_STATUS_TRUE);
  condition.set_reason(kReasonSucceeded);
  return condition;
}

// The standard status conditions (host_status.h) for a controller that opted in: from the
// plan's outcome and the cached children of the primary. Types the plugin sets in this
// response (in `conditions` or in its status' conditions array) are the plugin's.
std::vector<pluginpb::Condition> HostConditions(const ReconcileContext& context, const Plan& plan) {
  HostStatusInput input;
  if (plan.has_error) {
    input.result = plan.error_kind == pluginpb::ERROR_KIND_TERMINAL
                       ? ReconcileResult::kTerminalError
                       : ReconcileResult::kRetryableError;
    input.error_message = plan.error_message;
    input.error_reason = plan.error_reason;
    input.consecutive_errors = static_cast<int>(context.attempt) + 1;
  }
  const std::string uid(context.primary->uid());
  for (const cache::Store* store : context.owned_stores) {
    if (store == nullptr) continue;
    for (const cache::ObjectPtr& child : store->ByIndex(cache::Index::kOwnerUid, uid)) {
      input.children.push_back(ChildReadinessOf(ParseOrNull(child->json())));
    }
  }
  std::vector<pluginpb::Condition> given = plan.conditions;
  if (plan.status.has_value()) {
    const json* own = Member(*plan.status, "conditions");
    if (own != nullptr && own->is_array()) {
      for (const json& entry : *own) {
        pluginpb::Condition condition;
        condition.set_type(StringMember(entry, "type"));
        given.push_back(std::move(condition));
      }
    }
  }
  return ComputeHostConditions(input, given);
}

// The object's controller owner reference (null when none).
const json* ControllerRef(const json& object) {
  const json* owners = Member(Metadata(object), "ownerReferences");
  if (owners == nullptr || !owners->is_array()) return nullptr;
  for (const json& ref : *owners) {
    const json* controller = Member(ref, "controller");
    if (controller != nullptr && controller->is_boolean() && controller->get<bool>()) return &ref;
  }
  return nullptr;
}

// Whether `ref` names the primary's kind and name with another uid: an earlier object of the
// same name, necessarily gone (names are unique), whose children the garbage collector has not
// deleted yet.
bool NamesEarlierPrimary(const json& ref, const ReconcileContext& context) {
  const ControllerInfo& c = *context.controller;
  const std::string api_version = StringMember(ref, "apiVersion");
  const size_t slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  return group == c.primary.group && StringMember(ref, "kind") == c.primary.kind &&
         StringMember(ref, "name") == context.name;
}

// `json` parsed the way the cache holds objects (managedFields stripped).
absl::StatusOr<cache::ObjectPtr> ParseLikeTheCache(absl::string_view text) {
  thread_local cache::ObjectParser parser;
  return parser.Parse(text);
}

std::string AppliedKey(const ControllerInfo& c, const PlannedApply& a) {
  return absl::StrCat(c.field_manager, "\n", a.group, "/", a.kind, "/", a.ref.namespace_name, "/",
                      a.ref.name);
}

std::string DescribeForUser(const ReconcileContext& context) {
  const ControllerInfo& c = *context.controller;
  return absl::StrCat(c.primary.kind, " ", context.namespace_,
                      context.namespace_.empty() ? "" : "/", context.name);
}

// The conditions the status write sets: the plugin's, the host's Reconciled condition unless
// the plugin gave its own, and the host's status conditions when the controller asks for them.
std::vector<pluginpb::Condition> StatusConditions(const ReconcileContext& context,
                                                  const Plan& plan) {
  const ControllerInfo& c = *context.controller;
  std::vector<pluginpb::Condition> conditions = plan.conditions;
  if (std::optional<pluginpb::Condition> reconciled = ReconciledFor(context, plan);
      reconciled.has_value() && c.primary.has_status) {
    bool given = false;  // the plugin's own Reconciled condition wins
    for (const pluginpb::Condition& condition : conditions) {
      given |= condition.type() == kReconciledCondition;
    }
    if (!given) conditions.push_back(*reconciled);
  }
  if (c.host_status && c.primary.has_status && context.primary != nullptr) {
    for (pluginpb::Condition& condition : HostConditions(context, plan)) {
      conditions.push_back(std::move(condition));
    }
  }
  return conditions;
}

// The kind, status and reason of a response whose writes all succeeded: the plugin's error
// (terminal or retried), its requeue_after, or done.
void SetResult(const Plan& plan, ApplyOutcome& outcome) {
  if (plan.has_error && plan.error_kind == pluginpb::ERROR_KIND_TERMINAL) {
    outcome.kind = OutcomeKind::kTerminal;
    outcome.status = absl::FailedPreconditionError(plan.error_message);
    outcome.reason = plan.error_reason.empty() ? kReasonTerminalError : plan.error_reason;
  } else if (plan.has_error) {
    outcome.kind = OutcomeKind::kRetry;
    outcome.status = absl::UnavailableError(plan.error_message);
    outcome.reason = plan.error_reason.empty() ? kReasonReconcileError : plan.error_reason;
    outcome.retry_after = plan.error_retry_after.value_or(absl::ZeroDuration());
  } else if (plan.requeue_after.has_value()) {
    outcome.kind = OutcomeKind::kRequeueAfter;
    outcome.requeue_after = *plan.requeue_after;
  } else {
    outcome.kind = OutcomeKind::kDone;
  }
}

}  // namespace

bool Applier::AppliedBefore(const std::string& key, absl::string_view uid, size_t hash) {
  common::MutexLock lock(&applied_mu_);
  auto it = applied_.find(key);
  return it != applied_.end() && it->second.uid == uid && it->second.hash == hash;
}

void Applier::RememberApplied(const std::string& key, std::string uid, size_t hash) {
  common::MutexLock lock(&applied_mu_);
  if (applied_.size() >= options_.max_remembered_applies && !applied_.contains(key)) {
    applied_.clear();
  }
  applied_[key] = Applied{std::move(uid), hash};
}

// The state of one Apply() call. Lives on the caller's stack.
struct Applier::Run {
  Run(Applier* applier, const ReconcileContext& reconcile)
      : self(applier),
        context(reconcile),
        primary_json(reconcile.primary != nullptr ? std::string(reconcile.primary->json())
                                                  : std::string()) {}

  Applier* self;
  const ReconcileContext& context;
  ApplyOutcome outcome;
  // The newest state of the primary this run knows: the cached one, then what the server
  // answered to each write to it. The status write's resourceVersion precondition comes from
  // it, so the applier's own earlier writes do not make it a conflict.
  std::string primary_json;

  // The current state of an owned object: from the host's cache when the context carries it,
  // else read from the server. Null when it does not exist.
  absl::StatusOr<cache::ObjectPtr> Current(int owned_index, const kube::ResourceRef& ref) {
    if (owned_index >= 0 && static_cast<size_t>(owned_index) < context.owned_stores.size() &&
        context.owned_stores[owned_index] != nullptr) {
      return context.owned_stores[owned_index]->Get(ref.namespace_name, ref.name);
    }
    absl::StatusOr<std::string> live = self->client_->Get(ref);
    if (kube::IsNotFound(live.status())) return cache::ObjectPtr();
    if (!live.ok()) return live.status();
    return ParseLikeTheCache(*live);
  }

  bool HasStores() const {
    return !context.owned_stores.empty() &&
           context.owned_stores.size() == context.controller->owns.size();
  }

  // Refuses (before the first write) desired objects and OWNED patches whose target exists and
  // is not controlled by this primary: another object's child, or an object with no controller
  // (adoption is not part of the protocol: the plugin cannot declare it). An OWNED patch's
  // target must exist (in the cache) unless this response applies it. Fills `current` (by
  // apply / patch index) for the writes that follow. Returns the outcome when refused.
  std::optional<ApplyOutcome> CheckControl(const Plan& plan,
                                           std::vector<cache::ObjectPtr>* apply_current,
                                           std::vector<cache::ObjectPtr>* patch_current) {
    const std::string primary_uid(context.primary->uid());
    absl::flat_hash_set<std::string> applied;
    apply_current->assign(plan.applies.size(), nullptr);
    patch_current->assign(plan.patches.size(), nullptr);
    auto refuse = [&](const std::string& message) {
      RecordFailure(kReasonNotControlled, kReasonNotControlled, message);
      outcome.kind = OutcomeKind::kTerminal;
      outcome.status = absl::FailedPreconditionError(message);
      outcome.reason = kReasonNotControlled;
      return outcome;
    };
    for (size_t i = 0; i < plan.applies.size(); ++i) {
      const PlannedApply& a = plan.applies[i];
      if (a.is_primary) continue;
      applied.insert(absl::StrCat(a.owned_index, "/", a.ref.namespace_name, "/", a.ref.name));
      absl::StatusOr<cache::ObjectPtr> current = Current(a.owned_index, a.ref);
      if (!current.ok()) {
        return Failed(current.status(), absl::StrCat("reading ", Describe(a.ref)), false, false);
      }
      if (*current == nullptr) continue;
      const json current_json = ParseOrNull((*current)->json());
      const json* controller_ref = ControllerRef(current_json);
      const std::string controller =
          controller_ref == nullptr ? "" : StringMember(*controller_ref, "uid");
      if (controller == primary_uid) {
        (*apply_current)[i] = *current;
        continue;
      }
      if (controller_ref != nullptr && NamesEarlierPrimary(*controller_ref, context)) {
        // The primary was deleted and created again: its predecessor's child goes soon.
        return Failed(absl::UnavailableError(absl::StrCat(
                          "it is the child of an earlier ", DescribeForUser(context), " (uid ",
                          controller, "), not deleted yet by the garbage collector")),
                      absl::StrCat("applying ", Describe(a.ref)), false, false);
      }
      // The runner reconciles the primary again when this object is deleted.
      outcome.blocked_by.push_back({a.owned_index, a.ref.namespace_name, a.ref.name});
      return refuse(NotControlledMessage(context, i, a, controller));
    }
    for (size_t i = 0; i < plan.patches.size(); ++i) {
      const PlannedPatch& p = plan.patches[i];
      if (p.owned_index < 0) continue;
      if (applied.contains(
              absl::StrCat(p.owned_index, "/", p.ref.namespace_name, "/", p.ref.name))) {
        continue;  // just applied with this primary as controller (checked above)
      }
      absl::StatusOr<cache::ObjectPtr> current = Current(p.owned_index, p.ref);
      if (!current.ok()) {
        return Failed(current.status(), absl::StrCat("reading ", Describe(p.ref)), false, false);
      }
      if (*current == nullptr) {
        // Maybe not in the cache yet: retry with backoff, as a 404 of the patch itself was.
        return Failed(
            absl::NotFoundError(absl::StrCat(HasStores() ? "not in the cache" : "not found")),
            absl::StrCat(p.what, " (", Describe(p.ref), ")"), false, false);
      }
      const json current_json = ParseOrNull((*current)->json());
      const json* controller_ref = ControllerRef(current_json);
      const std::string controller =
          controller_ref == nullptr ? "" : StringMember(*controller_ref, "uid");
      if (controller != primary_uid) {
        return refuse(absl::StrCat(
            p.what, ": ", Describe(p.ref), " is not controlled by ", DescribeForUser(context),
            controller.empty() ? " (it has no controller)"
                               : absl::StrCat(" (its controller is uid ", controller, ")"),
            "; an OWNED patch may only change the primary's own children"));
      }
      (*patch_current)[i] = *current;
    }
    return std::nullopt;
  }

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
    } else if (code == 400 || code == 413 || code == 422) {
      // The API refuses what the plugin sent (413: over its request or object size limit);
      // repeating it will not help.
      outcome.kind = OutcomeKind::kTerminal;
      outcome.status = absl::InvalidArgumentError(message);
      outcome.reason = kReasonWriteRejected;
      RecordFailure(kReasonWriteRejected, kReasonWriteRejected, message);
    } else {
      outcome.kind = OutcomeKind::kRetry;
      outcome.status = status.code() == absl::StatusCode::kOk
                           ? absl::UnknownError(message)
                           : absl::Status(status.code(), message);
      // Retried (a permission can be granted, a server fixed), but never silently: the object
      // gets a Warning event (aggregated) and Reconciled=False naming the refusal, and the log
      // a line (rate limited). kube's 403 message names the verb, resource and namespace.
      // 429/503/504 are the server asking to come back later: retried quietly.
      const bool denied = code == 401 || code == 403;
      if (denied || (code >= 500 && code != 503 && code != 504)) {
        const char* reason = denied ? kReasonForbidden : kReasonWriteFailed;
        outcome.reason = reason;
        RecordFailure(reason, reason, message);
        uint64_t suppressed = 0;
        if (self->refused_log_.Allow(&suppressed)) {
          common::LogWarning(denied ? "write forbidden by the API server; retrying"
                                    : "write failed on the API server; retrying",
                             {{"controller", context.controller->name},
                              {"namespace", context.namespace_},
                              {"name", context.name},
                              {"code", code},
                              {"error", message},
                              {"suppressed", suppressed}});
        }
      }
    }
    return outcome;
  }

  // A Warning event `event_reason` and Reconciled=False with `reason`, best effort.
  void RecordFailure(absl::string_view event_reason, absl::string_view reason,
                     const std::string& message) {
    Event("Warning", event_reason, message);
    if (context.primary == nullptr || !context.controller->primary.has_status) return;
    pluginpb::Condition condition;
    condition.set_type(kReconciledCondition);
    condition.set_status(pluginpb::CONDITION_STATUS_FALSE);
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
  // 409, never a lost update of status.conditions). The first try uses the newest primary this
  // run knows (the cached one, or the server's answer to this host's own write to it, e.g. the
  // finalizer patch: no extra GET on the common path); on a conflict the live primary is read
  // and the write is tried once more. A write that would change nothing is skipped.
  absl::Status WriteStatus(const std::optional<json>& status,
                           const std::vector<pluginpb::Condition>& conditions) {
    if (!primary_json.empty()) {
      const json known = ParseOrNull(primary_json);
      if (known.is_object()) {
        absl::Status first = PatchStatus(known, status, conditions);
        if (!kube::IsConflict(first)) return first;
      }
    }
    ASSIGN_OR_RETURN(std::string live_text, self->client_->Get(PrimaryRef(context, false)));
    const json live = ParseOrNull(live_text);
    if (!live.is_object()) return absl::DataLossError("the primary is not a JSON object");
    return PatchStatus(live, status, conditions);
  }

  absl::Status PatchStatus(const json& live, const std::optional<json>& status,
                           const std::vector<pluginpb::Condition>& conditions) {
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
    const json* live_status = Member(live, "status");
    if (MergePatchIsNoop(live_status != nullptr ? *live_status : json(), body_status)) {
      ++outcome.skipped;
      return absl::OkStatus();
    }
    json body = {{"metadata", {{"resourceVersion", rv}}}, {"status", std::move(body_status)}};
    ASSIGN_OR_RETURN(std::string patched,
                     self->client_->Patch(ref, kube::PatchType::kMerge, body.dump()));
    primary_json = std::move(patched);
    ++outcome.writes;
    return absl::OkStatus();
  }

  // Deletes the primary's children of delete_absent kinds that `plan` does not apply.
  // The children of `owned` are read from the host's cache when the context carries it (no
  // request; a child the cache has not seen yet is pruned by the reconcile its add event
  // causes), else listed live.
  std::optional<ApplyOutcome> Prune(const Plan& plan) {
    const ControllerInfo& c = *context.controller;
    absl::flat_hash_set<std::string> desired;
    for (const PlannedApply& a : plan.applies) {
      desired.insert(
          absl::StrCat(a.group, "/", a.kind, "/", a.ref.namespace_name, "/", a.ref.name));
    }
    const std::string primary_uid(context.primary->uid());
    for (size_t index = 0; index < c.owns.size(); ++index) {
      const OwnedResource& owned = c.owns[index];
      if (!owned.delete_absent) continue;
      kube::ResourceRef list_ref;
      list_ref.group = owned.mapping.group;
      list_ref.version = owned.mapping.version;
      list_ref.resource = owned.mapping.resource;
      if (owned.mapping.namespaced) list_ref.namespace_name = ChildNamespace(context);
      std::vector<std::string> items;
      if (HasStores() && context.owned_stores[index] != nullptr) {
        for (const cache::ObjectPtr& child :
             context.owned_stores[index]->ByIndex(cache::Index::kOwnerUid, primary_uid)) {
          if (!list_ref.namespace_name.empty() && child->namespace_() != list_ref.namespace_name) {
            continue;  // as the live LIST, only the child namespace
          }
          items.emplace_back(child->json());
        }
      } else {
        absl::StatusOr<kube::ObjectList> list = self->client_->List(list_ref);
        if (!list.ok()) {
          return Failed(list.status(), absl::StrCat("listing ", owned.mapping.resource), false,
                        false);
        }
        items = std::move(list->items);
      }
      for (const std::string& item_text : items) {
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
                            const pluginpb::ReconcileResponse& response) {
  Run run(this, context);
  absl::StatusOr<Plan> validated = ValidateResponse(context, response);
  if (!validated.ok()) {
    const std::string message = std::string(validated.status().message());
    run.RecordFailure(
        kReasonInvalidResponse, kReasonInvalidResponse,
        absl::StrCat("invalid response from controller ",
                     context.controller == nullptr ? "" : context.controller->name, ": ", message));
    run.outcome.kind = OutcomeKind::kTerminal;
    run.outcome.status = validated.status();
    run.outcome.reason = kReasonInvalidResponse;
    return run.outcome;
  }
  const Plan& plan = *validated;
  const ControllerInfo& c = *context.controller;

  // Ownership is checked against the current objects before the first write.
  std::vector<cache::ObjectPtr> apply_current;
  std::vector<cache::ObjectPtr> patch_current;
  if (context.primary != nullptr) {
    if (std::optional<ApplyOutcome> refused =
            run.CheckControl(plan, &apply_current, &patch_current)) {
      return *refused;
    }
  }

  for (size_t i = 0; i < plan.applies.size(); ++i) {
    const PlannedApply& a = plan.applies[i];
    const std::string body = a.object.dump();
    const size_t hash = absl::Hash<std::string>{}(body);
    const std::string applied_key = AppliedKey(c, a);
    // A no-op apply is skipped: the same configuration this manager applied last to this very
    // object (so no field it applied before would be removed), every field of it already in
    // the cached object. Only with the host's cache (a stale cache is corrected by the watch
    // event that follows, which reconciles again).
    const cache::ObjectPtr& current = a.is_primary            ? context.primary
                                      : apply_current.empty() ? nullptr
                                                              : apply_current[i];
    if (current != nullptr && run.HasStores() && AppliedBefore(applied_key, current->uid(), hash) &&
        ApplyIsCovered(ParseOrNull(current->json()), a.object)) {
      ++run.outcome.skipped;
      continue;
    }
    kube::PatchOptions options;
    options.field_manager = c.field_manager;
    options.force = true;
    absl::StatusOr<std::string> applied =
        client_->Patch(a.ref, kube::PatchType::kApply, body, options);
    if (!applied.ok()) {
      return run.Failed(applied.status(), absl::StrCat("applying ", Describe(a.ref)), a.is_primary,
                        false);
    }
    ++run.outcome.writes;
    const json result = ParseOrNull(*applied);
    RememberApplied(applied_key, StringMember(Metadata(result), "uid"), hash);
    if (a.is_primary) run.primary_json = std::move(*applied);
  }
  for (size_t i = 0; i < plan.patches.size(); ++i) {
    const PlannedPatch& p = plan.patches[i];
    const std::string* body = &p.body;
    std::string pinned_body;
    bool has_test_op = p.has_test_op;
    if (!patch_current.empty() && patch_current[i] != nullptr && p.type == kube::PatchType::kJson &&
        p.parsed.is_array()) {
      // A JSON Patch is pinned to the object whose control was checked: a replacement (new
      // uid) fails the `test`, a conflict (requeue and look again). A merge patch cannot be
      // pinned the same way (kube-apiserver answers a changed metadata.uid with 422, the
      // embedded server ignores it): between the check and the write it relies on the cache.
      // The `test` goes in front of the operations' text: no copy of the parsed patch.
      const json test = {{"op", "test"},
                         {"path", "/metadata/uid"},
                         {"value", std::string(patch_current[i]->uid())}};
      pinned_body = absl::StrCat("[", test.dump(), p.parsed.empty() ? "" : ",",
                                 absl::string_view(p.body).substr(1));
      has_test_op = true;
      body = &pinned_body;
    }
    absl::StatusOr<std::string> patched = client_->Patch(p.ref, p.type, *body);
    if (!patched.ok()) {
      return run.Failed(patched.status(), absl::StrCat(p.what, " (", Describe(p.ref), ")"),
                        p.targets_primary, has_test_op);
    }
    ++run.outcome.writes;
    if (p.targets_primary) run.primary_json = std::move(*patched);
  }
  const std::vector<pluginpb::Condition> conditions = StatusConditions(context, plan);
  if (plan.status.has_value() || !conditions.empty()) {
    absl::Status written = run.WriteStatus(plan.status, conditions);
    if (!written.ok()) return run.Failed(written, "writing the status", true, false);
  }
  if (!plan.has_error && context.primary != nullptr) {
    if (std::optional<ApplyOutcome> failed = run.Prune(plan)) return *failed;
  }
  for (const pluginpb::Event& event : plan.events) {
    run.Event(event.type() == pluginpb::EVENT_TYPE_WARNING ? "Warning" : "Normal", event.reason(),
              event.message());
  }
  if (plan.has_error) {
    run.Event("Warning", plan.error_reason.empty() ? kReasonReconcileError : plan.error_reason,
              plan.error_message);
  }
  if (plan.finalized) {
    if (std::optional<ApplyOutcome> failed = run.ReleaseFinalizer()) return *failed;
  }

  SetResult(plan, run.outcome);
  return run.outcome;
}

absl::StatusOr<cache::ObjectPtr> Applier::EnsureFinalizer(const ReconcileContext& context) {
  if (context.controller == nullptr) return absl::InvalidArgumentError("no controller");
  const std::string& finalizer = context.controller->finalizer;
  if (finalizer.empty()) return cache::ObjectPtr();
  const kube::ResourceRef ref = PrimaryRef(context, false);
  // The first try trusts the cached primary (no GET on the common path: the `test` makes a
  // stale cache a failed test); later ones read the live object.
  json known;
  if (context.primary != nullptr) known = ParseOrNull(context.primary->json());
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (attempt > 0 || !known.is_object()) {
      absl::StatusOr<std::string> live_text = client_->Get(ref);
      if (!live_text.ok()) return live_text.status();
      known = ParseOrNull(*live_text);
      if (!known.is_object()) return absl::DataLossError("the primary is not a JSON object");
    }
    const json& meta = Metadata(known);
    // Kubernetes refuses new finalizers on an object being deleted; there is nothing to guard.
    if (Member(meta, "deletionTimestamp") != nullptr) return cache::ObjectPtr();
    json patch = json::array();
    const json* finalizers = Member(meta, "finalizers");
    if (finalizers != nullptr && finalizers->is_array()) {
      for (const json& f : *finalizers) {
        if (f == finalizer) return cache::ObjectPtr();
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
    if (patched.ok()) {
      absl::StatusOr<cache::ObjectPtr> parsed = ParseLikeTheCache(*patched);
      // The finalizer is on; an answer that does not parse only costs the fresh resourceVersion.
      return parsed.ok() ? *parsed : cache::ObjectPtr();
    }
    if (!IsFailedTest(patched.status()) && !kube::IsConflict(patched.status())) {
      return patched.status();
    }
  }
  return absl::AbortedError(absl::StrCat("adding finalizer ", finalizer, " to ", Describe(ref),
                                         ": the finalizers kept changing"));
}

void Applier::RecordTerminal(const ReconcileContext& context, const absl::Status& status) {
  if (context.controller == nullptr) return;
  Run run(this, context);
  run.RecordFailure(kReasonReconcileError, kReasonTerminalError, std::string(status.message()));
}

}  // namespace ctrlhost::controller::apply
