#include "sdk/cpp/result.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::sdk {
namespace {

// Never throws, even for strings that are not valid UTF-8 (they are replaced).
std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool NonEmptyString(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get<std::string>().empty();
}

// Error.reason is an event reason too: the stricter of both limits.
constexpr size_t kMaxErrorReason = 128;

// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (metav1.Condition reason).
bool ValidConditionReason(absl::string_view reason) {
  if (reason.empty() || reason.size() > 1024 || !absl::ascii_isalpha(reason[0])) return false;
  for (char c : reason) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != ',' && c != ':') return false;
  }
  const char last = reason.back();
  return absl::ascii_isalnum(last) || last == '_';
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

pluginpb::ConditionStatus ToProto(ConditionStatus s) {
  switch (s) {
    case ConditionStatus::kTrue:
      return pluginpb::CONDITION_STATUS_TRUE;
    case ConditionStatus::kFalse:
      return pluginpb::CONDITION_STATUS_FALSE;
    case ConditionStatus::kUnknown:
      return pluginpb::CONDITION_STATUS_UNKNOWN;
  }
  return pluginpb::CONDITION_STATUS_UNKNOWN;
}

// The API group of an apiVersion ("" for "v1").
std::string GroupOf(const std::string& api_version) {
  const size_t slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

// Whether `obj` is of the primary's kind (group and kind; any version): the primary itself, or
// a child that the controller's own watch (and label selector) would see as a primary too.
bool IsOfPrimaryKind(const Request& request, const nlohmann::json& obj) {
  auto str = [&](const nlohmann::json* v) {
    return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
  };
  return str(FindPath(obj, "kind")) == request.kind() &&
         GroupOf(str(FindPath(obj, "apiVersion"))) == GroupOf(request.api_version());
}

}  // namespace

nlohmann::json NewObject(absl::string_view api_version, absl::string_view kind,
                         absl::string_view name) {
  nlohmann::json obj = {{"apiVersion", std::string(api_version)},
                        {"kind", std::string(kind)},
                        {"metadata", nlohmann::json::object()}};
  if (!name.empty()) obj["metadata"]["name"] = std::string(name);
  return obj;
}

void ComposeMergePatch(nlohmann::json* base, const nlohmann::json& patch) {
  if (!patch.is_object() || !base->is_object()) {
    *base = patch;
    return;
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    auto existing = base->find(it.key());
    if (existing != base->end() && existing->is_object() && it->is_object()) {
      ComposeMergePatch(&*existing, *it);
    } else {
      (*base)[it.key()] = *it;
    }
  }
}

Result Result::RetryableError(absl::string_view message, absl::string_view reason,
                              std::optional<absl::Duration> retry_after) {
  Result r;
  r.SetError(ErrorKind::kRetryable, message, reason, retry_after);
  return r;
}

Result Result::TerminalError(absl::string_view message, absl::string_view reason) {
  Result r;
  r.SetError(ErrorKind::kTerminal, message, reason);
  return r;
}

Result Result::FromStatus(const absl::Status& status) {
  if (status.ok()) return Result();
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kPermissionDenied:
      return TerminalError(status.ToString());
    default:
      return RetryableError(status.ToString());
  }
}

Result Result::Finalized() {
  Result r;
  r.SetFinalized();
  return r;
}

Result Result::Requeue(absl::Duration after) {
  Result r;
  r.SetRequeueAfter(after);
  return r;
}

nlohmann::json& Result::Desire(nlohmann::json object) {
  desired_.push_back(std::move(object));
  return desired_.back();
}

nlohmann::json& Result::Status() {
  if (!status_.has_value() || !status_->is_object()) status_ = nlohmann::json::object();
  return *status_;
}

void Result::MergeStatus(const nlohmann::json& patch) { ComposeMergePatch(&Status(), patch); }

void Result::SetCondition(absl::string_view type, ConditionStatus status, absl::string_view reason,
                          absl::string_view message) {
  Condition c{std::string(type), status, std::string(reason), std::string(message)};
  for (Condition& existing : conditions_) {
    if (existing.type == c.type) {
      existing = std::move(c);
      return;
    }
  }
  conditions_.push_back(std::move(c));
}

void Result::Event(EventType type, absl::string_view reason, absl::string_view message) {
  events_.push_back(EventRecord{type, std::string(reason), std::string(message)});
}

void Result::PatchPrimary(PatchType type, nlohmann::json patch,
                          absl::string_view resource_version) {
  patches_.push_back(PatchRecord{pluginpb::PATCH_TARGET_PRIMARY, "", "", "", type, std::move(patch),
                                 std::string(resource_version)});
}

