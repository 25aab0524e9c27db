// Proves that the generated C++ code for ctrlhost.admin.v1alpha1 works over real gRPC, including
// the types it imports from ctrlhost.plugin.v1alpha1: an AdminService on a Unix socket in a
// temporary directory, called by a client with bounded deadlines.

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "ctrlhost/admin/v1alpha1/admin.grpc.pb.h"
#include "ctrlhost/admin/v1alpha1/admin.pb.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ctrlhost::admin::v1alpha1 {
namespace {

// A temporary directory for the socket (see plugin_roundtrip_test.cc for the length limit).
class SocketDir {
 public:
  SocketDir() {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    std::string tmpl = base + "/admin-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~SocketDir() {
    if (dir_.empty()) return;
    unlink(socket_path().c_str());
    rmdir(dir_.c_str());
  }
  bool ok() const { return !dir_.empty(); }
  std::string socket_path() const { return dir_ + "/admin.sock"; }

 private:
  std::string dir_;
};

// Answers from fixed data. Stateless, so thread-safe.
class FakeAdmin final : public AdminService::Service {
 public:
  grpc::Status GetPlugin(grpc::ServerContext*, const GetPluginRequest* request,
                         GetPluginResponse* response) override {
    if (request->operator_() != "web" || request->plugin() != "webapp") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "plugin " + request->operator_() + "/" + request->plugin());
    }
    Plugin* p = response->mutable_plugin();
    p->set_operator_("web");
    p->set_name("webapp");
    p->set_state(PLUGIN_STATE_DRAINING);
    ExecSource* exec = p->mutable_source()->mutable_exec();
    exec->set_command("/opt/web/bin/plugin");
    exec->add_args("--verbose");
    (*exec->mutable_env())["TOKEN"] = "<redacted>";
    p->set_swap_generation(4);
    p->mutable_canary()->set_swap_generation(5);
    p->mutable_canary()->set_percent(10);
    p->add_capabilities(pluginpb::CAPABILITY_SERVER_SIDE_APPLY);
    p->add_controllers("webapp");
    p->mutable_work()->set_in_flight(3);
    p->mutable_work()->set_max_in_flight(64);
    p->mutable_work()->mutable_oldest_queued_age()->set_seconds(2);
    p->mutable_last_error()->set_message("stream broken");
    p->mutable_last_error()->mutable_time()->set_seconds(1700000000);
    return grpc::Status::OK;
  }

  grpc::Status SwapPlugin(grpc::ServerContext*, const SwapPluginRequest* request,
                          SwapPluginResponse* response) override {
    if (request->action_case() == SwapPluginRequest::ACTION_NOT_SET) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "action is required");
    }
    SwapFailed* failed = response->mutable_failed();
    failed->set_reason(SWAP_FAILURE_REASON_EXITED);
    failed->set_message("exited with status 2 before ready; canary " +
                        std::to_string(request->start_canary().percent()) + "%");
    failed->set_attempted_generation(request->expected_generation() + 1);
    failed->set_serving_generation(request->expected_generation());
    failed->add_output_tail("panic: boom");
    return grpc::Status::OK;
  }
};

class AdminRoundTripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    const std::string address = "unix:" + dir_.socket_path();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&admin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot listen on " << address;
    stub_ = AdminService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }
  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }

  SocketDir dir_;
  FakeAdmin admin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<AdminService::Stub> stub_;
};

TEST_F(AdminRoundTripTest, GetPluginCarriesStateSourceAndFigures) {
  GetPluginRequest req;
  req.set_operator_("web");
  req.set_plugin("webapp");
  GetPluginResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status status = stub_->GetPlugin(&ctx, req, &resp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const Plugin& p = resp.plugin();
  EXPECT_EQ(p.state(), PLUGIN_STATE_DRAINING);
  ASSERT_EQ(p.source().kind_case(), PluginSource::kExec);
  EXPECT_EQ(p.source().exec().command(), "/opt/web/bin/plugin");
  ASSERT_EQ(p.source().exec().args_size(), 1);
  EXPECT_EQ(p.source().exec().env().at("TOKEN"), "<redacted>");
  EXPECT_EQ(p.swap_generation(), 4u);
  EXPECT_EQ(p.canary().percent(), 10u);
  EXPECT_EQ(p.canary().state(), PLUGIN_STATE_UNSPECIFIED);  // Unset enum reads as 0.
  ASSERT_EQ(p.capabilities_size(), 1);
  EXPECT_EQ(p.capabilities(0), pluginpb::CAPABILITY_SERVER_SIDE_APPLY);
  EXPECT_EQ(p.work().in_flight(), 3u);
  EXPECT_EQ(p.work().oldest_queued_age().seconds(), 2);
  EXPECT_EQ(p.last_error().time().seconds(), 1700000000);
}

TEST_F(AdminRoundTripTest, GetPluginUnknownIsNotFound) {
  GetPluginRequest req;
  req.set_operator_("web");
  req.set_plugin("nope");
  GetPluginResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  EXPECT_EQ(stub_->GetPlugin(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(AdminRoundTripTest, SwapFailureIsAResultNotAnRpcError) {
  SwapPluginRequest req;
  req.set_operator_("web");
  req.set_plugin("webapp");
  req.set_expected_generation(4);
  req.mutable_ready_timeout()->set_seconds(30);
  StartCanary* canary = req.mutable_start_canary();
  canary->set_percent(25);
  canary->mutable_source()->mutable_endpoint()->set_address("dns:///web-plugin:7070");
  canary->mutable_source()->mutable_endpoint()->mutable_tls()->set_server_name("web-plugin");
  SwapPluginResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status status = stub_->SwapPlugin(&ctx, req, &resp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(resp.result_case(), SwapPluginResponse::kFailed);
  EXPECT_EQ(resp.failed().reason(), SWAP_FAILURE_REASON_EXITED);
  EXPECT_EQ(resp.failed().message(), "exited with status 2 before ready; canary 25%");
  EXPECT_EQ(resp.failed().attempted_generation(), 5u);
  EXPECT_EQ(resp.failed().serving_generation(), 4u);
  ASSERT_EQ(resp.failed().output_tail_size(), 1);

  SwapPluginRequest empty;
  grpc::ClientContext ctx2;
  SetDeadline(&ctx2);
  EXPECT_EQ(stub_->SwapPlugin(&ctx2, empty, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace ctrlhost::admin::v1alpha1
