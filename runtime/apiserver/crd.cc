#include "runtime/apiserver/crd.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::apiserver {
namespace {

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> Strings(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& s : *it) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

// As kube-apiserver (KEP 1111): the groups of the Kubernetes project need an approval link in
// an annotation of the CRD.
void CheckApprovalOfProtectedGroup(const nlohmann::json& crd, const std::string& group,
                                   std::vector<kube::StatusCause>& causes) {
  const bool protected_group = group == "k8s.io" || group == "kubernetes.io" ||
                               absl::EndsWith(group, ".k8s.io") ||
                               absl::EndsWith(group, ".kubernetes.io");
  if (protected_group) {
    constexpr char kApproval[] = "api-approved.kubernetes.io";
    const std::string field = absl::StrCat("metadata.annotations[", kApproval, "]");
    const nlohmann::json* annotations = nullptr;
    if (crd.contains("metadata") && crd["metadata"].is_object() &&
        crd["metadata"].contains("annotations") && crd["metadata"]["annotations"].is_object()) {
      annotations = &crd["metadata"]["annotations"];
    }
    if (annotations == nullptr || !annotations->contains(kApproval)) {
      causes.push_back(
          {"FieldValueRequired",
           absl::StrCat("Required value: protected groups must have approval "
                        "annotation \"",
                        kApproval, "\", see https://github.com/kubernetes/enhancements/pull/1111"),
           field});
    } else {
      const nlohmann::json& value = (*annotations)[kApproval];
      const std::string text = value.is_string() ? value.get<std::string>() : "";
      if (!absl::StartsWith(text, "unapproved") && !absl::StartsWith(text, "https://") &&
          !absl::StartsWith(text, "http://")) {
        causes.push_back(
            {"FieldValueInvalid",
             absl::StrCat("Invalid value: \"", text,
                          "\": protected groups must have approval annotation \"", kApproval,
                          "\" with either a URL or a reason starting with "
                          "\"unapproved\", see "
                          "https://github.com/kubernetes/enhancements/pull/1111"),
             field});
      }
    }
  }
}

// The resource of one served version `v` of a CRD that passed validation.
ResourceInfo ServedVersion(const nlohmann::json& v, const std::string& group,
                           const nlohmann::json& names, const std::string& scope,
                           const std::string& singular, const std::string& list_kind) {
  ResourceInfo r;
  r.group = group;
  r.version = Str(v, "name");
  r.resource = Str(names, "plural");
  r.singular = singular;
  r.kind = Str(names, "kind");
  r.list_kind = list_kind;
  r.namespaced = scope != "Cluster";
  r.short_names = Strings(names, "shortNames");
  r.categories = Strings(names, "categories");
  r.custom = true;
  r.tracks_generation = true;
  r.return_deleted_object = true;
  r.has_status = v.contains("subresources") && v["subresources"].is_object() &&
                 v["subresources"].contains("status");
  if (v.contains("subresources") && v["subresources"].is_object() &&
      v["subresources"].contains("scale") && v["subresources"]["scale"].is_object()) {
    const nlohmann::json& scale = v["subresources"]["scale"];
    r.scale = std::make_shared<const ScaleSubresource>(
        ScaleSubresource{Str(scale, "specReplicasPath"), Str(scale, "statusReplicasPath"),
                         Str(scale, "labelSelectorPath")});
  }
  if (v.contains("additionalPrinterColumns") && v["additionalPrinterColumns"].is_array()) {
    r.printer_columns = v["additionalPrinterColumns"];
  }
  if (v.contains("schema") && v["schema"].is_object() && v["schema"].contains("openAPIV3Schema")) {
    r.schema = std::make_shared<const nlohmann::json>(v["schema"]["openAPIV3Schema"]);
  }
  return r;
}

// A scale subresource's path: dotted JSON fields under one of `roots` (".spec.replicas").
bool ScalePathUnder(const std::string& path, std::initializer_list<const char*> roots) {
  bool under = false;
  for (const char* root : roots) under = under || absl::StartsWith(path, root);
  if (!under) return false;
  for (absl::string_view segment : absl::StrSplit(path.substr(1), '.')) {
    if (segment.empty()) return false;
    for (char c : segment) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
    }
  }
  return true;
}

