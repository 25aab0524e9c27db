// Create, update (PUT) and patch, on objects and on the status subresource.
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/body_limits.h"
#include "runtime/apiserver/crd.h"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/apiserver/openapi/schema.h"
#include "runtime/apiserver/patch/apply.h"
#include "runtime/apiserver/patch/managed_fields.h"
#include "runtime/apiserver/patch/merge_strategy.h"
#include "runtime/apiserver/patch/patch.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/utf8.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::apiserver {
namespace {

std::string Query(const ApiRequest& req, const char* key) {
  auto it = req.query.find(key);
  return it == req.query.end() ? "" : it->second;
}

absl::StatusOr<bool> DryRun(const ApiRequest& req) { return ParseDryRun(Query(req, "dryRun")); }

bool IsJsonContentType(absl::string_view content_type) {
  absl::string_view ct = absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';')));
  return ct.empty() || ct == "application/json" || ct == "*/*";
}

// Members given twice in a JSON body: the last value wins (as Go's decoder, kube 1.20's
// behaviour), and like kube-apiserver 1.25+ each is a warning (fieldValidation=Warn, the
// default) or refuses the body (Strict).
absl::Status CheckDuplicateFields(const ApiRequest& req, openapi::FieldValidation mode,
                                  std::vector<std::string>* warnings) {
  if (mode == openapi::FieldValidation::kIgnore || !IsJsonContentType(req.content_type)) {
    return absl::OkStatus();
  }
  for (const std::string& path : DuplicateJsonFields(req.body)) {
    if (mode == openapi::FieldValidation::kStrict) {
      return kube::BadRequestError(
          absl::StrCat("strict decoding error: duplicate field \"", path, "\""));
    }
    warnings->push_back(absl::StrCat("duplicate field \"", path, "\""));
  }
  return absl::OkStatus();
}

// Members given twice in a merge, strategic merge or JSON Patch body. kube-apiserver 1.27+
// (endpoints/handlers/patch.go) decodes these bodies with sigs.k8s.io/json's UnmarshalStrict
// unless fieldValidation=Ignore: with Warn (the default) each duplicate is a warning ("json
// patch duplicate field ..." for a JSON Patch) and the patch applies with the last value (Go's
// decoder, and ours); with Strict the patch is refused with 422 Invalid on field `patch`.
// Apply bodies are YAML here, and the YAML parser refuses duplicate keys whatever the mode.
absl::Status CheckPatchDuplicateFields(const ApiRequest& req, PatchType type,
                                       openapi::FieldValidation mode,
                                       std::vector<std::string>* warnings) {
  if (mode == openapi::FieldValidation::kIgnore || type == PatchType::kApplyPatch) {
    return absl::OkStatus();
  }
  std::vector<std::string> problems;
  for (const std::string& path : DuplicateJsonFields(req.body)) {
    problems.push_back(absl::StrCat(type == PatchType::kJsonPatch ? "json patch " : "",
                                    "duplicate field \"", path, "\""));
  }
  if (problems.empty()) return absl::OkStatus();
  if (mode == openapi::FieldValidation::kStrict) {
    // kube quotes the patched object as the invalid value; the patch itself says more (and is
    // what the client sent), cut so that a large body does not make a large message.
    constexpr size_t kQuotedBytes = 1024;
    std::string value(common::Utf8Prefix(req.body, kQuotedBytes));
    if (value.size() < req.body.size()) value += "...";
    return kube::InvalidError(
        "", "", "",
        {kube::StatusCause{"FieldValueInvalid",
                           absl::StrCat("Invalid value: ", kube::GoQuote(value),
                                        ": strict decoding error: ", absl::StrJoin(problems, ", ")),
                           "patch"}});
  }
  warnings->insert(warnings->end(), problems.begin(), problems.end());
  return absl::OkStatus();
}

// Custom resources: prune, default and validate by the served version's openAPIV3Schema, adding
// `warnings`. Built-in kinds pass unchanged; a CRD with CEL rules is warned they are not enforced.
absl::Status ApplySchema(const ResourceInfo& r, openapi::FieldValidation mode, nlohmann::json& obj,
                         std::vector<std::string>* warnings) {
  if (r.group == "apiextensions.k8s.io" && r.kind == "CustomResourceDefinition") {
    WarnUnenforcedCelRules(obj, warnings);
  }
  if (!r.custom || r.schema == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> w,
                   openapi::PrepareCustomResource(*r.schema, r.group, r.kind, mode, obj));
  warnings->insert(warnings->end(), w.begin(), w.end());
  return absl::OkStatus();
}

