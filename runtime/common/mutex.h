// Mutex, reader/writer mutex and condition variable for ctrlhost's own shared state.
//
// Why not absl::Mutex: Debian's Abseil is built without ThreadSanitizer annotations and
// absl::Mutex synchronises through raw futexes, so TSan (which CI runs on the concurrent core)
// sees none of its happens-before edges and reports every guarded field as a race. These
// classes wrap the standard library, whose pthread calls TSan intercepts, and carry Abseil's
// thread-safety attributes so `ABSL_GUARDED_BY(mu_)` keeps documenting (and, under clang,
// checking) which lock guards which field. See docs/design/sanitizers.md.
//
//   class Counter {
//    public:
//     void Add() { MutexLock lock(&mu_); ++n_; }
//    private:
//     Mutex mu_;
//     int n_ ABSL_GUARDED_BY(mu_) = 0;
//   };
#ifndef CTRLHOST_RUNTIME_COMMON_MUTEX_H_
#define CTRLHOST_RUNTIME_COMMON_MUTEX_H_

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ctrlhost::common {

// An exclusive lock. Not recursive.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Documents (and under clang checks) that the caller holds the lock.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Makes a contended Lock spin briefly before it sleeps (glibc's PTHREAD_MUTEX_ADAPTIVE_NP):
  // for a lock whose critical sections are a few dozen nanoseconds and that several threads
  // take in a tight loop (a work queue), where a futex sleep and wake-up costs far more than
  // the wait. Call before the mutex is first used.
  void MakeAdaptive() {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(mu_.native_handle(), &attr);
    pthread_mutexattr_destroy(&attr);
  }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// A reader/writer lock: many readers or one writer.
class ABSL_LOCKABLE RwMutex {
 public:
  RwMutex() = default;
  RwMutex(const RwMutex&) = delete;
  RwMutex& operator=(const RwMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds an RwMutex exclusively for its scope.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(RwMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  RwMutex* const mu_;
};

// Holds an RwMutex shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(RwMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  RwMutex* const mu_;
};

// A condition variable used with Mutex. Waits may wake spuriously: always wait in a loop on
// the condition. Deadlines are wall-clock (absl::Time); code whose waiting must be testable
// without sleeping takes a Clock (clock.h) and is woken by it instead.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Atomically releases `mu`, waits for a signal, and reacquires `mu`.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  // As Wait, but returns after `deadline` at the latest. Returns true if it timed out.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }

  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitWithDeadline(mu, absl::Now() + timeout);
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_MUTEX_H_
