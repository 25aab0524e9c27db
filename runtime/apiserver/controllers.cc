#include "runtime/apiserver/controllers.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/crd.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

constexpr char kCrdPrefix[] = "/apiextensions.k8s.io/customresourcedefinitions/";
constexpr char kNamespacePrefix[] = "/core/namespaces/";

std::vector<std::string> OwnerUids(const nlohmann::json& obj) {
  std::vector<std::string> out;
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return out;
  auto refs = m->find("ownerReferences");
  if (refs == m->end() || !refs->is_array()) return out;
  for (const auto& r : *refs) {
    if (r.is_object() && r.contains("uid") && r["uid"].is_string()) out.push_back(r["uid"]);
  }
  return out;
}

void LogIfError(const absl::Status& s, const char* what, const std::string& key) {
  if (!s.ok() && !kube::IsNotFound(s)) {
    common::LogWarning(what, {{"key", key}, {"error", s}});
  }
}

}  // namespace

Controllers::Controllers(Store* store, ResourceRegistry* registry, ApiHandlers* handlers,
                         common::Clock* clock)
    : store_(store), registry_(registry), handlers_(handlers), clock_(clock) {}

Controllers::~Controllers() { Stop(); }

absl::Status Controllers::Start() {
  Store::ListOptions all;
  all.prefix = "/";
  ASSIGN_OR_RETURN(Store::ListResult list, store_->List(all));
  for (const ObjectPtr& o : list.items) {
    if (absl::StartsWith(o->key, kCrdPrefix)) {
      nlohmann::json crd = nlohmann::json::parse(o->value, nullptr, false);
      if (!crd.is_discarded()) SyncCrd(crd);
    }
  }
  for (const ObjectPtr& o : list.items) Index(nullptr, o.get());
  ASSIGN_OR_RETURN(watch_, store_->Watch("/", list.revision));
  // Work left over from before a restart: owners gone, deletions in progress.
  std::vector<std::string> orphan_owners;
  for (const auto& [owner, deps] : dependents_) {
    if (!uid_to_key_.contains(owner)) orphan_owners.push_back(owner);
  }
  std::vector<std::string> deleting;
  for (const ObjectPtr& o : list.items) {
    if (absl::StrContains(o->value, "\"deletionTimestamp\"")) deleting.push_back(o->key);
  }
  thread_ = std::thread([this, orphan_owners, deleting] {
    for (const auto& owner : orphan_owners) CollectDependents(owner);
    for (const auto& key : deleting) ProcessDeleting(key);
    Run();
  });
  return absl::OkStatus();
}

void Controllers::Stop() {
  if (stop_.exchange(true)) return;
  if (watch_) watch_->Stop();
  if (thread_.joinable()) thread_.join();
}

void Controllers::SyncCrd(const nlohmann::json& written) {
  common::MutexLock lock(&crd_mu_);
  // Serve what is stored now, not the (possibly older) version a handler just wrote.
  const std::string key = absl::StrCat(kCrdPrefix, MetaString(written, "name"));
  ObjectPtr current = store_->Get(key);
  if (current == nullptr) {
    const auto& spec = written.value("spec", nlohmann::json::object());
    registry_->RemoveCustomResource(
        spec.value("group", ""), spec.value("names", nlohmann::json::object()).value("plural", ""));
    return;
  }
  nlohmann::json crd = nlohmann::json::parse(current->value, nullptr, false);
  if (crd.is_discarded()) return;
  auto versions = ValidateCrd(crd);
  if (!versions.ok()) {
    common::LogWarning("stored CRD is invalid; not served",
                       {{"name", MetaString(crd, "name")}, {"error", versions.status()}});
    return;
  }
  if (versions->empty()) return;
  const std::string group = (*versions)[0].group;
  const std::string resource = (*versions)[0].resource;
  absl::Status s = registry_->SetCustomResource(group, resource, *std::move(versions));
  if (!s.ok())
    common::LogWarning("cannot serve CRD", {{"name", MetaString(crd, "name")}, {"error", s}});
}

