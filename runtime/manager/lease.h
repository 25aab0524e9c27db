// coordination.k8s.io/v1 Lease access shared by the leader elector (leader_elector.h) and the
// shard ring (shard_ring.h): where a Lease lives, how its fields are written, exception-free
// reads of what the server sent, and get / create / conditional update.
//
// Guarantees:
//   - UpdateLease sends the object as read, with its metadata.resourceVersion: the update is
//     conditional on it, so of two hosts writing the same Lease after reading the same version
//     exactly one wins (the other gets 409 Conflict, kube::IsConflict).
//   - The field readers never throw on a type mismatch (nlohmann's value() would): a field of
//     the wrong type reads as absent.
//
//   ASSIGN_OR_RETURN(nlohmann::json lease, GetLease(client, LeaseRef("ops", "ctrlhost")));
//   lease["spec"]["renewTime"] = FormatMicroTime(clock->Now());
//   RETURN_IF_ERROR(UpdateLease(client, LeaseRef("ops", "ctrlhost"), lease).status());
//
// Thread-safety: pure functions; the client calls are as thread-safe as kube::Client.
#ifndef CTRLHOST_RUNTIME_MANAGER_LEASE_H_
#define CTRLHOST_RUNTIME_MANAGER_LEASE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/client.h"

namespace ctrlhost::manager {

// The Leases of `lease_namespace`: the one named `name`, or the collection when `name` is
// empty (to create or list).
kube::ResourceRef LeaseRef(absl::string_view lease_namespace, absl::string_view name);

// leaseDurationSeconds for `d`: whole seconds, rounded up (a Lease never promises less than
// asked).
int64_t LeaseSeconds(absl::Duration d);

// RFC 3339 with microseconds in UTC, as Kubernetes writes MicroTime
// ("2026-11-25T17:01:02.123456Z").
std::string FormatMicroTime(absl::Time t);

// The string member `key` of `object`; "" when absent, not a string, or `object` is no object.
std::string StringField(const nlohmann::json& object, const char* key);
// The integer member `key` of `object`; `fallback` when absent or not an integer.
int64_t IntField(const nlohmann::json& object, const char* key, int64_t fallback);

// The Lease `ref` names, parsed. The client's error as it is (kube::IsNotFound when there is
// none); DataLoss when the server answered no JSON object.
absl::StatusOr<nlohmann::json> GetLease(kube::Client* client, const kube::ResourceRef& ref);
// Creates `lease` (a whole object, metadata.name and namespace set) in the collection of
// `ref` (its name is ignored). The server's answer (the Lease as stored), or its error
// (kube::IsAlreadyExists when another writer was first).
absl::StatusOr<std::string> CreateLease(kube::Client* client, const kube::ResourceRef& ref,
                                        const nlohmann::json& lease);
// Replaces the Lease `ref` names by `lease`, conditional on the metadata.resourceVersion that
// `lease` carries (keep the one read). The server's answer, or its error (kube::IsConflict
// when the Lease changed since, kube::IsNotFound when it was deleted).
absl::StatusOr<std::string> UpdateLease(kube::Client* client, const kube::ResourceRef& ref,
                                        const nlohmann::json& lease);

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_LEASE_H_
