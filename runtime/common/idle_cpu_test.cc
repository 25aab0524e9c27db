#include "runtime/common/idle_cpu.h"

#include <thread>

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

TEST(IdleCpuTest, OnlyTheCallingThreadMovesToIdle) {
  bool moved = false;
  bool status_ok = false;
  std::thread worker([&] {
    status_ok = RunThisThreadOnIdleCpu().ok();
    moved = ThisThreadRunsOnIdleCpu();
  });
  worker.join();
  EXPECT_TRUE(status_ok);
  EXPECT_TRUE(moved);
  EXPECT_FALSE(ThisThreadRunsOnIdleCpu());  // the test's own thread keeps its policy
}

}  // namespace
}  // namespace ctrlhost::common
