// The real AdminServer on a Unix socket with a fake backend: every RPC through a gRPC stub,
// validation, status mapping, the socket file's life, the swap cap, and the real `ctrlhost plugin`
// and `ctrlhost dump` commands against it.
#include "runtime/admin/server.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ctrlhost/admin/v1alpha1/admin.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/admin/backend.h"
#include "runtime/common/mutex.h"
#include "runtime/exe/cmd_dump.h"
#include "runtime/exe/cmd_plugin.h"

namespace ctrlhost::admin {
namespace {

// Returns the fake's configured failure, if any (mu_ held). A fresh copy: absl::Status shares its
// payload by a reference count inside the uninstrumented libabsl, which TSan cannot follow.
#define RETURN_FAILURE()                                                   \
  if (!failure_.ok()) {                                                    \
    return absl::Status(failure_.code(), std::string(failure_.message())); \
  }

// Answers from fixed data, records requests, can fail every call with a set status, and can hold
// SwapPlugin until released. Thread-safe: mu_ guards everything.
class FakeBackend final : public AdminBackend {
 public:
  absl::StatusOr<v1::ListOperatorsResponse> ListOperators(
      const v1::ListOperatorsRequest&) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    v1::ListOperatorsResponse response;
    response.add_operators()->set_name("web");
    response.mutable_operators(0)->set_state(v1::OPERATOR_STATE_READY);
    return response;
  }
  absl::StatusOr<v1::ListPluginsResponse> ListPlugins(
      const v1::ListPluginsRequest& request) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    last_list_plugins_ = request;
    v1::ListPluginsResponse response;
    for (const v1::Plugin& plugin : plugins_) {
      if (request.operator_().empty() || request.operator_() == plugin.operator_()) {
        *response.add_plugins() = plugin;
      }
    }
    return response;
  }
  absl::StatusOr<v1::GetPluginResponse> GetPlugin(const v1::GetPluginRequest& request) override {
    common::MutexLock lock(&mu_);
    ++calls_;
    RETURN_FAILURE();
    for (const v1::Plugin& plugin : plugins_) {
      if (plugin.operator_() == request.operator_() && plugin.name() == request.plugin()) {
        v1::GetPluginResponse response;
        *response.mutable_plugin() = plugin;
        return response;
      }
    }
    return absl::NotFoundError(
        absl::StrCat("plugin ", request.operator_(), "/", request.plugin(), " not found"));
  }
  absl::StatusOr<v1::ListControllersResponse> ListControllers(
      const v1::ListControllersRequest& request) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    v1::ListControllersResponse response;
    v1::Controller* controller = response.add_controllers();
    controller->set_operator_(request.operator_().empty() ? "web" : request.operator_());
    controller->set_plugin("webapp");
    controller->set_name("webapp");
    return response;
  }
  absl::StatusOr<v1::GetControllerResponse> GetController(
      const v1::GetControllerRequest& request) override {
    common::MutexLock lock(&mu_);
    ++calls_;
    RETURN_FAILURE();
    v1::GetControllerResponse response;
    response.mutable_controller()->set_operator_(request.operator_());
    response.mutable_controller()->set_plugin(request.plugin());
    response.mutable_controller()->set_name(request.controller());
    response.mutable_controller()->set_state(v1::CONTROLLER_STATE_READY);
    return response;
  }
  absl::StatusOr<v1::SwapPluginResponse> SwapPlugin(const v1::SwapPluginRequest& request) override {
    common::MutexLock lock(&mu_);
    ++calls_;
    ++swaps_entered_;
    changed_.SignalAll();
    while (hold_swaps_) changed_.Wait(&mu_);
    RETURN_FAILURE();
    last_swap_ = request;
    v1::SwapPluginResponse response;
    if (request.has_replace() && request.replace().exec().command() == "/bad") {
      v1::SwapFailed* failed = response.mutable_failed();
      failed->set_reason(v1::SWAP_FAILURE_REASON_EXITED);
      failed->set_message("exited with status 3 before it was ready");
      failed->set_attempted_generation(5);
      failed->set_serving_generation(4);
      failed->add_output_tail("panic: no config");
      return response;
    }
    response.mutable_succeeded()->set_swap_generation(5);
    if (!request.has_start_canary()) response.mutable_succeeded()->set_draining_generation(4);
    return response;
  }
  absl::StatusOr<v1::ReloadConfigResponse> ReloadConfig(
      const v1::ReloadConfigRequest& request) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    v1::ReloadConfigResponse response;
    response.set_dry_run(request.dry_run());
    v1::OperatorChange* change = response.add_changes();
    change->set_operator_("web");
    change->set_type(v1::OPERATOR_CHANGE_TYPE_UPDATED);
    change->add_swapped_plugins("webapp");
    return response;
  }
  absl::StatusOr<v1::DumpStateResponse> DumpState(const v1::DumpStateRequest&) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    v1::DumpStateResponse response;
    response.set_yaml("operators:\n- name: web\n  state: READY\n");
    response.mutable_taken_at()->set_seconds(1700000000);
    return response;
  }

  void AddPlugin(const std::string& op, const std::string& name) {
    common::MutexLock lock(&mu_);
    v1::Plugin plugin;
    plugin.set_operator_(op);
    plugin.set_name(name);
    plugin.set_state(v1::PLUGIN_STATE_READY);
    plugin.set_swap_generation(4);
    plugin.set_reported_version("1.2.0");
    plugin.mutable_work()->set_in_flight(3);
    plugin.mutable_work()->set_max_in_flight(64);
    plugin.mutable_work()->set_queued(7);
    plugins_.push_back(plugin);
  }
  void FailWith(absl::Status status) {
    common::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }
  void HoldSwaps(bool hold) {
    common::MutexLock lock(&mu_);
    hold_swaps_ = hold;
    changed_.SignalAll();
  }
  // Waits (bounded) until `n` SwapPlugin calls have begun.
  bool AwaitSwapsEntered(int n) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (swaps_entered_ < n) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) return swaps_entered_ >= n;
    }
    return true;
  }
  int calls() {
    common::MutexLock lock(&mu_);
    return calls_;
  }
  v1::SwapPluginRequest last_swap() {
    common::MutexLock lock(&mu_);
    return last_swap_;
  }

 private:
  common::Mutex mu_;
  common::CondVar changed_;
  std::vector<v1::Plugin> plugins_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool hold_swaps_ ABSL_GUARDED_BY(mu_) = false;
  int swaps_entered_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  v1::ListPluginsRequest last_list_plugins_ ABSL_GUARDED_BY(mu_);
  v1::SwapPluginRequest last_swap_ ABSL_GUARDED_BY(mu_);
};
#undef RETURN_FAILURE

