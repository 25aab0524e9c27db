#include "runtime/common/paths.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

std::string Cwd() { return std::filesystem::current_path().string(); }

TEST(PathsTest, RelativePathsBecomeAbsoluteAgainstTheWorkingDirectory) {
  EXPECT_EQ(AbsolutePath(".ctrlhost"), Cwd() + "/.ctrlhost");
  EXPECT_EQ(AbsolutePath(".ctrlhost/demo/"), Cwd() + "/.ctrlhost/demo");
  EXPECT_EQ(AbsolutePath("a/./b/../c"), Cwd() + "/a/c");
  EXPECT_EQ(AbsolutePath("."), Cwd());
  EXPECT_EQ(AbsolutePath("/var//lib/../tmp/"), "/var/tmp");
  EXPECT_EQ(AbsolutePath("/"), "/");
  EXPECT_EQ(AbsolutePath(""), "");
}

TEST(PathsTest, BareCommandNamesStayForThePathLookup) {
  EXPECT_EQ(AbsoluteCommand("python3"), "python3");
  EXPECT_EQ(AbsoluteCommand("bazel-bin/plugins/webapp/webapp"),
            Cwd() + "/bazel-bin/plugins/webapp/webapp");
  EXPECT_EQ(AbsoluteCommand("./plugin"), Cwd() + "/plugin");
  EXPECT_EQ(AbsoluteCommand("/usr/bin/python3"), "/usr/bin/python3");
}

TEST(PathsTest, CreatePrivateDirectoryMakesMissingParentsPrivate) {
  char pattern[] = "/tmp/paths-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string root = pattern;
  const std::string leaf = root + "/a/b/c";
  ASSERT_TRUE(CreatePrivateDirectory(leaf).ok());
  for (const std::string& dir : {root + "/a", root + "/a/b", leaf}) {
    struct stat st;
    ASSERT_EQ(stat(dir.c_str(), &st), 0) << dir;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << dir;
    EXPECT_EQ(st.st_mode & 0777, 0700u) << dir;
  }
  EXPECT_TRUE(CreatePrivateDirectory(leaf).ok()) << "an existing directory is fine";
  std::ofstream(root + "/file") << "x";
  absl::Status s = CreatePrivateDirectory(root + "/file/sub");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(root + "/file"), std::string::npos) << s;
  EXPECT_EQ(CreatePrivateDirectory("").code(), absl::StatusCode::kInvalidArgument);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ctrlhost::common
