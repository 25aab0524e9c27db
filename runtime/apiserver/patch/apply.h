// Server-side apply (PATCH with Content-Type application/apply-patch+yaml).
//
// The API server decodes the YAML body to JSON and calls ServerSideApply with the live object
// (nullptr when the apply creates it):
//
//   ApplyOptions opts;
//   opts.manager = query.fieldManager;        // required
//   opts.force = query.force;
//   opts.now = clock->Now();
//   opts.api_version = "apps/v1"; opts.kind = "Deployment";
//   opts.name = url.name; opts.namespace_name = url.namespace_name;
//   ASSIGN_OR_RETURN(nlohmann::json next,
//                    ServerSideApply(live, config, opts, BuiltinMergeStrategy("apps",
//                    "Deployment")));
//
// Semantics (Kubernetes' structured-merge-diff, simplified as listed below):
// - The result is the live object with the applied configuration merged in: maps recursively,
//   associative lists (merge key from the strategy) item by item, sets of primitives as sets,
//   everything else replaced. A null in the configuration removes the field.
// - The manager's "Apply" entry in metadata.managedFields becomes exactly the fields of the
//   configuration. Fields it applied last time and no longer applies are removed from the
//   object unless another manager owns them.
// - A field the configuration changes (a different value from live, or a new one) that another
//   manager owns is a conflict: 409 Conflict, reason "Conflict", one cause per field
//   {FieldManagerConflict, `conflict with "other"` (+ ` using apps/v1` for Update managers),
//   ".spec.replicas"}, message "Apply failed with 1 conflict: conflict with "other":
//   .spec.replicas". With `force` the manager takes those fields over. The same value is shared
//   ownership, never a conflict.
// - The way up from client-side apply: the manager "kubectl" (`kubectl apply --server-side`)
//   takes over without a conflict the fields of the live object's
//   `kubectl.kubernetes.io/last-applied-configuration` annotation whose values are still as
//   applied (kube-apiserver's last-applied manager); other conflicts stay conflicts.
// - Errors as kube-apiserver: no manager → 422 `PatchOptions.meta.k8s.io "" is invalid:
//   fieldManager: Required value: is required for apply patch`; apiVersion/kind different from
//   the resource's → 400 "invalid object type: apps/v1, Kind=Foo"; managedFields in the
//   configuration → 400 "metadata.managedFields must be nil"; name or namespace different from
//   the URL → 400; a body that is not an object → 400; a v1 Service whose spec.ports item omits
//   `protocol` (a list-map key without a default in kube 1.20) → 500 InternalError
//   `Internal error occurred: failed to create typed patch object: .spec.ports: element 0:
//   associative list with keys has an element that omits key field "protocol"`, as
//   kube-apiserver 1.20 (newer servers default it to TCP).
//
// Simplified compared with structured-merge-diff (and see managed_fields.h):
// - No schema: lists of custom resources are atomic (an apply replaces the whole list and owns
//   it as one field), their maps granular; built-in kinds use MergeStrategy, one merge key per
//   associative list (Kubernetes keys ports by port and protocol).
// - No defaulting or type conversion of the configuration, no unions, no validation of field
//   names or types against a schema; nulls are not owned.
// - Maps emptied by pruning stay as empty maps.
// - Subresource "status" applies only .status of the configuration; `ignore_status` drops .status
//   on the main resource (for kinds with a status subresource), as the real reset strategies do.
//
// Pure function: thread-safe.
#ifndef CTRLHOST_RUNTIME_APISERVER_PATCH_APPLY_H_
#define CTRLHOST_RUNTIME_APISERVER_PATCH_APPLY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/patch/managed_fields.h"
#include "runtime/apiserver/patch/merge_strategy.h"

namespace ctrlhost::apiserver {

struct ApplyOptions {
  std::string manager;  // fieldManager; required, at most 128 printable bytes
  bool force = false;
  absl::Time now;              // recorded in the manager's entry
  std::string subresource;     // "" or "status"
  std::string api_version;     // of the request, e.g. "apps/v1"; the configuration must match
  std::string kind;            // of the resource; the configuration must match
  std::string name;            // from the URL; "" skips the check
  std::string namespace_name;  // from the URL; "" skips the check
  bool ignore_status = false;  // main resource of a kind with a status subresource
};

absl::StatusOr<nlohmann::json> ServerSideApply(const nlohmann::json* live,
                                               const nlohmann::json& applied_config,
                                               const ApplyOptions& opts,
                                               const MergeStrategy* strategy);

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PATCH_APPLY_H_