// Adds `Warning: 299 - "text"` headers, as kube-apiserver reports dropped unknown fields.
ApiResponse WithWarnings(ApiResponse resp, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) {
    std::string text;
    for (char c : w) {
      if (c == '"' || c == '\\') text.push_back('\\');
      text.push_back(c == '\n' || c == '\r' ? ' ' : c);
    }
    resp.headers.emplace_back("Warning", absl::StrCat("299 - \"", text, "\""));
  }
  return resp;
}

// The field manager of a non-apply write: ?fieldManager=, else the User-Agent's product name.
std::string FieldManager(const ApiRequest& req) {
  std::string m = Query(req, "fieldManager");
  if (!m.empty()) return m;
  m = req.user_agent.substr(0, req.user_agent.find('/'));
  return m.empty() ? "unknown" : m;
}

kube::NameRule NameRuleFor(const ResourceInfo& r) {
  if (r.custom) return kube::NameRule::kPathSegment;
  if (r.group.empty() && (r.resource == "namespaces" || r.resource == "services")) {
    return kube::NameRule::kDns1123Label;
  }
  return kube::NameRule::kDns1123Subdomain;
}

// The body must be an object of the endpoint's kind and version.
absl::Status CheckKind(const ResourceInfo& r, nlohmann::json& obj) {
  if (!obj.is_object()) return kube::BadRequestError("the request body must be a JSON object");
  // Built-in kinds decode into the endpoint's type, so a body without apiVersion and kind
  // gets them from the URL (typed clients often leave them out); custom resources decode as
  // unstructured and need them.
  if (!r.custom) {
    for (const auto& [field, value] :
         {std::pair<const char*, std::string>{"apiVersion", r.ApiVersion()},
          std::pair<const char*, std::string>{"kind", r.kind}}) {
      auto it = obj.find(field);
      if (it == obj.end() || (it->is_string() && it->get_ref<const std::string&>().empty())) {
        obj[field] = value;
      }
    }
  }
  auto kind = obj.find("kind");
  if (kind == obj.end() || !kind->is_string() || kind->get<std::string>().empty()) {
    return kube::BadRequestError("Object 'Kind' is missing in the request body");
  }
  if (kind->get<std::string>() != r.kind) {
    return kube::BadRequestError(absl::StrCat("the kind in the body (", kind->get<std::string>(),
                                              ") does not match the endpoint's kind (", r.kind,
                                              ")"));
  }
  auto av = obj.find("apiVersion");
  if (av == obj.end() || !av->is_string() || av->get<std::string>().empty()) {
    return kube::BadRequestError("Object 'apiVersion' is missing in the request body");
  }
  if (av->get<std::string>() != r.ApiVersion()) {
    return kube::BadRequestError(
        absl::StrCat("the API version in the data (", av->get<std::string>(),
                     ") does not match the expected API version (", r.ApiVersion(), ")"));
  }
  if (obj.contains("metadata") && !obj["metadata"].is_object()) {
    return kube::BadRequestError("metadata must be an object");
  }
  if (!obj.contains("metadata")) obj["metadata"] = nlohmann::json::object();
  return absl::OkStatus();
}

absl::Status CheckNamespaceAndName(const ResourceInfo& r, nlohmann::json& obj, absl::string_view ns,
                                   absl::string_view url_name) {
  nlohmann::json& meta = obj["metadata"];
  if (r.namespaced) {
    auto it = meta.find("namespace");
    if (it != meta.end() &&
        !(it->is_string() && (it->get<std::string>().empty() || it->get<std::string>() == ns))) {
      return kube::BadRequestError(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    meta["namespace"] = std::string(ns);
  } else {
    meta.erase("namespace");
  }
  if (!url_name.empty()) {
    auto it = meta.find("name");
    if (it == meta.end() || !it->is_string() || it->get<std::string>().empty()) {
      meta["name"] = std::string(url_name);
    } else if (it->get<std::string>() != url_name) {
      return kube::BadRequestError(absl::StrCat("the name of the object (", it->get<std::string>(),
                                                ") does not match the name on the URL (", url_name,
                                                ")"));
    }
  }
  return absl::OkStatus();
}

// core/v1 Secret: `stringData` is write-only; its entries are base64-encoded into `data`
// (overriding keys present in both) and the field is dropped, as kube-apiserver's conversion does.
absl::Status ConvertSecretStringData(const ResourceInfo& r, nlohmann::json& obj) {
  if (!r.group.empty() || r.resource != "secrets") return absl::OkStatus();
  auto it = obj.find("stringData");
  if (it == obj.end()) return absl::OkStatus();
  if (it->is_null()) {
    obj.erase(it);
    return absl::OkStatus();
  }
  if (!it->is_object()) {
    return kube::BadRequestError(absl::StrCat(
        "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal ",
        it->type_name(), " into Go struct field Secret.stringData of type map[string]string"));
  }
  nlohmann::json& data = obj["data"];
  if (data.is_null()) data = nlohmann::json::object();
  if (!data.is_object()) {
    return kube::BadRequestError(
        "Secret in version \"v1\" cannot be handled as a Secret: data must be an object");
  }
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_string()) {
      return kube::BadRequestError(absl::StrCat(
          "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal ",
          e.value().type_name(), " into Go struct field Secret.stringData of type string"));
    }
    data[e.key()] = absl::Base64Escape(e.value().get_ref<const std::string&>());
  }
  obj.erase("stringData");
  return absl::OkStatus();
}

