#include "runtime/apiserver/patch/managed_fields.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;
using Node = MergeStrategy::Node;
using Path = FieldSet::Path;

const Node* ChildNode(const Node* node, const std::string& field) {
  return node == nullptr ? nullptr : node->Child(field);
}

enum class Shape { kMap, kAssociative, kSet, kLeaf };

Shape ShapeOf(const json& value, const Node* node) {
  if (value.is_object()) {
    return value.empty() || (node != nullptr && node->strategy.replace) ? Shape::kLeaf
                                                                        : Shape::kMap;
  }
  if (value.is_array() && !value.empty() && node != nullptr) {
    if (node->strategy.IsAssociativeList()) return Shape::kAssociative;
    if (node->strategy.IsPrimitiveSet()) return Shape::kSet;
  }
  return Shape::kLeaf;
}

// The items of an associative list by their "k:" element, in list order.
absl::StatusOr<std::vector<std::pair<std::string, const json*>>> IndexItems(const json& list,
                                                                            const Node* node,
                                                                            const Path& path) {
  const std::string& key = node->strategy.merge_key;
  std::vector<std::pair<std::string, const json*>> out;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& item = list[i];
    if (!item.is_object() || !item.contains(key) || item.at(key).is_null()) {
      return absl::InvalidArgumentError(absl::StrCat(
          FieldSet::PathString(path), ": element ", i,
          ": associative list with keys has an element that omits key field \"", key, "\""));
    }
    std::string element = FieldSet::KeyElement(json::object({{key, item.at(key)}}));
    if (!seen.emplace(element, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(FieldSet::PathString(path),
                                                     ": duplicate entries for key [", key, "=",
                                                     item.at(key).dump(), "]"));
    }
    out.emplace_back(std::move(element), &item);
  }
  return out;
}

absl::Status Collect(const json& value, const Node* node, Path& path, FieldSet* out);

