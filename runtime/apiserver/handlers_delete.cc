// Delete and deletecollection: finalizers and deletionTimestamp, preconditions, propagation
// policies (the garbage collector acts on the `orphan` / `foregroundDeletion` finalizers).
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/apiserver/handlers.h"
#include "runtime/apiserver/handlers_internal.h"
#include "runtime/apiserver/object_util.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

absl::StatusOr<DeleteOptions> ParseDeleteOptions(const ApiRequest& req) {
  DeleteOptions o;
  auto q = [&](const char* k) {
    auto it = req.query.find(k);
    return it == req.query.end() ? std::string() : it->second;
  };
  o.propagation_policy = q("propagationPolicy");
  ASSIGN_OR_RETURN(o.dry_run, ParseDryRun(q("dryRun")));
  if (!req.body.empty()) {
    ASSIGN_OR_RETURN(nlohmann::json body, ParseObjectBody(req.content_type, req.body));
    if (!body.is_object()) return kube::BadRequestError("DeleteOptions must be an object");
    if (body.contains("propagationPolicy") && body["propagationPolicy"].is_string()) {
      o.propagation_policy = body["propagationPolicy"].get<std::string>();
    }
    if (body.contains("orphanDependents") && body["orphanDependents"].is_boolean()) {
      o.orphan_dependents_false = !body["orphanDependents"].get<bool>();
      if (o.propagation_policy.empty()) {
        o.propagation_policy = body["orphanDependents"].get<bool>() ? "Orphan" : "Background";
      }
    }
    if (body.contains("preconditions") && body["preconditions"].is_object()) {
      const auto& p = body["preconditions"];
      if (p.contains("uid") && p["uid"].is_string()) o.precondition_uid = p["uid"];
      if (p.contains("resourceVersion") && p["resourceVersion"].is_string()) {
        o.precondition_resource_version = p["resourceVersion"];
      }
    }
    if (body.contains("dryRun") && body["dryRun"].is_array()) {
      for (const auto& d : body["dryRun"]) {
        ASSIGN_OR_RETURN(bool all, ParseDryRun(d.is_string() ? d.get<std::string>() : "?"));
        o.dry_run |= all;
      }
    }
  }
  if (!o.propagation_policy.empty() && o.propagation_policy != "Orphan" &&
      o.propagation_policy != "Background" && o.propagation_policy != "Foreground") {
    return kube::InvalidError("meta.k8s.io", "DeleteOptions", "",
                              {{"FieldValueNotSupported",
                                absl::StrCat("Unsupported value: \"", o.propagation_policy,
                                             "\": supported values: \"Foreground\", "
                                             "\"Background\", \"Orphan\""),
                                "propagationPolicy"}});
  }
  return o;
}

}  // namespace

absl::StatusOr<ObjectPtr> ApiHandlers::DeleteObject(const ResourceInfo& r, absl::string_view ns,
                                                    absl::string_view name,
                                                    const DeleteOptions& options) {
  const std::string n(name);
  const absl::Time now = clock_->Now();
  return store_->Write(
      r.Key(ns, name),
      [&](const StoredObject* current, int64_t revision) -> absl::StatusOr<Mutation> {
        if (current == nullptr) return kube::NotFoundError(r.group, r.resource, n);
        if (current->corrupt) {
          // Its bytes failed their checksum: removed at once (finalizers and preconditions
          // cannot be read), with a stub as the final state watchers see.
          if (options.dry_run) return Mutation{Mutation::Op::kNoop, ""};
          nlohmann::json stub = {
              {"apiVersion", r.StorageApiVersion()}, {"kind", r.kind}, {"metadata", {{"name", n}}}};
          if (!ns.empty()) stub["metadata"]["namespace"] = std::string(ns);
          stub["metadata"]["resourceVersion"] = std::to_string(revision);
          return Mutation(Mutation::Op::kDelete, Dump(stub), Labels{});
        }
        nlohmann::json obj = nlohmann::json::parse(current->value, nullptr, false);
        if (obj.is_discarded()) return kube::InternalError("stored object is not JSON");
        if (!options.precondition_uid.empty() &&
            options.precondition_uid != MetaString(obj, "uid")) {
          return kube::ConflictError(
              r.group, r.resource, n,
              absl::StrCat("Precondition failed: UID in precondition: ", options.precondition_uid,
                           ", UID in object meta: ", MetaString(obj, "uid")));
        }
        if (!options.precondition_resource_version.empty() &&
            options.precondition_resource_version != std::to_string(current->mod_revision)) {
          return kube::ConflictError(
              r.group, r.resource, n,
              absl::StrCat("Precondition failed: ResourceVersion in precondition: ",
                           options.precondition_resource_version,
                           ", ResourceVersion in object meta: ", current->mod_revision));
        }
        nlohmann::json& meta = obj["metadata"];
        const bool already = IsBeingDeleted(obj);
        bool changed = false;
        auto add_finalizer = [&](const char* f) {
          if (!HasFinalizer(obj, f)) {
            meta["finalizers"].push_back(f);
            changed = true;
          }
        };
        if (options.propagation_policy == "Orphan") add_finalizer("orphan");
        if (options.propagation_policy == "Foreground") add_finalizer("foregroundDeletion");
        const bool is_namespace = r.group.empty() && r.resource == "namespaces";
        const bool has_finalizers =
            (meta.contains("finalizers") && !meta["finalizers"].empty()) || is_namespace;
        if (!has_finalizers) {
          meta["resourceVersion"] = std::to_string(revision);
          if (options.dry_run) return Mutation{Mutation::Op::kNoop, ""};
          return Mutation{Mutation::Op::kDelete, Dump(obj)};
        }
        if (!already) {
          // As kube-apiserver's markAsDeleting: kinds that track generation see the deletion
          // as a new generation.
          auto gen = meta.find("generation");
          if (gen != meta.end() && gen->is_number_integer() && gen->get<int64_t>() > 0) {
            *gen = gen->get<int64_t>() + 1;
          }
          meta["deletionTimestamp"] = FormatTimestamp(now);
          meta["deletionGracePeriodSeconds"] = 0;
          if (is_namespace) obj["status"]["phase"] = "Terminating";
          changed = true;
        }
        if (!changed || options.dry_run) return Mutation{Mutation::Op::kNoop, ""};
        meta["resourceVersion"] = std::to_string(revision);
        return Mutation{Mutation::Op::kPut, Dump(obj)};
      });
}