// ConfigMap and Secret maps of strings (data, binaryData): what kube-apiserver's decoder refuses
// with 400 before validation (a number in ConfigMap.data is not a string).
absl::Status CheckStringMaps(const ResourceInfo& r, const nlohmann::json& obj) {
  if (!r.group.empty() || (r.kind != "ConfigMap" && r.kind != "Secret")) return absl::OkStatus();
  for (const char* field : {"data", "binaryData"}) {
    auto it = obj.find(field);
    if (it == obj.end() || it->is_null()) continue;
    const std::string prefix = absl::StrCat(r.kind, " in version \"v1\" cannot be handled as a ",
                                            r.kind, ": json: cannot unmarshal ");
    if (!it->is_object()) {
      return kube::BadRequestError(absl::StrCat(prefix, it->type_name(), " into Go struct field ",
                                                r.kind, ".", field, " of type map[string]"));
    }
    for (auto e = it->begin(); e != it->end(); ++e) {
      if (!e.value().is_string()) {
        return kube::BadRequestError(absl::StrCat(prefix, e.value().type_name(),
                                                  " into Go struct field ", r.kind, ".", field,
                                                  " of type string"));
      }
    }
  }
  return absl::OkStatus();
}

// An Event (core/v1 or events.k8s.io/v1) regards an object in its own namespace, or a
// cluster-scoped one from "default" or no namespace: kube-apiserver's rule and message.
absl::Status ValidateEventNamespace(const ResourceInfo& r, const nlohmann::json& obj) {
  const char* member = r.group == "events.k8s.io" ? "regarding" : "involvedObject";
  auto it = obj.find(member);
  std::string involved;
  if (it != obj.end() && it->is_object()) {
    auto n = it->find("namespace");
    if (n != it->end() && n->is_string()) involved = n->get<std::string>();
  }
  const std::string ns = MetaString(obj, "namespace");
  const bool ok = involved.empty() ? ns.empty() || ns == "default" : ns == involved;
  if (ok) return absl::OkStatus();
  return kube::InvalidError(
      r.group, r.kind, MetaString(obj, "name"),
      {{"FieldValueInvalid",
        absl::StrCat("Invalid value: \"", involved, "\": does not match event.namespace"),
        "involvedObject.namespace"}});
}

// Kind-specific conversion of an incoming object, then the checks every write makes.
absl::Status NormalizeAndValidate(const ResourceInfo& r, nlohmann::json& obj) {
  RETURN_IF_ERROR(ConvertSecretStringData(r, obj));
  RETURN_IF_ERROR(CheckStringMaps(r, obj));
  std::vector<kube::StatusCause> causes =
      kube::ValidateObjectMeta(obj, NameRuleFor(r), r.namespaced);
  if (!causes.empty()) {
    return kube::InvalidError(r.group, r.kind, MetaString(obj, "name"), std::move(causes));
  }
  if (r.group == "apiextensions.k8s.io" && r.resource == "customresourcedefinitions") {
    return ValidateCrd(obj).status();
  }
  if ((r.group.empty() || r.group == "events.k8s.io") && r.resource == "events") {
    return ValidateEventNamespace(r, obj);
  }
  return absl::OkStatus();
}

// Server-set fields of a new object.
void PrepareCreate(const ResourceInfo& r, nlohmann::json& obj, absl::Time now) {
  nlohmann::json& meta = obj["metadata"];
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = FormatTimestamp(now);
  meta.erase("resourceVersion");
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("selfLink");
  if (r.tracks_generation || r.custom) {
    meta["generation"] = 1;
  } else {
    meta.erase("generation");
  }
  // A kind with a status subresource takes none on create; a built-in kind without one
  // (ConfigMap, Secret, ServiceAccount, Event, Lease) has no status field at all, which
  // kube-apiserver drops as an unknown field.
  if (r.has_status || !r.custom) obj.erase("status");
  if (r.group.empty() && r.resource == "namespaces") {
    obj["spec"]["finalizers"] = {"kubernetes"};
    obj["status"] = {{"phase", "Active"}};
    meta["labels"]["kubernetes.io/metadata.name"] = meta["name"];
  }
  if (r.group == "apps" && r.kind == "Deployment" && obj.contains("spec") &&
      obj["spec"].is_object() && !obj["spec"].contains("replicas")) {
    obj["spec"]["replicas"] = 1;
  }
  if (r.group == "apiextensions.k8s.io" && r.resource == "customresourcedefinitions") {
    PrepareCrdCreate(obj);
  }
}

