// Serves a Plugin in-process on a Unix socket (and once on 127.0.0.1:0) and talks to it with a
// real gRPC client, as the host does: Describe, then one Reconcile stream with several requests,
// cancel notices, failures inside reconcile functions, an oversized answer and a graceful stop.
#include "sdk/cpp/plugin.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::sdk {
namespace {

using ClientStream =
    grpc::ClientReaderWriter<pluginpb::ReconcileRequest, pluginpb::ReconcileResponse>;

// A temporary directory for the socket. Unix socket paths are limited to 107 bytes, so a long
// TEST_TMPDIR falls back to /tmp.
class SocketDir {
 public:
  SocketDir() {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    std::string tmpl = base + "/sdk-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~SocketDir() {
    unlink(path().c_str());
    rmdir(dir_.c_str());
  }
  std::string path() const { return dir_ + "/plugin.sock"; }

 private:
  std::string dir_;
};

// Lets a test hold a reconcile function inside its call until released. Thread-safe.
class Gate {
 public:
  void Enter() {
    common::MutexLock lock(&mu_);
    ++entered_;
    cv_.SignalAll();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!open_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
  }
  bool WaitEntered(int n) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (entered_ < n && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    return entered_ >= n;
  }
  void Open() {
    common::MutexLock lock(&mu_);
    open_ = true;
    cv_.SignalAll();
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

Gate* gate = nullptr;  // set by the fixture

// Behaviour chosen by the ConfigMap's data.mode.
Result Echo(const Request& req) {
  const std::string mode = req.object().value("data", nlohmann::json::object()).value("mode", "");
  if (mode == "throw") throw std::runtime_error("boom");
  if (mode == "throw-int") throw 42;
  if (mode == "garbage") {
    Result r;
    r.Desire(nlohmann::json::array({1, 2}));
    return r;
  }
  if (mode == "block") gate->Enter();
  if (mode == "big") {
    Result r;
    r.Status()["pad"] = std::string(2 << 20, 'x');
    return r;
  }
  Result r;
  nlohmann::json& copy = r.Desire(NewObject("v1", "ConfigMap", req.name() + "-copy"));
  copy["data"] = {{"from", req.name()}};
  r.Status()["seen"] = req.attempt();
  r.SetCondition("Ready", true, "Copied");
  r.Event(EventType::kNormal, "Copied", "copied");
  return r;
}

pluginpb::DescribeRequest HostDescribe() {
  pluginpb::DescribeRequest req;
  req.add_protocol_versions("v2");
  req.add_protocol_versions("v1alpha1");
  for (int c = 1; c <= 7; ++c) req.add_capabilities(static_cast<pluginpb::Capability>(c));
  req.add_capabilities(static_cast<pluginpb::Capability>(99));  // From a later version: ignored.
  req.set_max_message_bytes(64 << 20);
  req.set_instance_name("echo-1");
  return req;
}

pluginpb::ReconcileRequest Call(uint64_t id, absl::string_view name, absl::string_view mode,
                                absl::string_view controller = "echo") {
  pluginpb::ReconcileRequest req;
  req.set_request_id(id);
  pluginpb::ReconcileCall* call = req.mutable_reconcile();
  call->set_controller(std::string(controller));
  call->set_namespace_("team-a");
  call->set_name(std::string(name));
  call->set_attempt(1);
  call->set_object(absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
                                name, R"(","namespace":"team-a"},"data":{"mode":")", mode,
                                R"("}})"));
  return req;
}

// The health status the plugin reports for `service`, or -1 when the call fails.
int HealthOf(const std::string& address, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  if (!stub->Check(&ctx, req, &resp).ok()) return -1;
  return resp.status();
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gate = &gate_;
    PluginOptions options;
    options.max_message_bytes = 1 << 20;
    options.workers = 4;
    plugin_ = std::make_unique<Plugin>("echo-plugin", "0.0.1", options);
    plugin_->Add(ControllerBuilder("echo")
                     .For("", "v1", "ConfigMap")
                     .Owns("", "v1", "ConfigMap", {/*delete_absent=*/true})
                     .MaxConcurrent(4)
                     .Reconcile(Echo));
    absl::StatusOr<std::unique_ptr<PluginServer>> server =
        plugin_->Start(absl::StrCat("unix://", dir_.path()));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = pluginpb::ControllerPluginService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    gate_.Open();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
    gate = nullptr;
  }
  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }
  // Reads until `n` responses arrived (or the stream ends), keyed by request_id.
  static std::map<uint64_t, pluginpb::ReconcileResponse> ReadN(ClientStream* stream, size_t n) {
    std::map<uint64_t, pluginpb::ReconcileResponse> out;
    pluginpb::ReconcileResponse resp;
    while (out.size() < n && stream->Read(&resp)) out[resp.request_id()] = resp;
    return out;
  }

  Gate gate_;
  SocketDir dir_;
  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<pluginpb::ControllerPluginService::Stub> stub_;
};

