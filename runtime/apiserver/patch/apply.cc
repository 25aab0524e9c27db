#include "runtime/apiserver/patch/apply.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/apiserver/patch/internal/errors.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;
using Node = MergeStrategy::Node;

constexpr size_t kMaxFieldManagerLength = 128;

const Node* ChildNode(const Node* node, const std::string& field) {
  return node == nullptr ? nullptr : node->Child(field);
}

json WithoutNulls(json value) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      if (it->is_null()) {
        it = value.erase(it);
      } else {
        *it = WithoutNulls(std::move(*it));
        ++it;
      }
    }
  } else if (value.is_array()) {
    for (json& item : value) item = WithoutNulls(std::move(item));
  }
  return value;
}

// The path element identifying a list item: k:{...} for associative lists, v:... for sets.
absl::StatusOr<std::vector<std::string>> Elements(const json& list, const Node* node,
                                                  absl::string_view side) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  const std::string& key = node->strategy.merge_key;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& item = list[i];
    std::string element;
    if (node->strategy.IsAssociativeList()) {
      if (!item.is_object() || !item.contains(key) || item.at(key).is_null()) {
        return kube::BadRequestError(absl::StrCat(
            side, ": element ", i, " of an associative list omits key field \"", key, "\""));
      }
      element = FieldSet::KeyElement(json::object({{key, item.at(key)}}));
    } else {
      element = FieldSet::ValueElement(item);
    }
    if (!seen.insert(element).second) {
      return kube::BadRequestError(
          absl::StrCat(side, ": duplicate entries for ", FieldSet::PathString({element})));
    }
    out.push_back(std::move(element));
  }
  return out;
}

absl::StatusOr<json> Merge(const json* live, const json& config, const Node* node);

// Merges two associative lists or sets. Items only in live keep their place; items in both
// and new items follow the configuration's order (structured-merge-diff's list merge).
absl::StatusOr<json> MergeList(const json& live, const json& config, const Node* node) {
  ASSIGN_OR_RETURN(std::vector<std::string> lhs, Elements(live, node, "live object"));
  ASSIGN_OR_RETURN(std::vector<std::string> rhs, Elements(config, node, "apply configuration"));
  std::map<std::string, size_t> in_lhs, in_rhs;
  for (size_t i = 0; i < lhs.size(); ++i) in_lhs[lhs[i]] = i;
  for (size_t i = 0; i < rhs.size(); ++i) in_rhs[rhs[i]] = i;
  std::vector<std::string> shared;
  for (const std::string& e : rhs) {
    if (in_lhs.count(e) != 0) shared.push_back(e);
  }
  size_t next_shared = 0;
  std::set<std::string> emitted;
  json out = json::array();
  auto emit = [&](const std::string& e) -> absl::Status {
    auto l = in_lhs.find(e);
    const json* live_item = l == in_lhs.end() ? nullptr : &live[l->second];
    ASSIGN_OR_RETURN(json merged, Merge(live_item, config[in_rhs.at(e)], node));
    out.push_back(std::move(merged));
    emitted.insert(e);
    if (next_shared < shared.size() && shared[next_shared] == e) ++next_shared;
    return absl::OkStatus();
  };
  size_t l = 0, r = 0;
  while (l < lhs.size() || r < rhs.size()) {
    if (l < lhs.size() && r < rhs.size() && lhs[l] == rhs[r]) {
      RETURN_IF_ERROR(emit(rhs[r]));
      ++l;
      ++r;
      continue;
    }
    if (l < lhs.size()) {
      const std::string& e = lhs[l];
      if (in_rhs.count(e) == 0) {
        out.push_back(live[l++]);
        continue;
      }
      if (emitted.count(e) != 0 ||
          (next_shared < shared.size() && shared[next_shared] != e && r < rhs.size())) {
        ++l;
        continue;
      }
    }
    if (r < rhs.size()) {
      RETURN_IF_ERROR(emit(rhs[r++]));
    } else {
      ++l;
    }
  }
  return out;
}

absl::StatusOr<json> Merge(const json* live, const json& config, const Node* node) {
  if (live == nullptr || live->is_null()) return WithoutNulls(config);
  if (live->is_object() && config.is_object() && !(node != nullptr && node->strategy.replace)) {
    json out = *live;
    for (const auto& [field, value] : config.items()) {
      if (value.is_null()) {
        out.erase(field);
        continue;
      }
      auto current = out.find(field);
      ASSIGN_OR_RETURN(json merged, Merge(current == out.end() ? nullptr : &*current, value,
                                          ChildNode(node, field)));
      out[field] = std::move(merged);
    }
    return out;
  }
  if (live->is_array() && config.is_array() && node != nullptr &&
      (node->strategy.IsAssociativeList() || node->strategy.IsPrimitiveSet())) {
    return MergeList(*live, WithoutNulls(config), node);
  }
  return WithoutNulls(config);
}

