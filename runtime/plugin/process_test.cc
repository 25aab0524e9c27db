// Process with real child processes: exec failures, process groups and the parent-death signal.
#include "runtime/plugin/process.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace ctrlhost::plugin {
namespace {

// Gone or a zombie (exited, not yet reaped by whoever inherited it).
// Plain read(2): the process may vanish between open and read (ESRCH), which libstdc++'s
// streams turn into an exception.
bool Exited(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buffer[4096];
  const ssize_t n = read(fd, buffer, sizeof(buffer));
  close(fd);
  if (n <= 0) return true;  // gone while we read
  const std::string stat(buffer, static_cast<size_t>(n));
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z' ||
         stat[paren + 2] == 'X';
}

// Waits (real time, bounded at 30 s) for another process to do something we cannot be told
// about: exit, or write a file.
template <typename Predicate>
bool Eventually(Predicate predicate) {
  for (int i = 0; i < 6000; ++i) {
    if (predicate()) return true;
    usleep(5000);
  }
  return predicate();
}

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  int pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) ? pid : 0;
}

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/process-XXXXXX");
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
  }
  std::string dir_;
};

// Regression (issue 13, item 11): plugins outlived a host killed with SIGKILL (6 orphans after
// 3 rounds) and a restarted host started a second set.
TEST_F(ProcessTest, RegressionPluginDiesWithAKilledHost) {
  const std::string pid_file = dir_ + "/plugin.pid";
  const pid_t host = fork();
  ASSERT_GE(host, 0);
  if (host == 0) {
    execl("runtime/plugin/testing/spawn_host_main", "spawn_host_main", pid_file.c_str(),
          "/bin/sleep", "1000", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_TRUE(Eventually([&] { return ReadPid(pid_file) > 0; }));
  const pid_t plugin = ReadPid(pid_file);
  EXPECT_FALSE(Exited(plugin));
  ASSERT_EQ(kill(host, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(host, &status, 0), host);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(Eventually([&] { return Exited(plugin); })) << "plugin " << plugin << " survived";
  kill(plugin, SIGKILL);  // a failed run leaves nothing behind
}

// Issue 19: a wrapper (here sh) and the plugin it started stop together.
TEST_F(ProcessTest, SignalReachesTheWholeProcessGroup) {
  const std::string child_file = dir_ + "/child.pid";
  ProcessSpec spec;
  spec.command = "/bin/sh";
  spec.args = {"-c", absl::StrCat("sleep 1000 & echo $! > ", child_file, ".tmp; mv ", child_file,
                                  ".tmp ", child_file, "; wait")};
  auto process = Process::Spawn(spec, "wrapper-1", [](int) {});
  ASSERT_TRUE(process.ok()) << process.status();
  ASSERT_TRUE(Eventually([&] { return ReadPid(child_file) > 0; }));
  const pid_t child = ReadPid(child_file);
  (*process)->Signal(SIGTERM);
  ASSERT_TRUE((*process)->WaitExited(absl::Now() + absl::Seconds(30)).has_value());
  EXPECT_TRUE(Eventually([&] { return Exited(child); }));
  kill(child, SIGKILL);
}

TEST_F(ProcessTest, WhatAPluginLeavesInItsGroupIsKilledWhenItExits) {
  const std::string child_file = dir_ + "/child.pid";
  ProcessSpec spec;
  spec.command = "sh";  // looked up in PATH
  spec.args = {"-c", absl::StrCat("sleep 1000 & echo $! > ", child_file, ".tmp; mv ", child_file,
                                  ".tmp ", child_file, "; exit 0")};
  auto process = Process::Spawn(spec, "leaver-1", [](int) {});
  ASSERT_TRUE(process.ok()) << process.status();
  ASSERT_TRUE((*process)->WaitExited(absl::Now() + absl::Seconds(30)).has_value());
  const pid_t child = ReadPid(child_file);
  ASSERT_GT(child, 0);
  EXPECT_TRUE(Eventually([&] { return Exited(child); }));
  kill(child, SIGKILL);
}

TEST_F(ProcessTest, ExecFailuresAreReportedBySpawn) {
  const std::string not_executable = dir_ + "/plugin.txt";
  const std::string no_interpreter = dir_ + "/plugin.bin";
  std::ofstream(not_executable) << "#!/bin/sh\nexit 0\n";
  std::ofstream(no_interpreter) << "garbage, no #! line";
  chmod(not_executable.c_str(), 0644);
  chmod(no_interpreter.c_str(), 0755);
  struct Case {
    std::string command;
    std::string working_dir;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {dir_ + "/missing", "", absl::StatusCode::kNotFound},
      {"no-such-command-in-path", "", absl::StatusCode::kNotFound},
      {not_executable, "", absl::StatusCode::kPermissionDenied},
      {no_interpreter, "", absl::StatusCode::kFailedPrecondition},
      {"/bin/true", dir_ + "/missing-dir", absl::StatusCode::kNotFound},
  };
  for (const Case& c : cases) {
    ProcessSpec spec;
    spec.command = c.command;
    spec.working_dir = c.working_dir;
    auto process = Process::Spawn(spec, "bad-1", [](int) {});
    ASSERT_FALSE(process.ok()) << c.command;
    EXPECT_EQ(process.status().code(), c.code) << process.status();
    EXPECT_NE(process.status().message().find(c.command), std::string::npos) << process.status();
  }
}

}  // namespace
}  // namespace ctrlhost::plugin
