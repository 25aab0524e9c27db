// Strategic merge patch, following the rules of k8s.io/apimachinery/pkg/util/strategicpatch
// (server side: parallel delete lists merged, unmatched nulls ignored). Declared in patch.h.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/patch/internal/errors.h"
#include "runtime/apiserver/patch/patch.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;
using Node = MergeStrategy::Node;

constexpr absl::string_view kPatchDirective = "$patch";
constexpr absl::string_view kRetainKeys = "$retainKeys";
constexpr absl::string_view kSetElementOrder = "$setElementOrder/";
constexpr absl::string_view kDeleteFromPrimitiveList = "$deleteFromPrimitiveList/";

std::string Child(absl::string_view path, absl::string_view field) {
  return path.empty() ? std::string(field) : absl::StrCat(path, ".", field);
}

const Node* ChildNode(const Node* node, absl::string_view field) {
  return node == nullptr ? nullptr : node->Child(field);
}

std::string MergeKeyOf(const Node* node) {
  return node == nullptr ? std::string() : node->strategy.merge_key;
}

bool MergesList(const Node* node) { return node != nullptr && node->strategy.merge; }

bool SameKind(const json& a, const json& b) {
  if (a.is_object() || b.is_object()) return a.is_object() && b.is_object();
  if (a.is_array() || b.is_array()) return a.is_array() && b.is_array();
  return true;  // scalars (and null) replace each other
}

// Element kinds of the lists merged together: all maps, or all scalars of one type.
enum class ElementKind { kEmpty, kMap, kScalar };

absl::StatusOr<ElementKind> ElementKindOf(const json& a, const json& b, const std::string& path) {
  std::optional<json::value_t> seen;
  for (const json* list : {&a, &b}) {
    for (const json& item : *list) {
      if (item.is_array()) {
        return internal::PatchDoesNotApply(path, "lists of lists are not supported");
      }
      json::value_t type = item.type();
      if (type == json::value_t::number_unsigned || type == json::value_t::number_float) {
        type = json::value_t::number_integer;  // all JSON numbers are one Go type (float64)
      }
      if (seen.has_value() && *seen != type) {
        return kube::BadRequestError(
            absl::StrCat("strategic merge patch: list ", path, " mixes element types"));
      }
      seen = type;
    }
  }
  if (!seen.has_value()) return ElementKind::kEmpty;
  return *seen == json::value_t::object ? ElementKind::kMap : ElementKind::kScalar;
}

absl::Status NoMergeKey(const json& item, absl::string_view key, const std::string& path) {
  return kube::BadRequestError(absl::StrCat("strategic merge patch: map: ", item.dump(),
                                            " does not contain declared merge key: ", key, " (in ",
                                            path, ")"));
}

// The position of `item` in `order` (matched on the merge key for maps), or -1.
absl::StatusOr<int> IndexIn(const json& order, const json& item, const std::string& key, bool maps,
                            const std::string& path) {
  if (maps && (!item.is_object() || !item.contains(key))) return NoMergeKey(item, key, path);
  for (size_t i = 0; i < order.size(); ++i) {
    const json& candidate = order[i];
    if (maps) {
      if (!candidate.is_object() || !candidate.contains(key)) {
        return NoMergeKey(candidate, key, path);
      }
      if (candidate.at(key) == item.at(key)) return static_cast<int>(i);
    } else if (candidate == item) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

class Merger {
 public:
  absl::StatusOr<json> MergeMap(json original, json patch, const Node* node,
                                const std::string& path);

 private:
  absl::StatusOr<json> Normalize(json value, const Node* node, const std::string& path);
  absl::StatusOr<json> MergeList(json original, json patch, const Node* node, bool delete_list,
                                 const std::string& path);
  absl::Status ApplyRetainKeys(json& original, json& patch, const std::string& path);
  absl::Status ApplySetElementOrder(json& original, json& patch, const Node* node,
                                    const std::string& path);
  absl::StatusOr<json> NormalizeOrder(json patch_items, json server_only, const json& patch_order,
                                      const json& server_order, const std::string& key, bool maps,
                                      const std::string& path);
  absl::Status Partition(const json& merged, const json& order, const std::string& key, bool maps,
                         const std::string& path, json* in_order, json* others);
};

// A value taken from the patch where nothing merges with it: nulls dropped and directives
// applied, as if it were merged into an empty value.
absl::StatusOr<json> Merger::Normalize(json value, const Node* node, const std::string& path) {
  if (value.is_object()) return MergeMap(json::object(), std::move(value), node, path);
  if (value.is_array()) {
    if (MergesList(node)) return MergeList(json::array(), std::move(value), node, false, path);
    for (json& item : value) {
      ASSIGN_OR_RETURN(item, Normalize(std::move(item), node, path));
    }
  }
  return value;
}

absl::Status Merger::ApplyRetainKeys(json& original, json& patch, const std::string& path) {
  auto it = patch.find(kRetainKeys);
  if (it == patch.end()) return absl::OkStatus();
  json retain = std::move(*it);
  patch.erase(it);
  if (!retain.is_array() ||
      !std::all_of(retain.begin(), retain.end(), [](const json& k) { return k.is_string(); })) {
    return kube::BadRequestError(absl::StrCat(
        "invalid patch format of retainKeys: $retainKeys must be a list of strings (in ", path,
        ")"));
  }
  auto retained = [&retain](const std::string& key) {
    return std::find(retain.begin(), retain.end(), json(key)) != retain.end();
  };
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null() || absl::StartsWith(key, "$")) continue;
    if (!retained(key)) {
      return kube::BadRequestError(absl::StrCat("invalid patch format of retainKeys: ", path, ".",
                                                key, " is not in the $retainKeys list"));
    }
  }
  for (auto orig = original.begin(); orig != original.end();) {
    orig = retained(orig.key()) ? std::next(orig) : original.erase(orig);
  }
  return absl::OkStatus();
}