struct CommandResult {
  int exit = -1;
  std::string out;
  std::string err;
};

class AdminServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // sun_path holds 107 bytes: fall back to /tmp for a long $TEST_TMPDIR.
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    std::string dir = base + "/adm-XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/admin.sock";
  }
  void TearDown() override {
    server_.reset();
    unlink(socket_.c_str());
    rmdir(dir_.c_str());
  }

  AdminServerOptions Options() {
    AdminServerOptions options;
    options.socket_path = socket_;
    options.backend = &backend_;
    return options;
  }
  void StartServer(AdminServerOptions options) {
    absl::StatusOr<std::unique_ptr<AdminServer>> server = AdminServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void StartServer() { StartServer(Options()); }

  std::unique_ptr<v1::AdminService::Stub> Stub() {
    return v1::AdminService::NewStub(
        grpc::CreateChannel("unix://" + socket_, grpc::InsecureChannelCredentials()));
  }
  static void Deadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }

  CommandResult Run(int (*command)(const std::vector<std::string>&, std::ostream&, std::ostream&),
                    std::vector<std::string> args) {
    args.push_back("--admin-socket=" + socket_);
    args.push_back("--timeout=10s");
    std::ostringstream out, err;
    CommandResult result;
    result.exit = command(args, out, err);
    result.out = out.str();
    result.err = err.str();
    return result;
  }

  bool SocketExists() const {
    struct stat info;
    return lstat(socket_.c_str(), &info) == 0;
  }

  std::string dir_;
  std::string socket_;
  FakeBackend backend_;
  std::unique_ptr<AdminServer> server_;
};

