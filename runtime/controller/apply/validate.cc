#include "runtime/controller/apply/validate.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/utf8.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

constexpr size_t kMaxConditionType = 316;
constexpr size_t kMaxConditionReason = 1024;
constexpr size_t kMaxConditionMessage = 32768;
constexpr size_t kMaxEventReason = 128;
// Event messages are kept up to this long (the recorder stores at most 1024 bytes of them,
// escaped); error messages too (they become a condition message, an event, the key's last
// error): a plugin's text is not copied whole whatever its size.
constexpr size_t kMaxEventMessage = kMaxConditionMessage;
constexpr size_t kMaxErrorMessage = kMaxConditionMessage;
// Error.reason becomes an event reason too, so it has the stricter of both limits.
constexpr size_t kMaxErrorReason = kMaxEventReason;
// google.protobuf.Duration's range: about 10000 years.
constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr size_t kMaxJsonDepth = 1000;

absl::Status Invalid(absl::string_view where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

struct GroupVersion {
  std::string group;
  std::string version;
};

GroupVersion ParseApiVersion(absl::string_view api_version) {
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(api_version, absl::MaxSplits('/', 1));
  if (parts.second.empty()) return {"", std::string(parts.first)};
  return {std::string(parts.first), std::string(parts.second)};
}

// A version as discovery serves them ("v1", "v1beta2"). It goes into the request path, so
// nothing else (a '/', "..") may pass.
bool IsVersion(absl::string_view version) {
  if (version.empty() || version.size() > 63) return false;
  for (char ch : version) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) return false;
  }
  return true;
}

// Names go into request paths: refuse what is not a valid path segment ("..", '/', '%') before
// the server sees it. The kind's own naming rule is left to the server.
absl::Status CheckName(absl::string_view where, absl::string_view field, absl::string_view name) {
  std::vector<std::string> problems = kube::IsValidPathSegmentName(name);
  if (name.size() > 253) problems.push_back("must be no more than 253 characters");
  if (problems.empty()) return absl::OkStatus();
  return Invalid(where, absl::StrCat(field, " \"", name, "\": ", absl::StrJoin(problems, "; ")));
}

bool IsPrimaryKind(const ControllerInfo& c, absl::string_view group, absl::string_view kind) {
  return c.primary.group == group && c.primary.kind == kind;
}

bool PrimaryIsNamespace(const ControllerInfo& c) {
  return c.primary.group.empty() && c.primary.kind == "Namespace";
}

const OwnedResource* FindOwned(const ControllerInfo& c, absl::string_view group,
                               absl::string_view kind) {
  for (const OwnedResource& owned : c.owns) {
    if (owned.mapping.group == group && owned.mapping.kind == kind) return &owned;
  }
  return nullptr;
}