// Whether an update from `old` to `updated` is a new generation. Built-in kinds and custom
// resources with a status subresource track the spec (everything but metadata and status); a
// custom resource without one tracks everything but metadata, as kube-apiserver's CR strategy.
bool NewGeneration(const ResourceInfo& r, const nlohmann::json& old,
                   const nlohmann::json& updated) {
  if (!r.custom || r.has_status) return SpecChanged(old, updated);
  nlohmann::json a = old;
  nlohmann::json b = updated;
  if (a.is_object()) a.erase("metadata");
  if (b.is_object()) b.erase("metadata");
  return a != b;
}

// Applies the server-owned rules of an update of `old` into `updated` (both stored form), see
// ApiHandlers::FinishUpdate, with `resource_version` as the new metadata.resourceVersion.
absl::StatusOr<Mutation> FinishUpdateAt(const ResourceInfo& r, const nlohmann::json& old,
                                        nlohmann::json updated, absl::string_view resource_version,
                                        absl::string_view subresource) {
  nlohmann::json& meta = updated["metadata"];
  const nlohmann::json& old_meta = old["metadata"];
  // Fields only the server sets.
  for (const char* f : {"uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation"}) {
    if (old_meta.contains(f)) {
      meta[f] = old_meta[f];
    } else {
      meta.erase(f);
    }
  }
  meta.erase("selfLink");
  if (subresource == "status") {
    // A status write changes only the status.
    nlohmann::json result = old;
    if (updated.contains("status")) {
      result["status"] = updated["status"];
    } else {
      result.erase("status");
    }
    if (meta.contains("managedFields")) result["metadata"]["managedFields"] = meta["managedFields"];
    updated = std::move(result);
  } else if (r.has_status) {
    if (old.contains("status")) {
      updated["status"] = old["status"];
    } else {
      updated.erase("status");
    }
  } else if (!r.custom) {
    updated.erase("status");  // no such field (see PrepareCreate)
  }
  if ((r.tracks_generation || r.custom) && subresource != "status" &&
      NewGeneration(r, old, updated)) {
    const int64_t gen = old_meta.value("generation", int64_t{0});
    updated["metadata"]["generation"] = gen + 1;
  }
  if (IsBeingDeleted(old)) {
    // Finalizers can only be removed once deletion started.
    auto nf = updated["metadata"].find("finalizers");
    if (nf != updated["metadata"].end() && nf->is_array()) {
      for (const auto& f : *nf) {
        if (f.is_string() && !HasFinalizer(old, f.get<std::string>())) {
          // 422 with a Forbidden cause, as kube-apiserver's ValidateObjectMetaUpdate answers.
          return kube::InvalidError(
              r.group, r.kind, MetaString(old, "name"),
              {kube::FieldForbidden(
                  "metadata.finalizers",
                  absl::StrCat("no new finalizers can be added if the object is being deleted, "
                               "found new finalizers [\"",
                               f.get<std::string>(), "\"]"))});
        }
      }
    }
  }
  if (SameObject(old, updated)) return Mutation{Mutation::Op::kNoop, ""};
  updated["metadata"]["resourceVersion"] = std::string(resource_version);
  const bool no_finalizers =
      !updated["metadata"].contains("finalizers") || updated["metadata"]["finalizers"].empty();
  bool ns_finalizers = false;
  if (r.group.empty() && r.resource == "namespaces" && updated.contains("spec") &&
      updated["spec"].contains("finalizers") && !updated["spec"]["finalizers"].empty()) {
    ns_finalizers = true;
  }
  if (IsBeingDeleted(updated) && no_finalizers && !ns_finalizers) {
    return Mutation(Mutation::Op::kDelete, Dump(updated), LabelsOf(updated));
  }
  return Mutation(Mutation::Op::kPut, Dump(updated), LabelsOf(updated));
}

// The resourceVersion written into objects computed before their revision is known; the
// mutator replaces it with the revision. Random per process, alphanumeric (JSON-escapes to
// itself), and a precomputed object is used only when it holds the text exactly once, so
// client data that happens to contain it cannot be corrupted.
const std::string& RevisionPlaceholder() {
  static const std::string* const placeholder = [] {
    absl::BitGen gen;
    std::string p = "rv0placeholder";
    for (int i = 0; i < 24; ++i) p.push_back("0123456789abcdef"[absl::Uniform<int>(gen, 0, 16)]);
    return new std::string(std::move(p));
  }();
  return *placeholder;
}