TEST_F(AdminServerTest, EveryRpcRoundTrips) {
  backend_.AddPlugin("web", "webapp");
  StartServer();
  EXPECT_EQ(server_->target(), "unix://" + socket_);
  auto stub = Stub();
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::ListOperatorsResponse response;
    ASSERT_TRUE(stub->ListOperators(&context, {}, &response).ok());
    ASSERT_EQ(response.operators_size(), 1);
    EXPECT_EQ(response.operators(0).state(), v1::OPERATOR_STATE_READY);
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::ListPluginsResponse response;
    ASSERT_TRUE(stub->ListPlugins(&context, {}, &response).ok());
    ASSERT_EQ(response.plugins_size(), 1);
    EXPECT_EQ(response.plugins(0).reported_version(), "1.2.0");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::GetPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    v1::GetPluginResponse response;
    ASSERT_TRUE(stub->GetPlugin(&context, request, &response).ok());
    EXPECT_EQ(response.plugin().swap_generation(), 4u);
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::ListControllersRequest request;
    request.set_operator_("db");
    v1::ListControllersResponse response;
    ASSERT_TRUE(stub->ListControllers(&context, request, &response).ok());
    ASSERT_EQ(response.controllers_size(), 1);
    EXPECT_EQ(response.controllers(0).operator_(), "db");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::GetControllerRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    request.set_controller("pages");
    v1::GetControllerResponse response;
    ASSERT_TRUE(stub->GetController(&context, request, &response).ok());
    EXPECT_EQ(response.controller().name(), "pages");
    EXPECT_EQ(response.controller().state(), v1::CONTROLLER_STATE_READY);
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::SwapPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    request.mutable_replace()->mutable_endpoint()->set_address("unix:///run/v2.sock");
    v1::SwapPluginResponse response;
    ASSERT_TRUE(stub->SwapPlugin(&context, request, &response).ok());
    EXPECT_EQ(response.succeeded().swap_generation(), 5u);
    EXPECT_EQ(response.succeeded().draining_generation(), 4u);
    EXPECT_EQ(backend_.last_swap().replace().endpoint().address(), "unix:///run/v2.sock");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::ReloadConfigRequest request;
    request.set_dry_run(true);
    v1::ReloadConfigResponse response;
    ASSERT_TRUE(stub->ReloadConfig(&context, request, &response).ok());
    EXPECT_TRUE(response.dry_run());
    ASSERT_EQ(response.changes_size(), 1);
    EXPECT_EQ(response.changes(0).swapped_plugins(0), "webapp");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::DumpStateResponse response;
    ASSERT_TRUE(stub->DumpState(&context, {}, &response).ok());
    EXPECT_EQ(response.yaml(), "operators:\n- name: web\n  state: READY\n");
    EXPECT_EQ(response.taken_at().seconds(), 1700000000);
  }
}

TEST_F(AdminServerTest, InvalidRequestsNeverReachTheBackend) {
  StartServer();
  auto stub = Stub();
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::GetPluginRequest request;
    request.set_operator_("web");
    v1::GetPluginResponse response;
    grpc::Status status = stub->GetPlugin(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "GetPluginRequest.plugin is required");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    v1::GetControllerRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    v1::GetControllerResponse response;
    grpc::Status status = stub->GetController(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "GetControllerRequest.controller is required");
  }
  struct Case {
    v1::SwapPluginRequest request;
    std::string message;
  };
  std::vector<Case> cases(4);
  for (Case& c : cases) {
    c.request.set_operator_("web");
    c.request.set_plugin("webapp");
  }
  cases[0].message =
      "SwapPluginRequest.action is required: one of replace, start_canary, promote_canary or "
      "abort_canary";
  cases[1].request.mutable_replace()->mutable_exec();
  cases[1].message = "SwapPluginRequest.replace.exec.command is required";
  cases[2].request.mutable_start_canary()->mutable_source()->mutable_exec()->set_command("x");
  cases[2].request.mutable_start_canary()->set_percent(100);
  cases[2].message = "SwapPluginRequest.start_canary.percent must be between 1 and 99, got 100";
  cases[3].request.mutable_abort_canary();
  cases[3].request.mutable_ready_timeout()->set_seconds(-1);
  cases[3].message = "SwapPluginRequest.ready_timeout must not be negative, got -1s";
  for (const Case& c : cases) {
    grpc::ClientContext context;
    Deadline(&context);
    v1::SwapPluginResponse response;
    grpc::Status status = stub->SwapPlugin(&context, c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_EQ(status.error_message(), c.message);
  }
  EXPECT_EQ(backend_.calls(), 0);
}

TEST_F(AdminServerTest, BackendStatusCodesMapOneToOne) {
  StartServer();
  auto stub = Stub();
  for (int code = 1; code <= 16; ++code) {
    const std::string message = absl::StrCat("failure number ", code);
    backend_.FailWith(absl::Status(static_cast<absl::StatusCode>(code), message));
    grpc::ClientContext context;
    Deadline(&context);
    v1::GetPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    v1::GetPluginResponse response;
    grpc::Status status = stub->GetPlugin(&context, request, &response);
    EXPECT_EQ(static_cast<int>(status.error_code()), code);
    EXPECT_EQ(status.error_message(), message);
  }
  EXPECT_EQ(ToGrpcStatus(absl::OkStatus()).error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(42), "odd")).error_code(),
            grpc::StatusCode::UNKNOWN);
}

