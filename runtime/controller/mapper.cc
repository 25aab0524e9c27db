#include "runtime/controller/mapper.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "nlohmann/json.hpp"
#include "runtime/common/mutex.h"
#include "runtime/controller/field_path.h"
#include "runtime/kube/selector.h"

namespace ctrlhost::controller {
namespace {

// The key of the primary named `name` for an object in `object_namespace`.
std::string PrimaryKey(const PrimaryKind& primary, absl::string_view object_namespace,
                       absl::string_view name) {
  return cache::ObjectKey(primary.namespaced ? object_namespace : absl::string_view(), name);
}

// Parses an object's JSON without exceptions; a discarded value on malformed input.
nlohmann::json ParseJson(absl::string_view json) {
  return nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
}

kube::Labels LabelsOf(const cache::Object& object) {
  kube::Labels labels;
  for (size_t i = 0; i < object.label_count(); ++i) {
    auto [key, value] = object.label(i);
    labels.emplace(std::string(key), std::string(value));
  }
  return labels;
}

// Objects of `store` in `namespace_`, or all of them when the primary is cluster-scoped.
std::vector<cache::ObjectPtr> InScope(const cache::Store& store, const PrimaryKind& primary,
                                      absl::string_view namespace_) {
  if (!primary.namespaced) return store.List();
  return store.ByIndex(cache::Index::kNamespace, namespace_);
}

class SelfMapperImpl : public Mapper {
 public:
  std::vector<std::string> Map(const cache::Object& object) const override {
    return {std::string(object.key())};
  }
  std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                        const cache::Store& watched) const override {
    cache::ObjectPtr same = watched.Get(primary.key());
    if (same == nullptr) return {};
    return {same};
  }
};

class OwnerMapperImpl : public Mapper {
 public:
  OwnerMapperImpl(PrimaryKind primary, bool controller_only)
      : primary_(std::move(primary)), controller_only_(controller_only) {}

  std::vector<std::string> Map(const cache::Object& object) const override {
    std::vector<std::string> keys;
    if (object.owner_count() == 0) return keys;
    for (const cache::OwnerReference& owner : object.meta().owner_references) {
      if (Matches(owner) && !owner.name.empty()) {
        keys.push_back(PrimaryKey(primary_, object.namespace_(), owner.name));
      }
    }
    return keys;
  }

  std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                        const cache::Store& watched) const override {
    std::vector<cache::ObjectPtr> out;
    if (primary.uid().empty()) return out;
    for (cache::ObjectPtr& object : watched.ByIndex(cache::Index::kOwnerUid, primary.uid())) {
      for (const cache::OwnerReference& owner : object->meta().owner_references) {
        if (owner.uid == primary.uid() && Matches(owner)) {
          out.push_back(std::move(object));
          break;
        }
      }
    }
    return out;
  }

 private:
  bool Matches(const cache::OwnerReference& owner) const {
    return (!controller_only_ || owner.controller) && owner.kind == primary_.kind &&
           GroupOf(owner.api_version) == primary_.group;
  }

  const PrimaryKind primary_;
  const bool controller_only_;
};

class NameLabelMapper : public Mapper {
 public:
  NameLabelMapper(PrimaryKind primary, std::string label)
      : primary_(std::move(primary)), label_(std::move(label)) {}

  std::vector<std::string> Map(const cache::Object& object) const override {
    std::optional<absl::string_view> name = object.Label(label_);
    if (!name.has_value() || name->empty()) return {};
    return {PrimaryKey(primary_, object.namespace_(), *name)};
  }

  std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                        const cache::Store& watched) const override {
    std::vector<cache::ObjectPtr> out;
    for (cache::ObjectPtr& object :
         watched.ByIndex(cache::Index::kLabel, absl::StrCat(label_, "=", primary.name()))) {
      if (!primary_.namespaced || object->namespace_() == primary.namespace_()) {
        out.push_back(std::move(object));
      }
    }
    return out;
  }

 private:
  const PrimaryKind primary_;
  const std::string label_;
};

// The selector a primary holds at the path: a metav1.LabelSelector, or a plain map of labels
// (like a Service's spec.selector). Missing, malformed or empty selectors select nothing: an
// empty selector here almost always means "not set yet", and enqueueing the primary for every
// object in its namespace would be the costly surprise.
std::optional<kube::LabelSelector> SelectorAt(const FieldPath& path, const cache::Object& primary) {
  nlohmann::json json = ParseJson(primary.json());
  if (json.is_discarded()) return std::nullopt;
  std::vector<const nlohmann::json*> found = path.Find(json);
  if (found.size() != 1 || !found[0]->is_object() || found[0]->empty()) return std::nullopt;
  const nlohmann::json& value = *found[0];
  if (value.contains("matchLabels") || value.contains("matchExpressions")) {
    absl::StatusOr<kube::LabelSelector> selector = kube::LabelSelector::FromJson(value);
    if (!selector.ok() || selector->Empty()) return std::nullopt;
    return *std::move(selector);
  }
  kube::Labels labels;
  for (const auto& [key, label_value] : value.items()) {
    if (!label_value.is_string()) return std::nullopt;
    labels.emplace(key, label_value.get<std::string>());
  }
  return kube::LabelSelector::FromLabels(labels);
}

