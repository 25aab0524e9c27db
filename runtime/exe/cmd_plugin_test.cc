// `ctrlhost plugin list|swap` and `ctrlhost dump` against a real gRPC AdminService (a test
// double answering from fixed data) on a Unix socket in a temporary directory.
#include "runtime/exe/cmd_plugin.h"

#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/admin/v1alpha1/admin.grpc.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/mutex.h"
#include "runtime/exe/admin_client.h"
#include "runtime/exe/cmd_dump.h"
#include "runtime/exe/flags.h"

namespace ctrlhost::exe {
namespace {

using Args = std::vector<std::string>;

// Answers from fixed data and records the last requests.
// Thread-safe: gRPC calls handlers on its threads; mu_ guards the recorded requests.
class FakeAdmin final : public adminpb::AdminService::Service {
 public:
  grpc::Status ListPlugins(grpc::ServerContext*, const adminpb::ListPluginsRequest* request,
                           adminpb::ListPluginsResponse* response) override {
    common::MutexLock lock(&mu_);
    last_list_ = *request;
    for (const adminpb::Plugin& plugin : plugins_.plugins()) {
      if (request->operator_().empty() || plugin.operator_() == request->operator_()) {
        *response->add_plugins() = plugin;
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status SwapPlugin(grpc::ServerContext*, const adminpb::SwapPluginRequest* request,
                          adminpb::SwapPluginResponse* response) override {
    common::MutexLock lock(&mu_);
    last_swap_ = *request;
    if (request->plugin() == "missing") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "plugin web/missing not found");
    }
    if (request->has_replace() && request->replace().exec().command() == "/bad") {
      adminpb::SwapFailed* failed = response->mutable_failed();
      failed->set_reason(adminpb::SWAP_FAILURE_REASON_START_FAILED);
      failed->set_message("exec /bad: no such file or directory");
      failed->set_attempted_generation(5);
      failed->set_serving_generation(4);
      failed->add_output_tail("starting");
      failed->add_output_tail("boom");
      return grpc::Status::OK;
    }
    response->mutable_succeeded()->set_swap_generation(5);
    if (!request->has_start_canary()) response->mutable_succeeded()->set_draining_generation(4);
    return grpc::Status::OK;
  }

  grpc::Status DumpState(grpc::ServerContext*, const adminpb::DumpStateRequest*,
                         adminpb::DumpStateResponse* response) override {
    response->set_yaml("operators:\n- name: web\n");
    return grpc::Status::OK;
  }

  void AddPlugin(const std::string& op, const std::string& name) {
    common::MutexLock lock(&mu_);
    adminpb::Plugin* plugin = plugins_.add_plugins();
    plugin->set_operator_(op);
    plugin->set_name(name);
    plugin->set_state(adminpb::PLUGIN_STATE_READY);
    plugin->set_swap_generation(4);
    plugin->set_reported_version("1.2.0");
    plugin->mutable_work()->set_in_flight(3);
    plugin->mutable_work()->set_max_in_flight(64);
    plugin->mutable_work()->set_queued(7);
    plugin->set_restarts(1);
    plugin->set_health("SERVING");
  }

  void DecorateLast() {
    common::MutexLock lock(&mu_);
    adminpb::Plugin* plugin = plugins_.mutable_plugins(plugins_.plugins_size() - 1);
    plugin->mutable_canary()->set_swap_generation(5);
    plugin->mutable_canary()->set_percent(10);
    plugin->mutable_canary()->set_state(adminpb::PLUGIN_STATE_STARTING);
    plugin->mutable_last_error()->set_message("stream broken\nreconnecting");
    plugin->set_health("NOT_SERVING");
    plugin->set_waiting_requests(2);
  }

  adminpb::ListPluginsRequest last_list() {
    common::MutexLock lock(&mu_);
    return last_list_;
  }
  adminpb::SwapPluginRequest last_swap() {
    common::MutexLock lock(&mu_);
    return last_swap_;
  }

 private:
  common::Mutex mu_;
  adminpb::ListPluginsResponse plugins_ ABSL_GUARDED_BY(mu_);
  adminpb::ListPluginsRequest last_list_ ABSL_GUARDED_BY(mu_);
  adminpb::SwapPluginRequest last_swap_ ABSL_GUARDED_BY(mu_);
};

struct Result {
  int exit = -1;
  std::string out;
  std::string err;
};

class AdminCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Unix socket paths are limited to 108 bytes: fall back to /tmp for a long $TEST_TMPDIR.
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    std::string dir = base + "/exe-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/admin.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }

