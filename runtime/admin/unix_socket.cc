#include "runtime/admin/unix_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ctrlhost::admin {
namespace {

std::string ErrnoText(int error) { return strerror(error); }

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Whether a process accepts connections on the socket at `path`: true when connect() succeeds,
// false when it is refused (nobody listens: a stale file). Other errors are returned.
absl::StatusOr<bool> SomeoneListens(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", ErrnoText(errno)));
  }
  sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  int result;
  do {
    result = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  } while (result != 0 && errno == EINTR);
  const int error = errno;
  close(fd);
  if (result == 0) return true;
  // A full backlog (EAGAIN) still means a live listener.
  if (error == EAGAIN) return true;
  if (error == ECONNREFUSED || error == ENOENT) return false;
  return absl::FailedPreconditionError(absl::StrCat("cannot tell whether another host serves ",
                                                    path, ": connect: ", ErrnoText(error)));
}

}  // namespace

absl::Status ClaimSocketPath(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("the admin socket path is empty");
  if (path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("the admin socket path \"", path, "\" is not absolute"));
  }
  if (path.size() > kMaxSocketPathLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("the admin socket path \"", path, "\" is ", path.size(),
                     " bytes long; Unix sockets allow at most ", kMaxSocketPathLength));
  }
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("the admin socket path contains a NUL byte");
  }
  const std::string directory = DirectoryOf(path);
  struct stat info;
  if (stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the directory ", directory, " of the admin socket does not exist"));
  }
  if (lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot inspect ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; remove it or choose another path"));
  }
  absl::StatusOr<bool> live = SomeoneListens(path);
  if (!live.ok()) return live.status();
  if (*live) return absl::FailedPreconditionError(absl::StrCat("another host serves ", path));
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove the stale socket ", path, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<SocketFile> RestrictSocket(const std::string& path) {
  if (chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0) {
    return absl::InternalError(absl::StrCat("chmod 0600 ", path, ": ", ErrnoText(errno)));
  }
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) {
    return absl::InternalError(absl::StrCat("stat ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return absl::InternalError(absl::StrCat(path, " is not a socket after bind"));
  }
  return SocketFile{path, info.st_dev, info.st_ino};
}

void RemoveSocketFile(const SocketFile& file) {
  if (file.path.empty()) return;
  struct stat info;
  if (lstat(file.path.c_str(), &info) != 0) return;
  if (info.st_dev != file.device || info.st_ino != file.inode) return;
  unlink(file.path.c_str());
}

}  // namespace ctrlhost::admin
