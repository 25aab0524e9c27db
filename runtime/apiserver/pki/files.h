// Private-file helpers for the PKI: owner-only directories and files, atomic replacement, and
// an inter-process lock on a directory. Internal to //runtime/apiserver/pki.
#ifndef CTRLHOST_RUNTIME_APISERVER_PKI_FILES_H_
#define CTRLHOST_RUNTIME_APISERVER_PKI_FILES_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::apiserver::pki_internal {

// Creates `dir` and missing parents (new ones mode 0700) and sets `dir` itself to 0700.
absl::Status EnsurePrivateDir(const std::string& dir);

// The file's contents, or nullopt when it does not exist. PermissionDenied when unreadable,
// FailedPrecondition when larger than `max_bytes` or not a regular file.
absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path,
                                                            size_t max_bytes = 1 << 20);

// Writes `data` to a temporary file beside `path` with `mode`, fsyncs it and renames it over
// `path`, so readers see the old or the new file, never a mix.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view data, mode_t mode);

// chmod when the mode differs (files written by older versions or by hand).
absl::Status EnsureMode(const std::string& path, mode_t mode);

// An exclusive flock(2) on a directory, released on destruction. Move-only.
class DirLock {
 public:
  static absl::StatusOr<DirLock> Acquire(const std::string& dir);
  DirLock(DirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  DirLock& operator=(DirLock&&) = delete;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace ctrlhost::apiserver::pki_internal

#endif  // CTRLHOST_RUNTIME_APISERVER_PKI_FILES_H_
