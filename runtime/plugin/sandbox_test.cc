// The plugin sandbox with real child processes: Landlock hides paths even from the host's own
// user, another uid keeps the host's 0700 files out of reach, and the host's secrets stay out of
// the environment. Run as root, every part runs; otherwise the uid part is skipped with its reason.
#include "runtime/plugin/sandbox.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/testing/as_unprivileged.h"
#include "runtime/plugin/process.h"

namespace ctrlhost::plugin {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A fresh directory under /tmp (readable by other users through a 0711 parent when needed).
std::string TempDir() {
  char pattern[] = "/tmp/sandbox-test-XXXXXX";
  EXPECT_NE(mkdtemp(pattern), nullptr);
  return pattern;
}

// Runs `script` with /bin/sh under `spec`; returns its exit code (-1 when Spawn failed).
int RunShell(const std::string& script, const SandboxSpec& spec,
             std::vector<std::pair<std::string, std::string>> env = {}) {
  ProcessSpec process;
  process.command = "/bin/sh";
  process.args = {"-c", script};
  process.env = std::move(env);
  process.sandbox = spec;
  auto p = Process::Spawn(process, "sandbox-test", nullptr);
  if (!p.ok()) {
    ADD_FAILURE() << p.status();
    return -1;
  }
  std::optional<int> status = (*p)->WaitExited(absl::Now() + absl::Seconds(30));
  return status.has_value() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST(SandboxTest, LandlockHidesPathsFromTheSameUser) {
  if (LandlockAbi() == 0) GTEST_SKIP() << "the kernel has no Landlock (or it is disabled)";
  const std::string root = TempDir();
  const std::string hidden = root + "/data";
  const std::string own = hidden + "/plugins/own";
  const std::string beside = root + "/beside";
  std::filesystem::create_directories(own);
  std::filesystem::create_directories(beside);
  Write(hidden + "/token", "secret-token\n");
  Write(beside + "/public", "public\n");
  SandboxSpec spec;
  spec.hidden_paths = {hidden};
  spec.allowed_paths = {own};
  // Each attempt prints ok/denied into the plugin's own (allowed) directory.
  const std::string script = absl::StrCat(
      "r=", own, "/result; ", "cat ", hidden,
      "/token >/dev/null 2>&1 && echo read-token >>$r || echo no-token >>$r; ", "ls ", hidden,
      " >/dev/null 2>&1 && echo list-data >>$r || echo no-list >>$r; ", "touch ", hidden,
      "/new 2>/dev/null && echo wrote-data >>$r || echo no-write >>$r; ", "cat ", beside,
      "/public >/dev/null && echo read-public >>$r; ", "echo x > ", own,
      "/mine && echo wrote-own >>$r");
  EXPECT_EQ(RunShell(script, spec), 0);
  EXPECT_EQ(ReadAll(own + "/result"), "no-token\nno-list\nno-write\nread-public\nwrote-own\n");
  // The same script without the sandbox reaches everything (the test can fail).
  std::filesystem::remove(own + "/result");
  SandboxSpec none = spec;
  none.landlock = false;
  EXPECT_EQ(RunShell(script, none), 0);
  EXPECT_EQ(ReadAll(own + "/result"),
            "read-token\nlist-data\nwrote-data\nread-public\nwrote-own\n");
  std::filesystem::remove_all(root);
}

// Regression: a hidden directory that also holds another hidden path (the data dir holding the
// admin socket) was taken for a directory on the way to it, and its other entries were allowed.
TEST(SandboxTest, AHiddenDirectoryStaysHiddenWhateverIsHiddenBelowIt) {
  if (LandlockAbi() == 0) GTEST_SKIP() << "the kernel has no Landlock (or it is disabled)";
  const std::string root = TempDir();
  const std::string data = root + "/data";
  const std::string own = data + "/plugins/own";
  std::filesystem::create_directories(own);
  std::filesystem::create_directories(data + "/sub");
  for (const char* name : {"token", "kubeconfig", "ca.key", "server.key", "state.db"}) {
    Write(absl::StrCat(data, "/", name), "secret\n");
  }
  Write(data + "/sub/nested", "secret\n");
  SandboxSpec spec;
  spec.hidden_paths = {data + "/admin.sock", data + "/admin.sock.token", data,
                       data + "/sub/nested"};
  spec.allowed_paths = {own};
  std::string script = absl::StrCat("r=", own, "/result; ");
  for (const char* name :
       {"token", "kubeconfig", "ca.key", "server.key", "state.db", "sub/nested"}) {
    absl::StrAppend(&script, "cat ", data, "/", name, " >/dev/null 2>&1 && echo read-", name,
                    " >>$r; ");
  }
  absl::StrAppend(&script, "ls ", data, " >/dev/null 2>&1 && echo list >>$r; ", "ls ", data,
                  "/sub >/dev/null 2>&1 && echo list-sub >>$r; ", "echo x > ", own,
                  "/mine && echo wrote-own >>$r");
  EXPECT_EQ(RunShell(script, spec), 0);
  EXPECT_EQ(ReadAll(own + "/result"), "wrote-own\n");
  std::filesystem::remove_all(root);
}

TEST(SandboxTest, LandlockRulesetCountsEntriesBesideTheWay) {
  if (LandlockAbi() == 0) GTEST_SKIP() << "the kernel has no Landlock (or it is disabled)";
  SandboxSpec spec;
  spec.hidden_paths = {"relative"};
  EXPECT_EQ(LandlockRuleset::Build(spec).status().code(), absl::StatusCode::kFailedPrecondition);
  spec.hidden_paths = {"/"};
  EXPECT_EQ(LandlockRuleset::Build(spec).status().code(), absl::StatusCode::kFailedPrecondition);
  spec.hidden_paths = {"/tmp/does-not-exist/x"};
  absl::StatusOr<LandlockRuleset> ruleset = LandlockRuleset::Build(spec);
  ASSERT_TRUE(ruleset.ok()) << ruleset.status();
  EXPECT_TRUE(ruleset->enabled());
  EXPECT_GT(ruleset->rules(), 0u);
  spec.landlock = false;
  EXPECT_FALSE(LandlockRuleset::Build(spec)->enabled());
}

TEST(SandboxTest, AnotherUserCannotReadTheHostsPrivateFiles) {
  if (!CanSwitchUser(65532)) {
    GTEST_SKIP() << "not root (nor CAP_SETUID/CAP_SETGID), or uid 65532 is not mapped in this "
                    "user namespace: plugins run as the host's user";
  }
  const std::string root = TempDir();
  ASSERT_EQ(chmod(root.c_str(), 0711), 0);
  const std::string data = root + "/data";
  ASSERT_EQ(mkdir(data.c_str(), 0700), 0);
  Write(data + "/token", "secret-token\n");
  const std::string out = root + "/out";
  ASSERT_EQ(mkdir(out.c_str(), 0700), 0);
  ASSERT_EQ(chown(out.c_str(), 65532, 65532), 0);
  SandboxSpec spec;
  spec.uid = 65532;  // gid follows
  const std::string script =
      absl::StrCat("r=", out, "/result; id -u >>$r; id -g >>$r; id -G >>$r; ", "cat ", data,
                   "/token >/dev/null 2>&1 && echo read-token >>$r || echo no-token >>$r");
  EXPECT_EQ(RunShell(script, spec), 0);
  EXPECT_EQ(ReadAll(out + "/result"), "65532\n65532\n65532\nno-token\n");
  std::filesystem::remove_all(root);
}

TEST(SandboxTest, APluginLeftAsRootHasNoCapability) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: plugins have no capabilities to drop";
  const std::string dir = TempDir();
  SandboxSpec spec;
  EXPECT_EQ(RunShell(absl::StrCat("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status > ", dir, "/caps"),
                     spec),
            0);
  EXPECT_EQ(ReadAll(dir + "/caps"),
            "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n");
  spec.drop_root_capabilities = false;  // the test can fail: root keeps them otherwise
  EXPECT_EQ(RunShell(absl::StrCat("grep -E '^CapEff' /proc/self/status > ", dir, "/caps"), spec),
            0);
  EXPECT_NE(ReadAll(dir + "/caps"), "CapEff:\t0000000000000000\n");
  std::filesystem::remove_all(dir);
}

// Runs as an unprivileged user (as root, uid 65534 in a child), so that it runs in CI too.
TEST(SandboxTest, SwitchingUserWithoutThePrivilegeIsARefusal) {
  const std::string failure = common::testing::RunUnprivileged([]() -> std::string {
    const uid_t other = geteuid() + 1;
    if (CanSwitchUser(other)) return "CanSwitchUser is true for an unprivileged user";
    ProcessSpec process;
    process.command = "/bin/true";
    process.sandbox.uid = other;
    auto p = Process::Spawn(process, "sandbox-test", nullptr);
    if (p.ok()) return "the plugin was started under another uid";
    if (p.status().code() != absl::StatusCode::kPermissionDenied ||
        p.status().message().find("plugin user") == std::string::npos) {
      return "not a PERMISSION_DENIED naming the plugin user: " + p.status().ToString();
    }
    return "";
  });
  EXPECT_EQ(failure, "");
}

TEST(SandboxTest, TheHostsOwnUserNeedsNoSwitch) {
  // `--plugin-user` naming the host's own uid and gid works without privileges (non-root: the
  // setgroups it would otherwise make is refused).
  SandboxSpec spec;
  spec.uid = geteuid();
  spec.gid = getegid();
  EXPECT_EQ(RunShell("exit 0", spec), 0);
}

TEST(SandboxTest, TheHostsSecretsStayOutOfThePluginsEnvironment) {
  setenv("KUBECONFIG", "/host/kubeconfig", 1);
  setenv("CTRLHOST_ADMIN_HINT", "x", 1);
  setenv("GITHUB_TOKEN", "t", 1);
  setenv("db_password", "p", 1);
  setenv("PLAIN_SETTING", "kept", 1);
  const std::string dir = TempDir();
  const std::string out = dir + "/env";
  EXPECT_EQ(RunShell(absl::StrCat("env > ", out), SandboxSpec(),
                     {{"CTRLHOST_PLUGIN_ADDRESS", "unix:///x.sock"}, {"SPEC_TOKEN", "given"}}),
            0);
  const std::string env = ReadAll(out);
  EXPECT_EQ(env.find("KUBECONFIG="), std::string::npos) << env;
  EXPECT_EQ(env.find("CTRLHOST_ADMIN_HINT="), std::string::npos) << env;
  EXPECT_EQ(env.find("GITHUB_TOKEN="), std::string::npos) << env;
  EXPECT_EQ(env.find("db_password="), std::string::npos) << env;
  EXPECT_NE(env.find("PLAIN_SETTING=kept"), std::string::npos) << env;
  // What the operator file (the spec) sets is passed on: it is the operator's choice.
  EXPECT_NE(env.find("CTRLHOST_PLUGIN_ADDRESS=unix:///x.sock"), std::string::npos) << env;
  EXPECT_NE(env.find("SPEC_TOKEN=given"), std::string::npos) << env;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ctrlhost::plugin
