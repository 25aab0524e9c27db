// The `Burst` kind (burst.bench.ctrlhost.dev/v1) of the benchmarks that run bench/e2e_burst's
// plugin (e2e-burst, scheduling): its CRD and where its objects live.
//
//   client.Create(kCrds, kBurstCrd);
//   client.Create(kBursts, object_json);
//
// Constants only: usable from any thread.
#ifndef CTRLHOST_BENCH_E2E_BURST_BURST_KIND_H_
#define CTRLHOST_BENCH_E2E_BURST_BURST_KIND_H_

#include "runtime/kube/client.h"

namespace ctrlhost::bench {

inline const kube::ResourceRef kCrds{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "", "", ""};
inline const kube::ResourceRef kBursts{
    "burst.bench.ctrlhost.dev", "v1", "bursts", "default", "", ""};

// Namespaced, a status subresource, any fields (preserve-unknown-fields).
inline constexpr char kBurstCrd[] = R"({"apiVersion":"apiextensions.k8s.io/v1",
"kind":"CustomResourceDefinition","metadata":{"name":"bursts.burst.bench.ctrlhost.dev"},
"spec":{"group":"burst.bench.ctrlhost.dev","scope":"Namespaced",
"names":{"plural":"bursts","singular":"burst","kind":"Burst","listKind":"BurstList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}})";

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_E2E_BURST_BURST_KIND_H_
