#include "runtime/common/absl_deadlock.h"

#include "absl/synchronization/mutex.h"

namespace ctrlhost::common {

void TurnOffAbslDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace ctrlhost::common
