// A fixed pool of threads running submitted tasks in FIFO order.
//
//   WorkerPool pool(4);
//   pool.Submit([] { ... });
//   pool.Stop();  // runs what was queued, then joins the threads
//
// Thread-safe: Submit and Stop may be called from any thread. `mu_` guards the queue and the
// stopping flag. Tasks must not throw (the SDK's tasks catch everything themselves).
#ifndef CTRLHOST_SDK_CPP_WORKER_POOL_H_
#define CTRLHOST_SDK_CPP_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::sdk {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();  // Stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`. Returns false (and drops it) once Stop() has begun.
  bool Submit(std::function<void()> task);
  // Lets queued tasks finish, then joins the threads. Idempotent.
  void Stop();
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  std::vector<std::thread> threads_;  // constant after construction until Stop joins them
  common::Mutex mu_;
  common::CondVar cv_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  common::Mutex join_mu_;  // serializes Stop()'s join
};

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_WORKER_POOL_H_
