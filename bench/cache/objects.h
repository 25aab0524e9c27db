// Test objects of the cache benchmarks (bench/cache/cache_bench.cc): deterministic, sized like
// the ConfigMaps (~1 KB stored) and Pods (~5 KB stored, 43% of it managedFields).
//
//   client.Create(configmaps_ref, bench::ConfigMapJson(7));   // "cm-000007" in namespace bench
//
// Thread-safe (pure functions).
#ifndef CTRLHOST_BENCH_CACHE_OBJECTS_H_
#define CTRLHOST_BENCH_CACHE_OBJECTS_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace ctrlhost::bench {

inline constexpr char kNamespace[] = "bench";
inline constexpr char kGroup[] = "bench.ctrlhost.dev";  // of the PodLike CRD (podlikes, v1)

// `n` characters of pseudo-random text determined by `seed`.
std::string Filler(size_t n, int64_t seed);
// ConfigMap number `i` (name cm-NNNNNN, namespace kNamespace) as JSON.
std::string ConfigMapJson(int64_t i);
// PodLike number `i` (name pod-NNNNNN, namespace kNamespace) as JSON, controlled by the object
// of uid `owner_uid` (36 characters, like every uid, so the JSON's size does not depend on it):
// it must exist, or the API server's garbage collector deletes the PodLike at once.
std::string PodLikeJson(int64_t i, const std::string& owner_uid);

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_CACHE_OBJECTS_H_
