#include "sdk/cpp/host_judgement.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/builtin_kinds.h"

namespace ctrlhost::sdk::testing {
namespace {

using nlohmann::json;

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

std::string GroupOf(absl::string_view api_version) {
  const size_t slash = api_version.find('/');
  return slash == absl::string_view::npos ? "" : std::string(api_version.substr(0, slash));
}

std::string ApiVersionOf(const pluginpb::GroupVersionKind& gvk) {
  return gvk.group().empty() ? gvk.version() : absl::StrCat(gvk.group(), "/", gvk.version());
}

std::string StringAt(const json& obj, absl::string_view path) {
  const json* v = &obj;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!v->is_object()) return "";
    auto it = v->find(std::string(part));
    if (it == v->end()) return "";
    v = &*it;
  }
  return v->is_string() ? v->get<std::string>() : "";
}

const pluginpb::OwnedKind* Owned(const pluginpb::ControllerSpec& spec, absl::string_view group,
                                 absl::string_view kind) {
  for (const pluginpb::OwnedKind& o : spec.owns()) {
    if (o.kind().group() == group && o.kind().kind() == kind) return &o;
  }
  return nullptr;
}

bool IsPrimaryKind(const pluginpb::ControllerSpec& spec, absl::string_view group,
                   absl::string_view kind) {
  return spec.primary().group() == group && spec.primary().kind() == kind;
}

std::map<std::string, std::string> LabelsOf(const json& obj) {
  std::map<std::string, std::string> out;
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return out;
  auto labels = meta->find("labels");
  if (labels == meta->end() || !labels->is_object()) return out;
  for (auto it = labels->begin(); it != labels->end(); ++it) {
    if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  return out;
}

// obj's controller owner reference (null when none).
const json* ControllerRef(const json& obj) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return nullptr;
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return nullptr;
  for (const json& ref : *refs) {
    if (!ref.is_object()) continue;
    auto controller = ref.find("controller");
    if (controller != ref.end() && *controller == true) return &ref;
  }
  return nullptr;
}

std::string ControllerUid(const json& obj) {
  const json* ref = ControllerRef(obj);
  return ref == nullptr ? "" : StringAt(*ref, "uid");
}

// obj's controller reference names the primary (by uid; by kind and name when the fixture
// primary has no uid).
bool ControlledByPrimary(const json& obj, const pluginpb::ControllerSpec& spec,
                         const pluginpb::ReconcileCall& call) {
  const json* ref = ControllerRef(obj);
  if (ref == nullptr) return false;
  if (!call.uid().empty()) return StringAt(*ref, "uid") == call.uid();
  return IsPrimaryKind(spec, GroupOf(StringAt(*ref, "apiVersion")), StringAt(*ref, "kind")) &&
         StringAt(*ref, "name") == call.name();
}

absl::StatusOr<bool> MatchesRequirement(absl::string_view req,
                                        const std::map<std::string, std::string>& labels) {
  if (absl::ConsumePrefix(&req, "!")) {
    return labels.count(std::string(absl::StripAsciiWhitespace(req))) == 0;
  }
  for (absl::string_view op : {"!=", "==", "="}) {
    const size_t i = req.find(op);
    if (i == absl::string_view::npos) continue;
    const std::string key(absl::StripAsciiWhitespace(req.substr(0, i)));
    const std::string value(absl::StripAsciiWhitespace(req.substr(i + op.size())));
    auto it = labels.find(key);
    if (op == "!=") return it == labels.end() || it->second != value;
    return it != labels.end() && it->second == value;
  }
  std::vector<absl::string_view> fields = absl::StrSplit(req, ' ', absl::SkipWhitespace());
  if (fields.size() == 1) return labels.count(std::string(fields[0])) > 0;
  if (fields.size() >= 3 && (fields[1] == "in" || fields[1] == "notin")) {
    const size_t op_at = req.find(fields[1], fields[0].size());
    absl::string_view rest = absl::StripAsciiWhitespace(req.substr(op_at + fields[1].size()));
    if (!absl::StartsWith(rest, "(") || !absl::EndsWith(rest, ")")) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quote(req), ": values must be in parentheses"));
    }
    std::set<std::string> values;
    for (absl::string_view v : absl::StrSplit(rest.substr(1, rest.size() - 2), ',')) {
      values.insert(std::string(absl::StripAsciiWhitespace(v)));
    }
    auto it = labels.find(std::string(fields[0]));
    const bool has = it != labels.end();
    if (fields[1] == "in") return has && values.count(it->second) > 0;
    return !has || values.count(it->second) == 0;
  }
  return absl::InvalidArgumentError(absl::StrCat(Quote(req), " is not a label requirement"));
}