// kube-apiserver's rules for subresources.scale: specReplicasPath under .spec, statusReplicasPath
// under .status, labelSelectorPath (optional) under either; simple field paths only here.
void CheckScaleSubresource(const nlohmann::json& version, const std::string& field,
                           std::vector<kube::StatusCause>& causes) {
  if (!version.contains("subresources") || !version["subresources"].is_object()) return;
  auto scale = version["subresources"].find("scale");
  if (scale == version["subresources"].end()) return;
  if (!scale->is_object()) {
    causes.push_back({"FieldValueInvalid", "Invalid value: must be an object", field});
    return;
  }
  const struct {
    const char* name;
    std::initializer_list<const char*> roots;
    bool required;
  } paths[] = {{"specReplicasPath", {".spec."}, true},
               {"statusReplicasPath", {".status."}, true},
               {"labelSelectorPath", {".spec.", ".status."}, false}};
  for (const auto& p : paths) {
    const std::string value = Str(*scale, p.name);
    if (value.empty()) {
      if (p.required)
        causes.push_back({"FieldValueRequired", "Required value", field + "." + p.name});
      continue;
    }
    if (!ScalePathUnder(value, p.roots)) {
      causes.push_back({"FieldValueInvalid",
                        absl::StrCat("Invalid value: \"", value, "\": should be a JSON path under ",
                                     absl::StrJoin(p.roots, " or "), " made of field names"),
                        field + "." + p.name});
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<ResourceInfo>> ValidateCrd(const nlohmann::json& crd) {
  std::vector<kube::StatusCause> causes;
  auto bad = [&](const std::string& field, const std::string& msg,
                 const char* reason = "FieldValueInvalid") {
    causes.push_back({reason, msg, field});
  };
  const std::string name = MetaString(crd, "name");
  if (!crd.contains("spec") || !crd["spec"].is_object()) {
    bad("spec", "Required value", "FieldValueRequired");
    return kube::InvalidError("apiextensions.k8s.io", "CustomResourceDefinition", name, causes);
  }
  const nlohmann::json& spec = crd["spec"];
  const std::string group = Str(spec, "group");
  const nlohmann::json names = spec.value("names", nlohmann::json::object());
  const std::string plural = Str(names, "plural");
  const std::string kind = Str(names, "kind");
  std::string singular = Str(names, "singular");
  std::string list_kind = Str(names, "listKind");
  const std::string scope = Str(spec, "scope");
  if (group.empty()) bad("spec.group", "Required value", "FieldValueRequired");
  if (!group.empty() &&
      (!kube::IsDns1123Subdomain(group).empty() || group.find('.') == std::string::npos)) {
    bad("spec.group",
        absl::StrCat("Invalid value: \"", group, "\": should be a domain with at least one dot"));
  }
  CheckApprovalOfProtectedGroup(crd, group, causes);
  if (plural.empty()) bad("spec.names.plural", "Required value", "FieldValueRequired");
  if (!plural.empty() && !kube::IsDns1123Label(plural).empty()) {
    bad("spec.names.plural",
        absl::StrCat("Invalid value: \"", plural, "\": must be a lowercase RFC 1123 label"));
  }
  if (kind.empty()) bad("spec.names.kind", "Required value", "FieldValueRequired");
  if (name != absl::StrCat(plural, ".", group)) {
    bad("metadata.name",
        absl::StrCat("Invalid value: \"", name, "\": must be spec.names.plural+\".\"+spec.group"));
  }
  if (scope != "Namespaced" && scope != "Cluster") {
    bad("spec.scope",
        absl::StrCat("Unsupported value: \"", scope,
                     "\": supported values: \"Cluster\", \"Namespaced\""),
        "FieldValueNotSupported");
  }
  if (singular.empty()) singular = absl::AsciiStrToLower(kind);
  if (list_kind.empty()) list_kind = kind + "List";
  std::vector<ResourceInfo> out;
  int storage = 0;
  const nlohmann::json versions = spec.value("versions", nlohmann::json::array());
  if (!versions.is_array() || versions.empty()) {
    bad("spec.versions", "Required value: must have at least one version", "FieldValueRequired");
  }
  std::string storage_version;
  for (size_t i = 0; versions.is_array() && i < versions.size(); ++i) {
    const nlohmann::json& v = versions[i];
    const std::string vname = Str(v, "name");
    if (vname.empty() || !kube::IsDns1123Label(vname).empty()) {
      bad(absl::StrCat("spec.versions[", i, "].name"),
          absl::StrCat("Invalid value: \"", vname, "\": must be a DNS-1123 label"));
      continue;
    }
    if (v.value("storage", false)) {
      ++storage;
      storage_version = vname;
    }
    CheckScaleSubresource(v, absl::StrCat("spec.versions[", i, "].subresources.scale"), causes);
    if (!v.value("served", false)) continue;
    out.push_back(ServedVersion(v, group, names, scope, singular, list_kind));
  }
  if (versions.is_array() && !versions.empty() && storage != 1) {
    bad("spec.versions", "Invalid value: must have exactly one version marked as storage version");
  }
  if (!causes.empty()) {
    return kube::InvalidError("apiextensions.k8s.io", "CustomResourceDefinition", name, causes);
  }
  for (ResourceInfo& r : out) {
    r.storage_group = group;
    r.storage_resource = plural;
    r.storage_version = storage_version;
  }
  return out;
}

void PrepareCrdCreate(nlohmann::json& crd) {
  nlohmann::json& meta = crd["metadata"];
  if (!HasFinalizer(crd, kCrdCleanupFinalizer)) meta["finalizers"].push_back(kCrdCleanupFinalizer);
  const std::string now = FormatTimestamp(absl::Now());
  std::string storage;
  for (const auto& v : crd["spec"].value("versions", nlohmann::json::array())) {
    if (v.value("storage", false)) storage = v.value("name", "");
  }
  crd["status"] = {{"acceptedNames", crd["spec"].value("names", nlohmann::json::object())},
                   {"storedVersions", {storage}},
                   {"conditions",
                    {{{"type", "NamesAccepted"},
                      {"status", "True"},
                      {"reason", "NoConflicts"},
                      {"message", "no conflicts found"},
                      {"lastTransitionTime", now}},
                     {{"type", "Established"},
                      {"status", "True"},
                      {"reason", "InitialNamesAccepted"},
                      {"message", "the initial names have been accepted"},
                      {"lastTransitionTime", now}}}}};
}

namespace {

// Where `schema` (a CRD version's openAPIV3Schema, at `path`) has x-kubernetes-validations,
// depth first, at most `limit` paths; `*total` counts them all. Bounded by `depth`.
void FindCelRules(const nlohmann::json& schema, const std::string& path, int depth, size_t limit,
                  std::vector<std::string>* paths, size_t* total) {
  if (!schema.is_object() || depth > 64) return;
  auto rules = schema.find("x-kubernetes-validations");
  if (rules != schema.end() && rules->is_array() && !rules->empty()) {
    if (paths->size() < limit) paths->push_back(path);
    ++*total;
  }
  for (const char* nested : {"properties", "patternProperties", "definitions"}) {
    auto children = schema.find(nested);
    if (children == schema.end() || !children->is_object()) continue;
    for (const auto& [name, child] : children->items()) {
      FindCelRules(child, absl::StrCat(path, ".", nested, ".", name), depth + 1, limit, paths,
                   total);
    }
  }
  for (const char* single : {"items", "additionalProperties", "not"}) {
    auto child = schema.find(single);
    if (child != schema.end()) {
      FindCelRules(*child, absl::StrCat(path, ".", single), depth + 1, limit, paths, total);
    }
  }
  for (const char* list : {"allOf", "anyOf", "oneOf"}) {
    auto children = schema.find(list);
    if (children == schema.end() || !children->is_array()) continue;
    for (size_t i = 0; i < children->size(); ++i) {
      FindCelRules((*children)[i], absl::StrCat(path, ".", list, "[", i, "]"), depth + 1, limit,
                   paths, total);
    }
  }
}

}  // namespace

void WarnUnenforcedCelRules(const nlohmann::json& crd, std::vector<std::string>* warnings) {
  auto spec = crd.find("spec");
  if (spec == crd.end() || !spec->is_object()) return;
  auto versions = spec->find("versions");
  if (versions == spec->end() || !versions->is_array()) return;
  constexpr size_t kNamed = 5;
  std::vector<std::string> paths;
  size_t total = 0;
  for (size_t i = 0; i < versions->size(); ++i) {
    const nlohmann::json& v = (*versions)[i];
    if (!v.is_object() || !v.contains("schema") || !v["schema"].is_object()) continue;
    auto schema = v["schema"].find("openAPIV3Schema");
    if (schema == v["schema"].end()) continue;
    FindCelRules(*schema, absl::StrCat("spec.versions[", i, "].schema.openAPIV3Schema"), 0, kNamed,
                 &paths, &total);
  }
  if (total == 0) return;
  std::string text = absl::StrCat(
      "x-kubernetes-validations (CEL) rules are not enforced by this server; objects that break "
      "them are accepted: ",
      absl::StrJoin(paths, ", "));
  if (total > paths.size()) absl::StrAppend(&text, " and ", total - paths.size(), " more");
  warnings->push_back(std::move(text));
}

}  // namespace ctrlhost::apiserver