void Controllers::Run() {
  while (!stop_) {
    auto events = watch_->Next(clock_->Now() + absl::Seconds(1), 1000, nullptr);
    if (!events.ok()) {
      if (absl::IsCancelled(events.status())) return;
      common::LogWarning("controller watch failed; restarting it", {{"error", events.status()}});
      auto w = store_->Watch("/", store_->Revision());
      if (w.ok()) watch_ = *std::move(w);
      continue;
    }
    for (const WatchEvent& e : *events) {
      if (stop_) return;
      Handle(e);
    }
  }
}

void Controllers::Index(const StoredObject* previous, const StoredObject* object) {
  const std::string& key = object != nullptr ? object->key : previous->key;
  // Undo the previous version's entries.
  auto old = owners_of_.find(key);
  if (old != owners_of_.end()) {
    for (const auto& owner : old->second) {
      auto d = dependents_.find(owner);
      if (d != dependents_.end()) {
        d->second.erase(key);
        if (d->second.empty()) dependents_.erase(d);
      }
    }
    owners_of_.erase(old);
  }
  // Every write passes through here: read uid and owner references without a JSON tree.
  OwnershipFields now;
  if (object != nullptr) now = ReadOwnership(object->value);
  if (previous != nullptr) {
    OwnershipFields before = ReadOwnership(previous->value);
    if (before.ok && !(now.ok && now.uid == before.uid)) uid_to_key_.erase(before.uid);
  }
  if (object == nullptr || !now.ok) return;
  uid_to_key_[now.uid] = key;
  for (const auto& owner : now.owner_uids) dependents_[owner].insert(key);
  if (!now.owner_uids.empty()) owners_of_[key] = std::move(now.owner_uids);
}

void Controllers::Handle(const WatchEvent& e) {
  const std::string& key = e.object->key;
  if (e.type == WatchEvent::Type::kDeleted) {
    nlohmann::json j = nlohmann::json::parse(e.object->value, nullptr, false);
    const std::vector<std::string> owners =
        j.is_discarded() ? std::vector<std::string>{} : OwnerUids(j);
    Index(e.object.get(), nullptr);
    if (j.is_discarded()) return;
    if (absl::StartsWith(key, kCrdPrefix)) {
      const auto& spec = j.value("spec", nlohmann::json::object());
      ForgetCrdIfGone(key, spec.value("group", ""),
                      spec.value("names", nlohmann::json::object()).value("plural", ""));
    }
    CollectDependents(MetaString(j, "uid"));
    // An owner in foreground deletion may be waiting for this dependent.
    for (const auto& owner : owners) {
      auto k = uid_to_key_.find(owner);
      if (k != uid_to_key_.end()) ProcessDeleting(k->second);
    }
    // A namespace being deleted may be waiting for this object.
    std::string ns, name;
    ResourcePtr r = handlers_->ResourceForKey(key, &ns, &name);
    if (r != nullptr && r->namespaced) ProcessNamespace(ns);
    // So may the CRD of a custom resource (its cleanup finalizer waits for the last one).
    if (r != nullptr && r->custom) {
      ProcessCrd(absl::StrCat(kCrdPrefix, r->storage_resource, ".", r->storage_group));
    }
    return;
  }
  Index(e.previous.get(), e.object.get());
  if (absl::StartsWith(key, kCrdPrefix) && e.type == WatchEvent::Type::kAdded) {
    nlohmann::json crd = nlohmann::json::parse(e.object->value, nullptr, false);
    if (!crd.is_discarded()) SyncCrd(crd);
  }
  if (absl::StrContains(e.object->value, "\"deletionTimestamp\"")) {
    ProcessDeleting(key);
    return;
  }
  // A dependent whose owners are all gone (written after its owner was deleted, or naming an
  // owner that never existed) is collected now, in the background, as Kubernetes' garbage
  // collector does, not at the next start. Owners are indexed before their dependents: an
  // owner's uid exists from its creation, at an earlier revision of the same watch.
  if (auto own = owners_of_.find(key); own != owners_of_.end() && !own->second.empty()) {
    bool any_owner = false;
    for (const std::string& owner : own->second) any_owner |= uid_to_key_.contains(owner);
    if (!any_owner) CollectDependents(own->second.front());
  }
}

