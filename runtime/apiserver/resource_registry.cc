#include "runtime/apiserver/resource_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

std::string GvrKey(absl::string_view g, absl::string_view v, absl::string_view r) {
  return absl::StrCat(g, "/", v, "/", r);
}

// Kubernetes version priority: GA before beta before alpha, then higher numbers first
// ("v2" > "v1" > "v1beta2" > "v1beta1" > "v1alpha1"), then anything else alphabetically.
struct VersionOrder {
  int stability;  // 3 GA, 2 beta, 1 alpha, 0 other
  int major = 0;
  int minor = 0;
};

VersionOrder ParseVersion(absl::string_view v) {
  VersionOrder o{0};
  if (v.size() < 2 || v[0] != 'v' || !absl::ascii_isdigit(v[1])) return o;
  size_t i = 1;
  while (i < v.size() && absl::ascii_isdigit(v[i])) ++i;
  if (!absl::SimpleAtoi(v.substr(1, i - 1), &o.major)) return VersionOrder{0};
  absl::string_view rest = v.substr(i);
  if (rest.empty()) {
    o.stability = 3;
    return o;
  }
  absl::string_view num;
  if (absl::StartsWith(rest, "beta")) {
    o.stability = 2;
    num = rest.substr(4);
  } else if (absl::StartsWith(rest, "alpha")) {
    o.stability = 1;
    num = rest.substr(5);
  } else {
    return VersionOrder{0};
  }
  if (!absl::SimpleAtoi(num, &o.minor)) return VersionOrder{0};
  return o;
}

bool VersionLess(const std::string& a, const std::string& b) {  // true if a is preferred
  const VersionOrder x = ParseVersion(a), y = ParseVersion(b);
  if (x.stability != y.stability) return x.stability > y.stability;
  if (x.stability == 0) return a < b;
  if (x.major != y.major) return x.major > y.major;
  return x.minor > y.minor;
}

nlohmann::json GroupVersionJson(absl::string_view group, absl::string_view version) {
  return {{"groupVersion", absl::StrCat(group, "/", version)}, {"version", std::string(version)}};
}

std::vector<std::string> Verbs() {
  return {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
}

}  // namespace

std::string ResourceInfo::KeyPrefix() const {
  return absl::StrCat("/", storage_group.empty() ? "core" : storage_group, "/", storage_resource,
                      "/");
}

std::string ResourceInfo::NamespacePrefix(absl::string_view ns) const {
  return absl::StrCat(KeyPrefix(), ns, "/");
}

std::string ResourceInfo::Key(absl::string_view ns, absl::string_view name) const {
  return namespaced ? absl::StrCat(KeyPrefix(), ns, "/", name) : absl::StrCat(KeyPrefix(), name);
}

ResourceRegistry::ResourceRegistry() {
  common::WriterLock lock(&mu_);
  AddBuiltinResources([this](ResourceInfo info)
                          ABSL_NO_THREAD_SAFETY_ANALYSIS { AddLocked(std::move(info)); });
}

void ResourceRegistry::AddLocked(ResourceInfo info) {
  if (info.storage_group.empty() && info.storage_resource.empty()) {
    info.storage_group = info.group;
  }
  if (info.storage_resource.empty()) info.storage_resource = info.resource;
  if (info.storage_version.empty()) info.storage_version = info.version;
  if (std::find(group_order_.begin(), group_order_.end(), info.group) == group_order_.end()) {
    group_order_.push_back(info.group);
  }
  auto ptr = std::make_shared<const ResourceInfo>(std::move(info));
  by_resource_[GvrKey(ptr->group, ptr->version, ptr->resource)] = ptr;
  by_kind_[GvrKey(ptr->group, ptr->version, ptr->kind)] = ptr;
}

ResourcePtr ResourceRegistry::Find(absl::string_view group, absl::string_view version,
                                   absl::string_view resource) const {
  common::ReaderLock lock(&mu_);
  auto it = by_resource_.find(GvrKey(group, version, resource));
  return it == by_resource_.end() ? nullptr : it->second;
}

ResourcePtr ResourceRegistry::FindKind(absl::string_view group, absl::string_view version,
                                       absl::string_view kind) const {
  common::ReaderLock lock(&mu_);
  auto it = by_kind_.find(GvrKey(group, version, kind));
  return it == by_kind_.end() ? nullptr : it->second;
}

std::vector<ResourcePtr> ResourceRegistry::All() const {
  common::ReaderLock lock(&mu_);
  std::vector<ResourcePtr> out;
  out.reserve(by_resource_.size());
  for (const auto& [key, r] : by_resource_) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const ResourcePtr& a, const ResourcePtr& b) {
    return std::tie(a->group, a->resource, a->version) <
           std::tie(b->group, b->resource, b->version);
  });
  return out;
}

