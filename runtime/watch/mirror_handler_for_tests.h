// Helpers of the reflector tests.
//
// MirrorHandler: an EventHandler for reflector tests that mirrors the objects from the events it
// receives and records every inconsistency (an add of a known key, an update whose old state is
// not the mirrored one or that changes nothing, a delete of an unknown key), so a test can
// compare the mirror with the store and the server.
//
// Thread-safety: thread-safe; mu_ guards everything (the reflector thread writes, the test reads).
#ifndef CTRLHOST_RUNTIME_WATCH_MIRROR_HANDLER_FOR_TESTS_H_
#define CTRLHOST_RUNTIME_WATCH_MIRROR_HANDLER_FOR_TESTS_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/cache/object.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::watch {

class MirrorHandler : public EventHandler {
 public:
  void OnAdd(const cache::ObjectPtr& object, bool initial) override {
    common::MutexLock lock(&mu_);
    const std::string key(object->key());
    if (!mirror_.emplace(key, std::string(object->json())).second) {
      errors_.push_back("add of known " + key);
    }
    ++adds_;
    if (initial) ++initial_adds_;
  }
  void OnUpdate(const cache::ObjectPtr& old_object, const cache::ObjectPtr& object) override {
    common::MutexLock lock(&mu_);
    const std::string key(object->key());
    auto it = mirror_.find(key);
    if (it == mirror_.end() || it->second != old_object->json()) {
      errors_.push_back("update with a wrong old state " + key);
    }
    if (old_object->json() == object->json()) errors_.push_back("no-op update " + key);
    mirror_[key] = std::string(object->json());
    ++updates_;
  }
  void OnDelete(const cache::ObjectPtr& object) override {
    common::MutexLock lock(&mu_);
    const std::string key(object->key());
    if (mirror_.erase(key) == 0) errors_.push_back("delete of unknown " + key);
    deleted_.push_back(key);
  }

  std::map<std::string, std::string> mirror() const {
    common::MutexLock lock(&mu_);
    return mirror_;
  }
  std::vector<std::string> errors() const {
    common::MutexLock lock(&mu_);
    return errors_;
  }
  int adds() const {
    common::MutexLock lock(&mu_);
    return adds_;
  }
  int initial_adds() const {
    common::MutexLock lock(&mu_);
    return initial_adds_;
  }
  int updates() const {
    common::MutexLock lock(&mu_);
    return updates_;
  }
  int deletes() const {
    common::MutexLock lock(&mu_);
    return static_cast<int>(deleted_.size());
  }
  // The keys of the OnDelete calls, in order.
  std::vector<std::string> deleted() const {
    common::MutexLock lock(&mu_);
    return deleted_;
  }

 private:
  mutable common::Mutex mu_;
  std::map<std::string, std::string> mirror_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  int adds_ ABSL_GUARDED_BY(mu_) = 0;
  int initial_adds_ ABSL_GUARDED_BY(mu_) = 0;
  int updates_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> deleted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::watch

namespace ctrlhost::watch {

// Polls `done` (bounded, real time: 30 s) and moves the fake `clock` by `step` between polls,
// so that no backoff or timer of the reflector waits for real time. True once `done` holds.
inline bool WaitAdvancing(common::FakeClock& clock, const std::function<bool()>& done,
                          absl::Duration step) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (done()) return true;
    if (step > absl::ZeroDuration()) clock.Advance(step);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace ctrlhost::watch

#endif  // CTRLHOST_RUNTIME_WATCH_MIRROR_HANDLER_FOR_TESTS_H_
