// Whether this build's malloc is glibc's: ASan and TSan replace it with their own allocator,
// which mallinfo2 and mallopt do not describe or steer. Tests of glibc allocator behaviour skip
// when it is not:
//
//   if (!common::testing::GlibcMalloc()) GTEST_SKIP() << common::testing::kNotGlibcMalloc;
#ifndef CTRLHOST_RUNTIME_COMMON_TESTING_GLIBC_MALLOC_H_
#define CTRLHOST_RUNTIME_COMMON_TESTING_GLIBC_MALLOC_H_

namespace ctrlhost::common::testing {

inline constexpr char kNotGlibcMalloc[] =
    "a sanitizer's allocator replaces glibc's malloc (no mallinfo2 figures)";

constexpr bool GlibcMalloc() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

}  // namespace ctrlhost::common::testing

#endif  // CTRLHOST_RUNTIME_COMMON_TESTING_GLIBC_MALLOC_H_