absl::Status CollectFields(const json& map, const Node* node, Path& path, FieldSet* out) {
  for (const auto& [field, child] : map.items()) {
    if (child.is_null()) continue;
    path.push_back(FieldSet::FieldElement(field));
    absl::Status status = Collect(child, ChildNode(node, field), path, out);
    path.pop_back();
    RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

// An item of an associative list: the item itself and its fields.
absl::Status CollectItem(const json& item, const Node* node, Path& path, FieldSet* out) {
  out->Insert(path);
  return CollectFields(item, node, path, out);
}

absl::Status Collect(const json& value, const Node* node, Path& path, FieldSet* out) {
  switch (ShapeOf(value, node)) {
    case Shape::kMap:
      return CollectFields(value, node, path, out);
    case Shape::kAssociative: {
      ASSIGN_OR_RETURN(auto items, IndexItems(value, node, path));
      for (const auto& [element, item] : items) {
        path.push_back(element);
        absl::Status status = CollectItem(*item, node, path, out);
        path.pop_back();
        RETURN_IF_ERROR(status);
      }
      return absl::OkStatus();
    }
    case Shape::kSet:
      for (const json& item : value) {
        path.push_back(FieldSet::ValueElement(item));
        out->Insert(path);
        path.pop_back();
      }
      return absl::OkStatus();
    case Shape::kLeaf:
      out->Insert(path);
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

bool Absent(const json* v) { return v == nullptr || v->is_null(); }

const json* Find(const json& map, const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &*it;
}

absl::Status Diff(const json* before, const json* after, const Node* node, Path& path,
                  FieldDiff* diff);

absl::Status DiffMaps(const json& before, const json& after, const Node* node, Path& path,
                      FieldDiff* diff) {
  std::vector<std::string> keys;
  for (const auto& [key, v] : before.items()) keys.push_back(key);
  for (const auto& [key, v] : after.items()) {
    if (!before.contains(key)) keys.push_back(key);
  }
  for (const std::string& key : keys) {
    path.push_back(FieldSet::FieldElement(key));
    absl::Status status =
        Diff(Find(before, key), Find(after, key), ChildNode(node, key), path, diff);
    path.pop_back();
    RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

absl::Status Diff(const json* before, const json* after, const Node* node, Path& path,
                  FieldDiff* diff) {
  if (Absent(before) && Absent(after)) return absl::OkStatus();
  if (Absent(before)) return Collect(*after, node, path, &diff->added);
  if (Absent(after)) return Collect(*before, node, path, &diff->removed);
  const Shape shape = ShapeOf(*before, node);
  if (shape != ShapeOf(*after, node)) {
    RETURN_IF_ERROR(Collect(*before, node, path, &diff->removed));
    return Collect(*after, node, path, &diff->added);
  }
  switch (shape) {
    case Shape::kMap:
      return DiffMaps(*before, *after, node, path, diff);
    case Shape::kAssociative: {
      ASSIGN_OR_RETURN(auto old_items, IndexItems(*before, node, path));
      ASSIGN_OR_RETURN(auto new_items, IndexItems(*after, node, path));
      std::map<std::string, const json*> olds(old_items.begin(), old_items.end());
      std::map<std::string, const json*> news(new_items.begin(), new_items.end());
      for (const auto& [element, item] : olds) {
        path.push_back(element);
        auto match = news.find(element);
        absl::Status status = match == news.end()
                                  ? CollectItem(*item, node, path, &diff->removed)
                                  : DiffMaps(*item, *match->second, node, path, diff);
        path.pop_back();
        RETURN_IF_ERROR(status);
      }
      for (const auto& [element, item] : news) {
        if (olds.count(element) != 0) continue;
        path.push_back(element);
        absl::Status status = CollectItem(*item, node, path, &diff->added);
        path.pop_back();
        RETURN_IF_ERROR(status);
      }
      return absl::OkStatus();
    }
    case Shape::kSet:
      for (const json& item : *before) {
        if (std::find(after->begin(), after->end(), item) == after->end()) {
          path.push_back(FieldSet::ValueElement(item));
          diff->removed.Insert(path);
          path.pop_back();
        }
      }
      for (const json& item : *after) {
        if (std::find(before->begin(), before->end(), item) == before->end()) {
          path.push_back(FieldSet::ValueElement(item));
          diff->added.Insert(path);
          path.pop_back();
        }
      }
      return absl::OkStatus();
    case Shape::kLeaf:
      if (*before != *after) diff->modified.Insert(path);
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

// Identity and server-owned metadata nobody owns (kube-apiserver's stripMetaManager).
void Strip(FieldSet* set) {
  set->RemoveTree({"f:apiVersion"});
  set->RemoveTree({"f:kind"});
  for (const char* field : {"name", "namespace", "creationTimestamp", "selfLink", "uid",
                            "clusterName", "generation", "managedFields", "resourceVersion"}) {
    set->RemoveTree({"f:metadata", FieldSet::FieldElement(field)});
  }
  const FieldSet* meta = set->Child("f:metadata");
  if (meta != nullptr && meta->children().empty()) set->RemoveTree({"f:metadata"});
}

json WithoutManagedFields(const json& object) {
  json out = object;
  if (out.is_object() && out.contains("metadata") && out["metadata"].is_object()) {
    out["metadata"].erase("managedFields");
  }
  return out;
}

}  // namespace

std::string FormatManagedFieldsTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

const MergeStrategy::Node* StrategyRootFor(const json& object) {
  if (!object.is_object()) return nullptr;
  auto api_version = object.find("apiVersion");
  auto kind = object.find("kind");
  if (api_version == object.end() || !api_version->is_string() || kind == object.end() ||
      !kind->is_string()) {
    return nullptr;
  }
  const std::string& av = api_version->get_ref<const std::string&>();
  const size_t slash = av.find('/');
  const std::string group = slash == std::string::npos ? "" : av.substr(0, slash);
  const MergeStrategy* strategy = BuiltinMergeStrategy(group, kind->get_ref<const std::string&>());
  return strategy == nullptr ? nullptr : &strategy->root();
}

absl::StatusOr<FieldSet> FieldSetOf(const json& value, const MergeStrategy::Node* node) {
  FieldSet out;
  Path path;
  RETURN_IF_ERROR(Collect(value, node, path, &out));
  Strip(&out);
  return out;
}

absl::StatusOr<FieldDiff> DiffFields(const json* before, const json& after,
                                     const MergeStrategy::Node* node) {
  FieldDiff diff;
  Path path;
  const json empty = json::object();
  RETURN_IF_ERROR(Diff(before == nullptr ? &empty : before, &after, node, path, &diff));
  Strip(&diff.added);
  Strip(&diff.modified);
  Strip(&diff.removed);
  return diff;
}

absl::StatusOr<std::vector<ManagedFieldsEntry>> DecodeManagedFields(const json& object) {
  std::vector<ManagedFieldsEntry> out;
  if (!object.is_object()) return out;
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return out;
  auto managed = meta->find("managedFields");
  if (managed == meta->end() || managed->is_null()) return out;
  if (!managed->is_array()) {
    return absl::InvalidArgumentError("metadata.managedFields must be a list");
  }
  auto string_member = [](const json& e, const char* name, std::string* value) {
    auto it = e.find(name);
    if (it == e.end() || it->is_null()) return true;
    if (!it->is_string()) return false;
    *value = it->get<std::string>();
    return true;
  };
  for (const json& e : *managed) {
    ManagedFieldsEntry entry;
    std::string fields_type;
    if (!e.is_object() || !string_member(e, "manager", &entry.manager) ||
        !string_member(e, "operation", &entry.operation) ||
        !string_member(e, "apiVersion", &entry.api_version) ||
        !string_member(e, "time", &entry.time) ||
        !string_member(e, "subresource", &entry.subresource) ||
        !string_member(e, "fieldsType", &fields_type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata.managedFields: malformed entry ", e.dump()));
    }
    if (entry.operation != "Apply" && entry.operation != "Update") {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata.managedFields: unknown operation \"", entry.operation, "\""));
    }
    if (!fields_type.empty() && fields_type != "FieldsV1") {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata.managedFields: unknown fieldsType \"", fields_type, "\""));
    }
    if (auto fields = e.find("fieldsV1"); fields != e.end() && !fields->is_null()) {
      ASSIGN_OR_RETURN(entry.fields, FieldSet::FromFieldsV1(*fields));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

void EncodeManagedFields(std::vector<ManagedFieldsEntry> entries, json* object) {
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const ManagedFieldsEntry& e) { return e.fields.empty(); }),
                entries.end());
  // RFC 3339 UTC strings of one precision sort like the times they name.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const ManagedFieldsEntry& a, const ManagedFieldsEntry& b) {
                     return std::tie(a.operation, a.time, a.manager, a.api_version, a.subresource) <
                            std::tie(b.operation, b.time, b.manager, b.api_version, b.subresource);
                   });
  json& meta = (*object)["metadata"];
  if (!meta.is_object()) meta = json::object();
  if (entries.empty()) {
    meta.erase("managedFields");
    return;
  }
  json list = json::array();
  for (const ManagedFieldsEntry& e : entries) {
    json entry = {{"manager", e.manager},
                  {"operation", e.operation},
                  {"apiVersion", e.api_version},
                  {"fieldsType", "FieldsV1"},
                  {"fieldsV1", e.fields.ToFieldsV1()}};
    if (!e.time.empty()) entry["time"] = e.time;
    if (!e.subresource.empty()) entry["subresource"] = e.subresource;
    list.push_back(std::move(entry));
  }
  meta["managedFields"] = std::move(list);
}

void RecordUpdate(json* new_object, const json* old_object, absl::string_view manager,
                  absl::string_view api_version, absl::Time now, absl::string_view subresource) {
  if (new_object == nullptr || !new_object->is_object()) return;
  absl::StatusOr<std::vector<ManagedFieldsEntry>> decoded = DecodeManagedFields(*new_object);
  if (decoded.ok() && decoded->empty() && old_object != nullptr) {
    decoded = DecodeManagedFields(*old_object);
  }
  if (!decoded.ok()) {
    common::LogWarning("resetting undecodable managedFields",
                       {{"error", std::string(decoded.status().message())}});
    decoded.emplace();
  }
  std::vector<ManagedFieldsEntry> entries = *std::move(decoded);

  const json before = old_object == nullptr ? json::object() : WithoutManagedFields(*old_object);
  const json after = WithoutManagedFields(*new_object);
  absl::StatusOr<FieldDiff> diff = DiffFields(&before, after, StrategyRootFor(after));
  if (!diff.ok()) {
    // Malformed associative lists (missing or duplicate keys): track those lists atomically
    // rather than lose the write's ownership.
    diff = DiffFields(&before, after, nullptr);
  }
  if (diff.ok()) {
    const FieldSet changed = diff->added.Union(diff->modified);
    auto mine = std::find_if(entries.begin(), entries.end(), [&](const ManagedFieldsEntry& e) {
      return e.SameOwner(manager, "Update", subresource);
    });
    const ManagedFieldsEntry* const own = mine == entries.end() ? nullptr : &*mine;
    for (ManagedFieldsEntry& e : entries) {
      if (&e == own) continue;
      e.fields = e.fields.Difference(changed).Difference(diff->removed);
    }
    if (!changed.empty()) {
      if (mine == entries.end()) {
        ManagedFieldsEntry entry;
        entry.manager = std::string(manager);
        entry.operation = "Update";
        entry.subresource = std::string(subresource);
        entries.push_back(std::move(entry));
        mine = std::prev(entries.end());
      }
      mine->fields = mine->fields.Difference(diff->removed).Union(changed);
      mine->api_version = std::string(api_version);
      mine->time = FormatManagedFieldsTime(now);
    } else if (mine != entries.end()) {
      mine->fields = mine->fields.Difference(diff->removed);
    }
  }
  EncodeManagedFields(std::move(entries), new_object);
}

}  // namespace ctrlhost::apiserver
