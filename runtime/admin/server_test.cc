// The real AdminServer on a Unix socket with a fake backend: every RPC through a gRPC stub,
// validation, status mapping, the socket file's life, the swap cap and Stop().
#include "runtime/admin/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "gtest/gtest.h"
#include "runtime/admin/testing/admin_server_fixture.h"
#include "runtime/common/mutex.h"
#include "runtime/exe/cmd_dump.h"
#include "runtime/exe/cmd_plugin.h"

namespace ctrlhost::admin {
namespace {

using testing::AdminServerTest;
using testing::CommandResult;
using testing::FakeBackend;

TEST_F(AdminServerTest, EveryRpcRoundTrips) {
  backend_.AddPlugin("web", "webapp");
  StartServer();
  EXPECT_EQ(server_->target(), "unix://" + socket_);
  auto stub = Stub();
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::ListOperatorsResponse response;
    ASSERT_TRUE(stub->ListOperators(&context, {}, &response).ok());
    ASSERT_EQ(response.operators_size(), 1);
    EXPECT_EQ(response.operators(0).state(), adminpb::OPERATOR_STATE_READY);
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::ListPluginsResponse response;
    ASSERT_TRUE(stub->ListPlugins(&context, {}, &response).ok());
    ASSERT_EQ(response.plugins_size(), 1);
    EXPECT_EQ(response.plugins(0).reported_version(), "1.2.0");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::GetPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    adminpb::GetPluginResponse response;
    ASSERT_TRUE(stub->GetPlugin(&context, request, &response).ok());
    EXPECT_EQ(response.plugin().swap_generation(), 4u);
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::ListControllersRequest request;
    request.set_operator_("db");
    adminpb::ListControllersResponse response;
    ASSERT_TRUE(stub->ListControllers(&context, request, &response).ok());
    ASSERT_EQ(response.controllers_size(), 1);
    EXPECT_EQ(response.controllers(0).operator_(), "db");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::GetControllerRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    request.set_controller("pages");
    adminpb::GetControllerResponse response;
    ASSERT_TRUE(stub->GetController(&context, request, &response).ok());
    EXPECT_EQ(response.controller().name(), "pages");
    EXPECT_EQ(response.controller().state(), adminpb::CONTROLLER_STATE_READY);
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::SwapPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    request.mutable_replace()->mutable_endpoint()->set_address("unix:///run/v2.sock");
    adminpb::SwapPluginResponse response;
    ASSERT_TRUE(stub->SwapPlugin(&context, request, &response).ok());
    EXPECT_EQ(response.succeeded().swap_generation(), 5u);
    EXPECT_EQ(response.succeeded().draining_generation(), 4u);
    EXPECT_EQ(backend_.last_swap().replace().endpoint().address(), "unix:///run/v2.sock");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::ReloadConfigRequest request;
    request.set_dry_run(true);
    adminpb::ReloadConfigResponse response;
    ASSERT_TRUE(stub->ReloadConfig(&context, request, &response).ok());
    EXPECT_TRUE(response.dry_run());
    ASSERT_EQ(response.changes_size(), 1);
    EXPECT_EQ(response.changes(0).swapped_plugins(0), "webapp");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::DumpStateResponse response;
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
    adminpb::GetPluginRequest request;
    request.set_operator_("web");
    adminpb::GetPluginResponse response;
    grpc::Status status = stub->GetPlugin(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "GetPluginRequest.plugin is required");
  }
  {
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::GetControllerRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    adminpb::GetControllerResponse response;
    grpc::Status status = stub->GetController(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), "GetControllerRequest.controller is required");
  }
  struct Case {
    adminpb::SwapPluginRequest request;
    std::string message;
  };
  std::vector<Case> cases(4);
  for (Case& c : cases) {
    c.request.set_operator_("web");
    c.request.set_plugin("webapp");
  }
  cases[0].message =
      "SwapPluginRequest.action is required: one of replace, start_canary, promote_canary, "
      "abort_canary, start_shadow, stop_shadow or promote_shadow";
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
    adminpb::SwapPluginResponse response;
    grpc::Status status = stub->SwapPlugin(&context, c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.message;
    EXPECT_EQ(status.error_message(), c.message);
  }
  EXPECT_EQ(backend_.calls(), 0);
}

