#include "runtime/common/absl_deadlock.h"

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

// Two mutexes taken in both orders by one thread: no deadlock is possible, but Debian's Abseil
// (built without NDEBUG) aborts the process here unless the detector is off.
void LockInBothOrders() {
  absl::Mutex a;
  absl::Mutex b;
  {
    absl::MutexLock la(&a);
    absl::MutexLock lb(&b);
  }
  {
    absl::MutexLock lb(&b);
    absl::MutexLock la(&a);
  }
}

TEST(AbslDeadlockTest, LockOrdersNoLongerAbort) {
  TurnOffAbslDeadlockDetection();
  LockInBothOrders();
  LockInBothOrders();
  SUCCEED();
}

}  // namespace
}  // namespace ctrlhost::common
