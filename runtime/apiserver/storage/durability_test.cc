// Durability: a child process writes and reports every acknowledged write over a pipe; the
// parent SIGKILLs it mid-stream and reopens the database. Every acknowledged write must be
// there with its revision and value, and revisions must continue above everything stored.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/apiserver/storage/testing/store_test_util.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::NewTempDir;
using ::ctrlhost::apiserver::testing::PutValue;

constexpr char kChild[] = "runtime/apiserver/storage/crash_writer";

struct Acked {
  std::map<std::string, std::pair<int64_t, std::string>> puts;  // key -> revision, value
  std::map<std::string, int64_t> deletes;                       // key -> revision
  int64_t max_revision = 0;
  size_t lines = 0;
};

void ParseLine(const std::string& line, Acked* acked) {
  std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits(' ', 3));
  ASSERT_GE(fields.size(), 3u) << line;
  int64_t revision = 0;
  ASSERT_TRUE(absl::SimpleAtoi(fields[2], &revision)) << line;
  acked->max_revision = std::max(acked->max_revision, revision);
  ++acked->lines;
  if (fields[0] == "P") {
    ASSERT_EQ(fields.size(), 4u) << line;
    acked->puts[fields[1]] = {revision, fields[3]};
  } else {
    ASSERT_EQ(fields[0], "D") << line;
    acked->deletes[fields[1]] = revision;
  }
}

// Runs the child until it has acknowledged `min_acks` writes, kills it with SIGKILL and
// returns everything it acknowledged (including lines still in the pipe).
Acked RunAndKill(const std::string& path, bool sync_full, size_t min_acks, const std::string& tag) {
  Acked acked;
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(kChild, kChild, path.c_str(), sync_full ? "full" : "normal", "8", tag.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string buffer;
  bool killed = false;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  for (;;) {
    if (!killed && (acked.lines >= min_acks || absl::Now() > give_up)) {
      kill(pid, SIGKILL);
      killed = true;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    if (poll(&pfd, 1, 1000) <= 0) continue;  // bounded: the kill above ends the stream
    char chunk[4096];
    const ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;  // EOF: the child is gone and the pipe drained
    buffer.append(chunk, static_cast<size_t>(n));
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      ParseLine(buffer.substr(0, newline), &acked);
      buffer.erase(0, newline + 1);
    }
  }
  close(fds[0]);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child did not die by our SIGKILL; status " << status;
  return acked;
}

// The child deletes key n-5 right after its put of key n (n % 10 == 9) is acknowledged, so a
// delete whose acknowledgement the kill cut off may have committed.
bool DeleteMayHaveRun(const std::string& key, const Acked& acked) {
  const size_t slash = key.rfind('/');
  int n = 0;
  if (!absl::SimpleAtoi(key.substr(slash + 1), &n) || n % 10 != 4) return false;
  return acked.puts.count(absl::StrCat(key.substr(0, slash + 1), n + 5)) > 0;
}

class DurabilityTest : public ::testing::TestWithParam<bool> {};

TEST_P(DurabilityTest, AcknowledgedWritesSurviveSigkill) {
  const bool sync_full = GetParam();
  const std::string path = NewTempDir() + "/state.db";
  int64_t previous_max = 0;
  // Twice: the second run continues on the first run's database.
  for (int round = 0; round < 2; ++round) {
    Acked acked = RunAndKill(path, sync_full, 400, absl::StrCat("round", round));
    ASSERT_GE(acked.lines, 400u);
    EXPECT_GT(acked.max_revision, previous_max);

    StoreOptions options;
    options.path = path;
    options.sync_full = sync_full;
    auto store = Store::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    for (const auto& [key, put] : acked.puts) {
      if (acked.deletes.count(key) > 0) continue;
      ObjectPtr object = (*store)->Get(key);
      if (object == nullptr && DeleteMayHaveRun(key, acked)) continue;
      ASSERT_NE(object, nullptr) << "acknowledged write lost: " << key;
      EXPECT_EQ(object->mod_revision, put.first) << key;
      EXPECT_EQ(object->create_revision, put.first) << key;
      EXPECT_EQ(object->value, put.second) << key;
    }
    for (const auto& [key, revision] : acked.deletes) {
      EXPECT_EQ((*store)->Get(key), nullptr) << "acknowledged delete lost: " << key;
    }
    // Revisions continue above anything that was handed out and stored.
    const int64_t revision = (*store)->Revision();
    EXPECT_GE(revision, acked.max_revision);
    auto next = (*store)->Write("/after/crash", PutValue("x"));
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ((*next)->mod_revision, revision + 1);
    // History reads agree with the live state at the last acknowledged revision.
    Store::ListOptions at;
    at.prefix = absl::StrCat("/crash/round", round, "/");
    at.revision = acked.max_revision;
    auto list = (*store)->List(at);
    ASSERT_TRUE(list.ok()) << list.status();
    std::set<std::string> listed;
    for (const ObjectPtr& item : list->items) listed.insert(item->key);
    for (const auto& [key, put] : acked.puts) {
      if (acked.deletes.count(key) == 0 && !DeleteMayHaveRun(key, acked)) {
        EXPECT_EQ(listed.count(key), 1u) << key;
      }
    }
    previous_max = (*next)->mod_revision;
  }
}

INSTANTIATE_TEST_SUITE_P(SyncModes, DurabilityTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SyncFull" : "SyncNormal";
                         });

}  // namespace
}  // namespace ctrlhost::apiserver