// Decides a write from the current object (null if absent), writing `resource_version` into
// metadata.resourceVersion of the value it stores. Must depend only on its arguments and on
// state fixed before the write started (request, time), because it may run in the request
// thread against a snapshot or on the store's writer thread against the current object.
using ComputeWrite = std::function<absl::StatusOr<Mutation>(const StoredObject* current,
                                                            absl::string_view resource_version)>;

// Whether `current` is the version `snapshot` was taken of (both absent counts).
bool SameVersion(const StoredObject* snapshot, const StoredObject* current) {
  if (snapshot == nullptr || current == nullptr) return snapshot == current;
  return snapshot->mod_revision == current->mod_revision;
}

// Runs `compute` for `key` with the JSON work off the store's single writer thread, which
// would otherwise run it serially between commits for every write of every client.
//
// `compute` runs first in the calling thread against a Get() snapshot, with
// RevisionPlaceholder() as the resourceVersion. An error or a no-op is the answer at once:
// the request takes effect at the snapshot, which reflects every write acknowledged before it
// (so a client that saw resourceVersion N never gets a decision from a state older than N).
// Otherwise the mutator only checks that the key still holds the snapshot's version and
// installs the precomputed bytes with the placeholder replaced by the revision. If another
// write got there first, the mutator computes again from the current object on the writer
// thread, exactly as before: no retry loop through the queue, which would cost every retry a
// commit (an fsync) and, on a contended key, would find its fresh snapshot stale again.
// `precompute` false (dry runs) always computes in the mutator.
// A write may not store an object past kMaxObjectBytes, whatever computed it (a patch or an
// apply can grow an object past the request body limit).
absl::StatusOr<Mutation> CheckObjectSize(absl::StatusOr<Mutation> m) {
  if (m.ok() && m->op == Mutation::Op::kPut && m->value.size() > kMaxObjectBytes) {
    return kube::RequestEntityTooLargeError(absl::StrCat("the object would be ", m->value.size(),
                                                         " bytes, more than the ", kMaxObjectBytes,
                                                         " bytes a stored object may have"));
  }
  return m;
}

absl::StatusOr<ObjectPtr> WriteComputed(Store* store, const std::string& key, bool precompute,
                                        const ComputeWrite& compute) {
  ObjectPtr snapshot;
  std::optional<Mutation> prepared;
  size_t placeholder_at = std::string::npos;
  if (precompute) {
    snapshot = store->Get(key);
    std::optional<absl::StatusOr<Mutation>> m;
    try {
      m = snapshot != nullptr && snapshot->corrupt
              ? absl::StatusOr<Mutation>(CheckIntact(*snapshot))
              : CheckObjectSize(compute(snapshot.get(), RevisionPlaceholder()));
    } catch (...) {
      // Left to the mutator, whose exceptions the store turns into kInternal as before.
    }
    if (m.has_value()) {
      if (!m->ok()) return m->status();
      if ((*m)->op == Mutation::Op::kNoop) return snapshot;
      const std::string& p = RevisionPlaceholder();
      const size_t at = (*m)->value.find(p);
      if (at != std::string::npos && (*m)->value.find(p, at + p.size()) == std::string::npos) {
        placeholder_at = at;
        prepared = *std::move(*m);
      }
    }
  }
  return store->Write(
      key, [&](const StoredObject* current, int64_t revision) -> absl::StatusOr<Mutation> {
        if (prepared.has_value() && SameVersion(snapshot.get(), current)) {
          prepared->value.replace(placeholder_at, RevisionPlaceholder().size(),
                                  std::to_string(revision));
          return std::move(*prepared);
        }
        if (current != nullptr) RETURN_IF_ERROR(CheckIntact(*current));
        return CheckObjectSize(compute(current, std::to_string(revision)));
      });
}

// `served` with a patch of `type` applied (`apply_config` and `apply_opts`: a server-side apply).
absl::StatusOr<nlohmann::json> PatchOfType(PatchType type, const nlohmann::json& served,
                                           const std::string& body, const MergeStrategy* strategy,
                                           const nlohmann::json* apply_config,
                                           const ApplyOptions& apply_opts) {
  switch (type) {
    case PatchType::kJsonPatch:
      return ApplyJsonPatch(served, body);
    case PatchType::kMergePatch:
      return ApplyMergePatch(served, body);
    case PatchType::kStrategicMergePatch:
      return ApplyStrategicMergePatch(served, body, strategy);
    case PatchType::kApplyPatch:
      return ServerSideApply(&served, *apply_config, apply_opts, strategy);
  }
  return kube::InternalError("unknown patch type");
}

