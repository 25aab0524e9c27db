// Gives memory the allocator keeps but nobody uses back to the kernel.
//
// glibc's malloc keeps freed memory in the arena of the thread that used it, at the arena's
// peak, and returns only the top of the main heap by itself. A host that answered a burst (an
// initial list of 10,000 objects per kind, 200,000 reconciles for 20 plugins) would hold that
// peak for good. HeapTrimmer samples the allocator's free bytes (mallinfo2) and, once at least
// `threshold` more bytes sit free than at the lowest point since the last trim (memory was used
// and freed again), calls malloc_trim(0), which hands the free pages of every arena back.
//
//   HeapTrimmer trimmer;   // in a periodic loop (the manager's tick, 500 ms)
//   trimmer.Tick();
//
// Thread-compatible: one thread calls Tick. malloc_trim takes each arena's lock while it works
// (milliseconds for a heap of hundreds of MiB), so it runs at most once per `min_interval`.
#ifndef CTRLHOST_RUNTIME_COMMON_HEAP_TRIM_H_
#define CTRLHOST_RUNTIME_COMMON_HEAP_TRIM_H_

#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"

namespace ctrlhost::common {

class HeapTrimmer {
 public:
  struct Options {
    size_t threshold = size_t{16} << 20;  // bytes freed since the low point that trigger a trim
    absl::Duration min_interval = absl::Seconds(10);
  };
  HeapTrimmer() : HeapTrimmer(Options{}) {}
  explicit HeapTrimmer(Options options);

  // Samples the free bytes and trims when due. Returns the free bytes a trim found (0 if none
  // ran), for logs and tests.
  size_t Tick();
  uint64_t trims() const { return trims_; }

  // The allocator's free bytes now (mallinfo2().fordblks: every arena's free chunks).
  static size_t FreeBytes();

 private:
  const Options options_;
  size_t low_ = 0;  // fewest free bytes seen since the last trim
  absl::Time last_trim_ = absl::InfinitePast();
  uint64_t trims_ = 0;
};

// For a long-running server, called once at start: every heap block of 128 KiB or more gets a
// mapping of its own, unmapped when it is freed. glibc starts at that threshold but raises it
// (up to 32 MiB) each time such a block is freed; from then on large blocks (a list page of 500
// objects, a big reconcile call) come from the arenas, and their memory stays there once
// freed. At 20 operators this was 20 MiB of the host's memory (tools/bench shared-cache). The
// user's MALLOC_MMAP_THRESHOLD_ wins. Returns whether the threshold was set.
bool FixMmapThreshold();

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_HEAP_TRIM_H_