// The deepest nesting of arrays and objects in `bytes` (strings skipped). Checked before
// parsing because serializing and destroying a JSON tree recurse once per level: a response
// nested a million levels deep must be refused, not overflow the stack.
size_t NestingDepth(absl::string_view bytes) {
  size_t depth = 0;
  size_t max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char ch = bytes[i];
    if (in_string) {
      if (ch == '\\') {
        ++i;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

// Parses `bytes` as JSON without exceptions; `where` names the item in the error.
absl::StatusOr<json> ParseJson(absl::string_view where, const std::string& bytes) {
  if (NestingDepth(bytes) > kMaxJsonDepth) {
    return Invalid(where, absl::StrCat("nested deeper than ", kMaxJsonDepth, " levels"));
  }
  json parsed = json::parse(bytes, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Invalid(where, "not valid JSON");
  return parsed;
}

const std::string* StringAt(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return nullptr;
  return it->get_ptr<const std::string*>();
}

// The namespace an object of `owned` (or the primary when null) named `given` ends up in, or an
// error. `given` is "" when the object names none.
absl::StatusOr<std::string> ResolveNamespace(const ReconcileContext& context,
                                             const kube::ResourceMapping& mapping, bool is_primary,
                                             const std::string& given, absl::string_view where) {
  if (!mapping.namespaced) {
    if (!given.empty()) {
      return Invalid(where, absl::StrCat("kind ", mapping.kind,
                                         " is cluster-scoped; metadata.namespace must be empty"));
    }
    return std::string();
  }
  if (is_primary) {
    if (!given.empty() && given != context.namespace_) {
      return Invalid(where, absl::StrCat("namespace \"", given, "\" is not the primary's \"",
                                         context.namespace_, "\""));
    }
    return context.namespace_;
  }
  const std::string allowed = ChildNamespace(context);
  if (allowed.empty()) {  // cluster-scoped primary other than a Namespace
    if (given.empty()) {
      return Invalid(where, "metadata.namespace is required (the primary is cluster-scoped)");
    }
    return given;
  }
  if (!given.empty() && given != allowed) {
    return Invalid(where, absl::StrCat("namespace \"", given, "\" is outside the primary's \"",
                                       allowed, "\""));
  }
  return allowed;
}

json OwnerReference(const ReconcileContext& context) {
  const ControllerInfo& c = *context.controller;
  return json{{"apiVersion", ApiVersionOf(c.primary)},
              {"kind", c.primary.kind},
              {"name", context.name},
              {"uid", std::string(context.primary->uid())},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

absl::Status ValidateDesired(const ReconcileContext& context, const std::string& bytes,
                             const std::string& where, absl::flat_hash_set<std::string>* seen,
                             Plan* plan) {
  const ControllerInfo& c = *context.controller;
  absl::StatusOr<json> parsed = ParseJson(where, bytes);
  if (!parsed.ok()) return parsed.status();
  json& object = *parsed;
  if (!object.is_object()) return Invalid(where, "not a JSON object");
  const std::string* api_version = StringAt(object, "apiVersion");
  const std::string* kind = StringAt(object, "kind");
  if (api_version == nullptr || api_version->empty()) return Invalid(where, "apiVersion missing");
  if (kind == nullptr || kind->empty()) return Invalid(where, "kind missing");
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return Invalid(where, "metadata missing");
  const std::string* name = StringAt(*meta, "name");
  if (name == nullptr || name->empty()) return Invalid(where, "metadata.name missing");
  std::string given_ns;
  if (auto ns = meta->find("namespace"); ns != meta->end() && !ns->is_null()) {
    if (!ns->is_string()) return Invalid(where, "metadata.namespace is not a string");
    given_ns = ns->get<std::string>();
  }
  const GroupVersion gv = ParseApiVersion(*api_version);
  if (!IsVersion(gv.version)) {
    return Invalid(where, absl::StrCat("apiVersion \"", *api_version, "\" is not group/version"));
  }
  RETURN_IF_ERROR(CheckName(where, "metadata.name", *name));
  if (!given_ns.empty() && !kube::IsDns1123Label(given_ns).empty()) {
    return Invalid(where,
                   absl::StrCat("metadata.namespace \"", given_ns, "\" is not a valid name"));
  }

  const OwnedResource* owned = FindOwned(c, gv.group, *kind);
  bool is_primary = false;
  if (IsPrimaryKind(c, gv.group, *kind) && *name == context.name) {
    // The primary itself (even when its kind is also owned: an object never owns itself).
    is_primary = true;
  } else if (owned == nullptr) {
    return Invalid(where, absl::StrCat("kind ", *api_version, " ", *kind,
                                       " is not owned by controller ", c.name));
  }
  const kube::ResourceMapping& mapping = is_primary ? c.primary : owned->mapping;
  ASSIGN_OR_RETURN(std::string ns, ResolveNamespace(context, mapping, is_primary, given_ns, where));
  if (is_primary && ns != context.namespace_) {
    return Invalid(where, "the primary's namespace does not match");
  }
  if (mapping.namespaced) (*meta)["namespace"] = ns;

  const std::string key = absl::StrCat(gv.group, "/", *kind, "/", ns, "/", *name);
  if (!seen->insert(key).second) {
    return Invalid(where, absl::StrCat("duplicate of an earlier desired object ", *kind, " ",
                                       ns.empty() ? "" : absl::StrCat(ns, "/"), *name));
  }

  if (!is_primary) {
    const std::string primary_uid(context.primary->uid());
    json owners = json::array();
    if (auto refs = meta->find("ownerReferences"); refs != meta->end() && !refs->is_null()) {
      if (!refs->is_array()) return Invalid(where, "metadata.ownerReferences is not an array");
      for (const json& ref : *refs) {
        if (!ref.is_object()) return Invalid(where, "metadata.ownerReferences has a non-object");
        const std::string* uid = StringAt(ref, "uid");
        if (uid != nullptr && *uid == primary_uid) continue;  // replaced by ours below
        auto controller = ref.find("controller");
        if (controller != ref.end() && controller->is_boolean() && controller->get<bool>()) {
          return Invalid(where, "metadata.ownerReferences names another controller");
        }
        owners.push_back(ref);
      }
    }
    owners.push_back(OwnerReference(context));
    (*meta)["ownerReferences"] = std::move(owners);
  }

  PlannedApply apply;
  apply.ref.group = gv.group;
  apply.ref.version = gv.version;
  apply.ref.resource = mapping.resource;
  apply.ref.namespace_name = ns;
  apply.ref.name = *name;
  apply.is_primary = is_primary;
  apply.group = gv.group;
  apply.kind = *kind;
  if (!is_primary) apply.owned_index = static_cast<int>(owned - c.owns.data());
  apply.object = std::move(object);
  plan->applies.push_back(std::move(apply));
  return absl::OkStatus();
}

absl::Status ValidateJsonPatch(const json& ops, const std::string& where, bool* has_test) {
  if (!ops.is_array()) return Invalid(where, "a JSON Patch must be an array of operations");
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string op_where = absl::StrCat(where, ".patch[", i, "]");
    const json& op = ops[i];
    const std::string* name = StringAt(op, "op");
    if (name == nullptr) return Invalid(op_where, "\"op\" missing");
    const bool known = *name == "add" || *name == "remove" || *name == "replace" ||
                       *name == "move" || *name == "copy" || *name == "test";
    if (!known) return Invalid(op_where, absl::StrCat("unknown op \"", *name, "\""));
    if (*name == "test") *has_test = true;
    const std::string* path = StringAt(op, "path");
    if (path == nullptr) return Invalid(op_where, "\"path\" missing");
    if (!path->empty() && (*path)[0] != '/') {
      return Invalid(op_where, "\"path\" is not a JSON pointer");
    }
    if ((*name == "add" || *name == "replace" || *name == "test") && !op.contains("value")) {
      return Invalid(op_where, "\"value\" missing");
    }
    if (*name == "move" || *name == "copy") {
      const std::string* from = StringAt(op, "from");
      if (from == nullptr || (!from->empty() && (*from)[0] != '/')) {
        return Invalid(op_where, "\"from\" missing or not a JSON pointer");
      }
    }
  }
  return absl::OkStatus();
}

// Whether a validated patch body (JSON Patch array or merge patch object) would replace or
// edit metadata.ownerReferences.
bool TouchesOwnership(const json& body) {
  if (body.is_object()) {
    auto meta = body.find("metadata");
    if (meta == body.end()) return false;
    return !meta->is_object() || meta->contains("ownerReferences");
  }
  if (!body.is_array()) return false;
  for (const json& op : body) {
    const std::string* path = StringAt(op, "path");
    if (path == nullptr) continue;
    const std::string* name = StringAt(op, "op");
    if (name != nullptr && *name == "test") continue;
    auto touches = [](const std::string& p) {
      return p.empty() || p == "/metadata" || absl::StartsWith(p, "/metadata/ownerReferences");
    };
    if (touches(*path)) return true;
    const std::string* from = StringAt(op, "from");
    if (name != nullptr && *name == "move" && from != nullptr && touches(*from)) return true;
  }
  return false;
}

absl::Status ValidatePatch(const ReconcileContext& context, const pluginpb::Patch& patch,
                           const std::string& where, Plan* plan) {
  const ControllerInfo& c = *context.controller;
  PlannedPatch planned;
  planned.what = where;
  switch (patch.target()) {
    case pluginpb::PATCH_TARGET_PRIMARY:
    case pluginpb::PATCH_TARGET_PRIMARY_STATUS: {
      if (!patch.api_version().empty() || !patch.kind().empty() || !patch.name().empty()) {
        const GroupVersion gv = ParseApiVersion(patch.api_version());
        if (!IsPrimaryKind(c, gv.group, patch.kind()) || patch.name() != context.name) {
          return Invalid(where, "a PRIMARY / PRIMARY_STATUS patch must not name another object");
        }
      }
      planned.ref.group = c.primary.group;
      planned.ref.version = c.primary.version;
      planned.ref.resource = c.primary.resource;
      planned.ref.namespace_name = context.namespace_;
      planned.ref.name = context.name;
      if (patch.target() == pluginpb::PATCH_TARGET_PRIMARY_STATUS) {
        if (!c.primary.has_status) {
          return Invalid(where, absl::StrCat("a PRIMARY_STATUS patch needs a status subresource; "
                                             "kind ",
                                             ApiVersionOf(c.primary), " ", c.primary.kind,
                                             " has none (a PRIMARY patch changes the object)"));
        }
        planned.ref.subresource = "status";
      }
      planned.targets_primary = true;
      break;
    }
    case pluginpb::PATCH_TARGET_OWNED: {
      const GroupVersion gv = ParseApiVersion(patch.api_version());
      if (!IsVersion(gv.version) || patch.kind().empty()) {
        return Invalid(where, "an OWNED patch needs api_version (group/version) and kind");
      }
      const OwnedResource* owned = FindOwned(c, gv.group, patch.kind());
      if (owned == nullptr) {
        return Invalid(where, absl::StrCat("kind ", patch.api_version(), " ", patch.kind(),
                                           " is not owned by controller ", c.name));
      }
      if (patch.name().empty()) return Invalid(where, "an OWNED patch needs a name");
      RETURN_IF_ERROR(CheckName(where, "name", patch.name()));
      const std::string ns = owned->mapping.namespaced ? ChildNamespace(context) : "";
      if (owned->mapping.namespaced && ns.empty()) {
        return Invalid(where, "an OWNED patch of a namespaced kind needs a namespaced primary");
      }
      planned.ref.group = gv.group;
      planned.ref.version = gv.version;
      planned.ref.resource = owned->mapping.resource;
      planned.ref.namespace_name = ns;
      planned.ref.name = patch.name();
      planned.owned_index = static_cast<int>(owned - c.owns.data());
      break;
    }
    default:
      return Invalid(where, "target is unspecified or unknown");
  }
  ASSIGN_OR_RETURN(json body, ParseJson(where, patch.patch()));
  switch (patch.type()) {
    case pluginpb::PATCH_TYPE_JSON_PATCH: {
      RETURN_IF_ERROR(ValidateJsonPatch(body, where, &planned.has_test_op));
      planned.type = kube::PatchType::kJson;
      if (!patch.resource_version().empty()) {
        // `replace` (not `test`): the server then checks the resourceVersion as an update
        // precondition and answers 409 Conflict, where a failed `test` would be a 422.
        body.insert(body.begin(), json{{"op", "replace"},
                                       {"path", "/metadata/resourceVersion"},
                                       {"value", patch.resource_version()}});
      }
      break;
    }
    case pluginpb::PATCH_TYPE_MERGE_PATCH: {
      if (!body.is_object()) return Invalid(where, "a merge patch must be a JSON object");
      planned.type = kube::PatchType::kMerge;
      if (!patch.resource_version().empty()) {
        json& meta = body["metadata"];
        if (!meta.is_object()) meta = json::object();
        meta["resourceVersion"] = patch.resource_version();
      }
      break;
    }
    default:
      return Invalid(where, "type is unspecified or unknown");
  }
  if (patch.target() == pluginpb::PATCH_TARGET_OWNED && TouchesOwnership(body)) {
    return Invalid(where,
                   "an OWNED patch must not change metadata.ownerReferences (the host sets the "
                   "controller reference; desired objects get it)");
  }
  planned.body = body.dump();
  // Only an OWNED JSON Patch needs the parsed form later (the applier pins its target by uid).
  if (patch.target() == pluginpb::PATCH_TARGET_OWNED && planned.type == kube::PatchType::kJson) {
    planned.parsed = std::move(body);
  }
  plan->patches.push_back(std::move(planned));
  return absl::OkStatus();
}

bool IsConditionReason(absl::string_view reason) {
  auto alpha = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); };
  auto inner = [&](char ch) {
    return alpha(ch) || (ch >= '0' && ch <= '9') || ch == '_' || ch == ',' || ch == ':';
  };
  if (reason.empty() || !alpha(reason.front())) return false;
  for (char ch : reason) {
    if (!inner(ch)) return false;
  }
  const char last = reason.back();
  return last != ',' && last != ':';
}

absl::Status ValidateConditions(const pluginpb::ReconcileResponse& response, Plan* plan) {
  absl::flat_hash_set<std::string> types;
  for (int i = 0; i < response.conditions_size(); ++i) {
    const pluginpb::Condition& condition = response.conditions(i);
    const std::string where = absl::StrCat("conditions[", i, "]");
    if (condition.type().empty()) return Invalid(where, "type is empty");
    if (condition.type().size() > kMaxConditionType) {
      return Invalid(where, absl::StrCat("type is longer than ", kMaxConditionType));
    }
    if (!types.insert(condition.type()).second) {
      return Invalid(where, absl::StrCat("type \"", condition.type(), "\" given twice"));
    }
    if (condition.status() != pluginpb::CONDITION_STATUS_TRUE &&
        condition.status() != pluginpb::CONDITION_STATUS_FALSE &&
        condition.status() != pluginpb::CONDITION_STATUS_UNKNOWN) {
      return Invalid(where, "status is unspecified or unknown");
    }
    if (condition.reason().size() > kMaxConditionReason || !IsConditionReason(condition.reason())) {
      return Invalid(where, absl::StrCat("reason \"", condition.reason(),
                                         "\" must be CamelCase: ^[A-Za-z]([A-Za-z0-9_,:]*"
                                         "[A-Za-z0-9_])?$, at most 1024 characters"));
    }
    if (condition.message().size() > kMaxConditionMessage) {
      return Invalid(where, absl::StrCat("message is longer than ", kMaxConditionMessage));
    }
    plan->conditions.push_back(condition);
  }
  return absl::OkStatus();
}

absl::Status ValidateEvents(const pluginpb::ReconcileResponse& response, Plan* plan) {
  for (int i = 0; i < response.events_size(); ++i) {
    const pluginpb::Event& event = response.events(i);
    const std::string where = absl::StrCat("events[", i, "]");
    if (event.type() != pluginpb::EVENT_TYPE_NORMAL &&
        event.type() != pluginpb::EVENT_TYPE_WARNING) {
      return Invalid(where, "type is unspecified or unknown");
    }
    if (event.reason().empty()) return Invalid(where, "reason is empty");
    if (event.reason().size() > kMaxEventReason) {
      return Invalid(where, absl::StrCat("reason is longer than ", kMaxEventReason));
    }
    // Field by field, so that a long message is not copied whole.
    pluginpb::Event& kept = plan->events.emplace_back();
    kept.set_type(event.type());
    kept.set_reason(event.reason());
    kept.set_message(std::string(common::Utf8Prefix(event.message(), kMaxEventMessage)));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> NonNegativeDuration(absl::string_view where,
                                                   const google::protobuf::Duration& duration) {
  const int64_t seconds = duration.seconds();
  const int32_t nanos = duration.nanos();
  // google.protobuf.Duration's own range: +-10000 years, nanos of the seconds' sign.
  if (seconds < -kMaxDurationSeconds || seconds > kMaxDurationSeconds || nanos <= -1'000'000'000 ||
      nanos >= 1'000'000'000 || (seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return Invalid(where, "not a valid Duration");
  }
  if (seconds < 0 || nanos < 0) return Invalid(where, "negative");
  return absl::Seconds(seconds) + absl::Nanoseconds(nanos);
}

absl::Status ValidateError(const pluginpb::Error& error, Plan* plan) {
  if (error.kind() != pluginpb::ERROR_KIND_RETRYABLE &&
      error.kind() != pluginpb::ERROR_KIND_TERMINAL) {
    return Invalid("error", "kind is unspecified or unknown");
  }
  if (!error.reason().empty() &&
      (error.reason().size() > kMaxErrorReason || !IsConditionReason(error.reason()))) {
    return Invalid("error", absl::StrCat("reason \"", error.reason(),
                                         "\" must be CamelCase: ^[A-Za-z]([A-Za-z0-9_,:]*"
                                         "[A-Za-z0-9_])?$, at most ",
                                         kMaxErrorReason, " characters"));
  }
  if (error.has_retry_after()) {
    if (error.kind() != pluginpb::ERROR_KIND_RETRYABLE) {
      return Invalid("error", "retry_after is only allowed on a retryable error");
    }
    ASSIGN_OR_RETURN(plan->error_retry_after,
                     NonNegativeDuration("error.retry_after", error.retry_after()));
  }
  plan->has_error = true;
  plan->error_kind = error.kind();
  plan->error_message = std::string(common::Utf8Prefix(error.message(), kMaxErrorMessage));
  if (plan->error_message.size() < error.message().size()) {
    absl::StrAppend(&plan->error_message, "... (", error.message().size(), " bytes, cut)");
  }
  plan->error_reason = error.reason();
  return absl::OkStatus();
}

absl::Status TooLarge(absl::string_view where, size_t bytes) {
  return Invalid(where, absl::StrCat(bytes, " bytes, more than the ", kMaxWriteBytes,
                                     " bytes one write may carry (the API server's request "
                                     "limit)"));
}

// The size limits of validate.h, on the raw text: nothing is parsed or copied before they pass.
absl::Status CheckSizes(const pluginpb::ReconcileResponse& response) {
  size_t total = 0;
  for (int i = 0; i < response.desired_objects_size(); ++i) {
    const size_t bytes = response.desired_objects(i).size();
    if (bytes > kMaxWriteBytes) return TooLarge(absl::StrCat("desired_objects[", i, "]"), bytes);
    total += bytes;
  }
  for (int i = 0; i < response.patches_size(); ++i) {
    const size_t bytes = response.patches(i).patch().size();
    if (bytes > kMaxWriteBytes) return TooLarge(absl::StrCat("patches[", i, "]"), bytes);
    total += bytes;
  }
  size_t status_bytes = response.status().size();
  for (const pluginpb::Condition& condition : response.conditions()) {
    status_bytes +=
        condition.type().size() + condition.reason().size() + condition.message().size();
  }
  if (status_bytes > kMaxWriteBytes) return TooLarge("status and conditions", status_bytes);
  total += status_bytes;
  for (const pluginpb::Event& event : response.events()) {
    total += event.reason().size() + std::min(event.message().size(), kMaxEventMessage);
  }
  if (total > kMaxResponseWriteBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the desired objects, patches, status, conditions and events total ", total,
        " bytes, more than the ", kMaxResponseWriteBytes, " bytes one response may write"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming `field` and `capability` when `used` and the capability is not in
// effect on the connection that carried the response (plugin.proto's Capability).
absl::Status NeedsCapability(const Capabilities& in_effect, bool used, absl::string_view field,
                             pluginpb::Capability capability) {
  if (!used || std::find(in_effect.begin(), in_effect.end(), capability) != in_effect.end()) {
    return absl::OkStatus();
  }
  return Invalid(field, absl::StrCat("requires ", pluginpb::Capability_Name(capability),
                                     ", which is not in effect on this plugin connection"));
}

// The features of a response that need a capability (docs/protocol.md section 2). Those of a
// controller's declaration (children, related objects, metadata-only kinds, delete_absent,
// schedules, background tasks) are the handshake's to check; CancelNotice and the
// StartTasks / StopTasks notices are the host's to send only when in effect.
absl::Status CheckCapabilities(const Capabilities& in_effect,
                               const pluginpb::ReconcileResponse& response) {
  RETURN_IF_ERROR(NeedsCapability(in_effect, response.desired_objects_size() > 0, "desired_objects",
                                  pluginpb::CAPABILITY_SERVER_SIDE_APPLY));
  RETURN_IF_ERROR(NeedsCapability(in_effect, response.conditions_size() > 0, "conditions",
                                  pluginpb::CAPABILITY_CONDITIONS));
  RETURN_IF_ERROR(NeedsCapability(in_effect, response.has_task_enqueue(), "task_enqueue",
                                  pluginpb::CAPABILITY_BACKGROUND_TASKS));
  RETURN_IF_ERROR(NeedsCapability(in_effect, response.has_task_status(), "task_status",
                                  pluginpb::CAPABILITY_BACKGROUND_TASKS));
  return absl::OkStatus();
}

bool PrimaryIsFinalizing(const ReconcileContext& context) {
  const ControllerInfo& c = *context.controller;
  if (context.primary == nullptr || c.finalizer.empty()) return false;
  if (context.primary->deletion_timestamp().empty()) return false;
  for (size_t i = 0; i < context.primary->finalizer_count(); ++i) {
    if (context.primary->finalizer(i) == c.finalizer) return true;
  }
  return false;
}

}  // namespace

std::string ApiVersionOf(const kube::ResourceMapping& mapping) {
  return mapping.group.empty() ? mapping.version
                               : absl::StrCat(mapping.group, "/", mapping.version);
}

std::string ChildNamespace(const ReconcileContext& context) {
  if (context.controller->primary.namespaced) return context.namespace_;
  if (PrimaryIsNamespace(*context.controller)) return context.name;
  return "";
}

std::string NotControlledMessage(const ReconcileContext& context, size_t index,
                                 const PlannedApply& apply, absl::string_view controller_uid) {
  const kube::ResourceRef& ref = apply.ref;
  const std::string primary =
      absl::StrCat(context.controller->primary.kind, " ", context.namespace_,
                   context.namespace_.empty() ? "" : "/", context.name);
  return absl::StrCat(
      "desired_objects[", index, "]: ", apply.kind, " ", ref.resource, ref.group.empty() ? "" : ".",
      ref.group, " ", ref.namespace_name.empty() ? "" : absl::StrCat(ref.namespace_name, "/"),
      ref.name, " exists and ",
      controller_uid.empty()
          ? "has no controller"
          : absl::StrCat("is controlled by another object (uid ", controller_uid, ")"),
      "; ", primary, " does not adopt it (the protocol has no adoption): delete it (", primary,
      " is reconciled again when it is gone) or rename the child");
}

absl::StatusOr<Plan> ValidateResponse(const ReconcileContext& context,
                                      const pluginpb::ReconcileResponse& response) {
  if (context.controller == nullptr) return absl::InvalidArgumentError("no controller");
  RETURN_IF_ERROR(CheckSizes(response));
  if (context.capabilities.has_value()) {
    RETURN_IF_ERROR(CheckCapabilities(*context.capabilities, response));
  }
  // A TaskEnqueue or TaskStatus travels alone with request_id 0 (the session hands it to the
  // background tasks); inside an answer to a request it would be silently lost.
  if (response.has_task_enqueue() || response.has_task_status()) {
    return Invalid(response.has_task_enqueue() ? "task_enqueue" : "task_status",
                   "a background task's message is sent on its own with request_id 0, not in "
                   "the answer to a request");
  }
  Plan plan;
  if (context.primary == nullptr) {
    // The answer to a REASON_PRIMARY_DELETED request: nothing is left to change.
    const char* forbidden = nullptr;
    if (response.desired_objects_size() > 0) forbidden = "desired_objects";
    if (response.patches_size() > 0) forbidden = "patches";
    if (!response.status().empty()) forbidden = "status";
    if (response.conditions_size() > 0) forbidden = "conditions";
    if (response.finalized()) forbidden = "finalized";
    if (forbidden != nullptr) {
      return Invalid(forbidden,
                     "the primary is gone; only events, error and requeue_after are allowed");
    }
  }
  if (context.primary != nullptr && !context.controller->primary.has_status) {
    // The host writes status and conditions through the status subresource only. A kind without
    // one (ConfigMap, Secret, ServiceAccount, a CRD without subresources.status) would take them,
    // if at all, as ordinary fields through the main resource: a ConfigMap has no status, and
    // kube-apiserver drops it silently, while the embedded server would keep it. Refused alike
    // everywhere (ctrlhost test --check too), so no cluster shows a status that never lands.
    const char* written = !response.status().empty()       ? "status"
                          : response.conditions_size() > 0 ? "conditions"
                                                           : nullptr;
    if (written != nullptr) {
      const kube::ResourceMapping& m = context.controller->primary;
      return Invalid(written, absl::StrCat("kind ", ApiVersionOf(m), " ", m.kind,
                                           " has no status subresource, so it has no status to "
                                           "write; record the outcome with an event instead"));
    }
  }
  absl::flat_hash_set<std::string> seen;
  for (int i = 0; i < response.desired_objects_size(); ++i) {
    RETURN_IF_ERROR(ValidateDesired(context, response.desired_objects(i),
                                    absl::StrCat("desired_objects[", i, "]"), &seen, &plan));
  }
  for (int i = 0; i < response.patches_size(); ++i) {
    RETURN_IF_ERROR(
        ValidatePatch(context, response.patches(i), absl::StrCat("patches[", i, "]"), &plan));
  }
  if (!response.status().empty()) {
    ASSIGN_OR_RETURN(json status, ParseJson("status", response.status()));
    if (!status.is_object()) return Invalid("status", "not a JSON object");
    plan.status = std::move(status);
  }
  RETURN_IF_ERROR(ValidateConditions(response, &plan));
  RETURN_IF_ERROR(ValidateEvents(response, &plan));
  if (response.has_requeue_after()) {
    ASSIGN_OR_RETURN(plan.requeue_after,
                     NonNegativeDuration("requeue_after", response.requeue_after()));
  }
  if (response.has_error()) RETURN_IF_ERROR(ValidateError(response.error(), &plan));
  if (response.finalized()) {
    if (plan.has_error) return Invalid("finalized", "not allowed together with an error");
    if (!PrimaryIsFinalizing(context)) {
      return Invalid("finalized",
                     "the primary is not being deleted with the controller's finalizer on it");
    }
    plan.finalized = true;
  }
  return plan;
}

}  // namespace ctrlhost::controller::apply