absl::Status Merger::Partition(const json& merged, const json& order, const std::string& key,
                               bool maps, const std::string& path, json* in_order, json* others) {
  *in_order = json::array();
  *others = json::array();
  for (const json& item : merged) {
    ASSIGN_OR_RETURN(int index, IndexIn(order, item, key, maps, path));
    (index >= 0 ? in_order : others)->push_back(item);
  }
  return absl::OkStatus();
}

// Items named by the patch keep the patch's order, items only on the server keep the server's
// order, and the two are interleaved so that server-only items stay next to the items that
// followed them on the server (strategicpatch's normalizeElementOrder + mergeSortedSlice).
absl::StatusOr<json> Merger::NormalizeOrder(json patch_items, json server_only,
                                            const json& patch_order, const json& server_order,
                                            const std::string& key, bool maps,
                                            const std::string& path) {
  auto sort_by = [&](json& items, const json& order) -> absl::Status {
    std::vector<std::pair<int, json>> keyed;
    for (json& item : items) {
      ASSIGN_OR_RETURN(int index, IndexIn(order, item, key, maps, path));
      keyed.emplace_back(index, std::move(item));
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    items = json::array();
    for (auto& [index, item] : keyed) items.push_back(std::move(item));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(sort_by(patch_items, patch_order));
  RETURN_IF_ERROR(sort_by(server_only, server_order));
  json out = json::array();
  size_t i = 0, j = 0;
  while (i < server_only.size() || j < patch_items.size()) {
    if (j >= patch_items.size()) {
      out.push_back(std::move(server_only[i++]));
    } else if (i >= server_only.size()) {
      out.push_back(std::move(patch_items[j++]));
    } else {
      ASSIGN_OR_RETURN(int left, IndexIn(server_order, server_only[i], key, maps, path));
      ASSIGN_OR_RETURN(int right, IndexIn(server_order, patch_items[j], key, maps, path));
      if (left >= 0 && right >= 0 && left < right) {
        out.push_back(std::move(server_only[i++]));
      } else {
        out.push_back(std::move(patch_items[j++]));
      }
    }
  }
  return out;
}

absl::StatusOr<json> Merger::MergeList(json original, json patch, const Node* node,
                                       bool delete_list, const std::string& path) {
  if (original.empty() && patch.empty()) return original;
  ASSIGN_OR_RETURN(ElementKind kind, ElementKindOf(original, patch, path));
  if (kind != ElementKind::kMap) {
    if (delete_list) {
      json kept = json::array();
      for (json& item : original) {
        if (std::find(patch.begin(), patch.end(), item) == patch.end()) {
          kept.push_back(std::move(item));
        }
      }
      return kept;
    }
    json merged = json::array();
    for (const json* list : {&original, &patch}) {
      for (const json& item : *list) {
        if (std::find(merged.begin(), merged.end(), item) == merged.end()) merged.push_back(item);
      }
    }
    json patch_items, server_only;
    RETURN_IF_ERROR(Partition(merged, patch, "", false, path, &patch_items, &server_only));
    return NormalizeOrder(std::move(patch_items), std::move(server_only), patch, original, "",
                          false, path);
  }

  const std::string key = MergeKeyOf(node);
  if (key.empty()) {
    return kube::BadRequestError(
        absl::StrCat("strategic merge patch: cannot merge lists without merge key for ", path));
  }
  // Directive items: {"$patch": "delete", key: v} deletes, {"$patch": "replace"} replaces the
  // list with the other items of the patch.
  json items = json::array();
  bool replace = false;
  for (json& item : patch) {
    auto directive = item.find(kPatchDirective);
    if (directive == item.end()) {
      items.push_back(std::move(item));
      continue;
    }
    if (*directive == "delete") {
      if (!item.contains(key)) return NoMergeKey(item, key, path);
      json kept = json::array();
      for (json& existing : original) {
        if (!(existing.is_object() && existing.contains(key) && existing.at(key) == item.at(key))) {
          kept.push_back(std::move(existing));
        }
      }
      original = std::move(kept);
    } else if (*directive == "replace") {
      replace = true;
    } else if (*directive == "merge") {
      return kube::BadRequestError(absl::StrCat(
          "strategic merge patch: merging lists cannot yet be specified in the patch (", path,
          ")"));
    } else {
      return kube::BadRequestError(absl::StrCat(
          "strategic merge patch: unknown patch type: ", directive->dump(), " in list ", path));
    }
  }
  if (replace) {
    original = json::array();
    for (json& item : items) {
      ASSIGN_OR_RETURN(json normalized, Normalize(std::move(item), node, path));
      original.push_back(std::move(normalized));
    }
    items = json::array();
  }
  json merged = original;
  for (const json& item : items) {
    if (!item.contains(key)) return NoMergeKey(item, key, path);
    ASSIGN_OR_RETURN(int index, IndexIn(merged, item, key, true, path));
    if (index >= 0) {
      ASSIGN_OR_RETURN(merged[index], MergeMap(std::move(merged[index]), item, node, path));
    } else {
      ASSIGN_OR_RETURN(json added, Normalize(item, node, path));
      merged.push_back(std::move(added));
    }
  }
  json patch_items, server_only;
  RETURN_IF_ERROR(Partition(merged, items, key, true, path, &patch_items, &server_only));
  return NormalizeOrder(std::move(patch_items), std::move(server_only), items, original, key, true,
                        path);
}

absl::Status Merger::ApplySetElementOrder(json& original, json& patch, const Node* node,
                                          const std::string& path) {
  std::vector<std::string> directives;
  for (const auto& [key, value] : patch.items()) {
    if (absl::StartsWith(key, kSetElementOrder)) directives.push_back(key);
  }
  for (const std::string& directive : directives) {
    json order = std::move(patch[directive]);
    patch.erase(directive);
    const std::string field = directive.substr(kSetElementOrder.size());
    const std::string field_path = Child(path, field);
    const Node* child = ChildNode(node, field);
    const std::string key = MergeKeyOf(child);
    if (!order.is_array()) {
      return kube::BadRequestError(absl::StrCat(
          "invalid patch format of setElementOrder list: ", directive, " must be a list"));
    }
    const bool has_original = original.contains(field) && !original[field].is_null();
    const bool has_patch = patch.contains(field) && !patch[field].is_null();
    if ((has_original && !original[field].is_array()) || (has_patch && !patch[field].is_array())) {
      return kube::BadRequestError(absl::StrCat(
          "invalid patch format of setElementOrder list: ", field_path, " is not a list"));
    }
    const json original_list = has_original ? original[field] : json::array();
    const json patch_list = has_patch ? patch[field] : json::array();
    ASSIGN_OR_RETURN(ElementKind kind, ElementKindOf(original_list, patch_list, field_path));
    const bool maps = kind == ElementKind::kMap || (!order.empty() && order[0].is_object());
    if (maps && key.empty()) {
      return kube::BadRequestError(absl::StrCat(
          "strategic merge patch: cannot merge lists without merge key for ", field_path));
    }
    // The patch list (directive items aside) must follow the order of $setElementOrder.
    size_t p = 0, o = 0;
    while (p < patch_list.size() && o < order.size()) {
      const json& item = patch_list[p];
      if (item.is_object() && item.contains(kPatchDirective)) {
        ++p;
        continue;
      }
      ASSIGN_OR_RETURN(int index, IndexIn(json::array({order[o]}), item, key, maps, field_path));
      if (index == 0) ++p;
      ++o;
    }
    while (p < patch_list.size() && patch_list[p].is_object() &&
           patch_list[p].contains(kPatchDirective)) {
      ++p;
    }
    if (p < patch_list.size() && !order.empty()) {
      return kube::BadRequestError(absl::StrCat("strategic merge patch: the order in patch list ",
                                                field_path, " doesn't match ", directive));
    }
    json merged;
    if (has_original && !has_patch) {
      merged = original_list;
    } else if (!has_original && has_patch) {
      ASSIGN_OR_RETURN(merged, Normalize(patch_list, child, field_path));
    } else if (has_original && has_patch) {
      if (MergesList(child)) {
        ASSIGN_OR_RETURN(merged, MergeList(original_list, patch_list, child, false, field_path));
      } else {
        ASSIGN_OR_RETURN(merged, Normalize(patch_list, child, field_path));
      }
    } else {
      continue;
    }
    json in_order, others;
    RETURN_IF_ERROR(Partition(merged, order, key, maps, field_path, &in_order, &others));
    ASSIGN_OR_RETURN(original[field], NormalizeOrder(std::move(in_order), std::move(others), order,
                                                     original_list, key, maps, field_path));
    patch.erase(field);
  }
  return absl::OkStatus();
}

absl::StatusOr<json> Merger::MergeMap(json original, json patch, const Node* node,
                                      const std::string& path) {
  if (auto directive = patch.find(kPatchDirective); directive != patch.end()) {
    if (*directive == "replace") {
      patch.erase(directive);
      return Normalize(std::move(patch), node, path);
    }
    if (*directive == "delete") return json::object();
    return kube::BadRequestError(
        absl::StrCat("strategic merge patch: unknown patch type: ", directive->dump(), " in map ",
                     path.empty() ? "<root>" : path));
  }
  if (!original.is_object()) original = json::object();
  RETURN_IF_ERROR(ApplyRetainKeys(original, patch, path));
  RETURN_IF_ERROR(ApplySetElementOrder(original, patch, node, path));

  for (auto& [patch_key, patch_value] : patch.items()) {
    std::string key = patch_key;
    bool delete_list = false;
    if (absl::StartsWith(key, kDeleteFromPrimitiveList)) {
      key = key.substr(kDeleteFromPrimitiveList.size());
      delete_list = true;
      if (!patch_value.is_array()) {
        return kube::BadRequestError(
            absl::StrCat("invalid patch format of primitive list: ", patch_key, " must be a list"));
      }
    } else if (absl::StartsWith(key, "$")) {
      return kube::BadRequestError(absl::StrCat("strategic merge patch: unknown directive ", key,
                                                " in ", path.empty() ? "<root>" : path));
    }
    const std::string child_path = Child(path, key);
    const Node* child = ChildNode(node, key);
    if (patch_value.is_null()) {
      original.erase(key);
      continue;
    }
    auto current = original.find(key);
    if (current == original.end() || !SameKind(*current, patch_value)) {
      if (delete_list) continue;
      ASSIGN_OR_RETURN(original[key], Normalize(std::move(patch_value), child, child_path));
      continue;
    }
    if (current->is_object()) {
      if (child != nullptr && child->strategy.replace) {
        ASSIGN_OR_RETURN(*current, Normalize(std::move(patch_value), child, child_path));
      } else {
        ASSIGN_OR_RETURN(*current,
                         MergeMap(std::move(*current), std::move(patch_value), child, child_path));
      }
    } else if (current->is_array()) {
      if (MergesList(child) || delete_list) {
        ASSIGN_OR_RETURN(*current, MergeList(std::move(*current), std::move(patch_value), child,
                                             delete_list, child_path));
      } else {
        ASSIGN_OR_RETURN(*current, Normalize(std::move(patch_value), child, child_path));
      }
    } else if (!delete_list) {
      *current = std::move(patch_value);
    }
  }
  return original;
}

}  // namespace

absl::StatusOr<json> ApplyStrategicMergePatch(const json& doc, absl::string_view patch_body,
                                              const MergeStrategy* strategy) {
  if (strategy == nullptr) return internal::UnsupportedPatchType(/*strategic_supported=*/false);
  json patch = json::parse(patch_body.begin(), patch_body.end(), nullptr,
                           /*allow_exceptions=*/false);
  if (patch.is_discarded()) {
    return kube::BadRequestError("strategic merge patch is not valid JSON");
  }
  if (!patch.is_object()) {
    return kube::BadRequestError(
        absl::StrCat("strategic merge patch must be a JSON object, not ", patch.type_name()));
  }
  if (!doc.is_object()) return kube::InternalError("patch target is not a JSON object");
  RETURN_IF_ERROR(internal::CheckNestingDepth(patch, "strategic merge patch"));
  Merger merger;
  return merger.MergeMap(doc, std::move(patch), &strategy->root(), "");
}

}  // namespace ctrlhost::apiserver
