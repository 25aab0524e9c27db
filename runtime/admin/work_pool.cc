#include "runtime/admin/work_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::admin {

WorkPool::WorkPool(std::string name, int threads, int max_queued)
    : name_(std::move(name)),
      threads_(std::max(threads, 1)),
      max_queued_(static_cast<size_t>(std::max(max_queued, 0))) {
  workers_.reserve(threads_);
  for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { Work(); });
}

WorkPool::~WorkPool() { Stop(); }

absl::Status WorkPool::TrySchedule(Task task) {
  common::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the admin server is stopping");
  // Idle workers take queued tasks first; a task waits only when none is idle.
  const size_t idle = static_cast<size_t>(threads_ - busy_);
  if (queue_.size() >= idle + max_queued_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": all ", threads_, " workers are busy and ", max_queued_,
                     " requests wait already; retry when one finishes"));
  }
  queue_.push_back(std::move(task));
  wake_.Signal();
  return absl::OkStatus();
}

void WorkPool::Work() {
  for (;;) {
    Task task;
    {
      common::MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) wake_.Wait(&mu_);
      // Stop() discards what is queued; a worker only leaves once it sees stopping_.
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    task(/*run=*/true);
    common::MutexLock lock(&mu_);
    --busy_;
  }
}

void WorkPool::Stop() {
  common::MutexLock stop_lock(&stop_mu_);
  std::deque<Task> discarded;
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    discarded.swap(queue_);
    wake_.SignalAll();
  }
  for (Task& task : discarded) task(/*run=*/false);
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

}  // namespace ctrlhost::admin
