#include "bench/swap/record.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ctrlhost::bench::swap {

int64_t MonoNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

RecordWriter::~RecordWriter() {
  if (fd_ >= 0) close(fd_);
}

absl::Status RecordWriter::Open(const std::string& path) {
  fd_ = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  pid_ = static_cast<uint32_t>(getpid());
  return absl::OkStatus();
}

absl::Status RecordWriter::Append(uint32_t index) {
  if (fd_ < 0) return absl::FailedPreconditionError("record file not open");
  Record record;
  record.mono_ns = MonoNanos();
  record.index = index;
  record.pid = pid_;
  // One write per record: with O_APPEND the kernel appends it whole, even from many processes.
  ssize_t n = write(fd_, &record, sizeof(record));
  if (n != static_cast<ssize_t>(sizeof(record))) {
    return absl::ErrnoToStatus(n < 0 ? errno : EIO, "append record");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Record>> ReadRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("read ", path));
  std::vector<Record> records(bytes.size() / sizeof(Record));
  if (!records.empty()) std::memcpy(records.data(), bytes.data(), records.size() * sizeof(Record));
  return records;
}

bool ParseIndex(absl::string_view name, uint32_t* index) {
  if (!absl::ConsumePrefix(&name, "t-") || name.empty()) return false;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(name, index);
}

void SortByTime(std::vector<Record>& records) {
  std::stable_sort(records.begin(), records.end(),
                   [](const Record& a, const Record& b) { return a.mono_ns < b.mono_ns; });
}

std::vector<Record> SplitMarkers(std::vector<Record>& records) {
  std::vector<Record> markers;
  std::vector<Record> reconciles;
  reconciles.reserve(records.size());
  for (const Record& r : records) (IsMarker(r) ? markers : reconciles).push_back(r);
  records = std::move(reconciles);
  return markers;
}

int64_t MarkerOf(const std::vector<Record>& markers, uint32_t pid, uint32_t kind) {
  for (const Record& r : markers) {
    if (r.pid == pid && r.index == kind) return r.mono_ns;
  }
  return -1;
}

namespace {

// Index of the first record with mono_ns >= t.
size_t LowerBound(const std::vector<Record>& records, int64_t t) {
  return std::lower_bound(records.begin(), records.end(), t,
                          [](const Record& r, int64_t v) { return r.mono_ns < v; }) -
         records.begin();
}

}  // namespace

Gap LongestGap(const std::vector<Record>& records, int64_t begin_ns, int64_t end_ns) {
  Gap best;
  if (end_ns < begin_ns) return best;
  // The intervals overlapping the window: from the last record before it (or its begin) to the
  // first after it (or its end).
  size_t first = LowerBound(records, begin_ns);
  int64_t prev = first > 0 ? records[first - 1].mono_ns : begin_ns;
  for (size_t i = first; i < records.size(); ++i) {
    const int64_t t = records[i].mono_ns;
    if (t - prev > best.length_ns) best = Gap{t - prev, prev, t};
    prev = t;
    if (t > end_ns) return best;
  }
  if (end_ns - prev > best.length_ns) best = Gap{end_ns - prev, prev, end_ns};
  return best;
}

int64_t CountIn(const std::vector<Record>& records, int64_t begin_ns, int64_t end_ns) {
  if (end_ns <= begin_ns) return 0;
  return static_cast<int64_t>(LowerBound(records, end_ns) - LowerBound(records, begin_ns));
}

int64_t MissingIn(const std::vector<Record>& records, uint32_t objects, int64_t begin_ns,
                  int64_t end_ns) {
  std::vector<bool> seen(objects, false);
  int64_t missing = objects;
  for (size_t i = LowerBound(records, begin_ns); i < records.size() && records[i].mono_ns < end_ns;
       ++i) {
    const uint32_t index = records[i].index;
    if (index < objects && !seen[index]) {
      seen[index] = true;
      --missing;
    }
  }
  return missing;
}

int64_t FullRateAt(const std::vector<Record>& records, int64_t from_ns, double rate_per_s,
                   double fraction, int64_t bucket_ns) {
  if (records.empty() || bucket_ns <= 0) return -1;
  const double needed = fraction * rate_per_s * (static_cast<double>(bucket_ns) / 1e9);
  for (int64_t t = from_ns; t <= records.back().mono_ns; t += bucket_ns) {
    if (static_cast<double>(CountIn(records, t, t + bucket_ns)) >= needed) return t + bucket_ns;
  }
  return -1;
}

int64_t FirstFromOtherPid(const std::vector<Record>& records, int64_t from_ns, uint32_t old_pid) {
  for (size_t i = LowerBound(records, from_ns); i < records.size(); ++i) {
    if (records[i].pid != old_pid) return records[i].mono_ns;
  }
  return -1;
}

uint32_t PidBefore(const std::vector<Record>& records, int64_t at_ns) {
  size_t i = LowerBound(records, at_ns);
  return i > 0 ? records[i - 1].pid : 0;
}

}  // namespace ctrlhost::bench::swap