// The applier's NotControlled refusal when an existing object has the desired identity and the
// primary does not control it (empty: none).
std::string NotControlled(const pluginpb::ControllerSpec& spec, const pluginpb::ReconcileCall& call,
                          const std::vector<json>& existing, const std::string& where,
                          const std::string& group, const std::string& kind,
                          const std::string& name, const std::string& ns) {
  for (const json& e : existing) {
    if (GroupOf(StringAt(e, "apiVersion")) != group || StringAt(e, "kind") != kind ||
        StringAt(e, "metadata.name") != name || StringAt(e, "metadata.namespace") != ns) {
      continue;
    }
    if (ControlledByPrimary(e, spec, call)) continue;
    const std::string uid = ControllerUid(e);
    const std::string state = uid.empty()
                                  ? "has no controller"
                                  : absl::StrCat("is controlled by another object (uid ", uid, ")");
    const std::string target = ns.empty() ? name : absl::StrCat(ns, "/", name);
    const std::string primary =
        call.namespace_().empty() ? call.name() : absl::StrCat(call.namespace_(), "/", call.name());
    const std::string& pk = spec.primary().kind();
    return absl::StrCat(where, ": ", kind, " ", target, " exists and ", state, "; ", pk, " ",
                        primary, " does not adopt it (the protocol has no adoption): delete it (",
                        pk, " ", primary,
                        " is reconciled again when it is gone) or rename the child");
  }
  return "";
}

}  // namespace

bool HasStatusSubresource(absl::string_view group, absl::string_view kind) {
  return common::HasStatusSubresource(group, kind);
}

void AddControllerReferences(const pluginpb::ControllerSpec& spec, pluginpb::ReconcileCall* call) {
  if (call->object().empty()) return;
  for (pluginpb::RawObject& child : *call->mutable_children()) {
    json obj = json::parse(child.object(), nullptr, /*allow_exceptions=*/false);
    if (!obj.is_object() || !obj["metadata"].is_object() ||
        obj["metadata"].contains("ownerReferences")) {
      continue;
    }
    json ref = {{"apiVersion", ApiVersionOf(spec.primary())},
                {"kind", spec.primary().kind()},
                {"name", call->name()},
                {"controller", true},
                {"blockOwnerDeletion", true}};
    if (!call->uid().empty()) ref["uid"] = call->uid();
    obj["metadata"]["ownerReferences"] = json::array({std::move(ref)});
    child.set_object(obj.dump());
  }
}

std::string JudgeRequest(const pluginpb::ControllerSpec& spec,
                         const pluginpb::ReconcileCall& call) {
  if (call.object().empty()) return "";  // the deletion notice of a gone primary
  const json obj = json::parse(call.object(), nullptr, /*allow_exceptions=*/false);
  if (!obj.is_object()) return "the primary is not a JSON object";
  const std::string api_version = StringAt(obj, "apiVersion");
  const std::string kind = StringAt(obj, "kind");
  if (!IsPrimaryKind(spec, GroupOf(api_version), kind)) {
    return absl::StrCat("the object is a ", api_version, " ", kind, "; controller ", spec.name(),
                        " reconciles ", ApiVersionOf(spec.primary()), " ", spec.primary().kind());
  }
  if (!spec.label_selector().empty()) {
    const std::map<std::string, std::string> labels = LabelsOf(obj);
    absl::StatusOr<bool> ok = MatchesSelector(spec.label_selector(), labels);
    if (!ok.ok()) {
      return absl::StrCat("controller ", spec.name(), ": label selector ",
                          Quote(spec.label_selector()), ": ", ok.status().message());
    }
    if (!*ok) {
      return absl::StrCat("the object's labels {",
                          absl::StrJoin(labels, ",", absl::PairFormatter("=")),
                          "} do not match controller ", spec.name(), "'s label selector ",
                          Quote(spec.label_selector()), ": the host would never reconcile it");
    }
  }
  if (!call.namespace_().empty() && spec.namespaces_size() > 0 &&
      std::find(spec.namespaces().begin(), spec.namespaces().end(), call.namespace_()) ==
          spec.namespaces().end()) {
    return absl::StrCat("namespace ", Quote(call.namespace_()), " is not one of controller ",
                        spec.name(), "'s namespaces [", absl::StrJoin(spec.namespaces(), " "),
                        "]: the host would never reconcile it");
  }
  for (const pluginpb::RawObject& child : call.children()) {
    const json c = json::parse(child.object(), nullptr, /*allow_exceptions=*/false);
    if (!c.is_object()) {
      return absl::StrCat("child ", child.api_version(), " ", child.kind(), ": not a JSON object");
    }
    const std::string name = StringAt(c, "metadata.name");
    if (Owned(spec, GroupOf(child.api_version()), child.kind()) == nullptr) {
      return absl::StrCat("child ", child.api_version(), " ", child.kind(), " ", name,
                          ": controller ", spec.name(),
                          " does not own that kind, so the host never passes one as a child");
    }
    if (!ControlledByPrimary(c, spec, call)) {
      const std::string uid = ControllerUid(c);
      const std::string why =
          uid.empty() ? "it has no controller"
                      : absl::StrCat("it is controlled by another object (uid ", uid, ")");
      return absl::StrCat("child ", child.api_version(), " ", child.kind(), " ", name, ": ", why,
                          ", so the host never passes it as a child (pass it with Existing to "
                          "test an object in the way)");
    }
  }
  return "";
}

