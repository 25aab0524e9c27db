// Test support for the admin server: a fake AdminBackend and a fixture that runs the real
// AdminServer on a Unix socket in a short temporary directory.
//
//   TEST_F(AdminServerTest, Something) {
//     backend_.AddPlugin("web", "webapp");
//     StartServer();
//     CommandResult r = Run(exe::RunPluginListCommand, {});
//   }
//
// Thread-safety: FakeBackend is thread-safe (mu_ guards its state); the fixture is used by the
// test's main thread.
#ifndef CTRLHOST_RUNTIME_ADMIN_TESTING_ADMIN_SERVER_FIXTURE_H_
#define CTRLHOST_RUNTIME_ADMIN_TESTING_ADMIN_SERVER_FIXTURE_H_

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "ctrlhost/admin/v1alpha1/admin.grpc.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/admin/backend.h"
#include "runtime/admin/server.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::admin::testing {

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
  absl::StatusOr<adminpb::ListOperatorsResponse> ListOperators(
      const adminpb::ListOperatorsRequest&) override {
    common::MutexLock lock(&mu_);
    ++operator_lists_entered_;
    changed_.SignalAll();
    while (hold_operator_lists_) changed_.Wait(&mu_);
    RETURN_FAILURE();
    adminpb::ListOperatorsResponse response;
    response.add_operators()->set_name("web");
    response.mutable_operators(0)->set_state(adminpb::OPERATOR_STATE_READY);
    return response;
  }
  absl::StatusOr<adminpb::ListPluginsResponse> ListPlugins(
      const adminpb::ListPluginsRequest& request) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    last_list_plugins_ = request;
    adminpb::ListPluginsResponse response;
    for (const adminpb::Plugin& plugin : plugins_) {
      if (request.operator_().empty() || request.operator_() == plugin.operator_()) {
        *response.add_plugins() = plugin;
      }
    }
    return response;
  }
  absl::StatusOr<adminpb::GetPluginResponse> GetPlugin(
      const adminpb::GetPluginRequest& request) override {
    common::MutexLock lock(&mu_);
    ++calls_;
    RETURN_FAILURE();
    for (const adminpb::Plugin& plugin : plugins_) {
      if (plugin.operator_() == request.operator_() && plugin.name() == request.plugin()) {
        adminpb::GetPluginResponse response;
        *response.mutable_plugin() = plugin;
        return response;
      }
    }
    return absl::NotFoundError(
        absl::StrCat("plugin ", request.operator_(), "/", request.plugin(), " not found"));
  }
  absl::StatusOr<adminpb::ListControllersResponse> ListControllers(
      const adminpb::ListControllersRequest& request) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    adminpb::ListControllersResponse response;
    adminpb::Controller* controller = response.add_controllers();
    controller->set_operator_(request.operator_().empty() ? "web" : request.operator_());
    controller->set_plugin("webapp");
    controller->set_name("webapp");
    return response;
  }
  absl::StatusOr<adminpb::GetControllerResponse> GetController(
      const adminpb::GetControllerRequest& request) override {
    common::MutexLock lock(&mu_);
    ++calls_;
    RETURN_FAILURE();
    adminpb::GetControllerResponse response;
    response.mutable_controller()->set_operator_(request.operator_());
    response.mutable_controller()->set_plugin(request.plugin());
    response.mutable_controller()->set_name(request.controller());
    response.mutable_controller()->set_state(adminpb::CONTROLLER_STATE_READY);
    return response;
  }
  absl::StatusOr<adminpb::SwapPluginResponse> SwapPlugin(
      const adminpb::SwapPluginRequest& request) override {
    common::MutexLock lock(&mu_);
    ++calls_;
    ++swaps_entered_;
    changed_.SignalAll();
    while (hold_swaps_) changed_.Wait(&mu_);
    RETURN_FAILURE();
    last_swap_ = request;
    adminpb::SwapPluginResponse response;
    if (request.has_replace() && request.replace().exec().command() == "/bad") {
      adminpb::SwapFailed* failed = response.mutable_failed();
      failed->set_reason(adminpb::SWAP_FAILURE_REASON_EXITED);
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
  absl::StatusOr<adminpb::ReloadConfigResponse> ReloadConfig(
      const adminpb::ReloadConfigRequest& request) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    adminpb::ReloadConfigResponse response;
    response.set_dry_run(request.dry_run());
    adminpb::OperatorChange* change = response.add_changes();
    change->set_operator_("web");
    change->set_type(adminpb::OPERATOR_CHANGE_TYPE_UPDATED);
    change->add_swapped_plugins("webapp");
    return response;
  }
  absl::StatusOr<adminpb::DumpStateResponse> DumpState(const adminpb::DumpStateRequest&) override {
    common::MutexLock lock(&mu_);
    RETURN_FAILURE();
    adminpb::DumpStateResponse response;
    response.set_yaml("operators:\n- name: web\n  state: READY\n");
    response.mutable_taken_at()->set_seconds(1700000000);
    return response;
  }

  void AddPlugin(const std::string& op, const std::string& name) {
    common::MutexLock lock(&mu_);
    adminpb::Plugin plugin;
    plugin.set_operator_(op);
    plugin.set_name(name);
    plugin.set_state(adminpb::PLUGIN_STATE_READY);
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
  // ListOperators waits while held: a slow query.
  void HoldOperatorLists(bool hold) {
    common::MutexLock lock(&mu_);
    hold_operator_lists_ = hold;
    changed_.SignalAll();
  }
  bool AwaitOperatorListsEntered(int n) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (operator_lists_entered_ < n) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) return operator_lists_entered_ >= n;
    }
    return true;
  }
  int operator_lists_entered() {
    common::MutexLock lock(&mu_);
    return operator_lists_entered_;
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
  adminpb::SwapPluginRequest last_swap() {
    common::MutexLock lock(&mu_);
    return last_swap_;
  }

 private:
  common::Mutex mu_;
  common::CondVar changed_;
  std::vector<adminpb::Plugin> plugins_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  bool hold_swaps_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_operator_lists_ ABSL_GUARDED_BY(mu_) = false;
  int operator_lists_entered_ ABSL_GUARDED_BY(mu_) = 0;
  int swaps_entered_ ABSL_GUARDED_BY(mu_) = 0;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  adminpb::ListPluginsRequest last_list_plugins_ ABSL_GUARDED_BY(mu_);
  adminpb::SwapPluginRequest last_swap_ ABSL_GUARDED_BY(mu_);
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

  std::unique_ptr<adminpb::AdminService::Stub> Stub() {
    return adminpb::AdminService::NewStub(
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

}  // namespace ctrlhost::admin::testing

#endif  // CTRLHOST_RUNTIME_ADMIN_TESTING_ADMIN_SERVER_FIXTURE_H_
