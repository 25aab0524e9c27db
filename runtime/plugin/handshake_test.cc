// Handshake against the in-process test plugin over a real Unix socket, and the
// DescribeResponse checks on their own.
#include "runtime/plugin/handshake.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::plugin {
namespace {

using ::testing::HasSubstr;
using testing::TestPlugin;
using testing::TestPluginOptions;

class HandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    dir_ = base + "/hs-XXXXXX";
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    address_ = absl::StrCat("unix://", dir_, "/p.sock");
  }
  void TearDown() override {
    plugin_.reset();
    unlink((dir_ + "/p.sock").c_str());
    rmdir(dir_.c_str());
  }

  absl::StatusOr<HandshakeResult> Run(TestPluginOptions plugin_options,
                                      absl::Duration deadline = absl::Seconds(20)) {
    auto plugin = TestPlugin::Start(address_, plugin_options);
    if (!plugin.ok()) return plugin.status();
    plugin_ = std::move(*plugin);
    HandshakeOptions options;
    options.instance_name = "test-1";
    options.deadline = deadline;
    return Handshake(MakeChannel(address_, kDefaultMaxMessageBytes), options);
  }

  std::string dir_;
  std::string address_;
  std::unique_ptr<TestPlugin> plugin_;
};

TEST_F(HandshakeTest, Succeeds) {
  auto result = Run({});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->describe.controllers_size(), 2);
  EXPECT_EQ(result->describe.controllers(0).name(), "echo");
  EXPECT_TRUE(result->cancellation);
  EXPECT_EQ(result->capabilities,
            (std::vector<pluginpb::Capability>{pluginpb::CAPABILITY_CANCELLATION,
                                               pluginpb::CAPABILITY_CHILDREN}));
  EXPECT_TRUE(result->session_options.cancellation);
  EXPECT_EQ(result->session_options.instance_name, "test-1");
}

// Regression: the handshake said host_version "0.1.0" while `ctrlhost version` said
// "0.1.0-dev"; both now come from common::kCtrlhostVersion.
TEST_F(HandshakeTest, SendsTheCtrlhostVersion) {
  auto result = Run({});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(plugin_->last_describe().host_version(), "0.1.0-dev");
  EXPECT_EQ(plugin_->last_describe().instance_name(), "test-1");
}

TEST_F(HandshakeTest, WithoutCancellationCapability) {
  TestPluginOptions options;
  options.cancellation = false;
  auto result = Run(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->cancellation);
}

TEST_F(HandshakeTest, UnsupportedProtocolVersionIsFailedPrecondition) {
  TestPluginOptions options;
  options.describe = "bad-version";
  auto result = Run(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("\"v9\""));
}

TEST_F(HandshakeTest, MalformedDescribeIsInvalidArgument) {
  struct Case {
    const char* mode;
    const char* message;
  };
  for (const Case& c :
       {Case{"no-controllers", "at least one"}, Case{"duplicate", "duplicate name \"echo\""},
        Case{"no-primary", "controllers[0] (\"echo\").primary: missing"},
        Case{"needs-capability", "CAPABILITY_RELATED_OBJECTS"}}) {
    SCOPED_TRACE(c.mode);
    TestPluginOptions options;
    options.describe = c.mode;
    auto result = Run(options);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(result.status().message(), HasSubstr(c.message));
    plugin_.reset();
    unlink((dir_ + "/p.sock").c_str());
  }
}

TEST_F(HandshakeTest, NotServingForAMomentAtStartIsWaitedFor) {
  TestPluginOptions options;
  options.health = "starting";  // NOT_SERVING to the first 3 checks
  const absl::Time start = absl::Now();
  auto result = Run(options);
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(result.ok()) << result.status();
  // It succeeded only after the plugin said SERVING: every NOT_SERVING answer was seen, then
  // (at least) one more check, each retry 100 ms after the last (3 waits; a margin for the
  // wall clock being adjusted meanwhile).
  EXPECT_EQ(plugin_->health_not_serving_answers(), 3);
  EXPECT_GE(plugin_->health_checks(), 4);
  EXPECT_GE(took, absl::Milliseconds(250));
}

TEST_F(HandshakeTest, NotServingIsUnavailableSoItIsRetried) {
  TestPluginOptions options;
  options.health = "not-serving";
  auto result = Run(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("NOT_SERVING"));
}