absl::StatusOr<ApiResponse> ApiHandlers::Delete(const Target& t, const ApiRequest& req) {
  const ResourceInfo& r = *t.r;
  if (!t.subresource.empty()) {
    return kube::MethodNotAllowedError("delete is not allowed on a subresource");
  }
  ASSIGN_OR_RETURN(DeleteOptions options, ParseDeleteOptions(req));
  ASSIGN_OR_RETURN(ObjectPtr obj, DeleteObject(r, t.ns, t.name, options));
  nlohmann::json j = nlohmann::json::parse(obj->value, nullptr, false);
  // The returned object is the final state of an immediate deletion (no deletionTimestamp), or
  // the object kept for its finalizers (deletionTimestamp set). Deciding from it rather than a
  // second read keeps the answer right when the object is recreated or released meanwhile.
  const bool pending = !j.is_discarded() && IsBeingDeleted(j);
  if (pending || options.dry_run || r.return_deleted_object || r.custom) {
    // kube-apiserver answers 200 with the object, and 202 only when the object stays and the
    // client explicitly asked for orphanDependents=false.
    return ObjectResponse(pending && options.orphan_dependents_false ? 202 : 200, r, *obj);
  }
  nlohmann::json status = {{"kind", "Status"},
                           {"apiVersion", "v1"},
                           {"metadata", nlohmann::json::object()},
                           {"status", "Success"},
                           {"details",
                            {{"name", t.name},
                             {"group", r.group},
                             {"kind", r.resource},
                             {"uid", j.is_discarded() ? "" : MetaString(j, "uid")}}}};
  ApiResponse resp;
  resp.body = Dump(status);
  return resp;
}

absl::StatusOr<ApiResponse> ApiHandlers::DeleteCollection(const Target& t, const ApiRequest& req) {
  const ResourceInfo& r = *t.r;
  ASSIGN_OR_RETURN(DeleteOptions options, ParseDeleteOptions(req));
  ASSIGN_OR_RETURN(ObjectFilter filter, MakeFilter(t, req));
  Store::ListOptions lo;
  lo.prefix = t.ns.empty() ? r.KeyPrefix() : r.NamespacePrefix(t.ns);
  if (!filter.Empty()) lo.filter = [&filter](const StoredObject& o) { return filter.Matches(o); };
  ASSIGN_OR_RETURN(Store::ListResult list, store_->List(lo));
  std::string out =
      absl::StrCat("{\"kind\":", Dump(r.list_kind), ",\"apiVersion\":", Dump(r.ApiVersion()),
                   ",\"metadata\":{},\"items\":[");
  bool first = true;
  for (const ObjectPtr& o : list.items) {
    std::string ns, name;
    if (ResourceForKey(o->key, &ns, &name) == nullptr) continue;
    auto deleted = DeleteObject(r, ns, name, options);
    if (!deleted.ok()) {
      if (kube::IsNotFound(deleted.status())) continue;  // raced with another delete
      return deleted.status();
    }
    if (!first) out.push_back(',');
    first = false;
    out += ServedBytes(r, (*deleted)->value);
  }
  out += "]}";
  ApiResponse resp;
  resp.body = std::move(out);
  return resp;
}

ResourcePtr ApiHandlers::ResourceForKey(absl::string_view key, std::string* ns,
                                        std::string* name) const {
  // "/<group|core>/<resource>/[<ns>/]<name>"
  std::vector<std::string> parts = absl::StrSplit(key.substr(1), '/');
  if (parts.size() < 3) return nullptr;
  const std::string group = parts[0] == "core" ? "" : parts[0];
  for (const ResourcePtr& r : registry_->All()) {
    if (r->storage_group != group || r->storage_resource != parts[1] ||
        r->version != r->storage_version || r->group != r->storage_group) {
      continue;
    }
    if (r->namespaced && parts.size() == 4) {
      *ns = parts[2];
      *name = parts[3];
      return r;
    }
    if (!r->namespaced && parts.size() == 3) {
      ns->clear();
      *name = parts[2];
      return r;
    }
  }
  return nullptr;
}

}  // namespace ctrlhost::apiserver
