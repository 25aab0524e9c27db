// The admin API's Unix socket file: claiming its path safely, restricting it to the owner, and
// removing it only while it is still ours.
//
//   RETURN_IF_ERROR(ClaimSocketPath(path));     // stale file removed; a live host is not robbed
//   ... bind (gRPC's AddListeningPort("unix://" + path)) ...
//   ASSIGN_OR_RETURN(SocketFile file, RestrictSocket(path));   // chmod 0600, remember inode
//   ...
//   RemoveSocketFile(file);                     // unlinks only if the path is still that inode
//
// Guarantees: ClaimSocketPath never removes anything but a socket nobody accepts connections on
// (connect() refused); a regular file, a directory or a socket another process serves make it fail
// with FAILED_PRECONDITION and stay untouched. Between ClaimSocketPath and the bind another process
// could still take the path (then the bind fails or, gRPC unlinking before bind, one of the two
// wins): the check is for the common case of two hosts started on one data directory, not a lock.
// Between the bind and RestrictSocket the socket has the process umask's mode (usually 0755 or
// 0775; connecting needs write permission, so other users cannot connect under umask 022); the
// host's state directory is 0700 anyway.
//
// Thread-safety: functions are thread-safe (they touch only the file system).
#ifndef CTRLHOST_RUNTIME_ADMIN_UNIX_SOCKET_H_
#define CTRLHOST_RUNTIME_ADMIN_UNIX_SOCKET_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::admin {

// Longest path a sockaddr_un holds (sun_path is 108 bytes with its terminating NUL).
inline constexpr size_t kMaxSocketPathLength = 107;

// A socket file this process created, identified by device and inode.
struct SocketFile {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;
};

// Makes `path` (absolute) ready to bind: InvalidArgument when empty, relative or too long;
// FailedPrecondition when its directory does not exist, when something other than a socket is
// there, or "another host serves <path>" when a process accepts connections on it. A stale socket
// (connection refused) is removed.
absl::Status ClaimSocketPath(const std::string& path);

// chmod 0600 on the freshly bound socket and records its identity.
absl::StatusOr<SocketFile> RestrictSocket(const std::string& path);

// Unlinks file.path if it still is the same inode; a file someone else put there stays.
void RemoveSocketFile(const SocketFile& file);

}  // namespace ctrlhost::admin

#endif  // CTRLHOST_RUNTIME_ADMIN_UNIX_SOCKET_H_