// Keeps each primary's selector, parsed once per primary change.
class SelectorPathMapper : public Mapper {
 public:
  SelectorPathMapper(PrimaryKind primary, FieldPath path)
      : primary_(std::move(primary)), path_(std::move(path)) {}

  std::vector<std::string> Map(const cache::Object& object) const override {
    std::vector<std::string> keys;
    const kube::Labels labels = LabelsOf(object);
    ReaderLock lock(&mu_);
    auto scan = [&](const absl::flat_hash_map<std::string, kube::LabelSelector>& selectors) {
      for (const auto& [key, selector] : selectors) {
        if (selector.Matches(labels)) keys.push_back(key);
      }
    };
    if (primary_.namespaced) {
      auto it = by_namespace_.find(object.namespace_());
      if (it != by_namespace_.end()) scan(it->second);
    } else {
      for (const auto& [unused, selectors] : by_namespace_) scan(selectors);
    }
    return keys;
  }

  std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                        const cache::Store& watched) const override {
    std::vector<cache::ObjectPtr> out;
    std::optional<kube::LabelSelector> selector = SelectorAt(path_, primary);
    if (!selector.has_value()) return out;
    for (cache::ObjectPtr& object : InScope(watched, primary_, primary.namespace_())) {
      if (selector->Matches(LabelsOf(*object))) out.push_back(std::move(object));
    }
    return out;
  }

  void ObservePrimary(const cache::ObjectPtr& old_primary,
                      const cache::ObjectPtr& new_primary) override {
    std::optional<kube::LabelSelector> selector;
    if (new_primary != nullptr) selector = SelectorAt(path_, *new_primary);
    WriterLock lock(&mu_);
    if (old_primary != nullptr) {
      auto it = by_namespace_.find(old_primary->namespace_());
      if (it != by_namespace_.end()) {
        it->second.erase(old_primary->key());
        if (it->second.empty()) by_namespace_.erase(it);
      }
    }
    if (new_primary != nullptr && selector.has_value()) {
      by_namespace_[new_primary->namespace_()].insert_or_assign(std::string(new_primary->key()),
                                                                *std::move(selector));
    }
  }

 private:
  using ReaderLock = common::ReaderLock;
  using WriterLock = common::WriterLock;

  const PrimaryKind primary_;
  const FieldPath path_;
  mutable common::RwMutex mu_;
  // namespace -> primary key -> selector.
  absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, kube::LabelSelector>>
      by_namespace_ ABSL_GUARDED_BY(mu_);
};

// Keeps an index from referenced object key to the primaries that name it.
class FieldPathMapper : public Mapper {
 public:
  FieldPathMapper(PrimaryKind primary, FieldPath path)
      : primary_(std::move(primary)), path_(std::move(path)) {}

  std::vector<std::string> Map(const cache::Object& object) const override {
    const std::string ref = PrimaryKey(primary_, object.namespace_(), object.name());
    common::ReaderLock lock(&mu_);
    auto it = by_ref_.find(ref);
    if (it == by_ref_.end()) return {};
    return std::vector<std::string>(it->second.begin(), it->second.end());
  }

  std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                        const cache::Store& watched) const override {
    std::vector<cache::ObjectPtr> out;
    for (const std::string& ref : RefsOf(primary)) {
      if (cache::ObjectPtr object = watched.Get(ref)) out.push_back(std::move(object));
    }
    return out;
  }

  void ObservePrimary(const cache::ObjectPtr& old_primary,
                      const cache::ObjectPtr& new_primary) override {
    std::vector<std::string> refs;
    if (new_primary != nullptr) refs = RefsOf(*new_primary);
    common::WriterLock lock(&mu_);
    const cache::ObjectPtr& any = new_primary != nullptr ? new_primary : old_primary;
    if (any == nullptr) return;
    const std::string key(any->key());
    auto it = refs_of_.find(key);
    if (it != refs_of_.end()) {
      for (const std::string& ref : it->second) {
        auto r = by_ref_.find(ref);
        if (r == by_ref_.end()) continue;
        r->second.erase(key);
        if (r->second.empty()) by_ref_.erase(r);
      }
      refs_of_.erase(it);
    }
    if (new_primary == nullptr || refs.empty()) return;
    for (const std::string& ref : refs) by_ref_[ref].insert(key);
    refs_of_.emplace(key, std::move(refs));
  }

 private:
  // Keys of the objects `primary` names, sorted and unique.
  std::vector<std::string> RefsOf(const cache::Object& primary) const {
    std::vector<std::string> refs;
    nlohmann::json json = ParseJson(primary.json());
    if (json.is_discarded()) return refs;
    for (const std::string& name : path_.Strings(json)) {
      if (!name.empty()) refs.push_back(PrimaryKey(primary_, primary.namespace_(), name));
    }
    std::sort(refs.begin(), refs.end());
    refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
    return refs;
  }

  const PrimaryKind primary_;
  const FieldPath path_;
  mutable common::RwMutex mu_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> by_ref_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<std::string>> refs_of_ ABSL_GUARDED_BY(mu_);
};