TEST_F(PluginTest, HealthIsServing) {
  EXPECT_EQ(HealthOf(server_->address(), kServiceName),
            grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(HealthOf(server_->address(), ""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(HealthOf(server_->address(), "other"), -1);  // NOT_FOUND

  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(kServiceName);
  auto watch = stub->Watch(&ctx, req);
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  ctx.TryCancel();
  while (watch->Read(&resp)) {
  }
  watch->Finish();
}

// The first status a Watch on `service` reports, or -1 when the call fails.
int FirstWatched(const std::string& address, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  auto watch = stub->Watch(&ctx, req);
  grpc::health::v1::HealthCheckResponse resp;
  const int status = watch->Read(&resp) ? resp.status() : -1;
  ctx.TryCancel();
  while (watch->Read(&resp)) {
  }
  watch->Finish();
  return status;
}

TEST_F(PluginTest, SetServingFlipsHealthForBothNames) {
  using Resp = grpc::health::v1::HealthCheckResponse;
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("");
  auto watch = stub->Watch(&ctx, req);
  Resp resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), Resp::SERVING);

  plugin_->SetServing(false);       // through the Plugin: every running server
  ASSERT_TRUE(watch->Read(&resp));  // the open Watch sees the change
  EXPECT_EQ(resp.status(), Resp::NOT_SERVING);
  EXPECT_EQ(HealthOf(server_->address(), ""), Resp::NOT_SERVING);
  EXPECT_EQ(HealthOf(server_->address(), kServiceName), Resp::NOT_SERVING);
  EXPECT_EQ(FirstWatched(server_->address(), kServiceName), Resp::NOT_SERVING);

  server_->SetServing(true);  // through the server
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), Resp::SERVING);
  EXPECT_EQ(HealthOf(server_->address(), ""), Resp::SERVING);
  EXPECT_EQ(HealthOf(server_->address(), kServiceName), Resp::SERVING);
  ctx.TryCancel();
  while (watch->Read(&resp)) {
  }
  watch->Finish();
}

TEST_F(PluginTest, DescribeAnswersTheControllers) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  pluginpb::DescribeResponse resp;
  grpc::Status status = stub_->Describe(&ctx, HostDescribe(), &resp);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(resp.protocol_version(), "v1alpha1");
  EXPECT_EQ(resp.plugin_name(), "echo-plugin");
  EXPECT_EQ(resp.plugin_version(), "0.0.1");
  EXPECT_EQ(resp.capabilities_size(), 8);  // every capability, background tasks included
  ASSERT_EQ(resp.controllers_size(), 1);
  EXPECT_EQ(resp.controllers(0).name(), "echo");
  EXPECT_TRUE(resp.controllers(0).owns(0).delete_absent());
  EXPECT_EQ(plugin_->capabilities().size(), 7u);
}

TEST_F(PluginTest, DescribeRefusesUnknownProtocolVersions) {
  pluginpb::DescribeRequest req = HostDescribe();
  req.clear_protocol_versions();
  req.add_protocol_versions("v1beta1");
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  pluginpb::DescribeResponse resp;
  grpc::Status status = stub_->Describe(&ctx, req, &resp);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("v1beta1"), std::string::npos) << status.error_message();
}