  Result Run(int (*command)(const Args&, std::ostream&, std::ostream&), Args args) {
    args.push_back("--admin-socket=" + socket_);
    args.push_back("--timeout=10s");
    std::ostringstream out, err;
    Result result;
    result.exit = command(args, out, err);
    result.out = out.str();
    result.err = err.str();
    return result;
  }

  std::string dir_;
  std::string socket_;
  FakeAdmin service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(AdminCommandsTest, ListPrintsTable) {
  service_.AddPlugin("web", "webapp");
  service_.AddPlugin("db", "postgres");
  service_.DecorateLast();
  Result r = Run(RunPluginListCommand, {});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "OPERATOR  NAME      STATE  HEALTH                   GENERATION  VERSION  "
            "INFLIGHT  QUEUED  RESTARTS  CANARY              LAST-ERROR\n"
            "web       webapp    READY  SERVING                  4           1.2.0    "
            "3/64      7       1         -                   -\n"
            "db        postgres  READY  NOT_SERVING (2 waiting)  4           1.2.0    "
            "3/64      7       1         gen 5 10% STARTING  "
            "stream broken reconnecting\n");
  EXPECT_EQ(service_.last_list().operator_(), "");
}

TEST_F(AdminCommandsTest, ListFiltersByOperator) {
  service_.AddPlugin("web", "webapp");
  service_.AddPlugin("db", "postgres");
  Result r = Run(RunPluginListCommand, {"--operator", "db"});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_EQ(service_.last_list().operator_(), "db");
  EXPECT_TRUE(absl::StrContains(r.out, "postgres"));
  EXPECT_FALSE(absl::StrContains(r.out, "webapp"));
}

TEST_F(AdminCommandsTest, ListEmpty) {
  Result r = Run(RunPluginListCommand, {});
  EXPECT_EQ(r.exit, kExitOk);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "no plugins\n");
}

TEST_F(AdminCommandsTest, ListAsJson) {
  service_.AddPlugin("web", "webapp");
  Result r = Run(RunPluginListCommand, {"-o", "json"});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["plugins"][0]["name"], "webapp");
  EXPECT_EQ(doc["plugins"][0]["state"], "PLUGIN_STATE_READY");
}

TEST_F(AdminCommandsTest, ListAsYaml) {
  service_.AddPlugin("web", "webapp");
  Result r = Run(RunPluginListCommand, {"--output=yaml"});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "plugins:\n")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "name: webapp\n")) << r.out;
}

TEST_F(AdminCommandsTest, SwapReplaceWithCommand) {
  service_.AddPlugin("web", "webapp");
  Result r = Run(RunPluginSwapCommand,
                 {"web/webapp", "--command", "/opt/v2", "--arg", "-v", "--arg", "--x=1", "--env",
                  "A=1=2", "--ready-timeout", "1.5s", "--expected-generation", "4"});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_EQ(r.out, "plugin web/webapp: swapped, generation 5 serves, generation 4 is draining\n");
  adminpb::SwapPluginRequest request = service_.last_swap();
  EXPECT_EQ(request.operator_(), "web");
  EXPECT_EQ(request.plugin(), "webapp");
  ASSERT_TRUE(request.has_replace());
  EXPECT_EQ(request.replace().exec().command(), "/opt/v2");
  ASSERT_EQ(request.replace().exec().args_size(), 2);
  EXPECT_EQ(request.replace().exec().args(1), "--x=1");
  EXPECT_EQ(request.replace().exec().env().at("A"), "1=2");
  EXPECT_EQ(request.ready_timeout().seconds(), 1);
  EXPECT_EQ(request.ready_timeout().nanos(), 500000000);
  EXPECT_EQ(request.expected_generation(), 4u);
}

