// FixMmapThreshold in a process of its own: nothing freed before it, so a 256 KiB block comes
// from the arenas only if glibc raised its threshold.
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"
#include "runtime/common/heap_trim.h"
#include "runtime/common/testing/glibc_malloc.h"

namespace ctrlhost::common {
namespace {

// With the threshold fixed, a 256 KiB block gets a mapping of its own every time: glibc's
// default would raise the threshold past it once the first one was freed (this test fails
// without the call: round 1 comes from the heap).
TEST(FixMmapThresholdTest, LargeBlocksAreMappedEveryTime) {
  if (!testing::GlibcMalloc()) GTEST_SKIP() << testing::kNotGlibcMalloc;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) GTEST_SKIP() << "set in the environment";
  ASSERT_TRUE(FixMmapThreshold());
  for (int i = 0; i < 3; ++i) {
    const size_t before = mallinfo2().hblks;
    void* block = std::malloc(256 << 10);
    std::memset(block, 1, 256 << 10);
    EXPECT_EQ(mallinfo2().hblks, before + 1) << "round " << i;
    std::free(block);
    EXPECT_EQ(mallinfo2().hblks, before) << "round " << i;
  }
}

}  // namespace
}  // namespace ctrlhost::common
