// The fixture of the in-process host tests (host_test.cc, host_reload_test.cc,
// host_apiserver_test.cc): the embedded API server over HTTPS, the manager, and the real WebApp
// reference plugin as a child process over its Unix socket. Test-only.
#ifndef CTRLHOST_RUNTIME_MANAGER_HOST_TEST_FIXTURE_H_
#define CTRLHOST_RUNTIME_MANAGER_HOST_TEST_FIXTURE_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/raw_tls_client.h"
#include "runtime/common/logging.h"
#include "runtime/common/yaml_json.h"
#include "runtime/config/load.h"
#include "runtime/manager/host.h"

namespace ctrlhost::manager {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline std::string Runfile(const std::string& path) {
  return (fs::path(std::getenv("TEST_SRCDIR")) / "ctrlhost" / path).string();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value at a JSON pointer, or null when `j` has nothing there (never throws).
inline json At(const json& j, const std::string& pointer) {
  const json::json_pointer p(pointer);
  if (!j.is_object() || !j.contains(p)) return json();
  return j.at(p);
}

// Polls `condition` for up to 30 s (real time: the host runs on the real clock here).
template <typename F>
bool Eventually(F condition) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return condition();
}

class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "records");
    // Under --config=tsan the plugin binaries are instrumented but not linked with the test's
    // suppressions (races inside Debian's uninstrumented gRPC and Abseil): hand them the same
    // list through TSAN_OPTIONS. Ignored by other builds.
    std::ofstream supp(dir_ / "tsan.supp");
    supp << "called_from_lib:libgrpc.so\ncalled_from_lib:libgrpc++.so\n"
         << "called_from_lib:libgpr.so\nrace:libabsl_*.so*\n";
    tsan_options_ = absl::StrCat("halt_on_error=1 suppressions=", (dir_ / "tsan.supp").string());
  }

  // Starts the host with the WebApp plugin.
  void StartHost(const std::string& extra_plugin_yaml = "") {
    ASSERT_NO_FATAL_FAILURE(DoStartHost(extra_plugin_yaml));
  }
  void DoStartHost(const std::string& extra_plugin_yaml) {
    StartOperators(config::ParseOperators(WebAppOperatorYaml(extra_plugin_yaml), "operator.yaml"));
  }
  std::string WebAppOperatorYaml(const std::string& extra_plugin_yaml = "") {
    return absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata: {name: shop}
spec:
  plugins:
  - name: webapp
    exec:
      command: )",
                        Runfile("plugins/webapp/webapp"), R"(
      env: {WEBAPP_RECORD_DIR: )",
                        (dir_ / "records").string(), ", TSAN_OPTIONS: \"", tsan_options_, "\"}\n",
                        extra_plugin_yaml);
  }

  // GET /readyz?verbose from the host's health server: {status, body}.
  std::pair<int, std::string> Readyz() {
    const std::string url = host_->metrics_url();  // http://127.0.0.1:PORT/metrics
    const size_t colon = url.rfind(':');
    httplib::Client client("127.0.0.1", std::atoi(url.c_str() + colon + 1));
    httplib::Result result = client.Get("/readyz?verbose");
    if (!result) return {0, "no answer"};
    return {result->status, result->body};
  }

  // A cluster of our own (the embedded API server as a separate object the test stops and
  // restarts on the same port and data) instead of the host's embedded one.
  absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> StartCluster(int port) {
    apiserver::ApiServerOptions options;
    options.data_dir = (dir_ / "cluster").string();
    options.port = port;
    options.sync_full = false;
    return apiserver::ApiServer::Start(options);
  }

  // Starts the host on `operators` (parsed from `source`), with the embedded API server and the
  // metrics server on free ports; `customize` may adjust the options first.
  void StartOperators(const absl::StatusOr<std::vector<config::OperatorSpec>>& operators,
                      const std::function<void(HostOptions&)>& customize = nullptr) {
    ASSERT_TRUE(operators.ok()) << operators.status();
    HostOptions options;
    options.operators = *operators;
    options.data_dir = (dir_ / "data").string();
    options.apiserver.port = 0;
    options.metrics_port = 0;
    if (customize) customize(options);
    absl::StatusOr<std::unique_ptr<Host>> host = Host::Start(options);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = *std::move(host);
  }

  void CreateFromYamlFile(const std::string& path, const kube::ResourceRef& ref) {
    absl::StatusOr<json> object = common::YamlToJson(ReadFile(path));
    ASSERT_TRUE(object.ok()) << object.status();
    absl::StatusOr<std::string> created = host_->client().Create(ref, object->dump());
    ASSERT_TRUE(created.ok()) << created.status();
  }

  json Get(const kube::ResourceRef& ref) {
    absl::StatusOr<std::string> body = host_->client().Get(ref);
    if (!body.ok()) return json();
    return json::parse(*body);
  }

  // Reconciles of every controller so far, whatever their result.
  uint64_t Reconciles() {
    uint64_t total = 0;
    for (const Manager::PluginReport& plugin : host_->manager().Report()) {
      for (const ControllerStatus& c : plugin.controllers) {
        for (uint64_t n : c.metrics.reconciles) total += n;
      }
    }
    return total;
  }

  fs::path dir_;
  std::string tsan_options_;
  std::unique_ptr<Host> host_;
};

inline const kube::ResourceRef kCrds{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "", "", ""};

inline kube::ResourceRef WebApp(const std::string& name, const std::string& subresource = "") {
  return kube::ResourceRef{"apps.ctrlhost.dev", "v1alpha1", "webapps",
                           "default",           name,       subresource};
}

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_HOST_TEST_FIXTURE_H_