std::string JudgeResponse(const pluginpb::ControllerSpec& spec, const pluginpb::ReconcileCall& call,
                          const std::vector<json>& existing,
                          const pluginpb::ReconcileResponse& response) {
  if (response.has_error() && response.desired_objects_size() == 0 &&
      response.patches_size() == 0 && response.status().empty() &&
      response.conditions_size() == 0) {
    return "";  // an error answer (the SDK validated it)
  }
  if (call.object().empty()) return "";  // a gone primary: only events, an error, a requeue
  const pluginpb::GroupVersionKind& primary = spec.primary();
  if (!HasStatusSubresource(primary.group(), primary.kind())) {
    const char* what = !response.status().empty()       ? "status"
                       : response.conditions_size() > 0 ? "conditions"
                                                        : nullptr;
    if (what != nullptr) {
      return absl::StrCat(what, ": kind ", ApiVersionOf(primary), " ", primary.kind(),
                          " has no status subresource, so it has no status to write; record the "
                          "outcome with an event instead");
    }
    for (int i = 0; i < response.patches_size(); ++i) {
      if (response.patches(i).target() == pluginpb::PATCH_TARGET_PRIMARY_STATUS) {
        return absl::StrCat("patches[", i,
                            "]: a PRIMARY_STATUS patch needs a status subresource; kind ",
                            ApiVersionOf(primary), " ", primary.kind(),
                            " has none (a PRIMARY patch changes the object)");
      }
    }
  }
  const bool namespaced = !call.namespace_().empty();
  const std::string child_namespace =
      primary.group().empty() && primary.kind() == "Namespace" ? call.name() : call.namespace_();
  for (int i = 0; i < response.desired_objects_size(); ++i) {
    const std::string where = absl::StrCat("desired_objects[", i, "]");
    const json d = json::parse(response.desired_objects(i), nullptr, false);
    if (!d.is_object()) return absl::StrCat(where, ": not a JSON object");
    const std::string api_version = StringAt(d, "apiVersion");
    const std::string kind = StringAt(d, "kind");
    const std::string name = StringAt(d, "metadata.name");
    std::string ns = StringAt(d, "metadata.namespace");
    const std::string group = GroupOf(api_version);
    if (IsPrimaryKind(spec, group, kind) && name == call.name()) {
      if (namespaced && !ns.empty() && ns != call.namespace_()) {
        return absl::StrCat(where, ": namespace ", Quote(ns), " is not the primary's ",
                            Quote(call.namespace_()));
      }
      continue;
    }
    const pluginpb::OwnedKind* owned = Owned(spec, group, kind);
    if (owned == nullptr) {
      return absl::StrCat(where, ": kind ", api_version, " ", kind, " is not owned by controller ",
                          spec.name());
    }
    if (owned->cluster_scoped()) {
      if (!ns.empty()) {
        return absl::StrCat(where, ": kind ", kind,
                            " is cluster-scoped; metadata.namespace must be empty");
      }
    } else if (child_namespace.empty()) {
      if (ns.empty()) {
        return absl::StrCat(where,
                            ": metadata.namespace is required (the primary is cluster-scoped)");
      }
    } else if (!ns.empty() && ns != child_namespace) {
      return absl::StrCat(where, ": namespace ", Quote(ns), " is outside the primary's ",
                          Quote(child_namespace));
    } else {
      ns = child_namespace;
    }
    std::string refused = NotControlled(spec, call, existing, where, group, kind, name, ns);
    if (!refused.empty()) return refused;
  }
  for (int i = 0; i < response.patches_size(); ++i) {
    const pluginpb::Patch& p = response.patches(i);
    if (p.target() != pluginpb::PATCH_TARGET_OWNED) continue;
    if (Owned(spec, GroupOf(p.api_version()), p.kind()) == nullptr) {
      return absl::StrCat("patches[", i, "]: kind ", p.api_version(), " ", p.kind(),
                          " is not owned by controller ", spec.name());
    }
  }
  return "";
}

absl::StatusOr<bool> MatchesSelector(absl::string_view selector,
                                     const std::map<std::string, std::string>& labels) {
  std::vector<absl::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < selector.size(); ++i) {
    if (selector[i] == '(') {
      ++depth;
    } else if (selector[i] == ')') {
      --depth;
    } else if (selector[i] == ',' && depth == 0) {
      parts.push_back(selector.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(selector.substr(start));
  for (absl::string_view raw : parts) {
    absl::string_view req = absl::StripAsciiWhitespace(raw);
    if (req.empty()) return absl::InvalidArgumentError("empty requirement");
    absl::StatusOr<bool> ok = MatchesRequirement(req, labels);
    if (!ok.ok() || !*ok) return ok;
  }
  return true;
}

}  // namespace ctrlhost::sdk::testing
