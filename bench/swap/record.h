// The swap benchmark's reconcile log: one fixed-size binary record per completed reconcile,
// appended by every plugin process (both swap generations, and the instances of a restarted
// host) to one file opened with O_APPEND, so the benchmark gets exact per-reconcile completion
// times on one clock (CLOCK_MONOTONIC, shared by all processes of the machine).
//
//   RecordWriter writer;                          // in the plugin
//   writer.Open("/tmp/x/reconciles.log");
//   writer.Append(object_index);                  // one write(2) of 16 bytes: atomic with O_APPEND
//   ...
//   std::vector<Record> all = *ReadRecords(path);  // in the benchmark
//
// Thread-safety: RecordWriter::Append is thread-safe (one write(2) per record, which O_APPEND
// makes atomic for regular files); Open is called once before any Append. The free functions
// are thread-safe.
#ifndef CTRLHOST_BENCH_SWAP_RECORD_H_
#define CTRLHOST_BENCH_SWAP_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::bench::swap {

// One completed reconcile (16 bytes on disk, host byte order: the file never leaves the machine).
struct Record {
  int64_t mono_ns = 0;  // CLOCK_MONOTONIC when the reconcile function returned
  uint32_t index = 0;   // N of the object `t-N`
  uint32_t pid = 0;     // the plugin process that ran it (each generation is its own process)
};
static_assert(sizeof(Record) == 16, "records are fixed-size");

// Markers a plugin process writes about itself (not reconciles: index values no object has).
inline constexpr uint32_t kMarkerMain = 0xFFFFFFFF;  // main() entered (exec and loading done)
inline constexpr uint32_t kMarkerRun = 0xFFFFFFFE;   // about to serve (Plugin::Run)
inline bool IsMarker(const Record& r) { return r.index >= kMarkerRun; }

// CLOCK_MONOTONIC in nanoseconds.
int64_t MonoNanos();

class RecordWriter {
 public:
  RecordWriter() = default;
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Opens (creating) `path` for appending. Errors: the open(2) failure.
  absl::Status Open(const std::string& path);
  // Appends one record stamped now with this process's pid. Errors: the write(2) failure.
  absl::Status Append(uint32_t index);

 private:
  int fd_ = -1;
  uint32_t pid_ = 0;
};

// Every record in `path` (a trailing partial record is ignored). Errors: NotFound, or the read
// failure.
absl::StatusOr<std::vector<Record>> ReadRecords(const std::string& path);

// N of an object name "t-N" (N < 2^32), or false for any other name.
bool ParseIndex(absl::string_view name, uint32_t* index);

// Analysis. `records` must be sorted by mono_ns (SortByTime) and hold reconciles only
// (SplitMarkers).
void SortByTime(std::vector<Record>& records);
// Moves the markers out of `records` into the result, keeping both in order.
std::vector<Record> SplitMarkers(std::vector<Record>& records);
// The first marker of `kind` written by `pid`, or -1.
int64_t MarkerOf(const std::vector<Record>& markers, uint32_t pid, uint32_t kind);

// The longest interval between two consecutive completed reconciles that overlaps
// [begin_ns, end_ns]: the window's disruption. A window with no record at all inside it counts
// from the last record before it to the first after it (or to its edge when there is none).
struct Gap {
  int64_t length_ns = 0;
  int64_t from_ns = 0;  // the reconcile before the gap
  int64_t to_ns = 0;    // the reconcile after it
};
Gap LongestGap(const std::vector<Record>& records, int64_t begin_ns, int64_t end_ns);

// Records with begin_ns <= mono_ns < end_ns.
int64_t CountIn(const std::vector<Record>& records, int64_t begin_ns, int64_t end_ns);

// How many of the objects 0..objects-1 have no record in [begin_ns, end_ns).
int64_t MissingIn(const std::vector<Record>& records, uint32_t objects, int64_t begin_ns,
                  int64_t end_ns);

// The first time after `from_ns` the rate is back: the end of the first `bucket_ns` bucket
// (buckets laid from `from_ns`) holding at least `fraction * rate_per_s` reconciles per second;
// -1 when none starts before the last record.
int64_t FullRateAt(const std::vector<Record>& records, int64_t from_ns, double rate_per_s,
                   double fraction, int64_t bucket_ns);

// The first record at or after `from_ns` whose pid is not `old_pid`, or -1.
int64_t FirstFromOtherPid(const std::vector<Record>& records, int64_t from_ns, uint32_t old_pid);
// The pid of the last record before `at_ns` (0 when none).
uint32_t PidBefore(const std::vector<Record>& records, int64_t at_ns);

}  // namespace ctrlhost::bench::swap

#endif  // CTRLHOST_BENCH_SWAP_RECORD_H_