TEST_F(AdminCommandsTest, SwapResolvesAUniquePluginName) {
  service_.AddPlugin("web", "webapp");
  service_.AddPlugin("db", "postgres");
  Result r = Run(RunPluginSwapCommand, {"postgres", "--endpoint", "10.0.0.5:7000", "--canary", "10",
                                        "--ca-file", "/ca.pem"});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_EQ(r.out, "plugin db/postgres: canary generation 5 is ready and serves 10% of the keys\n");
  adminpb::SwapPluginRequest request = service_.last_swap();
  EXPECT_EQ(request.operator_(), "db");
  ASSERT_TRUE(request.has_start_canary());
  EXPECT_EQ(request.start_canary().percent(), 10u);
  EXPECT_EQ(request.start_canary().source().endpoint().address(), "10.0.0.5:7000");
  EXPECT_EQ(request.start_canary().source().endpoint().tls().ca_file(), "/ca.pem");
}

TEST_F(AdminCommandsTest, SwapAmbiguousOrUnknownName) {
  service_.AddPlugin("web", "shared");
  service_.AddPlugin("db", "shared");
  Result r = Run(RunPluginSwapCommand, {"shared", "--promote-canary"});
  EXPECT_EQ(r.exit, kExitFailure);
  EXPECT_EQ(r.err,
            "error: plugin name \"shared\" is ambiguous: it is in operators web, db; use "
            "OPERATOR/PLUGIN\n");
  r = Run(RunPluginSwapCommand, {"nope", "--abort-canary"});
  EXPECT_EQ(r.exit, kExitFailure);
  EXPECT_EQ(r.err, "error: no plugin named \"nope\" (see \"ctrlhost plugin list\")\n");
  r = Run(RunPluginSwapCommand, {"shared", "--operator", "db", "--promote-canary"});
  EXPECT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "plugin db/shared: canary promoted, generation 5 serves, generation 4 is "
            "draining\n");
  EXPECT_TRUE(service_.last_swap().has_promote_canary());
}

TEST_F(AdminCommandsTest, SwapFailureKeepsOldInstanceAndExitsOne) {
  Result r = Run(RunPluginSwapCommand, {"web/webapp", "--command", "/bad"});
  EXPECT_EQ(r.exit, kExitFailure);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "error: swap of plugin web/webapp failed (START_FAILED): exec /bad: no such file or "
            "directory\n"
            "generation 5 was not started; generation 4 still serves\n"
            "last output of the failed instance:\n"
            "  starting\n"
            "  boom\n");
}

TEST_F(AdminCommandsTest, SwapRefusedByHost) {
  Result r = Run(RunPluginSwapCommand, {"web/missing", "--command", "/x"});
  EXPECT_EQ(r.exit, kExitFailure);
  EXPECT_EQ(r.err, "error: swap of plugin web/missing refused: plugin web/missing not found\n");
}

TEST_F(AdminCommandsTest, SwapUsageErrors) {
  struct Case {
    Args args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"w"},
       "one of --command, --endpoint, --promote-canary, --abort-canary or --from-shadow is "
       "required"},
      {{"w", "--from-shadow", "--promote-canary"},
       "--promote-canary and --from-shadow are mutually exclusive"},
      {{"w", "--command", "x", "--min-compared", "5"}, "--min-compared needs --from-shadow"},
      {{"w", "--from-shadow", "--min-agreement", "0"},
       "invalid value \"0\" for --min-agreement: expected a number above 0, at most 1"},
      {{"w", "--from-shadow", "--min-agreement", "x"},
       "invalid value \"x\" for --min-agreement: expected a number above 0, at most 1"},
      {{"w", "--command", "x", "--endpoint", "h:1"},
       "--command and --endpoint are mutually exclusive"},
      {{"w", "--promote-canary", "--abort-canary"},
       "--promote-canary and --abort-canary are mutually exclusive"},
      {{"w", "--command="}, "--command must not be empty"},
      {{"w", "--endpoint", "h:1", "--arg", "x"}, "--arg needs --command"},
      {{"w", "--command", "x", "--ca-file", "c"}, "--ca-file needs --endpoint"},
      {{"w", "--endpoint", "h:1", "--cert-file", "c"}, "--cert-file and --key-file go together"},
      {{"w", "--promote-canary", "--canary", "5"}, "--canary needs --command or --endpoint"},
      {{"w", "--command", "x", "--canary", "100"}, "--canary must be between 1 and 99, got 100"},
      {{"w", "--endpoint", "nohostport"},
       "invalid value \"nohostport\" for --endpoint: expected HOST:PORT"},
      {{"w", "--command", "x", "--env", "=1"},
       "invalid value \"=1\" for --env: expected KEY=VALUE"},
      {{"a/b/c", "--command", "x"},
       "invalid plugin name \"a/b/c\": expected PLUGIN or "
       "OPERATOR/PLUGIN"},
      {{"a/b", "--operator", "c", "--command", "x"},
       "--operator c contradicts the operator in \"a/b\""},
  };
  for (const Case& c : cases) {
    Result r = Run(RunPluginSwapCommand, c.args);
    EXPECT_EQ(r.exit, kExitUsage) << c.message;
    EXPECT_EQ(r.err, absl::StrCat("error: ", c.message,
                                  "\nrun \"ctrlhost plugin swap --help\" for usage\n"));
  }
  // Nothing reached the host.
  EXPECT_EQ(service_.last_swap().plugin(), "");
}

