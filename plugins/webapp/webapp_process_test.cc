// The webapp binary as the host runs it: started as a subprocess with CTRLHOST_PLUGIN_ADDRESS on
// a Unix socket, checked for health, asked to Describe and Reconcile over real gRPC, then stopped
// with SIGTERM, after which it must exit 0 (bounded wait). Also: a missing address is a clear
// error with exit code 2.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"

extern char** environ;

namespace ctrlhost::webapp {
namespace {

constexpr char kBinary[] = "plugins/webapp/webapp";

std::string TempDir() {
  std::string base = "/tmp";
  if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
    base = t;
  }
  std::string tmpl = base + "/wa-XXXXXX";
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

// A child process; waits for its exit on a thread so the test can wait with a deadline.
class Child {
 public:
  // Starts kBinary with the current environment plus `env`, stderr to `stderr_path`.
  bool Start(const std::vector<std::string>& env, const std::string& stderr_path) {
    std::vector<std::string> storage;
    auto overridden = [&](const std::string& entry) {
      if (entry.rfind("CTRLHOST_PLUGIN_ADDRESS=", 0) == 0) return true;
      for (const std::string& e : env) {
        if (entry.rfind(e.substr(0, e.find('=') + 1), 0) == 0) return true;
      }
      return false;
    };
    for (char** e = environ; *e != nullptr; ++e) {
      if (!overridden(*e)) storage.push_back(*e);
    }
    for (const std::string& e : env) storage.push_back(e);
    std::vector<char*> envp;
    for (std::string& e : storage) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    std::string binary = kBinary;
    char* argv[] = {binary.data(), nullptr};
    const int rc = posix_spawn(&pid_, kBinary, &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return false;
    waiter_ = std::thread([this] {
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      common::MutexLock lock(&mu_);
      exited_ = true;
      status_ = status;
      cv_.SignalAll();
    });
    return true;
  }
  // The wait status, or -1 if it did not exit within `timeout`.
  int WaitExit(absl::Duration timeout) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + timeout;
    while (!exited_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    return exited_ ? status_ : -1;
  }
  void Signal(int sig) { kill(pid_, sig); }
  ~Child() {
    if (waiter_.joinable()) {
      if (WaitExit(absl::ZeroDuration()) == -1) kill(pid_, SIGKILL);
      waiter_.join();
    }
  }

 private:
  pid_t pid_ = -1;
  std::thread waiter_;
  common::Mutex mu_;
  common::CondVar cv_;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
  int status_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

TEST(WebAppProcessTest, ServesUntilSigtermThenExitsZero) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  const std::string socket = dir + "/webapp-1.sock";
  const std::string records = dir + "/records";
  // Under --config=tsan the plugin binary is instrumented but, unlike this test, not linked
  // with //proto/testing:tsan_suppressions: hand it the same list (races inside Debian's
  // uninstrumented gRPC and Abseil) through TSAN_OPTIONS. Ignored by other builds.
  const std::string suppressions = dir + "/tsan.supp";
  {
    std::ofstream out(suppressions);
    out << "called_from_lib:libgrpc.so\ncalled_from_lib:libgrpc++.so\n"
        << "called_from_lib:libgpr.so\nrace:libabsl_*.so*\n";
  }
  Child child;
  ASSERT_TRUE(
      child.Start({"CTRLHOST_PLUGIN_ADDRESS=unix://" + socket, "WEBAPP_RECORD_DIR=" + records,
                   "TSAN_OPTIONS=halt_on_error=1 suppressions=" + suppressions},
                  dir + "/stderr"));
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());

  // Health: wait_for_ready waits (up to the deadline) for the socket to be served.
  {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    ctx.set_wait_for_ready(true);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("ctrlhost.plugin.v1alpha1.ControllerPluginService");
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status status = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << ReadFile(dir + "/stderr");
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  auto stub = pluginpb::ControllerPluginService::NewStub(channel);
  {
    pluginpb::DescribeRequest req;
    req.add_protocol_versions("v1alpha1");
    for (int c = 1; c <= 7; ++c) req.add_capabilities(static_cast<pluginpb::Capability>(c));
    pluginpb::DescribeResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    ASSERT_TRUE(stub->Describe(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.plugin_name(), "webapp");
    ASSERT_EQ(resp.controllers_size(), 1);
    EXPECT_EQ(resp.controllers(0).finalizer(), "apps.ctrlhost.dev/external-record");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    auto stream = stub->Reconcile(&ctx);
    pluginpb::ReconcileRequest req;
    req.set_request_id(1);
    pluginpb::ReconcileCall* call = req.mutable_reconcile();
    call->set_controller("webapp");
    call->set_namespace_("default");
    call->set_name("shop");
    call->set_uid("u1");
    call->set_attempt(1);
    call->set_object(
        R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp","metadata":{"name":"shop",)"
        R"("namespace":"default","generation":1},"spec":{"image":"nginx","replicas":1}})");
    ASSERT_TRUE(stream->Write(req));
    ASSERT_TRUE(stream->WritesDone());
    pluginpb::ReconcileResponse resp;
    ASSERT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.request_id(), 1u);
    EXPECT_FALSE(resp.has_error()) << resp.error().message();
    EXPECT_EQ(resp.desired_objects_size(), 3);
    EXPECT_EQ(resp.conditions_size(), 2);
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_FALSE(ReadFile(records + "/default_shop.json").empty());

  child.Signal(SIGTERM);
  const int status = child.WaitExit(absl::Seconds(30));
  ASSERT_NE(status, -1) << "no exit within 30 s of SIGTERM";
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(ReadFile(dir + "/stderr").find("plugin stopped"), std::string::npos);
}

TEST(WebAppProcessTest, MissingAddressIsAClearErrorWithExitCode2) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  Child child;
  ASSERT_TRUE(child.Start({}, dir + "/stderr"));
  const int status = child.WaitExit(absl::Seconds(30));
  ASSERT_NE(status, -1);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(ReadFile(dir + "/stderr").find("CTRLHOST_PLUGIN_ADDRESS is not set"),
            std::string::npos);

  Child bad;
  ASSERT_TRUE(bad.Start({"CTRLHOST_PLUGIN_ADDRESS=unix:relative.sock"}, dir + "/stderr2"));
  const int bad_status = bad.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(WIFEXITED(bad_status));
  EXPECT_EQ(WEXITSTATUS(bad_status), 2);
  EXPECT_NE(ReadFile(dir + "/stderr2").find("must be absolute"), std::string::npos);
}

}  // namespace
}  // namespace ctrlhost::webapp