TEST_F(PluginTest, DescribeRefusesAHostWithoutANeededCapability) {
  pluginpb::DescribeRequest req = HostDescribe();
  req.clear_capabilities();
  req.add_capabilities(pluginpb::CAPABILITY_CONDITIONS);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  pluginpb::DescribeResponse resp;
  grpc::Status status = stub_->Describe(&ctx, req, &resp);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("CAPABILITY_CHILDREN"), std::string::npos)
      << status.error_message();
}

TEST_F(PluginTest, ReconcileAnswersEveryRequestAndSurvivesBadFunctions) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  std::unique_ptr<ClientStream> stream = stub_->Reconcile(&ctx);
  ASSERT_TRUE(stream->Write(Call(1, "a", "")));
  ASSERT_TRUE(stream->Write(Call(2, "b", "throw")));
  ASSERT_TRUE(stream->Write(Call(3, "c", "garbage")));
  ASSERT_TRUE(stream->Write(Call(4, "d", "", "nope")));
  ASSERT_TRUE(stream->Write(Call(5, "e", "throw-int")));
  pluginpb::ReconcileRequest bad_json = Call(6, "f", "");
  bad_json.mutable_reconcile()->set_object("{oops");
  ASSERT_TRUE(stream->Write(bad_json));
  ASSERT_TRUE(stream->Write(Call(7, "g", "big")));
  ASSERT_TRUE(stream->WritesDone());
  std::map<uint64_t, pluginpb::ReconcileResponse> got = ReadN(stream.get(), 7);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(got.size(), 7u);

  const pluginpb::ReconcileResponse& ok = got[1];
  EXPECT_FALSE(ok.has_error()) << ok.error().message();
  ASSERT_EQ(ok.desired_objects_size(), 1);
  nlohmann::json copy = nlohmann::json::parse(ok.desired_objects(0));
  EXPECT_EQ(copy["metadata"]["name"], "a-copy");
  EXPECT_EQ(copy["metadata"]["namespace"], "team-a");
  EXPECT_EQ(nlohmann::json::parse(ok.status())["seen"], 1);
  EXPECT_EQ(ok.conditions(0).status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(ok.events(0).reason(), "Copied");

  EXPECT_EQ(got[2].error().kind(), pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_NE(got[2].error().message().find("boom"), std::string::npos);
  EXPECT_EQ(got[3].error().kind(), pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_NE(got[3].error().message().find("invalid reconcile result"), std::string::npos);
  EXPECT_EQ(got[4].error().kind(), pluginpb::ERROR_KIND_TERMINAL);
  EXPECT_NE(got[4].error().message().find("no controller \"nope\""), std::string::npos);
  EXPECT_EQ(got[5].error().kind(), pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_EQ(got[6].error().kind(), pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_NE(got[6].error().message().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(got[7].error().kind(), pluginpb::ERROR_KIND_TERMINAL);
  EXPECT_EQ(got[7].error().reason(), "ResponseTooLarge");
  EXPECT_NE(got[7].error().message().find("exceeds the message limit of 1048576"),
            std::string::npos);
}

TEST_F(PluginTest, ResponsesComeAsTheyFinishAndCancelledOnesAreNotSent) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  std::unique_ptr<ClientStream> stream = stub_->Reconcile(&ctx);
  ASSERT_TRUE(stream->Write(Call(10, "slow", "block")));
  ASSERT_TRUE(gate_.WaitEntered(1));
  pluginpb::ReconcileRequest cancel;
  cancel.set_request_id(10);
  cancel.mutable_cancel()->set_reason("deadline exceeded");
  ASSERT_TRUE(stream->Write(cancel));
  ASSERT_TRUE(stream->Write(Call(11, "fast", "")));
  // The later request is answered while the earlier one is still running.
  std::map<uint64_t, pluginpb::ReconcileResponse> got = ReadN(stream.get(), 1);
  ASSERT_EQ(got.count(11), 1u);
  gate_.Open();
  ASSERT_TRUE(stream->WritesDone());
  pluginpb::ReconcileResponse extra;
  EXPECT_FALSE(stream->Read(&extra)) << "cancelled request answered: " << extra.request_id();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(PluginTest, GracefulShutdownFinishesInFlightAndRefusesNewWork) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  std::unique_ptr<ClientStream> stream = stub_->Reconcile(&ctx);
  ASSERT_TRUE(stream->Write(Call(20, "slow", "block")));
  ASSERT_TRUE(gate_.WaitEntered(1));
  EXPECT_EQ(server_->InFlight(), 1);
  std::thread stopper([&] { server_->Shutdown(absl::Seconds(30)); });
  // Requests sent once draining has begun are refused at once with a retryable error.
  bool refused = false;
  for (uint64_t id = 100; id < 2000 && !refused; ++id) {
    ASSERT_TRUE(stream->Write(Call(id, "n", "")));
    pluginpb::ReconcileResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    ASSERT_EQ(resp.request_id(), id);
    refused = resp.error().message() == "plugin shutting down";
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(HealthOf(server_->address(), kServiceName),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  plugin_->SetServing(true);  // ignored while draining
  EXPECT_EQ(HealthOf(server_->address(), ""), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  gate_.Open();  // The in-flight request finishes and is still answered.
  pluginpb::ReconcileResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), 20u);
  EXPECT_FALSE(resp.has_error());
  stopper.join();
  EXPECT_EQ(server_->InFlight(), 0);
  EXPECT_FALSE(stream->Read(&resp));  // The server ended the stream.
  stream->Finish();
}

TEST(PluginStartTest, ListensOnLoopbackPortZero) {
  Plugin plugin("p", "1");
  plugin.Add(ControllerBuilder("c").For("", "v1", "ConfigMap").Reconcile([](const Request&) {
    return Result();
  }));
  absl::StatusOr<std::unique_ptr<PluginServer>> server = plugin.Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->address(), "127.0.0.1:0");
  auto stub = pluginpb::ControllerPluginService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pluginpb::DescribeResponse resp;
  ASSERT_TRUE(stub->Describe(&ctx, HostDescribe(), &resp).ok());
  EXPECT_EQ(resp.controllers(0).name(), "c");
  (*server)->Shutdown(absl::Seconds(1));
}

TEST(PluginStartTest, RefusesBadConfiguration) {
  Plugin empty("p", "1");
  EXPECT_EQ(empty.Start("127.0.0.1:0").status().code(), absl::StatusCode::kFailedPrecondition);

  Plugin broken("p", "1");
  broken.Add(ControllerBuilder("Bad Name").For("", "v1", "ConfigMap").Reconcile([](const Request&) {
    return Result();
  }));
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);

  Plugin twice("p", "1");
  auto fn = [](const Request&) { return Result(); };
  twice.Add(ControllerBuilder("c").For("", "v1", "A").Reconcile(fn));
  twice.Add(ControllerBuilder("c").For("", "v1", "B").Reconcile(fn));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.Start("unix:relative.sock").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseListenAddressTest, Forms) {
  EXPECT_EQ(*ParseListenAddress("unix:///tmp/a.sock"), "unix:/tmp/a.sock");
  EXPECT_EQ(*ParseListenAddress("unix:/tmp/a.sock"), "unix:/tmp/a.sock");
  EXPECT_EQ(*ParseListenAddress("127.0.0.1:0"), "127.0.0.1:0");
  EXPECT_EQ(*ParseListenAddress("[::1]:9000"), "[::1]:9000");
  for (const char* bad :
       {"", "unix:", "unix:rel.sock", "dns:///x:1", "localhost", ":80", "host:99999", "host:abc"}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseListenAddress("unix://" + std::string(200, 'a')).ok());
}

}  // namespace
}  // namespace ctrlhost::sdk
