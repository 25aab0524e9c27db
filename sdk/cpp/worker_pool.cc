#include "sdk/cpp/worker_pool.h"

#include <utility>

namespace ctrlhost::sdk {

WorkerPool::WorkerPool(int threads) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() { Stop(); }

bool WorkerPool::Submit(std::function<void()> task) {
  common::MutexLock lock(&mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
  cv_.Signal();
  return true;
}

void WorkerPool::Stop() {
  {
    common::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  common::MutexLock lock(&join_mu_);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void WorkerPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      common::MutexLock lock(&mu_);
      while (tasks_.empty() && !stopping_) cv_.Wait(&mu_);
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace ctrlhost::sdk