// The options of a server-side apply to object `name` (in `ns`) or its `subresource`.
ApplyOptions ApplyOptionsFor(const ResourceInfo& r, const std::string& ns, const std::string& name,
                             const std::string& subresource, const ApiRequest& req) {
  ApplyOptions apply_opts;
  apply_opts.manager = Query(req, "fieldManager");
  const std::string force = Query(req, "force");
  apply_opts.force = ParseQueryBool(force);
  apply_opts.subresource = subresource;
  apply_opts.api_version = r.ApiVersion();
  apply_opts.kind = r.kind;
  apply_opts.name = name;
  apply_opts.namespace_name = ns;
  apply_opts.ignore_status = r.has_status && subresource.empty();
  return apply_opts;
}

}  // namespace

absl::Status ApiHandlers::CheckNamespaceWritable(const ResourceInfo& r,
                                                 absl::string_view ns) const {
  if (!r.namespaced) return absl::OkStatus();
  ResourcePtr nsr = registry_->Find("", "v1", "namespaces");
  ObjectPtr nso = store_->Get(nsr->Key("", ns));
  if (nso == nullptr) return kube::NotFoundError("", "namespaces", ns);
  if (absl::StrContains(nso->value, "\"deletionTimestamp\"")) {
    nlohmann::json j = nlohmann::json::parse(nso->value, nullptr, false);
    if (!j.is_discarded() && IsBeingDeleted(j)) {
      return kube::ForbiddenError(
          absl::StrCat(r.resource, " \"\" is forbidden: unable to create new content in namespace ",
                       ns, " because it is being terminated"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ApiResponse> ApiHandlers::Create(const Target& t, const ApiRequest& req) {
  const ResourceInfo& r = *t.r;
  if (!t.subresource.empty() || !t.name.empty()) {
    return kube::MethodNotAllowedError("create is not allowed on a named object or subresource");
  }
  ASSIGN_OR_RETURN(const openapi::FieldValidation mode,
                   openapi::ParseFieldValidation(Query(req, "fieldValidation")));
  ASSIGN_OR_RETURN(const bool dry_run, DryRun(req));
  ASSIGN_OR_RETURN(nlohmann::json obj, ParseObjectBody(req.content_type, req.body));
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckDuplicateFields(req, mode, &warnings));
  RETURN_IF_ERROR(CheckKind(r, obj));
  RETURN_IF_ERROR(CheckNamespaceAndName(r, obj, t.ns, ""));
  kube::ApplyGenerateName(obj);
  RETURN_IF_ERROR(NormalizeAndValidate(r, obj));
  RETURN_IF_ERROR(CheckNamespaceWritable(r, t.ns));
  const absl::Time now = clock_->Now();
  PrepareCreate(r, obj, now);
  RETURN_IF_ERROR(ApplySchema(r, mode, obj, &warnings));
  RecordUpdate(&obj, nullptr, FieldManager(req), r.ApiVersion(), now, "");
  nlohmann::json stored = ToStored(r, std::move(obj));
  const std::string name = MetaString(stored, "name");
  if (dry_run) {
    ApiResponse resp;
    resp.code = 201;
    resp.body = Dump(ToServed(r, std::move(stored)));
    return WithWarnings(std::move(resp), warnings);
  }
  const Labels labels = LabelsOf(stored);
  ASSIGN_OR_RETURN(
      ObjectPtr written,
      WriteComputed(store_, r.Key(t.ns, name), /*precompute=*/true,
                    [&](const StoredObject* current,
                        absl::string_view resource_version) -> absl::StatusOr<Mutation> {
                      if (current != nullptr) {
                        return kube::AlreadyExistsError(r.group, r.resource, name);
                      }
                      stored["metadata"]["resourceVersion"] = std::string(resource_version);
                      return Mutation(Mutation::Op::kPut, Dump(stored), labels);
                    }));
  if (crd_hook_ && r.group == "apiextensions.k8s.io") crd_hook_(stored);
  return WithWarnings(ObjectResponse(201, r, *written), warnings);
}

absl::StatusOr<Mutation> ApiHandlers::FinishUpdate(const ResourceInfo& r, const nlohmann::json& old,
                                                   nlohmann::json updated, int64_t revision,
                                                   absl::string_view subresource) const {
  return FinishUpdateAt(r, old, std::move(updated), std::to_string(revision), subresource);
}

absl::StatusOr<ApiResponse> ApiHandlers::Update(const Target& t, const ApiRequest& req) {
  const ResourceInfo& r = *t.r;
  if (t.subresource == "finalize") {
    // PUT /api/v1/namespaces/{name}/finalize sets spec.finalizers only.
  }
  ASSIGN_OR_RETURN(const openapi::FieldValidation mode,
                   openapi::ParseFieldValidation(Query(req, "fieldValidation")));
  ASSIGN_OR_RETURN(const bool dry_run, DryRun(req));
  ASSIGN_OR_RETURN(nlohmann::json obj, ParseObjectBody(req.content_type, req.body));
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckDuplicateFields(req, mode, &warnings));
  RETURN_IF_ERROR(CheckKind(r, obj));
  RETURN_IF_ERROR(CheckNamespaceAndName(r, obj, t.ns, t.name));
  RETURN_IF_ERROR(NormalizeAndValidate(r, obj));
  RETURN_IF_ERROR(ApplySchema(r, mode, obj, &warnings));
  const std::string want_rv = MetaString(obj, "resourceVersion");
  const std::string manager = FieldManager(req);
  const absl::Time now = clock_->Now();
  const std::string subresource = t.subresource;
  auto incoming = std::make_shared<nlohmann::json>(ToStored(r, std::move(obj)));
  auto result = std::make_shared<std::string>();
  ASSIGN_OR_RETURN(
      ObjectPtr written,
      WriteComputed(
          store_, r.Key(t.ns, t.name), /*precompute=*/!dry_run,
          [&](const StoredObject* current,
              absl::string_view resource_version) -> absl::StatusOr<Mutation> {
            if (current == nullptr) return kube::NotFoundError(r.group, r.resource, t.name);
            if (!want_rv.empty() && want_rv != std::to_string(current->mod_revision)) {
              return kube::ConflictError(r.group, r.resource, t.name, kube::kObjectModified);
            }
            nlohmann::json old = nlohmann::json::parse(current->value, nullptr, false);
            if (old.is_discarded()) return kube::InternalError("stored object is not JSON");
            nlohmann::json updated = *incoming;
            if (subresource == "finalize") {
              nlohmann::json fin = old;
              fin["spec"]["finalizers"] = updated.value("spec", nlohmann::json::object())
                                              .value("finalizers", nlohmann::json::array());
              updated = std::move(fin);
            }
            RecordUpdate(&updated, &old, manager, r.ApiVersion(), now,
                         subresource == "status" ? "status" : "");
            ASSIGN_OR_RETURN(Mutation m,
                             FinishUpdateAt(r, old, std::move(updated), resource_version,
                                            subresource == "status" ? "status" : ""));
            if (dry_run) {
              *result = m.op == Mutation::Op::kNoop ? current->value : m.value;
              return Mutation{Mutation::Op::kNoop, ""};
            }
            return m;
          }));
  if (dry_run) {
    ApiResponse resp;
    resp.body = ServedBytes(r, *result);
    return WithWarnings(std::move(resp), warnings);
  }
  if (crd_hook_ && r.group == "apiextensions.k8s.io" && written != nullptr) {
    nlohmann::json j = nlohmann::json::parse(written->value, nullptr, false);
    if (!j.is_discarded()) crd_hook_(j);
  }
  return WithWarnings(ObjectResponse(200, r, *written), warnings);
}

absl::StatusOr<ApiResponse> ApiHandlers::Patch(const Target& t, const ApiRequest& req) {
  const ResourceInfo& r = *t.r;
  ASSIGN_OR_RETURN(PatchType type, PatchTypeFromContentType(req.content_type));
  ASSIGN_OR_RETURN(const bool dry_run, DryRun(req));
  ASSIGN_OR_RETURN(openapi::FieldValidation mode,
                   openapi::ParseFieldValidation(Query(req, "fieldValidation")));
  // Warnings about the body itself; those about the result (`warnings`) are made again on each
  // try of the write.
  std::vector<std::string> body_warnings;
  RETURN_IF_ERROR(CheckPatchDuplicateFields(req, type, mode, &body_warnings));
  // Server-side apply drops fields outside the schema silently, as kube-apiserver does.
  if (type == PatchType::kApplyPatch) mode = openapi::FieldValidation::kIgnore;
  auto warnings = std::make_shared<std::vector<std::string>>();
  const MergeStrategy* strategy = r.custom ? nullptr : BuiltinMergeStrategy(r.group, r.kind);
  std::shared_ptr<nlohmann::json> apply_config;
  ApplyOptions apply_opts;
  if (type == PatchType::kApplyPatch) {
    ASSIGN_OR_RETURN(nlohmann::json cfg, ParseObjectBody("application/yaml", req.body));
    RETURN_IF_ERROR(CheckKind(r, cfg));
    RETURN_IF_ERROR(CheckNamespaceAndName(r, cfg, t.ns, t.name));
    apply_config = std::make_shared<nlohmann::json>(std::move(cfg));
    apply_opts = ApplyOptionsFor(r, t.ns, t.name, t.subresource, req);
  } else if (req.body.size() > 0 && type != PatchType::kJsonPatch) {
    // Validated again when applied; this gives a clear 400 before taking the write slot.
    RETURN_IF_ERROR(ParseJsonBody(req.body).status());
  }
  const std::string manager = FieldManager(req);
  const absl::Time now = clock_->Now();
  apply_opts.now = now;
  const std::string subresource = t.subresource;
  const std::string key = r.Key(t.ns, t.name);
  bool created = false;
  auto result = std::make_shared<std::string>();

  if (apply_config != nullptr && store_->Get(key) == nullptr) {
    RETURN_IF_ERROR(CheckNamespaceWritable(r, t.ns));
  }
  ASSIGN_OR_RETURN(
      ObjectPtr written,
      WriteComputed(
          store_, key, /*precompute=*/!dry_run,
          [&](const StoredObject* current,
              absl::string_view resource_version) -> absl::StatusOr<Mutation> {
            created = false;
            if (current == nullptr) {
              if (apply_config == nullptr || !subresource.empty()) {
                return kube::NotFoundError(r.group, r.resource, t.name);
              }
              // Apply creates.
              ASSIGN_OR_RETURN(nlohmann::json obj,
                               ServerSideApply(nullptr, *apply_config, apply_opts, strategy));
              RETURN_IF_ERROR(NormalizeAndValidate(r, obj));
              PrepareCreate(r, obj, now);
              warnings->clear();
              RETURN_IF_ERROR(ApplySchema(r, mode, obj, warnings.get()));
              nlohmann::json stored = ToStored(r, std::move(obj));
              stored["metadata"]["resourceVersion"] = std::string(resource_version);
              created = true;
              if (dry_run) {
                *result = Dump(stored);
                return Mutation{Mutation::Op::kNoop, ""};
              }
              return Mutation(Mutation::Op::kPut, Dump(stored), LabelsOf(stored));
            }
            nlohmann::json old = nlohmann::json::parse(current->value, nullptr, false);
            if (old.is_discarded()) return kube::InternalError("stored object is not JSON");
            nlohmann::json served = ToServed(r, old);
            ASSIGN_OR_RETURN(nlohmann::json patched, PatchOfType(type, served, req.body, strategy,
                                                                 apply_config.get(), apply_opts));
            RETURN_IF_ERROR(CheckKind(r, patched));
            RETURN_IF_ERROR(CheckNamespaceAndName(r, patched, t.ns, t.name));
            const std::string want_rv = MetaString(patched, "resourceVersion");
            if (!want_rv.empty() && want_rv != std::to_string(current->mod_revision)) {
              return kube::ConflictError(r.group, r.resource, t.name, kube::kObjectModified);
            }
            RETURN_IF_ERROR(NormalizeAndValidate(r, patched));
            warnings->clear();
            RETURN_IF_ERROR(ApplySchema(r, mode, patched, warnings.get()));
            nlohmann::json updated = ToStored(r, std::move(patched));
            if (type != PatchType::kApplyPatch) {
              RecordUpdate(&updated, &old, manager, r.ApiVersion(), now,
                           subresource == "status" ? "status" : "");
            }
            ASSIGN_OR_RETURN(Mutation m,
                             FinishUpdateAt(r, old, std::move(updated), resource_version,
                                            subresource == "status" ? "status" : ""));
            if (dry_run) {
              *result = m.op == Mutation::Op::kNoop ? current->value : m.value;
              return Mutation{Mutation::Op::kNoop, ""};
            }
            return m;
          }));
  if (dry_run) {
    ApiResponse resp;
    resp.code = created ? 201 : 200;
    resp.body = ServedBytes(r, *result);
    body_warnings.insert(body_warnings.end(), warnings->begin(), warnings->end());
    return WithWarnings(std::move(resp), body_warnings);
  }
  if (crd_hook_ && r.group == "apiextensions.k8s.io" && written != nullptr) {
    nlohmann::json j = nlohmann::json::parse(written->value, nullptr, false);
    if (!j.is_discarded()) crd_hook_(j);
  }
  body_warnings.insert(body_warnings.end(), warnings->begin(), warnings->end());
  return WithWarnings(ObjectResponse(created ? 201 : 200, r, *written), body_warnings);
}

absl::StatusOr<ObjectPtr> ApiHandlers::UpdateStored(
    const ResourceInfo& r, absl::string_view ns, absl::string_view name,
    std::function<absl::StatusOr<bool>(nlohmann::json& stored)> change) {
  const std::string n(name);
  return store_->Write(
      r.Key(ns, name),
      [&](const StoredObject* current, int64_t revision) -> absl::StatusOr<Mutation> {
        if (current == nullptr) return kube::NotFoundError(r.group, r.resource, n);
        nlohmann::json old = nlohmann::json::parse(current->value, nullptr, false);
        if (old.is_discarded()) return kube::InternalError("stored object is not JSON");
        nlohmann::json updated = old;
        ASSIGN_OR_RETURN(bool changed, change(updated));
        if (!changed) return Mutation{Mutation::Op::kNoop, ""};
        return FinishUpdate(r, old, std::move(updated), revision, "");
      });
}

}  // namespace ctrlhost::apiserver