void Result::PatchPrimaryStatus(PatchType type, nlohmann::json patch,
                                absl::string_view resource_version) {
  patches_.push_back(PatchRecord{pluginpb::PATCH_TARGET_PRIMARY_STATUS, "", "", "", type,
                                 std::move(patch), std::string(resource_version)});
}

void Result::PatchOwned(absl::string_view api_version, absl::string_view kind,
                        absl::string_view name, PatchType type, nlohmann::json patch,
                        absl::string_view resource_version) {
  patches_.push_back(PatchRecord{pluginpb::PATCH_TARGET_OWNED, std::string(api_version),
                                 std::string(kind), std::string(name), type, std::move(patch),
                                 std::string(resource_version)});
}

void Result::SetError(ErrorKind kind, absl::string_view message, absl::string_view reason,
                      std::optional<absl::Duration> retry_after) {
  error_ = ErrorRecord{kind, std::string(message), std::string(reason), retry_after};
}

void Result::Merge(Result other) {
  for (nlohmann::json& d : other.desired_) desired_.push_back(std::move(d));
  if (other.status_.has_value()) MergeStatus(*other.status_);
  for (Condition& c : other.conditions_) SetCondition(c.type, c.status, c.reason, c.message);
  for (EventRecord& e : other.events_) events_.push_back(std::move(e));
  for (PatchRecord& p : other.patches_) patches_.push_back(std::move(p));
  if (other.requeue_after_.has_value() &&
      (!requeue_after_.has_value() || *other.requeue_after_ < *requeue_after_)) {
    requeue_after_ = other.requeue_after_;
  }
  if (!error_.has_value()) error_ = std::move(other.error_);
  finalized_ = finalized_ && other.finalized_;
}

