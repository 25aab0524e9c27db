#include "runtime/common/idle_cpu.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ctrlhost::common {

absl::Status RunThisThreadOnIdleCpu() {
  struct sched_param param;
  std::memset(&param, 0, sizeof(param));
  if (const int e = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param); e != 0) {
    return absl::InternalError(
        absl::StrCat("cannot run this thread under SCHED_IDLE: ", std::strerror(e)));
  }
  return absl::OkStatus();
}

bool ThisThreadRunsOnIdleCpu() {
  int policy = 0;
  struct sched_param param;
  return pthread_getschedparam(pthread_self(), &policy, &param) == 0 && policy == SCHED_IDLE;
}

}  // namespace ctrlhost::common