class EnqueueAllMapper : public Mapper {
 public:
  EnqueueAllMapper(PrimaryKind primary, bool same_namespace_only, const cache::Store* primaries)
      : primary_(std::move(primary)),
        same_namespace_only_(same_namespace_only && primary_.namespaced),
        primaries_(primaries) {}

  std::vector<std::string> Map(const cache::Object& object) const override {
    std::vector<cache::ObjectPtr> all =
        same_namespace_only_ ? primaries_->ByIndex(cache::Index::kNamespace, object.namespace_())
                             : primaries_->List();
    std::vector<std::string> keys;
    keys.reserve(all.size());
    for (const cache::ObjectPtr& p : all) keys.emplace_back(p->key());
    return keys;
  }

  std::vector<cache::ObjectPtr> Related(const cache::Object& primary,
                                        const cache::Store& watched) const override {
    if (!same_namespace_only_) return watched.List();
    return watched.ByIndex(cache::Index::kNamespace, primary.namespace_());
  }

 private:
  const PrimaryKind primary_;
  const bool same_namespace_only_;
  const cache::Store* const primaries_;
};

}  // namespace

std::string ApiVersion(absl::string_view group, absl::string_view version) {
  if (group.empty()) return std::string(version);
  return absl::StrCat(group, "/", version);
}

absl::string_view GroupOf(absl::string_view api_version) {
  size_t slash = api_version.find('/');
  if (slash == absl::string_view::npos) return absl::string_view();
  return api_version.substr(0, slash);
}

std::vector<std::string> Mapper::MapEvent(const cache::ObjectPtr& old_object,
                                          const cache::ObjectPtr& new_object) const {
  std::vector<std::string> keys;
  if (old_object != nullptr) keys = Map(*old_object);
  if (new_object != nullptr) {
    std::vector<std::string> more = Map(*new_object);
    keys.insert(keys.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

void Mapper::ObservePrimary(const cache::ObjectPtr&, const cache::ObjectPtr&) {}

std::unique_ptr<Mapper> SelfMapper() { return std::make_unique<SelfMapperImpl>(); }

std::unique_ptr<Mapper> OwnerMapper(PrimaryKind primary, bool controller_only) {
  return std::make_unique<OwnerMapperImpl>(std::move(primary), controller_only);
}

absl::StatusOr<std::unique_ptr<Mapper>> MapperFor(const pluginpb::WatchedKind& watched,
                                                  PrimaryKind primary,
                                                  const cache::Store* primaries) {
  switch (watched.mapping_case()) {
    case pluginpb::WatchedKind::kOwnerReference:
      return OwnerMapper(std::move(primary), watched.owner_reference().controller_only());
    case pluginpb::WatchedKind::kLabel: {
      const pluginpb::LabelMapping& label = watched.label();
      if (label.source_case() == pluginpb::LabelMapping::kNameLabel) {
        if (label.name_label().empty()) {
          return absl::InvalidArgumentError("watch label mapping: name_label is empty");
        }
        return std::unique_ptr<Mapper>(
            std::make_unique<NameLabelMapper>(std::move(primary), label.name_label()));
      }
      if (label.source_case() == pluginpb::LabelMapping::kPrimarySelectorPath) {
        absl::StatusOr<FieldPath> path = FieldPath::Parse(label.primary_selector_path());
        if (!path.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "watch label mapping: primary_selector_path: ", path.status().message()));
        }
        return std::unique_ptr<Mapper>(
            std::make_unique<SelectorPathMapper>(std::move(primary), *std::move(path)));
      }
      return absl::InvalidArgumentError(
          "watch label mapping: one of name_label or primary_selector_path is required");
    }
    case pluginpb::WatchedKind::kFieldPath: {
      absl::StatusOr<FieldPath> path = FieldPath::Parse(watched.field_path().primary_field_path());
      if (!path.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("watch field_path mapping: ", path.status().message()));
      }
      return std::unique_ptr<Mapper>(
          std::make_unique<FieldPathMapper>(std::move(primary), *std::move(path)));
    }
    case pluginpb::WatchedKind::kEnqueueAll:
      if (primaries == nullptr) {
        return absl::InvalidArgumentError("watch enqueue_all mapping needs the primary store");
      }
      return std::unique_ptr<Mapper>(std::make_unique<EnqueueAllMapper>(
          std::move(primary), watched.enqueue_all().same_namespace_only(), primaries));
    case pluginpb::WatchedKind::MAPPING_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("watch of kind ", watched.kind().kind(),
                                                 " has no mapping (owner_reference, label, "
                                                 "field_path or enqueue_all)"));
}

}  // namespace ctrlhost::controller
