// Runs the calling thread only on CPU time that no other thread of the machine wants
// (SCHED_IDLE), for work that must never slow the serving path: a shadow's sending and the
// comparison of its answers. Lowering one's own priority needs no privilege. The thread's
// children inherit it; other threads of the process keep theirs.
//
//   if (absl::Status s = common::RunThisThreadOnIdleCpu(); !s.ok()) LogWarning(...);
#ifndef CTRLHOST_RUNTIME_COMMON_IDLE_CPU_H_
#define CTRLHOST_RUNTIME_COMMON_IDLE_CPU_H_

#include "absl/status/status.h"

namespace ctrlhost::common {

// The OS's error if the policy cannot be set (the thread then keeps its own).
absl::Status RunThisThreadOnIdleCpu();

// True when the calling thread runs under SCHED_IDLE.
bool ThisThreadRunsOnIdleCpu();

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_IDLE_CPU_H_