TEST_F(HandshakeTest, MissingHealthServiceIsFailedPrecondition) {
  TestPluginOptions options;
  options.health = "none";
  auto result = Run(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("grpc.health.v1"));
}

TEST_F(HandshakeTest, DescribeErrorKeepsItsCode) {
  TestPluginOptions options;
  options.describe = "unavailable";
  auto result = Run(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.status().message(), HasSubstr("not today"));
}

// A plugin of another protocol package (docs/protocol.md §10): a real gRPC server that serves
// only grpc.health.v1 and no ctrlhost.plugin.v1alpha1 service, so gRPC itself answers Describe
// UNIMPLEMENTED, as it would for a plugin built for ctrlhost.plugin.v1beta1. Permanent, named,
// and not a crash.
TEST_F(HandshakeTest, APluginOfAnotherProtocolPackageIsFailedPrecondition) {
  grpc::health::v1::Health::Service health;  // registered only: a server needs one service
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> other = builder.BuildAndStart();
  ASSERT_NE(other, nullptr);
  HandshakeOptions options;
  options.instance_name = "old-1";
  options.deadline = absl::Seconds(20);
  auto result = Handshake(MakeChannel(address_, kDefaultMaxMessageBytes), options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("plugin old-1 does not serve "
                        "ctrlhost.plugin.v1alpha1.ControllerPluginService"));
  EXPECT_THAT(result.status().message(), HasSubstr("tried ctrlhost.plugin.v1alpha1"));
  other->Shutdown();
}

