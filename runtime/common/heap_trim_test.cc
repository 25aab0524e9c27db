#include "runtime/common/heap_trim.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/common/testing/glibc_malloc.h"

namespace ctrlhost::common {
namespace {

// Resident bytes of this process (/proc/self/statm).
size_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

TEST(HeapTrimmerTest, TrimsOnceMemoryWasUsedAndFreedAndGivesThePagesBack) {
  if (!testing::GlibcMalloc()) GTEST_SKIP() << testing::kNotGlibcMalloc;
  HeapTrimmer trimmer({.threshold = size_t{8} << 20, .min_interval = absl::ZeroDuration()});
  EXPECT_EQ(trimmer.Tick(), 0u);
  // 64 MiB in 32 KiB blocks (below the mmap threshold), each followed by a small block that
  // stays: the freed blocks cannot merge into the heap's top, so only a trim gives their pages
  // back (the whole pages inside each). Made on another thread, as a burst of reconciles is: its
  // own arena.
  constexpr int kBlocks = 2048;
  constexpr size_t kBlock = 32 << 10;
  std::vector<char*> big(kBlocks), small(kBlocks);
  std::thread([&] {
    for (int i = 0; i < kBlocks; ++i) {
      big[i] = static_cast<char*>(std::malloc(kBlock));
      std::memset(big[i], 1, kBlock);
      small[i] = static_cast<char*>(std::malloc(64));
      std::memset(small[i], 1, 64);
    }
  }).join();
  EXPECT_EQ(trimmer.Tick(), 0u) << "nothing was freed yet";
  for (char* p : big) std::free(p);
  const size_t before = ResidentBytes();
  EXPECT_GE(trimmer.Tick(), size_t{8} << 20);
  EXPECT_EQ(trimmer.trims(), 1u);
  const size_t after = ResidentBytes();
  EXPECT_LT(after + (size_t{32} << 20), before)
      << "resident " << (before >> 20) << " MiB before the trim, " << (after >> 20) << " after";
  // Nothing used and freed since: no second trim.
  EXPECT_EQ(trimmer.Tick(), 0u);
  EXPECT_EQ(trimmer.trims(), 1u);
  for (char* p : small) std::free(p);
}

TEST(HeapTrimmerTest, AtMostOncePerInterval) {
  if (!testing::GlibcMalloc()) GTEST_SKIP() << testing::kNotGlibcMalloc;
  HeapTrimmer trimmer({.threshold = size_t{1} << 20, .min_interval = absl::Hours(1)});
  for (int round = 0; round < 2; ++round) {
    std::vector<char*> big(1024), small(1024);
    for (int i = 0; i < 1024; ++i) {
      big[i] = static_cast<char*>(std::malloc(4096));
      std::memset(big[i], 1, 4096);
      small[i] = static_cast<char*>(std::malloc(64));
    }
    for (char* p : big) std::free(p);
    trimmer.Tick();
    for (char* p : small) std::free(p);
  }
  EXPECT_EQ(trimmer.trims(), 1u);
}

}  // namespace
}  // namespace ctrlhost::common