TEST_F(AdminCommandsTest, DumpPrintsYaml) {
  Result r = Run(RunDumpCommand, {});
  ASSERT_EQ(r.exit, kExitOk) << r.err;
  EXPECT_EQ(r.out, "operators:\n- name: web\n");
}

TEST_F(AdminCommandsTest, UnreachableHost) {
  const std::string missing = dir_ + "/nothing.sock";
  for (auto* command : {RunPluginListCommand, RunDumpCommand}) {
    std::ostringstream out, err;
    EXPECT_EQ(command({"--admin-socket", missing, "--timeout", "2s"}, out, err), kExitFailure);
    EXPECT_EQ(err.str(), "error: cannot reach the ctrlhost admin API at unix://" + missing +
                             ": is \"ctrlhost run\" running?\n");
  }
}

TEST_F(AdminCommandsTest, UnreachableAfterServerStops) {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_.reset();
  // The socket file may or may not remain: either way, a clear error.
  Result r = Run(RunDumpCommand, {});
  EXPECT_EQ(r.exit, kExitFailure);
  EXPECT_TRUE(absl::StartsWith(r.err, "error: cannot reach the ctrlhost admin API at unix://"))
      << r.err;
}

TEST(AdminTargetTest, ResolvesSocketAndAddress) {
  AdminClientFlags flags;
  flags.data_dir = "/var/lib/ctrlhost/";
  EXPECT_EQ(*ResolveAdminTarget(flags), "unix:///var/lib/ctrlhost/admin.sock");
  flags.admin_socket = "/run/x/../a.sock";
  EXPECT_EQ(*ResolveAdminTarget(flags), "unix:///run/a.sock");
  flags.admin_address = "localhost:7000";
  EXPECT_EQ(ResolveAdminTarget(flags).status().message(),
            "--admin-socket and --admin-address are mutually exclusive");
  flags.admin_socket.clear();
  EXPECT_EQ(*ResolveAdminTarget(flags), "localhost:7000");
  flags.admin_address = "7000";
  EXPECT_EQ(ResolveAdminTarget(flags).status().code(), absl::StatusCode::kInvalidArgument);
  // A relative path becomes absolute, so the message names the real place.
  flags.admin_address.clear();
  flags.data_dir = "rel";
  EXPECT_TRUE(absl::StartsWith(*ResolveAdminTarget(flags), "unix:///"));
  EXPECT_TRUE(absl::EndsWith(*ResolveAdminTarget(flags), "/rel/admin.sock"));
}

TEST(PluginCommandTest, GroupHelpAndUnknownSubcommand) {
  std::ostringstream out, err;
  EXPECT_EQ(RunPluginCommand({"--help"}, out, err), kExitOk);
  EXPECT_TRUE(absl::StrContains(out.str(), "  list "));
  EXPECT_TRUE(absl::StrContains(out.str(), "  swap "));
  EXPECT_EQ(RunPluginCommand({"lsit"}, out, err), kExitUsage);
  EXPECT_EQ(err.str(),
            "error: unknown command \"lsit\" for \"ctrlhost plugin\" (did you mean list?)\n"
            "run \"ctrlhost plugin --help\" for usage\n");
}

}  // namespace
}  // namespace ctrlhost::exe
