#include "runtime/kube/discovery.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::kube {
namespace {

using nlohmann::json;

absl::StatusOr<json> GetJson(RestClient* rest, const std::string& path) {
  ASSIGN_OR_RETURN(RestResponse res, rest->Do({.method = "GET", .path = path}));
  json doc = json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::DataLossError(absl::StrCat("discovery ", path, ": response is not a JSON object"));
  }
  return doc;
}

std::string StringAt(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Adds the resources of one APIResourceList.
void AddResources(const json& list, const std::string& group, const std::string& version,
                  std::vector<ResourceMapping>* out) {
  auto resources = list.find("resources");
  if (resources == list.end() || !resources->is_array()) return;
  std::vector<std::string> with_status;
  const size_t first = out->size();
  for (const json& r : *resources) {
    if (!r.is_object()) continue;
    const std::string name = StringAt(r, "name");
    if (name.empty()) continue;
    size_t slash = name.find('/');
    if (slash != std::string::npos) {
      if (name.substr(slash + 1) == "status") with_status.push_back(name.substr(0, slash));
      continue;
    }
    ResourceMapping m;
    m.group = group;
    m.version = version;
    m.resource = name;
    m.kind = StringAt(r, "kind");
    auto ns = r.find("namespaced");
    m.namespaced = ns != r.end() && ns->is_boolean() && ns->get<bool>();
    auto verbs = r.find("verbs");
    if (verbs != r.end() && verbs->is_array()) {
      for (const json& v : *verbs) {
        if (v.is_string()) m.verbs.push_back(v.get<std::string>());
      }
    }
    out->push_back(std::move(m));
  }
  for (size_t i = first; i < out->size(); ++i) {
    for (const std::string& s : with_status) {
      if ((*out)[i].resource == s) (*out)[i].has_status = true;
    }
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Discovery::Snapshot>> Discovery::Load() {
  auto snapshot = std::make_shared<Snapshot>();
  // The core group.
  ASSIGN_OR_RETURN(json core, GetJson(rest_, "/api"));
  auto versions = core.find("versions");
  if (versions != core.end() && versions->is_array()) {
    for (const json& v : *versions) {
      if (!v.is_string()) continue;
      const std::string version = v.get<std::string>();
      if (!snapshot->preferred.contains("")) snapshot->preferred[""] = version;
      absl::StatusOr<json> list = GetJson(rest_, "/api/" + version);
      if (!list.ok()) {
        common::LogWarning("discovery: skipping group version",
                           {{"groupVersion", version}, {"error", list.status().ToString()}});
        continue;
      }
      AddResources(*list, "", version, &snapshot->mappings);
    }
  }
  // Named groups.
  ASSIGN_OR_RETURN(json groups, GetJson(rest_, "/apis"));
  auto group_list = groups.find("groups");
  if (group_list != groups.end() && group_list->is_array()) {
    for (const json& g : *group_list) {
      if (!g.is_object()) continue;
      const std::string name = StringAt(g, "name");
      auto preferred = g.find("preferredVersion");
      if (preferred != g.end() && preferred->is_object()) {
        snapshot->preferred[name] = StringAt(*preferred, "version");
      }
      auto gv = g.find("versions");
      if (name.empty() || gv == g.end() || !gv->is_array()) continue;
      for (const json& v : *gv) {
        if (!v.is_object()) continue;
        const std::string version = StringAt(v, "version");
        if (version.empty()) continue;
        if (!snapshot->preferred.contains(name)) snapshot->preferred[name] = version;
        absl::StatusOr<json> list = GetJson(rest_, absl::StrCat("/apis/", name, "/", version));
        if (!list.ok()) {
          common::LogWarning(
              "discovery: skipping group version",
              {{"groupVersion", name + "/" + version}, {"error", list.status().ToString()}});
          continue;
        }
        AddResources(*list, name, version, &snapshot->mappings);
      }
    }
  }
  return std::shared_ptr<const Snapshot>(std::move(snapshot));
}

absl::Status Discovery::Refresh() {
  common::MutexLock refresh(&refresh_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot, Load());
  common::MutexLock lock(&mu_);
  snapshot_ = std::move(snapshot);
  loaded_at_ = rest_->clock()->Now();
  ++refreshes_;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Discovery::Snapshot>> Discovery::Current(bool after_miss) {
  {
    common::MutexLock lock(&mu_);
    if (snapshot_ != nullptr && !after_miss) return snapshot_;
  }
  common::MutexLock refresh(&refresh_mu_);
  {
    // Another thread may have refreshed while this one waited.
    common::MutexLock lock(&mu_);
    if (snapshot_ != nullptr &&
        (!after_miss || rest_->clock()->Now() - loaded_at_ < min_refresh_interval_)) {
      return snapshot_;
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot, Load());
  common::MutexLock lock(&mu_);
  snapshot_ = snapshot;
  loaded_at_ = rest_->clock()->Now();
  ++refreshes_;
  return snapshot;
}

template <typename Match>
absl::StatusOr<ResourceMapping> Discovery::Find(const Match& match, const std::string& what) {
  for (bool after_miss : {false, true}) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot, Current(after_miss));
    for (const ResourceMapping& m : snapshot->mappings) {
      if (match(*snapshot, m)) return m;
    }
  }
  return absl::NotFoundError(absl::StrCat("the server does not serve ", what));
}

absl::StatusOr<ResourceMapping> Discovery::MappingFor(const GroupVersionKind& gvk) {
  auto match = [&](const Snapshot& s, const ResourceMapping& m) {
    if (m.group != gvk.group || m.kind != gvk.kind) return false;
    if (!gvk.version.empty()) return m.version == gvk.version;
    auto preferred = s.preferred.find(gvk.group);
    return preferred == s.preferred.end() || preferred->second == m.version;
  };
  return Find(match, absl::StrCat("kind \"", gvk.kind, "\" in version \"",
                                  gvk.group.empty() ? "" : gvk.group + "/", gvk.version, "\""));
}

absl::StatusOr<ResourceMapping> Discovery::MappingForResource(const std::string& group,
                                                              const std::string& version,
                                                              const std::string& resource) {
  auto match = [&](const Snapshot& s, const ResourceMapping& m) {
    if (m.group != group || m.resource != resource) return false;
    if (!version.empty()) return m.version == version;
    auto preferred = s.preferred.find(group);
    return preferred == s.preferred.end() || preferred->second == m.version;
  };
  return Find(match, absl::StrCat("resource \"", resource, "\" in group \"", group, "\""));
}

absl::StatusOr<std::vector<ResourceMapping>> Discovery::All() {
  ASSIGN_OR_RETURN(std::shared_ptr<const Snapshot> snapshot, Current(false));
  return snapshot->mappings;
}

int64_t Discovery::refreshes() const {
  common::MutexLock lock(&mu_);
  return refreshes_;
}

}  // namespace ctrlhost::kube
