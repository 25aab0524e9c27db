// Sharding of controllers' keys across hosts: ring membership on coordination.k8s.io/v1 Leases,
// an even assignment of the hash space (shard_assignment.h), and a hand-off that never lets two
// hosts reconcile one key.
//
// Every host of a ring holds one Lease of its own (`<ring>-<identity>`, label
// ctrlhost.dev/shard-ring=<ring>, holderIdentity = its identity), renewed every retryPeriod
// like the leader-election Lease. A Lease is *live* while its holder is set and its record
// changed within leaseDurationSeconds as observed on this host's clock (never by comparing
// renewTime with the local clock). The *view* of a host is the list of live identities in join
// order (their Leases' creationTimestamp, set by the API server, then the identity); a key
// belongs, under a view, to the owner of its shard hash's bucket in ShardAssignment(view). A
// key's shard hash is FNV-1a 64 of its primary object's uid (controller::ShardHash), the hash
// KEP-5866's server-side shard selector filters by, so a host's cache can hold its shard only.
//
// Hand-off. Each host publishes in its Lease (annotation ctrlhost.dev/shard-members) the view
// it has *adopted*: it publishes a new view only once every reconcile it has in flight is for
// a key it also owns under that view (the keys that move away have finished: drained). A host
// starts key k only when
//   1. k is its own under its current view and under its published view,
//   2. it read every peer's Lease after its last publication, and no live peer claims k under
//      the view that peer published,
//   3. its own Lease was renewed within renewDeadline.
// Two hosts that both start k would each have published a view giving k to itself before
// reading the other's Lease; the later reader sees the earlier one's claim and waits (writes
// and reads of Leases are linearizable). So no key is reconciled by two hosts at once; a key
// that moves waits until its old owner drained and published, or until the old owner's Lease
// expired (a dead host's keys move within leaseDuration + one poll + one publication). On a
// view change `on_view_change` is told the old and the new view: the manager queues every key
// this host newly owns, so none is dropped.
//
// Older hosts (rendezvous hashing by key, annotation ctrlhost.dev/shard-view) and this scheme
// do not mix: a live peer without the members annotation is taken to claim every key, and this
// host publishes a shard-view naming itself only, so an older peer waits on every key too. A
// mixed ring is safe but stalls: stop the old hosts before starting new ones.
//
// Limits (see docs/operations.md "Sharding"): a host cut off from the API server stops
// starting keys at renewDeadline, but the reconciles it has in flight run to their own
// deadline (the request timeout), so keep requestTimeout below leaseDuration - renewDeadline.
//
//   ShardRingOptions options{.lease_namespace = "ops", .ring = "ctrlhost", .identity = id};
//   ASSIGN_OR_RETURN(auto ring, ShardRing::Create(&client, options, on_view_change));
//   ring->Start();
//   ... runner options.key_gate = ring.get() ...
//   ring->Stop(/*leave=*/true);
//
// Thread-safety: thread-safe. One background thread (Loop) writes this host's Lease and reads
// the peers'; the KeyGate calls come from reflector and worker threads and never block on I/O.
// mu_ guards the views, their assignments, the in-flight table and the status; on_view_change
// runs on the loop's thread without mu_ held.
#ifndef CTRLHOST_RUNTIME_MANAGER_SHARD_RING_H_
#define CTRLHOST_RUNTIME_MANAGER_SHARD_RING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/key_gate.h"
#include "runtime/kube/client.h"
#include "runtime/manager/shard_assignment.h"

