#include "runtime/apiserver/pki/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ctrlhost::apiserver::pki_internal {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string Parent(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot write", path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsurePrivateDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the data directory must not be empty");
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return ErrnoStatus(errno, "cannot inspect", dir);
    std::string parent = Parent(dir);
    if (parent != dir && parent != "/" && parent != ".") {
      struct stat parent_st;
      if (::stat(parent.c_str(), &parent_st) != 0) {
        absl::Status s = EnsurePrivateDir(parent);
        if (!s.ok()) return s;
      }
    }
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "cannot create directory", dir);
    }
    if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot inspect", dir);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
  }
  return EnsureMode(dir, 0700);
}

absl::StatusOr<std::optional<std::string>> ReadFileIfExists(const std::string& path,
                                                            size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoStatus(errno, "cannot read", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  std::string data;
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot read", path);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
    if (data.size() > max_bytes) {
      ::close(fd);
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return std::optional<std::string>(std::move(data));
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view data, mode_t mode) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", tmp);
  absl::Status status = WriteAll(fd, data, tmp);
  // The umask may have narrowed `mode`; O_CREAT never widens an existing file's mode.
  if (status.ok() && ::fchmod(fd, mode) != 0) status = ErrnoStatus(errno, "cannot chmod", tmp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus(errno, "cannot sync", tmp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, "cannot close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "cannot rename into", path);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // Make the rename itself durable.
  int dir_fd = ::open(Parent(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

absl::Status EnsureMode(const std::string& path, mode_t mode) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "cannot inspect", path);
  if ((st.st_mode & 07777) == mode) return absl::OkStatus();
  if (::chmod(path.c_str(), mode) != 0) return ErrnoStatus(errno, "cannot chmod", path);
  return absl::OkStatus();
}

absl::StatusOr<DirLock> DirLock::Acquire(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", dir);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot lock", dir);
  }
  return DirLock(fd);
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

}  // namespace ctrlhost::apiserver::pki_internal
