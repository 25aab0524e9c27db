// WorkPool: a fixed set of threads running tasks from a bounded queue, so that the admin server
// hands slow backend calls off gRPC's callback threads without letting them pile up unbounded.
//
//   WorkPool pool("admin-query", /*threads=*/2, /*max_queued=*/64);
//   absl::Status s = pool.TrySchedule([reactor](bool run) {
//     if (!run) { reactor->Finish(Unavailable); return; }   // discarded by Stop()
//     ... slow work ...; reactor->Finish(OK);
//   });
//   if (!s.ok()) ... RESOURCE_EXHAUSTED (all busy, queue full) or UNAVAILABLE (stopping) ...
//   pool.Stop();
//
// Guarantees: every task accepted by TrySchedule is called exactly once: with run = true on a
// worker thread, or with run = false by Stop() when it was still queued (so a task that owns an
// RPC can always finish it). TrySchedule never blocks for work; Stop() waits for running tasks.
//
// Thread-safety: thread-safe. mu_ guards the queue, the busy count and the stopping flag. Stop()
// must not be called from a task (it joins the workers).
#ifndef CTRLHOST_RUNTIME_ADMIN_WORK_POOL_H_
#define CTRLHOST_RUNTIME_ADMIN_WORK_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::admin {

class WorkPool {
 public:
  using Task = std::function<void(bool run)>;

  // `threads` >= 1 workers; at most `max_queued` tasks wait while all workers are busy (0: a task
  // is accepted only when a worker is free).
  WorkPool(std::string name, int threads, int max_queued);
  ~WorkPool();  // Stop()

  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Accepts `task` or returns ResourceExhausted (every worker busy and the queue full) or
  // Unavailable (Stop() was called). A refused task is not called.
  absl::Status TrySchedule(Task task);

  // Refuses new tasks, calls every queued task with run = false, waits for running tasks and
  // joins the workers. Idempotent.
  void Stop();

 private:
  void Work();

  // Constant after construction.
  const std::string name_;
  const int threads_;
  const size_t max_queued_;

  common::Mutex mu_;
  common::CondVar wake_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Started in the constructor, joined by the first Stop().
  std::vector<std::thread> workers_;
  common::Mutex stop_mu_;  // serializes Stop() so workers_ is joined once
};

}  // namespace ctrlhost::admin

#endif  // CTRLHOST_RUNTIME_ADMIN_WORK_POOL_H_