absl::Status ResourceRegistry::SetCustomResource(absl::string_view group,
                                                 absl::string_view resource,
                                                 std::vector<ResourceInfo> versions) {
  common::WriterLock lock(&mu_);
  for (const auto& [key, r] : by_resource_) {
    if (r->group == group && r->resource == resource && !r->custom) {
      return kube::InvalidError(
          "apiextensions.k8s.io", "CustomResourceDefinition", absl::StrCat(resource, ".", group),
          {{"FieldValueInvalid", "the group and resource belong to a built-in kind",
            "spec.group"}});
    }
  }
  // Drop the old versions first: a version may have been removed from the CRD.
  for (auto it = by_resource_.begin(); it != by_resource_.end();) {
    if (it->second->custom && it->second->group == group && it->second->resource == resource) {
      by_kind_.erase(GvrKey(group, it->second->version, it->second->kind));
      by_resource_.erase(it++);
    } else {
      ++it;
    }
  }
  for (ResourceInfo& v : versions) {
    v.custom = true;
    AddLocked(std::move(v));
  }
  return absl::OkStatus();
}

void ResourceRegistry::RemoveCustomResource(absl::string_view group, absl::string_view resource) {
  common::WriterLock lock(&mu_);
  for (auto it = by_resource_.begin(); it != by_resource_.end();) {
    if (it->second->custom && it->second->group == group && it->second->resource == resource) {
      by_kind_.erase(GvrKey(group, it->second->version, it->second->kind));
      by_resource_.erase(it++);
    } else {
      ++it;
    }
  }
}

std::vector<std::string> ResourceRegistry::GroupVersionsLocked(absl::string_view group) const {
  std::vector<std::string> versions;
  for (const auto& [key, r] : by_resource_) {
    if (r->group == group &&
        std::find(versions.begin(), versions.end(), r->version) == versions.end()) {
      versions.push_back(r->version);
    }
  }
  std::sort(versions.begin(), versions.end(), VersionLess);
  return versions;
}

nlohmann::json ResourceRegistry::CoreApiVersions() const {
  return {{"kind", "APIVersions"},
          {"versions", {"v1"}},
          {"serverAddressByClientCIDRs", {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", ""}}}}};
}

nlohmann::json ResourceRegistry::ApiGroupList() const {
  common::ReaderLock lock(&mu_);
  nlohmann::json groups = nlohmann::json::array();
  for (const std::string& g : group_order_) {
    if (g.empty()) continue;
    std::vector<std::string> versions = GroupVersionsLocked(g);
    if (versions.empty()) continue;
    nlohmann::json vs = nlohmann::json::array();
    for (const auto& v : versions) vs.push_back(GroupVersionJson(g, v));
    groups.push_back({{"name", g}, {"versions", vs}, {"preferredVersion", vs[0]}});
  }
  return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
}

absl::StatusOr<nlohmann::json> ResourceRegistry::ApiGroup(absl::string_view group) const {
  common::ReaderLock lock(&mu_);
  std::vector<std::string> versions = GroupVersionsLocked(group);
  if (group.empty() || versions.empty()) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  nlohmann::json vs = nlohmann::json::array();
  for (const auto& v : versions) vs.push_back(GroupVersionJson(group, v));
  return nlohmann::json{{"kind", "APIGroup"},
                        {"apiVersion", "v1"},
                        {"name", std::string(group)},
                        {"versions", vs},
                        {"preferredVersion", vs[0]}};
}

absl::StatusOr<nlohmann::json> ResourceRegistry::ResourceList(absl::string_view group,
                                                              absl::string_view version) const {
  common::ReaderLock lock(&mu_);
  std::vector<ResourcePtr> rs;
  for (const auto& [key, r] : by_resource_) {
    if (r->group == group && r->version == version) rs.push_back(r);
  }
  if (rs.empty()) {
    return kube::ApiError(404, "NotFound", "the server could not find the requested resource");
  }
  std::sort(rs.begin(), rs.end(),
            [](const ResourcePtr& a, const ResourcePtr& b) { return a->resource < b->resource; });
  nlohmann::json resources = nlohmann::json::array();
  for (const ResourcePtr& r : rs) {
    nlohmann::json j = {{"name", r->resource},
                        {"singularName", r->singular},
                        {"namespaced", r->namespaced},
                        {"kind", r->kind},
                        {"verbs", Verbs()}};
    if (!r->short_names.empty()) j["shortNames"] = r->short_names;
    if (!r->categories.empty()) j["categories"] = r->categories;
    resources.push_back(std::move(j));
    if (r->has_status) {
      resources.push_back({{"name", r->resource + "/status"},
                           {"singularName", ""},
                           {"namespaced", r->namespaced},
                           {"kind", r->kind},
                           {"verbs", {"get", "patch", "update"}}});
    }
    if (r->scale != nullptr) {
      resources.push_back({{"name", r->resource + "/scale"},
                           {"singularName", ""},
                           {"namespaced", r->namespaced},
                           {"group", "autoscaling"},
                           {"version", "v1"},
                           {"kind", "Scale"},
                           {"verbs", {"get", "patch", "update"}}});
    }
  }
  return nlohmann::json{
      {"kind", "APIResourceList"},
      {"apiVersion", "v1"},
      {"groupVersion", group.empty() ? std::string(version) : absl::StrCat(group, "/", version)},
      {"resources", resources}};
}

}  // namespace ctrlhost::apiserver