absl::StatusOr<pluginpb::ReconcileResponse> Result::ToResponse(
    const Request& request, uint64_t request_id,
    const std::set<pluginpb::Capability>& capabilities) const {
  auto need = [&](pluginpb::Capability cap, absl::string_view what) -> absl::Status {
    if (capabilities.count(cap) > 0) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        what, " needs ", pluginpb::Capability_Name(cap), ", which the host did not offer"));
  };
  if (!request.exists() && (!desired_.empty() || status_.has_value() || !conditions_.empty() ||
                            !patches_.empty() || finalized_)) {
    return absl::FailedPreconditionError(
        "the primary is gone: only events, an error and requeue_after may be answered");
  }
  if (finalized_ && !request.finalizing()) {
    return absl::FailedPreconditionError(
        "Finalized() answered to a request that is not finalizing");
  }
  if (finalized_ && error_.has_value()) {
    return absl::FailedPreconditionError("Finalized() together with an error");
  }
  if (requeue_after_.has_value() && *requeue_after_ < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("negative requeue_after");
  }
  if (error_.has_value()) {
    if (!error_->reason.empty() &&
        (error_->reason.size() > kMaxErrorReason || !ValidConditionReason(error_->reason))) {
      return absl::InvalidArgumentError(
          absl::StrCat("error reason \"", error_->reason,
                       "\" must be CamelCase: ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most ",
                       kMaxErrorReason, " characters"));
    }
    if (error_->retry_after.has_value() && error_->kind == ErrorKind::kTerminal) {
      return absl::InvalidArgumentError("error retry_after is only allowed on a retryable error");
    }
    if (error_->retry_after.has_value() && (*error_->retry_after < absl::ZeroDuration() ||
                                            *error_->retry_after == absl::InfiniteDuration())) {
      return absl::InvalidArgumentError("error retry_after is negative or infinite");
    }
  }

  pluginpb::ReconcileResponse resp;
  resp.set_request_id(request_id);
  if (!desired_.empty()) {
    if (absl::Status s = need(pluginpb::CAPABILITY_SERVER_SIDE_APPLY, "a desired object");
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < desired_.size(); ++i) {
    nlohmann::json obj = desired_[i];
    if (!obj.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("desired object ", i, " is not an object"));
    }
    if (!NonEmptyString(obj, "apiVersion") || !NonEmptyString(obj, "kind")) {
      return absl::InvalidArgumentError(
          absl::StrCat("desired object ", i, " needs apiVersion and kind"));
    }
    nlohmann::json& meta = obj["metadata"];
    if (meta.is_null()) meta = nlohmann::json::object();
    if (!meta.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("desired object ", i, ": metadata is not an object"));
    }
    if (!meta.contains("name")) meta["name"] = request.name();
    if (!NonEmptyString(meta, "name")) {
      return absl::InvalidArgumentError(absl::StrCat("desired object ", i, " has no name"));
    }
    if (!meta.contains("namespace") && !request.namespace_().empty()) {
      meta["namespace"] = request.namespace_();
    }
    // The primary's labels by default, except on objects of the primary's own kind: a child
    // with them would match the label selector that selected the primary and be reconciled as
    // a primary itself (and so on, one generation per reconcile). The same in every SDK.
    if (!meta.contains("labels") && !IsOfPrimaryKind(request, obj)) {
      const std::map<std::string, std::string> labels = request.labels();
      if (!labels.empty()) meta["labels"] = labels;
    }
    resp.add_desired_objects(Dump(obj));
  }
  for (const PatchRecord& p : patches_) {
    if (p.type == PatchType::kJsonPatch && !p.patch.is_array()) {
      return absl::InvalidArgumentError("a JSON patch must be an array of operations");
    }
    if (p.type == PatchType::kMergePatch && !p.patch.is_object()) {
      return absl::InvalidArgumentError("a merge patch must be a JSON object");
    }
    if (p.target == pluginpb::PATCH_TARGET_OWNED &&
        (p.api_version.empty() || p.kind.empty() || p.name.empty())) {
      return absl::InvalidArgumentError("a patch of an owned object needs apiVersion, kind, name");
    }
    pluginpb::Patch* out = resp.add_patches();
    out->set_target(p.target);
    out->set_api_version(p.api_version);
    out->set_kind(p.kind);
    out->set_name(p.name);
    out->set_type(p.type == PatchType::kJsonPatch ? pluginpb::PATCH_TYPE_JSON_PATCH
                                                  : pluginpb::PATCH_TYPE_MERGE_PATCH);
    out->set_patch(Dump(p.patch));
    out->set_resource_version(p.resource_version);
  }
  if (status_.has_value()) {
    if (!status_->is_object()) return absl::InvalidArgumentError("status is not a JSON object");
    if (!status_->empty()) resp.set_status(Dump(*status_));
  }
  if (!conditions_.empty()) {
    if (absl::Status s = need(pluginpb::CAPABILITY_CONDITIONS, "a condition"); !s.ok()) return s;
  }
  for (const Condition& c : conditions_) {
    if (c.type.empty()) return absl::InvalidArgumentError("a condition without type");
    if (!ValidConditionReason(c.reason)) {
      return absl::InvalidArgumentError(absl::StrCat("condition ", c.type, ": reason \"", c.reason,
                                                     "\" is not CamelCase ([A-Za-z0-9_,:])"));
    }
    pluginpb::Condition* out = resp.add_conditions();
    out->set_type(c.type);
    out->set_status(ToProto(c.status));
    out->set_reason(c.reason);
    out->set_message(c.message);
  }
  for (const EventRecord& e : events_) {
    if (e.reason.empty()) return absl::InvalidArgumentError("an event without reason");
    pluginpb::Event* out = resp.add_events();
    out->set_type(e.type == EventType::kNormal ? pluginpb::EVENT_TYPE_NORMAL
                                               : pluginpb::EVENT_TYPE_WARNING);
    out->set_reason(e.reason);
    out->set_message(e.message);
  }
  if (requeue_after_.has_value()) *resp.mutable_requeue_after() = ToProtoDuration(*requeue_after_);
  if (error_.has_value()) {
    resp.mutable_error()->set_message(error_->message);
    resp.mutable_error()->set_kind(error_->kind == ErrorKind::kTerminal
                                       ? pluginpb::ERROR_KIND_TERMINAL
                                       : pluginpb::ERROR_KIND_RETRYABLE);
    resp.mutable_error()->set_reason(error_->reason);
    if (error_->retry_after.has_value()) {
      *resp.mutable_error()->mutable_retry_after() = ToProtoDuration(*error_->retry_after);
    }
  }
  resp.set_finalized(finalized_);
  return resp;
}

pluginpb::ReconcileResponse ErrorResponse(uint64_t request_id, pluginpb::ErrorKind kind,
                                          absl::string_view message, absl::string_view reason) {
  pluginpb::ReconcileResponse resp;
  resp.set_request_id(request_id);
  resp.mutable_error()->set_kind(kind);
  resp.mutable_error()->set_message(std::string(message));
  resp.mutable_error()->set_reason(std::string(reason));
  return resp;
}

std::set<pluginpb::Capability> AllSdkCapabilities() {
  return {pluginpb::CAPABILITY_CANCELLATION,      pluginpb::CAPABILITY_METADATA_ONLY,
          pluginpb::CAPABILITY_CHILDREN,          pluginpb::CAPABILITY_RELATED_OBJECTS,
          pluginpb::CAPABILITY_SERVER_SIDE_APPLY, pluginpb::CAPABILITY_CONDITIONS,
          pluginpb::CAPABILITY_SCHEDULES,         pluginpb::CAPABILITY_BACKGROUND_TASKS};
}

}  // namespace ctrlhost::sdk
