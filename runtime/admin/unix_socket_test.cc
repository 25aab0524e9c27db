#include "runtime/admin/unix_socket.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ctrlhost::admin {
namespace {

// A short temporary directory (sun_path holds 107 bytes; $TEST_TMPDIR can be longer).
class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    std::string dir = base + "/sock-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir_ + "/admin.sock";
  }
  void TearDown() override {
    if (listener_ >= 0) close(listener_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  // Binds a socket at path_; listens when `listen_too`, else closes it, leaving a stale file.
  void BindSocket(bool listen_too) {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address;
    std::memset(&address, 0, sizeof(address));
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    if (listen_too) {
      ASSERT_EQ(listen(fd, 4), 0);
      listener_ = fd;
    } else {
      close(fd);
    }
  }

  bool Exists() const {
    struct stat info;
    return lstat(path_.c_str(), &info) == 0;
  }

  std::string dir_;
  std::string path_;
  int listener_ = -1;
};

TEST_F(UnixSocketTest, FreePathIsClaimed) { EXPECT_TRUE(ClaimSocketPath(path_).ok()); }

TEST_F(UnixSocketTest, BadPaths) {
  EXPECT_EQ(ClaimSocketPath(""), absl::InvalidArgumentError("the admin socket path is empty"));
  EXPECT_EQ(ClaimSocketPath("rel/admin.sock"),
            absl::InvalidArgumentError("the admin socket path \"rel/admin.sock\" is not absolute"));
  const std::string long_path = "/tmp/" + std::string(103, 'x');
  EXPECT_EQ(ClaimSocketPath(long_path).message(),
            absl::StrCat("the admin socket path \"", long_path,
                         "\" is 108 bytes long; Unix sockets allow at most 107"));
  EXPECT_EQ(ClaimSocketPath(dir_ + "/missing/admin.sock"),
            absl::FailedPreconditionError(absl::StrCat(
                "the directory ", dir_, "/missing of the admin socket does not exist")));
}

TEST_F(UnixSocketTest, StaleSocketIsRemoved) {
  BindSocket(/*listen_too=*/false);
  ASSERT_TRUE(Exists());
  EXPECT_TRUE(ClaimSocketPath(path_).ok());
  EXPECT_FALSE(Exists());
}

TEST_F(UnixSocketTest, LiveSocketIsNotStolen) {
  BindSocket(/*listen_too=*/true);
  EXPECT_EQ(ClaimSocketPath(path_),
            absl::FailedPreconditionError(absl::StrCat("another host serves ", path_)));
  EXPECT_TRUE(Exists());
}

TEST_F(UnixSocketTest, OtherFilesAreNotRemoved) {
  { std::ofstream(path_) << "precious"; }
  EXPECT_EQ(ClaimSocketPath(path_),
            absl::FailedPreconditionError(absl::StrCat(
                path_, " exists and is not a socket; remove it or choose another path")));
  EXPECT_TRUE(Exists());
}

TEST_F(UnixSocketTest, RestrictAndRemoveOnlyOurOwnSocket) {
  BindSocket(/*listen_too=*/true);
  absl::StatusOr<SocketFile> file = RestrictSocket(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  struct stat info;
  ASSERT_EQ(lstat(path_.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);

  // Someone replaced the file: it stays.
  ASSERT_EQ(unlink(path_.c_str()), 0);
  close(listener_);
  listener_ = -1;
  BindSocket(/*listen_too=*/false);
  SocketFile stale = *file;
  struct stat replaced;
  ASSERT_EQ(lstat(path_.c_str(), &replaced), 0);
  if (replaced.st_ino != stale.inode) {
    RemoveSocketFile(stale);
    EXPECT_TRUE(Exists());
  }
  // Our own file goes.
  absl::StatusOr<SocketFile> ours = RestrictSocket(path_);
  ASSERT_TRUE(ours.ok());
  RemoveSocketFile(*ours);
  EXPECT_FALSE(Exists());
  RemoveSocketFile(*ours);  // already gone: nothing happens

  EXPECT_EQ(RestrictSocket(path_).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace ctrlhost::admin
