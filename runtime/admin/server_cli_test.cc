// The real `ctrlhost plugin list|swap` and `ctrlhost dump` commands (their library functions in
// runtime/exe) against the real AdminServer with a fake backend.
#include <string>

#include "absl/strings/match.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "gtest/gtest.h"
#include "runtime/admin/server.h"
#include "runtime/admin/testing/admin_server_fixture.h"
#include "runtime/exe/cmd_dump.h"
#include "runtime/exe/cmd_plugin.h"

namespace ctrlhost::admin {
namespace {

using testing::AdminServerTest;
using testing::CommandResult;
using testing::FakeBackend;

TEST_F(AdminServerTest, PluginListCommand) {
  backend_.AddPlugin("web", "webapp");
  backend_.AddPlugin("db", "postgres");
  StartServer();
  CommandResult r = Run(exe::RunPluginListCommand, {});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "OPERATOR  NAME      STATE  HEALTH  GENERATION  VERSION  INFLIGHT  QUEUED  RESTARTS  "
            "CANARY  LAST-ERROR\n"
            "web       webapp    READY  -       4           1.2.0    3/64      7       0         "
            "-       -\n"
            "db        postgres  READY  -       4           1.2.0    3/64      7       0         "
            "-       -\n");
  r = Run(exe::RunPluginListCommand, {"--operator", "db", "-o", "yaml"});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "name: postgres")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "webapp")) << r.out;
}

TEST_F(AdminServerTest, PluginSwapCommand) {
  backend_.AddPlugin("web", "webapp");
  StartServer();
  CommandResult r = Run(exe::RunPluginSwapCommand, {"webapp", "--command", "/opt/v2", "--env",
                                                    "TOKEN=x", "--ready-timeout", "3s"});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "plugin web/webapp: swapped, generation 5 serves, generation 4 is draining\n");
  adminpb::SwapPluginRequest seen = backend_.last_swap();
  EXPECT_EQ(seen.operator_(), "web");
  EXPECT_EQ(seen.replace().exec().command(), "/opt/v2");
  EXPECT_EQ(seen.replace().exec().env().at("TOKEN"), "x");
  EXPECT_EQ(seen.ready_timeout().seconds(), 3);

  r = Run(exe::RunPluginSwapCommand,
          {"web/webapp", "--endpoint", "127.0.0.1:7000", "--canary", "10"});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "plugin web/webapp: canary generation 5 is ready and serves 10% of the keys\n");

  r = Run(exe::RunPluginSwapCommand, {"web/webapp", "--command", "/bad"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err,
            "error: swap of plugin web/webapp failed (EXITED): exited with status 3 before it "
            "was ready\n"
            "generation 5 was not started; generation 4 still serves\n"
            "last output of the failed instance:\n"
            "  panic: no config\n");

  backend_.FailWith(absl::AbortedError("expected generation 3, serving 4"));
  r = Run(exe::RunPluginSwapCommand,
          {"web/webapp", "--promote-canary", "--expected-generation", "3"});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err, "error: swap of plugin web/webapp refused: expected generation 3, serving 4\n");
}

TEST_F(AdminServerTest, DumpCommand) {
  StartServer();
  CommandResult r = Run(exe::RunDumpCommand, {});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "operators:\n- name: web\n  state: READY\n");
  backend_.FailWith(absl::UnavailableError("the host is starting"));
  r = Run(exe::RunDumpCommand, {});
  EXPECT_EQ(r.exit, 1);
  // The CLI words UNAVAILABLE as "cannot reach", keeping the host's message.
  EXPECT_TRUE(absl::StrContains(r.err, "the host is starting")) << r.err;
}

}  // namespace
}  // namespace ctrlhost::admin