// Removes from `value` the members of `remove` unless `keep` owns something at or below them.
void RemoveFields(json& value, const FieldSet& remove, const FieldSet* keep, const Node* node) {
  for (const auto& [element, child] : remove.children()) {
    const FieldSet* child_keep = keep == nullptr ? nullptr : keep->Child(element);
    const bool whole = child.member() && (child_keep == nullptr || child_keep->empty());
    const std::string body = element.substr(2);
    if (absl::StartsWith(element, "f:")) {
      if (!value.is_object()) continue;
      auto it = value.find(body);
      if (it == value.end()) continue;
      if (whole) {
        value.erase(it);
      } else {
        RemoveFields(*it, child, child_keep, ChildNode(node, body));
      }
    } else if (absl::StartsWith(element, "k:") || absl::StartsWith(element, "v:")) {
      if (!value.is_array()) continue;
      json id = json::parse(body, nullptr, /*allow_exceptions=*/false);
      if (id.is_discarded()) continue;
      const bool by_key = element[0] == 'k';
      for (size_t i = 0; i < value.size(); ++i) {
        json& item = value[i];
        bool match = !by_key ? item == id : item.is_object() && id.is_object();
        if (by_key && match) {
          for (const auto& [k, v] : id.items()) match = match && item.contains(k) && item[k] == v;
        }
        if (!match) continue;
        if (whole) {
          value.erase(i);
        } else if (by_key) {
          RemoveFields(item, child, child_keep, node);
        }
        break;
      }
    }
  }
}

std::string Quote(absl::string_view s) { return json(std::string(s)).dump(); }

// kubectl's field manager for `kubectl apply --server-side`.
constexpr char kKubectlManager[] = "kubectl";

std::string PrintManager(const ManagedFieldsEntry& e) {
  std::string out = Quote(e.manager);
  if (!e.subresource.empty()) absl::StrAppend(&out, " with subresource ", Quote(e.subresource));
  if (e.operation == "Update") absl::StrAppend(&out, " using ", e.api_version);
  return out;
}

absl::Status ConflictError(const std::vector<std::pair<std::string, std::string>>& conflicts) {
  // conflicts: (printed manager, path), sorted.
  kube::StatusDetails details;
  for (const auto& [manager, path] : conflicts) {
    details.causes.push_back(
        {"FieldManagerConflict", absl::StrCat("conflict with ", manager), path});
  }
  std::string message;
  if (conflicts.size() == 1) {
    message = absl::StrCat("Apply failed with 1 conflict: conflict with ", conflicts[0].first, ": ",
                           conflicts[0].second);
  } else {
    std::vector<std::string> lines;
    std::string current;
    for (const auto& [manager, path] : conflicts) {
      if (lines.empty() || manager != current) {
        lines.push_back(absl::StrCat("conflicts with ", manager, ":"));
        current = manager;
      }
      lines.push_back(absl::StrCat("- ", path));
    }
    message = absl::StrCat("Apply failed with ", conflicts.size(),
                           " conflicts: ", absl::StrJoin(lines, "\n"));
  }
  return kube::ApiError(409, "Conflict", message, std::move(details));
}

