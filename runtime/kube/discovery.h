// Discovery and REST mapping: which resources the API server serves, and the translation
// between a kind (group, version, kind) and the resource the client addresses (plural name,
// namespaced or cluster-scoped), like client-go's discovery + restmapper.
//
//   kube::Discovery discovery(rest.get());
//   ASSIGN_OR_RETURN(kube::ResourceMapping m, discovery.MappingFor({"apps", "v1", "Deployment"}));
//   // m.resource == "deployments", m.namespaced == true
//
// Guarantees: the first lookup loads /api and /apis; a lookup that misses reloads them (at
// most once per `min_refresh_interval` of the RestClient's clock), so a CRD created after start
// becomes mappable without a restart. A group version whose resource list fails to load is
// skipped (logged), as kubectl does with an unavailable aggregated API.
#ifndef CTRLHOST_RUNTIME_KUBE_DISCOVERY_H_
#define CTRLHOST_RUNTIME_KUBE_DISCOVERY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/rest_client.h"

namespace ctrlhost::kube {

struct GroupVersionKind {
  std::string group;    // "" for the core group
  std::string version;  // "" in lookups: the group's preferred version
  std::string kind;
};

struct ResourceMapping {
  std::string group;
  std::string version;
  std::string resource;  // plural: "deployments"
  std::string kind;      // "Deployment"
  bool namespaced = false;
  bool has_status = false;  // serves the status subresource
  std::vector<std::string> verbs;
};

// Thread-safe. The cached snapshot is guarded by mu_; refreshes are serialized by refresh_mu_
// (held while loading, never while mu_ is held by a reader), so lookups never wait on HTTP
// unless they miss.
class Discovery {
 public:
  // `rest` is borrowed and must outlive this object.
  explicit Discovery(RestClient* rest, absl::Duration min_refresh_interval = absl::Seconds(1))
      : rest_(rest), min_refresh_interval_(min_refresh_interval) {}
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  // Reloads everything now.
  absl::Status Refresh();

  // kNotFound when the server does not serve the kind (after a refresh).
  absl::StatusOr<ResourceMapping> MappingFor(const GroupVersionKind& gvk);
  // Lookup by resource (plural) instead of kind.
  absl::StatusOr<ResourceMapping> MappingForResource(const std::string& group,
                                                     const std::string& version,
                                                     const std::string& resource);
  // Every served resource (from the current snapshot; loads it when empty).
  absl::StatusOr<std::vector<ResourceMapping>> All();
  // Number of completed refreshes (tests).
  int64_t refreshes() const;

 private:
  struct Snapshot {
    std::vector<ResourceMapping> mappings;
    absl::flat_hash_map<std::string, std::string> preferred;  // group -> version
  };
  absl::StatusOr<std::shared_ptr<const Snapshot>> Load();
  // The snapshot, loading it when missing, or reloading it after a miss (`after_miss`) when
  // the last load is older than min_refresh_interval_.
  absl::StatusOr<std::shared_ptr<const Snapshot>> Current(bool after_miss);
  template <typename Match>
  absl::StatusOr<ResourceMapping> Find(const Match& match, const std::string& what);

  RestClient* const rest_;
  const absl::Duration min_refresh_interval_;

  common::Mutex refresh_mu_;  // serializes Load(); acquired before mu_

  mutable common::Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ ABSL_GUARDED_BY(mu_);
  absl::Time loaded_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t refreshes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_DISCOVERY_H_