void Controllers::CollectDependents(const std::string& owner_uid) {
  if (owner_uid.empty()) return;
  auto it = dependents_.find(owner_uid);
  if (it == dependents_.end()) return;
  const std::set<std::string> keys = it->second;
  for (const std::string& dep : keys) {
    ObjectPtr o = store_->Get(dep);
    if (o == nullptr) continue;
    nlohmann::json j = nlohmann::json::parse(o->value, nullptr, false);
    if (j.is_discarded()) continue;
    bool any_owner_left = false;
    for (const auto& owner : OwnerUids(j)) any_owner_left |= uid_to_key_.contains(owner);
    if (any_owner_left) continue;
    std::string ns, name;
    ResourcePtr r = handlers_->ResourceForKey(dep, &ns, &name);
    if (r == nullptr) continue;
    DeleteOptions opts;
    opts.propagation_policy = "Background";
    LogIfError(handlers_->DeleteObject(*r, ns, name, opts).status(), "garbage collection failed",
               dep);
  }
}

void Controllers::ProcessDeleting(const std::string& key) {
  ObjectPtr o = store_->Get(key);
  if (o == nullptr) return;
  nlohmann::json j = nlohmann::json::parse(o->value, nullptr, false);
  if (j.is_discarded() || !IsBeingDeleted(j)) return;
  std::string ns, name;
  ResourcePtr r = handlers_->ResourceForKey(key, &ns, &name);
  if (r == nullptr) return;
  const std::string uid = MetaString(j, "uid");
  if (absl::StartsWith(key, kNamespacePrefix)) ProcessNamespace(name);
  if (absl::StartsWith(key, kCrdPrefix)) ProcessCrd(key);
  auto deps = dependents_.find(uid);
  const std::set<std::string> dep_keys =
      deps == dependents_.end() ? std::set<std::string>{} : deps->second;
  if (HasFinalizer(j, "orphan")) {
    for (const std::string& dep : dep_keys) {
      std::string dns, dname;
      ResourcePtr dr = handlers_->ResourceForKey(dep, &dns, &dname);
      if (dr == nullptr) continue;
      LogIfError(handlers_
                     ->UpdateStored(*dr, dns, dname,
                                    [&uid](nlohmann::json& d) -> absl::StatusOr<bool> {
                                      auto& refs = d["metadata"]["ownerReferences"];
                                      nlohmann::json kept = nlohmann::json::array();
                                      for (const auto& ref : refs) {
                                        if (ref.value("uid", "") != uid) kept.push_back(ref);
                                      }
                                      if (kept.size() == refs.size()) return false;
                                      if (kept.empty()) {
                                        d["metadata"].erase("ownerReferences");
                                      } else {
                                        refs = std::move(kept);
                                      }
                                      return true;
                                    })
                     .status(),
                 "orphaning a dependent failed", dep);
    }
    LogIfError(handlers_
                   ->UpdateStored(*r, ns, name,
                                  [](nlohmann::json& d) -> absl::StatusOr<bool> {
                                    RemoveFinalizer(d, "orphan");
                                    return true;
                                  })
                   .status(),
               "releasing the orphan finalizer failed", key);
    return;
  }
  if (HasFinalizer(j, "foregroundDeletion")) {
    bool remaining = false;
    for (const std::string& dep : dep_keys) {
      std::string dns, dname;
      ResourcePtr dr = handlers_->ResourceForKey(dep, &dns, &dname);
      if (dr == nullptr || store_->Get(dep) == nullptr) continue;
      remaining = true;
      DeleteOptions opts;
      opts.propagation_policy = "Foreground";
      LogIfError(handlers_->DeleteObject(*dr, dns, dname, opts).status(),
                 "foreground deletion of a dependent failed", dep);
    }
    if (!remaining) {
      LogIfError(handlers_
                     ->UpdateStored(*r, ns, name,
                                    [](nlohmann::json& d) -> absl::StatusOr<bool> {
                                      RemoveFinalizer(d, "foregroundDeletion");
                                      return true;
                                    })
                     .status(),
                 "releasing the foregroundDeletion finalizer failed", key);
    }
  }
}

