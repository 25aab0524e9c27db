// Predicates: which watch events start a reconcile.
//
// Defaults (plugin.proto `Predicates` left at its zero value):
// - Primary: creates and deletes always trigger; an update triggers only when the generation,
//   labels, annotations, finalizers, owner references or deletionTimestamp changed, so that a
//   controller does not react to its own status writes. Kinds that do not track a generation
//   (both states have generation 0, e.g. ConfigMap) trigger on any change outside `status`,
//   `metadata.resourceVersion` and `metadata.managedFields`, since their content has no
//   generation to move. `primary_status_changes = true` lets every other update through.
// - Owned children: every event triggers except an update that changed nothing but
//   `metadata.resourceVersion` / `metadata.managedFields`; with `ignore_child_status_changes`
//   an update that changed only `status` (or those) does not trigger either.
// - Never, for primaries or children: an update whose only change is `metadata.resourceVersion`
//   and/or `metadata.managedFields` (the cache strips managedFields, so such an update arrives
//   as a bare resourceVersion bump). kube-apiserver 1.20 answers a server-side apply that
//   changes nothing but the managedFields timestamps with a new resourceVersion (e.g. a
//   ConfigMap applied with `data: {}`, which it drops); reacting to that event would turn the
//   host's own no-op writes into an endless reconcile loop.
// - Resyncs, schedules, requeues and retries are never filtered (they do not pass here).
//
// Malformed JSON never crashes a predicate: when a comparison needs the JSON and it does not
// parse, the event triggers (a spurious reconcile is harmless, a missed one is not).
//
//   if (PrimaryUpdateTriggers(spec.predicates(), *old_object, *new_object)) queue.Add(key);
#ifndef CTRLHOST_RUNTIME_CONTROLLER_PREDICATE_H_
#define CTRLHOST_RUNTIME_CONTROLLER_PREDICATE_H_

#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/cache/object.h"

namespace ctrlhost::controller {

// Stateless functions of their arguments: thread-safe.

// True when the update of a primary from `old_object` to `new_object` should reconcile it.
bool PrimaryUpdateTriggers(const pluginpb::Predicates& predicates, const cache::Object& old_object,
                           const cache::Object& new_object);

// True when the update of an owned child should reconcile its owner.
bool ChildUpdateTriggers(const pluginpb::Predicates& predicates, const cache::Object& old_object,
                         const cache::Object& new_object);

// True when generation, labels, finalizers, owner references, deletionTimestamp or
// metadata.annotations differ (annotations are compared from the JSON).
bool MetadataChanged(const cache::Object& old_object, const cache::Object& new_object);

// True when nothing but `metadata.resourceVersion` and `metadata.managedFields` differs
// (false when either side does not parse: a spurious reconcile is harmless, a missed one is not).
bool OnlyBookkeepingChanged(const cache::Object& old_object, const cache::Object& new_object);

// True when anything but `status`, `metadata.resourceVersion` and `metadata.managedFields`
// differs (JSON compared structurally; true when either side does not parse).
bool ChangedBesidesStatus(const cache::Object& old_object, const cache::Object& new_object);

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_PREDICATE_H_