TEST_F(AdminServerTest, SocketIsOwnerOnlyAndStopRemovesIt) {
  StartServer();
  struct stat info;
  ASSERT_EQ(lstat(socket_.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  server_->Stop();
  EXPECT_FALSE(SocketExists());
  server_->Stop();  // idempotent
  CommandResult r = Run(exe::RunDumpCommand, {});
  EXPECT_EQ(r.exit, 1);
  EXPECT_EQ(r.err, "error: cannot reach the ctrlhost admin API at unix://" + socket_ +
                       ": is \"ctrlhost run\" running?\n");
}

TEST_F(AdminServerTest, StaleSocketIsReplaced) {
  // A socket file nobody listens on, as a crashed host leaves it.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address;
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  close(fd);
  ASSERT_TRUE(SocketExists());
  StartServer();
  CommandResult r = Run(exe::RunDumpCommand, {});
  EXPECT_EQ(r.exit, 0) << r.err;
}

TEST_F(AdminServerTest, LiveSocketIsNotStolen) {
  StartServer();
  absl::StatusOr<std::unique_ptr<AdminServer>> second = AdminServer::Start(Options());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status(),
            absl::FailedPreconditionError(absl::StrCat("another host serves ", socket_)));
  // The first server still answers on its socket.
  CommandResult r = Run(exe::RunDumpCommand, {});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "operators:\n- name: web\n  state: READY\n");
}

TEST_F(AdminServerTest, BadOptions) {
  AdminServerOptions options = Options();
  options.backend = nullptr;
  EXPECT_EQ(AdminServer::Start(options).status(),
            absl::InvalidArgumentError("AdminServerOptions.backend is required"));
  options = Options();
  options.max_concurrent_swaps = 0;
  EXPECT_EQ(AdminServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options();
  options.socket_path = dir_ + "/no/such/dir/admin.sock";
  EXPECT_EQ(AdminServer::Start(options).status().code(), absl::StatusCode::kFailedPrecondition);
  options.socket_path = "/tmp/" + std::string(120, 'a');
  EXPECT_EQ(AdminServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AdminServerTest, SwapsAreCappedAndNeverDelayQueries) {
  backend_.AddPlugin("web", "webapp");
  AdminServerOptions options = Options();
  options.max_concurrent_swaps = 1;
  StartServer(options);
  backend_.HoldSwaps(true);

  v1::SwapPluginRequest request;
  request.set_operator_("web");
  request.set_plugin("webapp");
  request.mutable_promote_canary();
  grpc::Status first_status;
  std::thread first([&] {
    auto stub = Stub();
    grpc::ClientContext context;
    Deadline(&context);
    v1::SwapPluginResponse response;
    first_status = stub->SwapPlugin(&context, request, &response);
  });
  ASSERT_TRUE(backend_.AwaitSwapsEntered(1));

  // While the swap runs, reads are answered...
  CommandResult list = Run(exe::RunPluginListCommand, {});
  EXPECT_EQ(list.exit, 0) << list.err;
  // ...and a second swap is refused at once rather than queued behind it.
  auto stub = Stub();
  grpc::ClientContext context;
  Deadline(&context);
  v1::SwapPluginResponse response;
  grpc::Status second = stub->SwapPlugin(&context, request, &response);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(second.error_message(),
            "admin swaps: all 1 workers are busy and 0 requests wait already; retry when one "
            "finishes");

  backend_.HoldSwaps(false);
  first.join();
  EXPECT_TRUE(first_status.ok()) << first_status.error_message();
}

TEST_F(AdminServerTest, StopWaitsForARunningSwap) {
  StartServer();
  backend_.HoldSwaps(true);
  grpc::Status status;
  std::thread swap([&] {
    auto stub = Stub();
    grpc::ClientContext context;
    Deadline(&context);
    v1::SwapPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    request.mutable_abort_canary();
    v1::SwapPluginResponse response;
    status = stub->SwapPlugin(&context, request, &response);
  });
  ASSERT_TRUE(backend_.AwaitSwapsEntered(1));
  std::thread stopper([&] { server_->Stop(); });
  backend_.HoldSwaps(false);
  stopper.join();
  swap.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(SocketExists());
}

// The real CLI commands against the real server.
TEST_F(AdminServerTest, PluginListCommand) {
  backend_.AddPlugin("web", "webapp");
  backend_.AddPlugin("db", "postgres");
  StartServer();
  CommandResult r = Run(exe::RunPluginListCommand, {});
  ASSERT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out,
            "OPERATOR  NAME      STATE  GENERATION  VERSION  INFLIGHT  QUEUED  RESTARTS  CANARY  "
            "LAST-ERROR\n"
            "web       webapp    READY  4           1.2.0    3/64      7       0         -       "
            "-\n"
            "db        postgres  READY  4           1.2.0    3/64      7       0         -       "
            "-\n");
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
  v1::SwapPluginRequest seen = backend_.last_swap();
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