namespace ctrlhost::manager {

inline constexpr char kShardRingLabel[] = "ctrlhost.dev/shard-ring";
// Written for older hosts only (see above).
inline constexpr char kShardViewAnnotation[] = "ctrlhost.dev/shard-view";
inline constexpr char kShardMembersAnnotation[] = "ctrlhost.dev/shard-members";
inline constexpr char kShardGenerationAnnotation[] = "ctrlhost.dev/shard-generation";

struct ShardRingOptions {
  std::string lease_namespace;
  std::string ring;      // a label value; Leases of other rings are ignored
  std::string identity;  // unique per host process: DefaultIdentity()
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  // How often the peers' Leases are read (and a drained view published).
  absl::Duration poll_period = absl::Milliseconds(500);
  common::Clock* clock = nullptr;  // nullptr: Clock::Real()
};

// InvalidArgument naming the field (client-go's timing rules, a valid label value for the ring).
absl::Status ValidateShardRing(const ShardRingOptions& options);

// The Lease name of `identity` in `ring`: lower case, characters outside [a-z0-9-] as '-'.
std::string ShardLeaseName(absl::string_view ring, absl::string_view identity);

struct ShardPeer {
  std::string identity;
  std::string lease;                 // its name
  std::vector<std::string> adopted;  // the view it published, in join order
  std::string generation;            // its counter, as published
  std::string created;               // its Lease's creationTimestamp (join order)
  bool live = false;
  bool older_scheme = false;  // no members annotation: taken to claim every key
};

// What /debug/dump and logs show.
struct ShardRingStatus {
  std::string ring;
  std::string identity;
  std::string lease;                     // "namespace/name"
  bool joined = false;                   // this host's Lease was written once
  bool active = false;                   // renewed within renewDeadline
  std::vector<std::string> view;         // live members as last read, in join order
  std::vector<std::string> adopted;      // the view this host published (drained to)
  int buckets = 0;                       // of kShardBuckets, this host's under `view`
  std::vector<watch::HashRange> ranges;  // this host's part of the hash space under `view`
  uint64_t generation = 0;               // of `adopted`, counted by this host
  bool peers_fresh = false;              // peers read after the last publication
  size_t in_flight = 0;                  // reconciles running now
  size_t draining = 0;                   // of them, for keys that are no longer this host's
  std::vector<ShardPeer> peers;
  absl::Time last_renewal = absl::InfinitePast();
  std::string last_error;
};

class ShardRing : public controller::KeyGate {
 public:
  using ViewChange = std::function<void(const std::vector<std::string>& old_view,
                                        const std::vector<std::string>& new_view)>;
  // `client` is borrowed and must outlive the ring; give it a client of its own (no QPS limit
  // shared with the controllers, a request timeout near retryPeriod).
  static absl::StatusOr<std::unique_ptr<ShardRing>> Create(kube::Client* client,
                                                           ShardRingOptions options,
                                                           ViewChange on_view_change);
  ~ShardRing() override;  // Stop(false)
  ShardRing(const ShardRing&) = delete;
  ShardRing& operator=(const ShardRing&) = delete;

  void Start();
  // Ends the loop. With `leave`, first gives up every key (Begin answers kNotMine), waits up to
  // `drain_timeout` for the reconciles in flight, then deletes this host's Lease so that the
  // peers take its keys over at their next poll (left to expire when something still runs).
  // Idempotent.
  void Stop(bool leave, absl::Duration drain_timeout = absl::Seconds(10));

  // One round of the loop (tests drive it directly): renew or publish this host's Lease, then
  // read the peers'. False when a request failed (last_error says which).
  bool SyncOnce();

  // controller::KeyGate.
  bool Owns(uint64_t shard_hash) const override;
  Verdict Begin(absl::string_view key, uint64_t shard_hash) override;
  void End(absl::string_view key) override;
  absl::Duration retry_after() const override;

  // This host's part of the hash space under its current view (what its caches hold).
  std::vector<watch::HashRange> Ranges() const;
  ShardRingStatus Status() const;
  const ShardRingOptions& options() const { return options_; }

 private:
  ShardRing(kube::Client* client, ShardRingOptions options, ViewChange on_view_change);
  void Loop();
  // Writes this host's Lease (create, renew, or publish `adopted`). OK or the failure.
  absl::Status WriteLease(const std::vector<std::string>& adopted, uint64_t generation);
  absl::Status ReadPeers();
  bool DrainedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ActiveLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  kube::Client* const client_;
  const ShardRingOptions options_;
  const ViewChange on_view_change_;
  common::Clock* const clock_;
  const std::string lease_name_;

  // Loop state (the loop's thread and Stop only).
  std::string lease_json_;   // this host's Lease as last written ("" before the first write)
  std::string own_created_;  // its creationTimestamp ("" before the first write)
  absl::Time last_write_ = absl::InfinitePast();
  struct Observed {
    std::string record;  // spec + view annotation, as last seen
    absl::Time since;    // when this host saw it change
    std::string resource_version;
  };
  absl::flat_hash_map<std::string, Observed> observed_;  // by Lease name
  // Members of the older scheme already warned about (one log line each, not one per poll).
  absl::flat_hash_set<std::string> warned_older_;

  mutable common::Mutex mu_;
  common::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> view_ ABSL_GUARDED_BY(mu_);       // join order
  std::vector<std::string> published_ ABSL_GUARDED_BY(mu_);  // join order
  ShardAssignment current_ ABSL_GUARDED_BY(mu_);             // of view_
  ShardAssignment adopted_ ABSL_GUARDED_BY(mu_);             // of published_
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  // Publications acknowledged by the API server, and how many had been when the last complete
  // read of the peers began: the peers are fresh when both are equal (read after publishing).
  uint64_t publications_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t read_after_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
  absl::Time last_renewal_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // request start
  // What live peers claim: the assignment of the view each published (shared, since a peer's
  // view rarely changes between reads), or every key for a peer of the older scheme.
  struct PeerClaim {
    std::shared_ptr<const ShardAssignment> assignment;  // null: claims every key
  };
  absl::flat_hash_map<std::string, PeerClaim> peer_claims_ ABSL_GUARDED_BY(mu_);
  std::vector<ShardPeer> peers_ ABSL_GUARDED_BY(mu_);
  struct InFlight {
    int count = 0;
    uint64_t hash = 0;
  };
  absl::flat_hash_map<std::string, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  bool stopped_ = false;  // Stop's own state: called from one thread
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_SHARD_RING_H_