// The fields kubectl's client-side apply last set (the `last-applied-configuration`
// annotation) whose values the live object still has: the first `kubectl apply --server-side`
// (field manager "kubectl") may take them over from whoever owns them, usually
// "kubectl-client-side-apply", without a conflict, as kube-apiserver lets it since server-side
// apply became the way up from client-side apply. Empty when the annotation is absent or not a
// JSON object. `live` is the live object without its managedFields.
FieldSet UpgradableFromClientSideApply(const json& live, const Node* root) {
  const auto metadata = live.find("metadata");
  if (metadata == live.end() || !metadata->is_object()) return FieldSet();
  const auto annotations = metadata->find("annotations");
  if (annotations == metadata->end() || !annotations->is_object()) return FieldSet();
  const auto annotation = annotations->find("kubectl.kubernetes.io/last-applied-configuration");
  if (annotation == annotations->end() || !annotation->is_string()) return FieldSet();
  const json last_applied =
      json::parse(annotation->get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
  if (last_applied.is_discarded() || !last_applied.is_object() ||
      !internal::CheckNestingDepth(last_applied, "last-applied-configuration").ok()) {
    return FieldSet();
  }
  absl::StatusOr<FieldSet> fields = FieldSetOf(last_applied, root);
  absl::StatusOr<FieldDiff> diff = DiffFields(&last_applied, live, root);
  if (!fields.ok() || !diff.ok()) return FieldSet();
  // Fields whose value changed since (someone else wrote them) are not kubectl's to take.
  return fields->Difference(diff->modified);
}

absl::Status ValidateManager(absl::string_view manager) {
  std::vector<kube::StatusCause> causes;
  if (manager.empty()) {
    causes.push_back(
        {"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"});
  } else if (manager.size() > kMaxFieldManagerLength) {
    causes.push_back(
        {"FieldValueTooLong",
         absl::StrCat("Too long: may not be more than ", kMaxFieldManagerLength, " bytes"),
         "fieldManager"});
  } else if (!std::all_of(manager.begin(), manager.end(),
                          [](char c) { return absl::ascii_isprint(c) || (c & 0x80) != 0; })) {
    causes.push_back({"FieldValueInvalid",
                      absl::StrCat("Invalid value: ", Quote(manager),
                                   ": must only contain printable characters"),
                      "fieldManager"});
  }
  if (causes.empty()) return absl::OkStatus();
  return kube::InvalidError("meta.k8s.io", "PatchOptions", "", std::move(causes));
}

std::string StringMember(const json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string MetaString(const json& object, const char* name) {
  auto meta = object.find("metadata");
  return meta != object.end() && meta->is_object() ? StringMember(*meta, name) : "";
}

absl::Status ValidateConfig(const json& config, const ApplyOptions& opts) {
  if (!config.is_object()) {
    return kube::BadRequestError(absl::StrCat(
        "error decoding YAML: an apply configuration must be an object, not ", config.type_name()));
  }
  const std::string api_version = StringMember(config, "apiVersion");
  const std::string kind = StringMember(config, "kind");
  if (api_version != opts.api_version || kind != opts.kind) {
    const size_t slash = api_version.find('/');
    const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    const std::string version =
        slash == std::string::npos ? api_version : api_version.substr(slash + 1);
    return kube::BadRequestError(
        absl::StrCat("invalid object type: ", group, "/", version, ", Kind=", kind));
  }
  if (auto meta = config.find("metadata"); meta != config.end() && !meta->is_null()) {
    if (!meta->is_object()) return kube::BadRequestError("metadata must be an object");
    if (auto managed = meta->find("managedFields"); managed != meta->end() && !managed->is_null()) {
      return kube::BadRequestError("metadata.managedFields must be nil");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNameAndNamespace(const json& object, const ApplyOptions& opts) {
  const std::string name = MetaString(object, "name");
  if (!opts.name.empty() && name != opts.name) {
    return kube::BadRequestError(absl::StrCat("the name of the object (", name,
                                              ") does not match the name on the URL (", opts.name,
                                              ")"));
  }
  const std::string ns = MetaString(object, "namespace");
  if (!opts.namespace_name.empty() && !ns.empty() && ns != opts.namespace_name) {
    return kube::BadRequestError(absl::StrCat("the namespace of the object (", ns,
                                              ") does not match the namespace on the URL (",
                                              opts.namespace_name, ")"));
  }
  return absl::OkStatus();
}

// The part of the configuration this request may apply.
json EffectiveConfig(const json& config, const ApplyOptions& opts) {
  if (opts.subresource == "status") {
    json out = json::object();
    for (const char* field : {"apiVersion", "kind", "status"}) {
      if (config.contains(field)) out[field] = config[field];
    }
    json meta = json::object();
    for (const char* field : {"name", "namespace"}) {
      if (!MetaString(config, field).empty()) meta[field] = MetaString(config, field);
    }
    if (!meta.empty()) out["metadata"] = std::move(meta);
    return out;
  }
  json out = config;
  if (opts.ignore_status) out.erase("status");
  return out;
}

// Kubernetes 1.20's structured-merge-diff refuses an item of an associative list that omits a
// key field with no default in the schema. The one operators hit: a Service port without
// `protocol` (ports are keyed by port and protocol; newer servers default protocol to TCP).
// kube-apiserver 1.20 answers 500 InternalError with this message; so does this server.
absl::Status CheckListMapKeys(const json& config, const ApplyOptions& opts) {
  if (opts.api_version != "v1" || opts.kind != "Service" || !opts.subresource.empty()) {
    return absl::OkStatus();
  }
  auto spec = config.find("spec");
  if (spec == config.end() || !spec->is_object()) return absl::OkStatus();
  auto ports = spec->find("ports");
  if (ports == spec->end() || !ports->is_array()) return absl::OkStatus();
  for (size_t i = 0; i < ports->size(); ++i) {
    const json& port = (*ports)[i];
    if (port.is_object() && !port.contains("protocol")) {
      return kube::InternalError(
          absl::StrCat("failed to create typed patch object: .spec.ports: element ", i,
                       ": associative list with keys has an element that omits key field "
                       "\"protocol\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<json> ServerSideApply(const json* live, const json& applied_config,
                                     const ApplyOptions& opts, const MergeStrategy* strategy) {
  RETURN_IF_ERROR(ValidateManager(opts.manager));
  RETURN_IF_ERROR(ValidateConfig(applied_config, opts));
  RETURN_IF_ERROR(internal::CheckNestingDepth(applied_config, "apply configuration"));
  RETURN_IF_ERROR(CheckListMapKeys(applied_config, opts));
  if (live != nullptr && !live->is_object()) {
    return kube::InternalError("live object is not a JSON object");
  }
  const Node* root = strategy == nullptr ? nullptr : &strategy->root();

  std::vector<ManagedFieldsEntry> entries;
  json base = json::object();
  if (live != nullptr) {
    absl::StatusOr<std::vector<ManagedFieldsEntry>> decoded = DecodeManagedFields(*live);
    if (decoded.ok()) entries = *std::move(decoded);  // undecodable entries are reset
    base = *live;
    if (base.contains("metadata") && base["metadata"].is_object()) {
      base["metadata"].erase("managedFields");
    }
  }

  const json config = EffectiveConfig(applied_config, opts);
  absl::StatusOr<FieldSet> applied_set = FieldSetOf(config, root);
  if (!applied_set.ok()) {
    return kube::BadRequestError(
        absl::StrCat("apply configuration: ", applied_set.status().message()));
  }
  ASSIGN_OR_RETURN(json merged, Merge(&base, config, root));

  auto mine = std::find_if(entries.begin(), entries.end(), [&](const ManagedFieldsEntry& e) {
    return e.SameOwner(opts.manager, "Apply", opts.subresource);
  });
  if (mine == entries.end()) {
    ManagedFieldsEntry entry;
    entry.manager = opts.manager;
    entry.operation = "Apply";
    entry.subresource = opts.subresource;
    entries.push_back(std::move(entry));
    mine = std::prev(entries.end());
  }
  const size_t mine_index = static_cast<size_t>(mine - entries.begin());

  // Fields applied last time and not any more go, unless someone still owns them.
  FieldSet keep = *applied_set;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i != mine_index) keep = keep.Union(entries[i].fields);
  }
  RemoveFields(merged, entries[mine_index].fields.Difference(keep), &keep, root);

  absl::StatusOr<FieldDiff> diff = DiffFields(&base, merged, root);
  if (!diff.ok()) {
    return kube::BadRequestError(absl::StrCat("apply: ", diff.status().message()));
  }
  const FieldSet changed = diff->added.Union(diff->modified);
  // kubectl moving from client-side to server-side apply takes what it applied before.
  const FieldSet upgradable = opts.manager == kKubectlManager && live != nullptr && !opts.force
                                  ? UpgradableFromClientSideApply(base, root)
                                  : FieldSet();
  std::vector<std::pair<std::string, std::string>> conflicts;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i == mine_index) continue;
    for (const FieldSet::Path& path : entries[i].fields.Intersection(changed).Members()) {
      if (upgradable.Has(path)) continue;
      conflicts.emplace_back(PrintManager(entries[i]), FieldSet::PathString(path));
    }
  }
  if (!conflicts.empty() && !opts.force) {
    std::sort(conflicts.begin(), conflicts.end());
    return ConflictError(conflicts);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i == mine_index) continue;
    entries[i].fields = entries[i].fields.Difference(changed).Difference(diff->removed);
  }
  ManagedFieldsEntry& own = entries[mine_index];
  own.fields = *std::move(applied_set);
  own.api_version = opts.api_version;
  own.time = FormatManagedFieldsTime(opts.now);

  RETURN_IF_ERROR(CheckNameAndNamespace(merged, opts));
  EncodeManagedFields(std::move(entries), &merged);
  return merged;
}

}  // namespace ctrlhost::apiserver