TEST_F(HandshakeTest, NobodyListeningIsDeadlineExceeded) {
  HandshakeOptions options;
  options.deadline = absl::Milliseconds(300);
  auto result = Handshake(MakeChannel(address_, kDefaultMaxMessageBytes), options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(HandshakeTest, CancellerAbortsAWaitingHandshake) {
  HandshakeCanceller canceller;
  HandshakeOptions options;
  options.deadline = absl::Seconds(60);  // nobody listens: it would wait this long
  options.canceller = &canceller;
  std::thread cancel([&] {
    usleep(100 * 1000);  // let the call start (not needed for correctness: see below)
    canceller.Cancel();
  });
  auto result = Handshake(MakeChannel(address_, kDefaultMaxMessageBytes), options);
  cancel.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  // Cancelled before the call starts: returns at once too.
  EXPECT_EQ(Handshake(MakeChannel(address_, kDefaultMaxMessageBytes), options).status().code(),
            absl::StatusCode::kCancelled);
}

pluginpb::DescribeResponse ValidResponse() {
  pluginpb::DescribeResponse response;
  response.set_protocol_version("v1alpha1");
  pluginpb::ControllerSpec* c = response.add_controllers();
  c->set_name("web");
  c->mutable_primary()->set_version("v1");
  c->mutable_primary()->set_kind("ConfigMap");
  return response;
}

pluginpb::DescribeRequest OfferedRequest() {
  pluginpb::DescribeRequest request;
  request.add_protocol_versions("v1alpha1");
  return request;
}

TEST(ValidateDescribeResponseTest, AcceptsMinimalResponse) {
  EXPECT_TRUE(ValidateDescribeResponse(OfferedRequest(), ValidResponse(), {}).ok());
}

TEST(ValidateDescribeResponseTest, RejectsBadFields) {
  {
    pluginpb::DescribeResponse r = ValidResponse();
    r.mutable_controllers(0)->set_name("Web_App");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, {}).message(), HasSubstr("RFC 1123"));
  }
  {
    pluginpb::DescribeResponse r = ValidResponse();
    r.mutable_controllers(0)->set_name("");
    EXPECT_EQ(ValidateDescribeResponse(OfferedRequest(), r, {}).code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    pluginpb::DescribeResponse r = ValidResponse();
    r.mutable_controllers(0)->mutable_primary()->set_kind("");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, {}).message(),
                HasSubstr("primary: version and kind are required"));
  }
  {
    pluginpb::DescribeResponse r = ValidResponse();
    pluginpb::WatchedKind* w = r.mutable_controllers(0)->add_watches();
    w->mutable_kind()->set_version("v1");
    w->mutable_kind()->set_kind("Secret");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, {}).message(),
                HasSubstr("watches[0].mapping: missing"));
  }
  {
    pluginpb::DescribeResponse r = ValidResponse();
    r.mutable_controllers(0)->set_finalizer("cleanup");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, {}).message(),
                HasSubstr("finalizer"));
  }
  {
    pluginpb::DescribeResponse r = ValidResponse();
    r.mutable_controllers(0)->add_schedules()->set_cron("0 3 * * *");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, {}).message(),
                HasSubstr("CAPABILITY_SCHEDULES"));
    EXPECT_TRUE(
        ValidateDescribeResponse(OfferedRequest(), r, {pluginpb::CAPABILITY_SCHEDULES}).ok());
  }
  {
    // Background tasks: only with their capability, names RFC 1123 labels, unique.
    pluginpb::DescribeResponse r = ValidResponse();
    r.mutable_controllers(0)->add_background_tasks()->set_name("poller");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, {}).message(),
                HasSubstr("background_tasks requires CAPABILITY_BACKGROUND_TASKS"));
    const std::vector<pluginpb::Capability> tasks = {pluginpb::CAPABILITY_BACKGROUND_TASKS};
    EXPECT_TRUE(ValidateDescribeResponse(OfferedRequest(), r, tasks).ok());
    r.mutable_controllers(0)->add_background_tasks()->set_name("poller");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, tasks).message(),
                HasSubstr("background_tasks[1].name: \"poller\" is declared twice"));
    r.mutable_controllers(0)->mutable_background_tasks(1)->set_name("Bad_Name");
    EXPECT_THAT(ValidateDescribeResponse(OfferedRequest(), r, tasks).message(),
                HasSubstr("background_tasks[1].name: \"Bad_Name\" must be a lowercase RFC 1123"));
  }
  {
    pluginpb::DescribeResponse r = ValidResponse();
    r.set_protocol_version("");
    EXPECT_EQ(ValidateDescribeResponse(OfferedRequest(), r, {}).code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// Regression: a plugin that declared 10,000 controllers was accepted, and the host started a
// worker thread per controller until it aborted; 200,000 strip_fields cost 105 MB.
TEST(ValidateDescribeResponseTest, RefusesWhatGoesPastTheLimitsNamingThem) {
  pluginpb::DescribeResponse many = ValidResponse();
  for (int i = 1; i < 10000; ++i) {
    pluginpb::ControllerSpec* c = many.add_controllers();
    *c = many.controllers(0);
    c->set_name(absl::StrCat("web-", i));
  }
  absl::Status s = ValidateDescribeResponse(OfferedRequest(), many, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("10000 controllers; the host's limit is 100 per plugin"));
  EXPECT_THAT(s.message(), HasSubstr("spec.plugins[].maxControllers"));
  DescribeLimits raised;
  raised.max_controllers = 10000;
  EXPECT_TRUE(ValidateDescribeResponse(OfferedRequest(), many, {}, raised).ok());

  pluginpb::DescribeResponse fields = ValidResponse();
  for (int i = 0; i < 257; ++i) {
    fields.mutable_controllers(0)->mutable_request_contents()->add_strip_fields(
        absl::StrCat("metadata.annotations.a", i));
  }
  s = ValidateDescribeResponse(OfferedRequest(), fields, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("request_contents.strip_fields: 257 entries; the host's "
                                     "limit is 256"));

  pluginpb::DescribeResponse workers = ValidResponse();
  workers.mutable_controllers(0)->set_max_concurrent_reconciles(100000);
  s = ValidateDescribeResponse(OfferedRequest(), workers, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("max_concurrent_reconciles: 100000"));

  pluginpb::DescribeResponse big = ValidResponse();
  big.mutable_controllers(0)->set_finalizer(std::string(2 << 20, 'x') + "/f");
  s = ValidateDescribeResponse(OfferedRequest(), big, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("bytes; the host's limit is 1048576 bytes"));
}

// The host-wide limit: the admit hook refuses the plugin, and the handshake says so.
TEST_F(HandshakeTest, AdmitRefusalRefusesThePlugin) {
  auto plugin = TestPlugin::Start(address_, {});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  plugin_ = std::move(*plugin);
  HandshakeOptions options;
  options.instance_name = "web-1";
  options.admit = [](const pluginpb::DescribeResponse& d) {
    return absl::FailedPreconditionError(
        absl::StrCat(d.controllers_size(), " controllers; the host's limit is 0"));
  };
  auto result = Handshake(MakeChannel(address_, kDefaultMaxMessageBytes), options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("plugin web-1: 2 controllers; the host's"));
}

}  // namespace
}  // namespace ctrlhost::plugin