void Controllers::ProcessNamespace(const std::string& name) {
  ResourcePtr nsr = registry_->Find("", "v1", "namespaces");
  ObjectPtr nso = store_->Get(nsr->Key("", name));
  if (nso == nullptr) return;
  nlohmann::json nsj = nlohmann::json::parse(nso->value, nullptr, false);
  if (nsj.is_discarded() || !IsBeingDeleted(nsj)) return;
  bool remaining = false;
  std::set<std::string> seen_prefixes;
  for (const ResourcePtr& r : registry_->All()) {
    if (!r->namespaced) continue;
    const std::string prefix = r->NamespacePrefix(name);
    if (!seen_prefixes.insert(prefix).second) continue;
    Store::ListOptions lo;
    lo.prefix = prefix;
    auto list = store_->List(lo);
    if (!list.ok()) continue;
    for (const ObjectPtr& o : list->items) {
      remaining = true;
      if (absl::StrContains(o->value, "\"deletionTimestamp\"")) continue;
      std::string ons, oname;
      ResourcePtr orr = handlers_->ResourceForKey(o->key, &ons, &oname);
      if (orr == nullptr) continue;
      LogIfError(handlers_->DeleteObject(*orr, ons, oname, DeleteOptions{}).status(),
                 "deleting namespace content failed", o->key);
    }
  }
  if (remaining) return;
  LogIfError(handlers_
                 ->UpdateStored(*nsr, "", name,
                                [](nlohmann::json& d) -> absl::StatusOr<bool> {
                                  if (!d.contains("spec") || !d["spec"].contains("finalizers")) {
                                    return false;
                                  }
                                  d["spec"].erase("finalizers");
                                  return true;
                                })
                 .status(),
             "finalizing namespace failed", name);
}

void Controllers::ProcessCrd(const std::string& key) {
  ObjectPtr o = store_->Get(key);
  if (o == nullptr) return;
  nlohmann::json crd = nlohmann::json::parse(o->value, nullptr, false);
  if (crd.is_discarded() || !IsBeingDeleted(crd) || !HasFinalizer(crd, kCrdCleanupFinalizer)) {
    return;
  }
  const auto& spec = crd.value("spec", nlohmann::json::object());
  const std::string group = spec.value("group", "");
  const std::string plural = spec.value("names", nlohmann::json::object()).value("plural", "");
  bool remaining = false;
  for (const ResourcePtr& r : registry_->All()) {
    if (!r->custom || r->group != group || r->resource != plural ||
        r->version != r->storage_version) {
      continue;
    }
    Store::ListOptions lo;
    lo.prefix = r->KeyPrefix();
    auto list = store_->List(lo);
    if (!list.ok()) continue;
    for (const ObjectPtr& item : list->items) {
      remaining = true;
      if (absl::StrContains(item->value, "\"deletionTimestamp\"")) continue;
      std::string ns, name;
      ResourcePtr ir = handlers_->ResourceForKey(item->key, &ns, &name);
      if (ir == nullptr) continue;
      LogIfError(handlers_->DeleteObject(*ir, ns, name, DeleteOptions{}).status(),
                 "deleting a custom resource of a deleted CRD failed", item->key);
    }
  }
  if (remaining) return;
  std::string ns, name;
  ResourcePtr crdr = handlers_->ResourceForKey(key, &ns, &name);
  if (crdr == nullptr) return;
  LogIfError(handlers_
                 ->UpdateStored(*crdr, "", name,
                                [](nlohmann::json& d) -> absl::StatusOr<bool> {
                                  RemoveFinalizer(d, kCrdCleanupFinalizer);
                                  return true;
                                })
                 .status(),
             "releasing the CRD cleanup finalizer failed", key);
  // Stop serving at once rather than when the deletion event comes round.
  ForgetCrdIfGone(key, group, plural);
}

void Controllers::ForgetCrdIfGone(const std::string& key, const std::string& group,
                                  const std::string& plural) {
  common::MutexLock lock(&crd_mu_);
  if (store_->Get(key) == nullptr) registry_->RemoveCustomResource(group, plural);
}

}  // namespace ctrlhost::apiserver
