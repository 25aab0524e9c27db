#include "runtime/queue/fair_pool.h"

#include <algorithm>

namespace ctrlhost::queue {
namespace {

// As in WorkQueue::Get: never hand an infinite deadline to a condition variable.
constexpr absl::Duration kMaxWait = absl::Minutes(1);

}  // namespace

FairPool::FairPool(common::Clock* clock) : clock_(clock) {}

FairPool::~FairPool() {
  std::vector<WorkQueue*> queues;
  {
    common::MutexLock lock(&mu_);
    queues.swap(queues_);
  }
  // Outside mu_: SetReadyListener(nullptr) waits for a running OnReady, which takes mu_.
  for (WorkQueue* queue : queues) queue->SetReadyListener(nullptr);
}

absl::Status FairPool::AddQueue(WorkQueue* queue) {
  {
    common::MutexLock lock(&mu_);
    if (shut_down_) return absl::FailedPreconditionError("fair pool is shut down");
    if (std::find(queues_.begin(), queues_.end(), queue) != queues_.end()) {
      return absl::AlreadyExistsError("work queue " + queue->name() + " is already in the pool");
    }
    queues_.push_back(queue);
    ++generation_;
  }
  queue->SetReadyListener(this);
  cv_.SignalAll();  // it may already hold ready keys
  return absl::OkStatus();
}

absl::Status FairPool::RemoveQueue(WorkQueue* queue) {
  {
    common::MutexLock lock(&mu_);
    auto it = std::find(queues_.begin(), queues_.end(), queue);
    if (it == queues_.end()) {
      return absl::NotFoundError("work queue " + queue->name() + " is not in the pool");
    }
    const size_t index = static_cast<size_t>(it - queues_.begin());
    queues_.erase(it);
    if (cursor_ > index) --cursor_;
    if (cursor_ >= queues_.size()) cursor_ = 0;
  }
  queue->SetReadyListener(nullptr);
  return absl::OkStatus();
}

void FairPool::OnReady() {
  {
    common::MutexLock lock(&mu_);
    ++generation_;
  }
  cv_.SignalAll();
}

std::optional<FairPool::Work> FairPool::ScanLocked() {
  const size_t n = queues_.size();
  for (size_t i = 0; i < n; ++i) {
    const size_t index = (cursor_ + i) % n;
    if (std::optional<WorkQueue::Item> item = queues_[index]->TryGet()) {
      cursor_ = (index + 1) % n;
      return Work{queues_[index], *item};
    }
  }
  return std::nullopt;
}

std::optional<FairPool::Work> FairPool::TryGet() {
  common::MutexLock lock(&mu_);
  if (shut_down_) return std::nullopt;
  return ScanLocked();
}

std::optional<FairPool::Work> FairPool::Get() {
  common::MutexLock lock(&mu_);
  while (true) {
    if (shut_down_) return std::nullopt;
    const uint64_t seen = generation_;
    if (std::optional<Work> work = ScanLocked()) return work;
    // Nothing ready: sleep until a queue says it has a key or its earliest delay expires.
    const absl::Time now = clock_->Now();
    absl::Time deadline = now + kMaxWait;
    for (WorkQueue* queue : queues_) deadline = std::min(deadline, queue->NextDeadline());
    while (generation_ == seen && !shut_down_) {
      if (clock_->WaitWithDeadline(&mu_, &cv_, deadline)) break;
    }
  }
}

void FairPool::ShutDown() {
  {
    common::MutexLock lock(&mu_);
    shut_down_ = true;
  }
  cv_.SignalAll();
}

}  // namespace ctrlhost::queue