TEST_F(AdminServerTest, OversizedRequestIsRefused) {
  AdminServerOptions options = Options();
  options.max_request_bytes = 64 * 1024;
  StartServer(options);
  auto stub = Stub();
  grpc::ClientContext context;
  Deadline(&context);
  adminpb::SwapPluginRequest request;
  request.set_operator_("web");
  request.set_plugin("webapp");
  request.mutable_replace()->mutable_exec()->set_command("/opt/v2");
  request.mutable_replace()->mutable_exec()->add_args(std::string(100 * 1024, 'x'));
  adminpb::SwapPluginResponse response;
  grpc::Status status = stub->SwapPlugin(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
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
    adminpb::GetPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    adminpb::GetPluginResponse response;
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

// Issue 13 item 9: an exec'd plugin under the host's own uid can connect() to the socket
// (Landlock does not mediate that) but cannot read the token file beside it.
TEST_F(AdminServerTest, RequiredTokenRefusesOtherClientsAndTheCliReadsIt) {
  AdminServerOptions options = Options();
  options.require_token = true;
  StartServer(std::move(options));
  const std::string token_path = socket_ + ".token";
  EXPECT_EQ(server_->token_path(), token_path);
  struct stat info;
  ASSERT_EQ(lstat(token_path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(info.st_size, 64);

  auto stub = Stub();
  adminpb::ListPluginsRequest request;
  adminpb::ListPluginsResponse response;
  grpc::ClientContext none;
  Deadline(&none);
  grpc::Status status = stub->ListPlugins(&none, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  grpc::ClientContext wrong;
  Deadline(&wrong);
  wrong.AddMetadata("authorization", "Bearer " + std::string(64, '0'));
  EXPECT_EQ(stub->ListPlugins(&wrong, request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  CommandResult r = Run(exe::RunDumpCommand, {});
  EXPECT_EQ(r.exit, 0) << r.err;
  server_->Stop();
  EXPECT_NE(lstat(token_path.c_str(), &info), 0);  // removed with the socket
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

  adminpb::SwapPluginRequest request;
  request.set_operator_("web");
  request.set_plugin("webapp");
  request.mutable_promote_canary();
  grpc::Status first_status;
  std::thread first([&] {
    auto stub = Stub();
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::SwapPluginResponse response;
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
  adminpb::SwapPluginResponse response;
  grpc::Status second = stub->SwapPlugin(&context, request, &response);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(second.error_message(),
            "admin swaps: all 1 workers are busy and 0 requests wait already; retry when one "
            "finishes");

  backend_.HoldSwaps(false);
  first.join();
  EXPECT_TRUE(first_status.ok()) << first_status.error_message();
}

TEST_F(AdminServerTest, QueriesQueueBoundedAndStopAnswersQueuedOnesUnavailable) {
  AdminServerOptions options = Options();
  options.query_threads = 1;
  options.max_queued_queries = 1;
  StartServer(options);
  backend_.HoldOperatorLists(true);
  common::Mutex mu;
  common::CondVar done;
  std::vector<grpc::Status> results(3);
  int finished = 0;
  auto list = [&](int i) {
    auto stub = Stub();
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::ListOperatorsResponse response;
    grpc::Status status = stub->ListOperators(&context, {}, &response);
    common::MutexLock lock(&mu);
    results[i] = status;
    ++finished;
    done.SignalAll();
  };
  // The first occupies the only worker.
  std::thread running(list, 0);
  ASSERT_TRUE(backend_.AwaitOperatorListsEntered(1));
  // Of the next two, one takes the only queue slot and the other is refused at once.
  std::thread a(list, 1), b(list, 2);
  {
    common::MutexLock lock(&mu);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (finished < 1 && !done.WaitWithDeadline(&mu, deadline)) {
    }
    ASSERT_EQ(finished, 1);
  }
  // Stop answers the queued one UNAVAILABLE and waits for the running one.
  std::thread stopper([&] { server_->Stop(); });
  {
    common::MutexLock lock(&mu);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (finished < 2 && !done.WaitWithDeadline(&mu, deadline)) {
    }
    ASSERT_EQ(finished, 2);
  }
  backend_.HoldOperatorLists(false);
  running.join();
  a.join();
  b.join();
  stopper.join();
  EXPECT_TRUE(results[0].ok()) << results[0].error_message();
  std::vector<grpc::StatusCode> others = {results[1].error_code(), results[2].error_code()};
  std::sort(others.begin(), others.end());
  EXPECT_EQ(others, (std::vector<grpc::StatusCode>{grpc::StatusCode::RESOURCE_EXHAUSTED,
                                                   grpc::StatusCode::UNAVAILABLE}));
  for (int i : {1, 2}) {
    if (results[i].error_code() == grpc::StatusCode::UNAVAILABLE) {
      EXPECT_EQ(results[i].error_message(), "the admin server is stopping");
    }
  }
  EXPECT_EQ(backend_.operator_lists_entered(), 1);
}

TEST_F(AdminServerTest, StopWaitsForARunningSwap) {
  StartServer();
  backend_.HoldSwaps(true);
  grpc::Status status;
  std::thread swap([&] {
    auto stub = Stub();
    grpc::ClientContext context;
    Deadline(&context);
    adminpb::SwapPluginRequest request;
    request.set_operator_("web");
    request.set_plugin("webapp");
    request.mutable_abort_canary();
    adminpb::SwapPluginResponse response;
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

}  // namespace
}  // namespace ctrlhost::admin
