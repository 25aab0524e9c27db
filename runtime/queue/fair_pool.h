// Fair hand-out of keys from several work queues to one pool of workers.
//
// Controllers sharing a worker pool each keep their own WorkQueue (dedup, exclusivity and
// backoff stay per controller). FairPool::Get visits the queues round-robin, starting after the
// queue that served the previous Get, so a controller with 10,000 queued keys gets one key per
// round like a controller with one: no queue waits for more than one key from each other
// queue with ready keys.
//
//   FairPool pool(common::Clock::Real());
//   pool.AddQueue(&deployments);
//   pool.AddQueue(&configmaps);
//   // each worker thread:
//   while (std::optional<FairPool::Work> work = pool.Get()) {
//     Reconcile(work->queue->name(), work->item.key);
//     work->queue->Done(work->item).IgnoreError();
//   }
#ifndef CTRLHOST_RUNTIME_QUEUE_FAIR_POOL_H_
#define CTRLHOST_RUNTIME_QUEUE_FAIR_POOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/queue/work_queue.h"

namespace ctrlhost::queue {

// Thread-safe. mu_ guards the queue list, the round-robin cursor, the wake-up generation and
// the shutdown flag. Lock order: FairPool::mu_ before a WorkQueue's mutex (Get scans the
// queues with mu_ held; queues notify the pool after releasing their own mutex).
class FairPool : private ReadyListener {
 public:
  // A key handed out, and the queue to call Done on.
  struct Work {
    WorkQueue* queue = nullptr;
    WorkQueue::Item item;
  };

  // `clock` is borrowed and must outlive the pool (use the queues' clock).
  explicit FairPool(common::Clock* clock);
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;
  // Detaches every queue still attached.
  ~FairPool() override;

  // Attaches `queue` (borrowed; it must stay alive until RemoveQueue or the pool's
  // destruction). A queue belongs to at most one pool. AlreadyExists if it is attached here,
  // FailedPrecondition after ShutDown.
  absl::Status AddQueue(WorkQueue* queue);
  // Detaches `queue`; keys it handed out are still Done on it directly. NotFound if absent.
  absl::Status RemoveQueue(WorkQueue* queue);

  // Blocks until some queue has a ready key (round-robin across queues) or the pool is shut
  // down (nullopt).
  std::optional<Work> Get();
  // As Get, but never blocks.
  std::optional<Work> TryGet();

  // Makes every Get return nullopt. The queues are not shut down (their owners do that).
  void ShutDown();

 private:
  void OnReady() override;
  std::optional<Work> ScanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  common::Clock* const clock_;

  common::Mutex mu_;
  common::CondVar cv_;  // signalled when a queue may have a ready key, and on shutdown
  std::vector<WorkQueue*> queues_ ABSL_GUARDED_BY(mu_);
  size_t cursor_ ABSL_GUARDED_BY(mu_) = 0;        // the queue the next scan starts at
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every OnReady
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ctrlhost::queue

#endif  // CTRLHOST_RUNTIME_QUEUE_FAIR_POOL_H_
