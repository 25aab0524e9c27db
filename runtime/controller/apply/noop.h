// No-op detection: whether a write the applier is about to make would change nothing, judged
// against the object the host's cache holds. The applier skips such writes so that a steady
// state makes zero API writes (kube-apiserver 1.20 answers a server-side apply that changes
// nothing but managedFields timestamps with a new resourceVersion, whose watch event would
// otherwise reconcile the owner again, forever).
//
//   if (ApplyIsCovered(current_json, desired)) { /* skip the apply */ }
//   if (MergePatchIsNoop(live_status, status_patch)) { /* skip the status write */ }
//
// Both are conservative: when in doubt (a type differs, an array's length differs, a member is
// missing) the answer is "not a no-op" and the write happens. Pure functions, thread-safe,
// never throw on any JSON.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_NOOP_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_NOOP_H_

#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {

// True when every field of the server-side apply configuration `desired` is present in
// `current` with an equal value: members of objects are compared recursively (members of
// `current` that `desired` does not name are ignored, since the server may have defaulted
// them or another manager may own them); arrays must have the same length and cover element
// by element (so defaulted members inside list items, e.g. a port's `protocol`, are
// tolerated); scalars compare equal (numbers by value). A desired empty object, empty array or
// null also matches an absent member: kube-apiserver drops empty maps such as a ConfigMap's
// `data: {}` (omitempty), so the object can never show them.
//
// This alone does not make an apply a no-op: an apply also removes the fields the manager
// applied before and no longer sends. The applier therefore skips only when, in addition, the
// configuration is the same one it last applied to this object (see Applier).
bool ApplyIsCovered(const nlohmann::json& current, const nlohmann::json& desired);

// True when applying the RFC 7386 merge patch `patch` to `target` yields `target` unchanged:
// every member of a patch object is null and absent from `target`, an object that
// `target` covers recursively, or a value (array, scalar) equal to `target`'s.
bool MergePatchIsNoop(const nlohmann::json& target, const nlohmann::json& patch);

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_NOOP_H_
