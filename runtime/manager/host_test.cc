// The whole host in-process: the embedded API server over HTTPS, the manager, and the real
// WebApp reference plugin as a child process over its Unix socket.
#include "runtime/manager/host.h"

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

namespace ctrlhost::manager {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Runfile(const std::string& path) {
  return (fs::path(std::getenv("TEST_SRCDIR")) / "ctrlhost" / path).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value at a JSON pointer, or null when `j` has nothing there (never throws).
json At(const json& j, const std::string& pointer) {
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

const kube::ResourceRef kCrds{
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "", "", ""};

kube::ResourceRef WebApp(const std::string& name, const std::string& subresource = "") {
  return kube::ResourceRef{"apps.ctrlhost.dev", "v1alpha1", "webapps",
                           "default",           name,       subresource};
}

TEST_F(HostTest, WebAppConvergesAndItsFinalizerIsHonoured) {
  StartHost();
  if (HasFatalFailure()) return;
  // The CRD arrives after the host started: the controller waits for it, then starts.
  EXPECT_FALSE(host_->manager().Ready().ok());
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();

  const std::string web = R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"shop","namespace":"default"},
    "spec":{"image":"nginx:1.25","replicas":2,"port":8080,"config":{"GREETING":"hi"}}})";
  ASSERT_TRUE(host_->client().Create(WebApp(""), web).ok());

  const kube::ResourceRef deployment{"apps", "v1", "deployments", "default", "shop", ""};
  const kube::ResourceRef service{"", "v1", "services", "default", "shop", ""};
  const kube::ResourceRef config_map{"", "v1", "configmaps", "default", "shop-config", ""};
  ASSERT_TRUE(Eventually([&] {
    json w = Get(WebApp("shop"));
    return !Get(deployment).is_null() && !Get(service).is_null() && !Get(config_map).is_null() &&
           At(w, "/status/observedGeneration") == 1;
  })) << Get(WebApp("shop")).dump()
      << "\n"
      << host_->manager().DumpYaml();
  json object = Get(WebApp("shop"));
  EXPECT_EQ(object["metadata"]["finalizers"], json::array({"apps.ctrlhost.dev/external-record"}));
  json d = Get(deployment);
  EXPECT_EQ(d["spec"]["replicas"], 2);
  ASSERT_EQ(d["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(d["metadata"]["ownerReferences"][0]["uid"], object["metadata"]["uid"]);
  EXPECT_EQ(d["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_TRUE(fs::exists(dir_ / "records" / "default_shop.json"));

  // An update reaches the child.
  ASSERT_TRUE(host_->client()
                  .Patch(WebApp("shop"), kube::PatchType::kMerge, R"({"spec":{"replicas":3}})")
                  .ok());
  EXPECT_TRUE(Eventually([&] { return At(Get(deployment), "/spec/replicas") == 3; }));

  // Cache memory per kind and per plugin: the plugin reads every cache the host keeps here
  // (WebApps and its children's kinds), each counted once.
  {
    observe::Figures figures;
    host_->manager().Collect(figures);
    double watch_memory = 0;
    for (const observe::WatchFigures& w : figures.watches) {
      EXPECT_GE(w.memory_bytes, w.bytes) << w.watch;
      watch_memory += w.memory_bytes;
    }
    EXPECT_GT(watch_memory, 0);
    ASSERT_EQ(figures.plugins.size(), 1u);
    EXPECT_EQ(figures.plugins[0].cache_bytes, watch_memory);
    const std::string dump = host_->manager().DumpYaml();
    EXPECT_TRUE(
        absl::StrContains(dump, absl::StrCat("cacheBytes: ", static_cast<uint64_t>(watch_memory))))
        << dump;
  }

  // Delete: the plugin removes its external record, the host releases the finalizer, the
  // garbage collector removes the children.
  ASSERT_TRUE(host_->client().Delete(WebApp("shop")).ok());
  EXPECT_TRUE(Eventually([&] { return Get(WebApp("shop")).is_null(); }))
      << Get(WebApp("shop")).dump();
  EXPECT_FALSE(fs::exists(dir_ / "records" / "default_shop.json"));
  EXPECT_TRUE(Eventually([&] { return Get(deployment).is_null() && Get(service).is_null(); }));

  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "state: READY")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "name: webapp")) << dump;
  observe::Figures figures;
  host_->manager().Collect(figures);
  ASSERT_EQ(figures.controllers.size(), 1u);
  EXPECT_GE(figures.controllers[0].reconcile_total["success"], 3u);
  ASSERT_EQ(figures.plugins.size(), 1u);
  EXPECT_TRUE(figures.plugins[0].up);
  EXPECT_GE(figures.plugins[0].requests_total["ok"], 3u);
  EXPECT_FALSE(figures.watches.empty());
  host_->Stop();
}

TEST_F(HostTest, ABrokenPluginIsReportedAndTheOthersRun) {
  StartHost(R"(  - name: broken
    startupTimeout: 2s
    exec: {command: /nonexistent/plugin}
)");
  if (HasFatalFailure()) return;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  // Refused (not restarted): WaitReady says so instead of waiting for its deadline.
  absl::Status ready = host_->manager().WaitReady(absl::Seconds(30));
  EXPECT_EQ(ready.code(), absl::StatusCode::kFailedPrecondition) << ready;
  EXPECT_TRUE(absl::StrContains(ready.message(),
                                "operator shop, plugin broken was refused: cannot execute plugin "
                                "command \"/nonexistent/plugin\""))
      << ready;
  EXPECT_TRUE(absl::StrContains(host_->manager().Ready().message(), "plugin shop/broken is"));
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "plugin: broken")) << dump;
  // The healthy plugin still works.
  const std::string web = R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"a","namespace":"default"},"spec":{"image":"nginx"}})";
  ASSERT_TRUE(host_->client().Create(WebApp(""), web).ok());
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "a", ""}).is_null();
  }));
}

// Regression: a plugin declaring 10,000 controllers made the host start a thread per
// controller until it aborted (std::system_error), taking every operator with it. It is refused
// with the limit named, and the host goes on serving the other plugins.
TEST_F(HostTest, APluginDeclaringTooManyControllersIsRefusedAndTheHostServes) {
  const std::string plugin = Runfile("runtime/plugin/testing/test_plugin_main");
  StartHost(absl::StrCat("  - name: greedy\n    exec: {command: ", plugin,
                         ", args: [--describe=many:10000]}\n"
                         "  - name: fair\n    maxControllers: 150\n    exec: {command: ",
                         plugin, ", args: [--describe=many:120]}\n"));
  if (HasFatalFailure()) return;
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(host_->manager().DumpYaml(), "10000 controllers; the host's limit");
  })) << host_->manager().DumpYaml();
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "is 100 per plugin")) << dump;
  // maxControllers raised for the other plugin: its 120 are admitted (their kind is not
  // served, so they wait for it; nothing refuses them).
  EXPECT_FALSE(absl::StrContains(dump, "120 controllers")) << dump;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  const std::string web = R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"a","namespace":"default"},"spec":{"image":"nginx"}})";
  ASSERT_TRUE(host_->client().Create(WebApp(""), web).ok());
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "a", ""}).is_null();
  }));
}

// The host-wide limits count every plugin's controllers and workers together.
TEST_F(HostTest, TheHostsControllerLimitCountsEveryPlugin) {
  const std::string plugin = Runfile("runtime/plugin/testing/test_plugin_main");
  StartOperators(config::ParseOperators(WebAppOperatorYaml(absl::StrCat(
                                            "  - name: second\n    exec: {command: ", plugin,
                                            ", args: [--describe=many:3]}\n")),
                                        "operator.yaml"),
                 [](HostOptions& options) { options.max_controllers = 3; });
  if (HasFatalFailure()) return;
  // webapp's one controller and second's three make four: whichever comes second is refused.
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(host_->manager().DumpYaml(),
                             "the host's limit is 3 controllers (ctrlhost run --max-controllers)");
  })) << host_->manager().DumpYaml();
}

TEST_F(HostTest, APluginOverItsCacheCapIsStoppedAndReported) {
  // One byte: the first cached object puts the WebApp plugin's caches over it.
  StartHost("    maxCacheBytes: 1\n");
  if (HasFatalFailure()) return;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  const std::string web = R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"capped","namespace":"default"},"spec":{"image":"nginx"}})";
  ASSERT_TRUE(host_->client().Create(WebApp(""), web).ok());
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(host_->manager().Ready().message(), "over its maxCacheBytes 1");
  })) << host_->manager().Ready();
  EXPECT_TRUE(absl::StrContains(host_->manager().Ready().message(),
                                "plugin shop/webapp: the caches its controllers read hold "))
      << host_->manager().Ready();
  const auto [status, body] = Readyz();
  EXPECT_EQ(status, 503) << body;
  EXPECT_TRUE(absl::StrContains(body, "over its maxCacheBytes 1")) << body;
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "cacheError: the caches its controllers read")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "state: stopped")) << dump;
  // Its controllers released their watches: no other plugin reads them, so the caches are gone.
  EXPECT_TRUE(Eventually([&] {
    observe::Figures figures;
    host_->manager().Collect(figures);
    return figures.plugins.size() == 1 && figures.plugins[0].cache_bytes == 0 &&
           figures.watches.empty();
  }));
  // The host itself keeps running (no crash, no OOM): the plugin is still up.
  observe::Figures figures;
  host_->manager().Collect(figures);
  ASSERT_EQ(figures.plugins.size(), 1u);
  EXPECT_TRUE(figures.plugins[0].up);
  host_->Stop();
}

// Regression: a plugin whose Describe changes across a crash restart (not a swap) gets the new
// instance's controllers, as a swap does; it kept the first ones before.
TEST_F(HostTest, RegressionNewDescribeAfterACrashRestartReplacesTheControllers) {
  const std::string script = (dir_ / "plugin.sh").string();
  // The mark lives in a directory of its own: dir_ is on the way to the data dir, which
  // Landlock hides, so the plugin cannot create entries in dir_ itself.
  fs::create_directories(dir_ / "mark");
  const std::string mark = (dir_ / "mark" / "second").string();
  std::ofstream(script) << "#!/bin/sh\nif [ -e " << mark << " ]; then exec "
                        << Runfile("runtime/plugin/testing/test_plugin_main")
                        << " --describe=renamed; fi\ntouch " << mark << "\nexec "
                        << Runfile("runtime/plugin/testing/test_plugin_main") << "\n";
  fs::permissions(script, fs::perms::owner_all);
  StartOperators(config::ParseOperators(absl::StrCat("apiVersion: ctrlhost.dev/v1alpha1\n"
                                                     "kind: Operator\nmetadata: {name: shop}\n"
                                                     "spec:\n  plugins:\n  - name: echo\n"
                                                     "    exec: {command: ",
                                                     script, "}\n"),
                                        "operator.yaml"));
  if (HasFatalFailure()) return;
  auto controllers = [&] {
    std::vector<std::string> names;
    for (const Manager::PluginReport& plugin : host_->manager().Report()) {
      for (const ControllerStatus& c : plugin.controllers) names.push_back(c.name);
    }
    std::sort(names.begin(), names.end());
    return absl::StrJoin(names, ",");
  };
  ASSERT_TRUE(Eventually([&] { return controllers() == "echo,other"; })) << controllers();
  pid_t pid = 0;
  for (const Manager::PluginReport& plugin : host_->manager().Report()) {
    pid = plugin.slot.serving.pid;
  }
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);  // a crash: the supervisor restarts the same plugin
  EXPECT_TRUE(Eventually([&] { return controllers() == "echo,third"; })) << controllers();
  uint64_t restarts = 0;
  for (const Manager::PluginReport& plugin : host_->manager().Report()) {
    restarts = plugin.slot.serving.restarts;
  }
  EXPECT_EQ(restarts, 1u);
}

// A plugin that reports NOT_SERVING (the test plugin does on SIGUSR1, as a draining plugin
// would) is shown where users look: /readyz?verbose, the dump, the admin report; SERVING again
// (SIGUSR2) clears it. Requests waiting meanwhile are the supervisor's (supervisor_test).
TEST_F(HostTest, APluginNotServingIsReportedUntilItServesAgain) {
  StartOperators(config::ParseOperators(
      absl::StrCat("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
                   "spec:\n  plugins:\n  - name: echo\n    exec:\n      command: ",
                   Runfile("runtime/plugin/testing/test_plugin_main"),
                   "\n      env: {TSAN_OPTIONS: \"", tsan_options_, "\"}\n"),
      "operator.yaml"));
  if (HasFatalFailure()) return;
  auto serving = [&] {
    for (const Manager::PluginReport& plugin : host_->manager().Report()) {
      if (plugin.slot.serving.state == plugin::PluginState::kReady) return plugin.slot.serving;
    }
    return plugin::PluginStatus();
  };
  ASSERT_TRUE(Eventually([&] { return serving().pid > 0; })) << host_->manager().DumpYaml();
  const pid_t pid = serving().pid;
  EXPECT_EQ(serving().health, plugin::HealthStatus::kServing);
  EXPECT_TRUE(absl::StrContains(host_->manager().DumpYaml(), "health: {status: SERVING"))
      << host_->manager().DumpYaml();

  ASSERT_EQ(kill(pid, SIGUSR1), 0);
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(host_->manager().Ready().message(),
                             "plugin shop/echo is not serving: it reports NOT_SERVING");
  })) << host_->manager().Ready();
  const auto [status, body] = Readyz();
  EXPECT_EQ(status, 503);
  EXPECT_TRUE(absl::StrContains(body, "plugin shop/echo is not serving")) << body;
  EXPECT_TRUE(absl::StrContains(host_->manager().DumpYaml(), "health: {status: NOT_SERVING"))
      << host_->manager().DumpYaml();
  EXPECT_EQ(serving().health, plugin::HealthStatus::kNotServing);
  EXPECT_EQ(serving().pid, pid);  // not restarted: the default period is 1m

  ASSERT_EQ(kill(pid, SIGUSR2), 0);
  ASSERT_TRUE(Eventually([&] { return serving().health == plugin::HealthStatus::kServing; }));
  EXPECT_FALSE(absl::StrContains(host_->manager().Ready().message(), "not serving"))
      << host_->manager().Ready();
  EXPECT_EQ(serving().restarts, 0u);
}

// Regression: two plugins declaring the same controller name shared its metrics labels and
// field manager; the second one's controllers are refused, naming both plugins.
TEST_F(HostTest, RegressionControllerNamesAreUniqueInTheHost) {
  const std::string plugin = Runfile("runtime/plugin/testing/test_plugin_main");
  StartOperators(config::ParseOperators(
      absl::StrCat("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
                   "spec:\n  plugins:\n  - name: a\n    exec: {command: ",
                   plugin, "}\n  - name: b\n    exec: {command: ", plugin, "}\n"),
      "operator.yaml"));
  if (HasFatalFailure()) return;
  absl::Status ready;
  ASSERT_TRUE(Eventually([&] {
    ready = host_->manager().Ready();
    return absl::StrContains(ready.message(), "must be unique in the host");
  })) << ready;
  EXPECT_TRUE(absl::StrContains(ready.message(), "controller \"echo\" of plugin shop/")) << ready;
  EXPECT_TRUE(absl::StrContains(ready.message(), "is already declared by plugin shop/")) << ready;
  size_t with_controllers = 0;
  for (const Manager::PluginReport& report : host_->manager().Report()) {
    if (!report.controllers.empty()) ++with_controllers;
  }
  EXPECT_EQ(with_controllers, 1u);
}

TEST_F(HostTest, DuplicateOperatorIsRefused) {
  StartHost();
  if (HasFatalFailure()) return;
  absl::StatusOr<std::vector<config::OperatorSpec>> again = config::ParseOperators(
      "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
      "spec:\n  plugins:\n  - name: x\n    exec: {command: /bin/true}\n",
      "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  absl::Status status = host_->manager().Start(*again);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "operator shop already runs")) << status;
}

config::PluginSpec ExecSource(const std::string& command, std::vector<std::string> args,
                              std::vector<std::pair<std::string, std::string>> env) {
  config::PluginSpec spec;
  config::ExecSpec exec;
  exec.command = command;
  exec.args = std::move(args);
  exec.env = std::move(env);
  spec.source = exec;
  return spec;
}

uint64_t Relists(Host& host) {
  observe::Figures figures;
  host.manager().Collect(figures);
  uint64_t relists = 0;
  for (const observe::WatchFigures& w : figures.watches) relists += w.relists_total;
  return relists;
}

// The same check when a swap brings the conflicting Describe: refused before the release serves.
TEST_F(HostTest, RegressionASwapToAConflictingControllerNameIsRefused) {
  const std::string plugin = Runfile("runtime/plugin/testing/test_plugin_main");
  StartOperators(config::ParseOperators(
      absl::StrCat("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
                   "spec:\n  plugins:\n  - name: a\n    exec: {command: ",
                   plugin, "}\n  - name: b\n    exec: {command: ", plugin,
                   ", args: [--describe=distinct]}\n"),
      "operator.yaml"));
  if (HasFatalFailure()) return;
  auto controllers = [&] {
    std::vector<std::string> names;
    for (const Manager::PluginReport& report : host_->manager().Report()) {
      for (const ControllerStatus& c : report.controllers) names.push_back(c.name);
    }
    std::sort(names.begin(), names.end());
    return absl::StrJoin(names, ",");
  };
  ASSERT_TRUE(Eventually([&] { return controllers() == "alpha,beta,echo,other"; }))
      << controllers();
  Manager::SwapOptions options;
  SwapResult swapped =
      host_->manager().SwapPlugin("shop", "b", ExecSource(plugin, {}, {}), options);
  EXPECT_EQ(swapped.failure, SwapFailure::kIncompatible) << swapped.status;
  EXPECT_TRUE(absl::StrContains(swapped.status.message(), "is already declared by plugin shop/a"))
      << swapped.status;
  EXPECT_EQ(controllers(), "alpha,beta,echo,other");
}

TEST_F(HostTest, SwapKeepsCachesAndRefusesBrokenReleases) {
  StartHost();
  if (HasFatalFailure()) return;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  ASSERT_TRUE(host_->client()
                  .Create(WebApp(""), R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1",
    "kind":"WebApp","metadata":{"name":"s","namespace":"default"},"spec":{"image":"a"}})")
                  .ok());
  const kube::ResourceRef deployment{"apps", "v1", "deployments", "default", "s", ""};
  ASSERT_TRUE(Eventually([&] { return !Get(deployment).is_null(); }));
  // Converged: the object's status says so (the last write its reconciles make).
  ASSERT_TRUE(Eventually([&] { return !At(Get(WebApp("s")), "/status/conditions").is_null(); }));
  const uint64_t before_swap = Reconciles();

  // v1 -> v2 (the same binary with another environment: a new generation).
  Manager::SwapOptions options;
  const std::vector<std::pair<std::string, std::string>> env = {
      {"WEBAPP_RECORD_DIR", (dir_ / "records").string()}, {"TSAN_OPTIONS", tsan_options_}};
  SwapResult swapped = host_->manager().SwapPlugin(
      "shop", "webapp", ExecSource(Runfile("plugins/webapp/webapp"), {}, env), options);
  ASSERT_TRUE(swapped.status.ok()) << swapped.status;
  EXPECT_EQ(swapped.serving_generation, 2u);
  EXPECT_EQ(swapped.drained_generation, 1u);
  // Regression: the new instance reconciles the existing object although
  // nothing about it changed (REASON_PLUGIN_STARTED), so a fix shipped by swap reaches it.
  EXPECT_TRUE(Eventually([&] { return Reconciles() > before_swap; }))
      << before_swap << " reconciles before the swap, " << Reconciles() << " after";
  // The new instance reconciles.
  ASSERT_TRUE(host_->client()
                  .Patch(WebApp("s"), kube::PatchType::kMerge, R"({"spec":{"image":"b"}})")
                  .ok());
  EXPECT_TRUE(Eventually([&] {
    json d = Get(deployment);
    return At(d, "/spec/template/spec/containers/0/image") == "b";
  }));

  // Broken releases are refused; generation 2 keeps serving.
  options.ready_timeout = absl::Seconds(10);
  SwapResult missing = host_->manager().SwapPlugin(
      "shop", "webapp", ExecSource("/nonexistent/webapp-v3", {}, {}), options);
  EXPECT_FALSE(missing.status.ok());
  // A binary that cannot be exec'd never ran: START_FAILED (docs/cli.md), not HANDSHAKE_FAILED.
  EXPECT_EQ(missing.failure, SwapFailure::kStartFailed) << missing.status;
  SwapResult bad_version = host_->manager().SwapPlugin(
      "shop", "webapp",
      ExecSource(Runfile("runtime/plugin/testing/test_plugin_main"), {"--describe=bad-version"},
                 {{"TSAN_OPTIONS", tsan_options_}}),
      options);
  EXPECT_FALSE(bad_version.status.ok());
  EXPECT_EQ(bad_version.failure, SwapFailure::kHandshakeFailed) << bad_version.status;
  SwapResult crashing = host_->manager().SwapPlugin(
      "shop", "webapp",
      ExecSource(Runfile("runtime/plugin/testing/test_plugin_main"), {"--exit-at-start=3"},
                 {{"TSAN_OPTIONS", tsan_options_}}),
      options);
  EXPECT_FALSE(crashing.status.ok());
  EXPECT_EQ(host_->manager().Ready(), absl::OkStatus());
  ASSERT_TRUE(host_->client()
                  .Patch(WebApp("s"), kube::PatchType::kMerge, R"({"spec":{"image":"c"}})")
                  .ok());
  EXPECT_TRUE(Eventually([&] {
    json d = Get(deployment);
    return At(d, "/spec/template/spec/containers/0/image") == "c";
  }));
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "generation: 2")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "lastSwapError:")) << dump;
  EXPECT_EQ(host_->manager()
                .SwapPlugin("shop", "nope", ExecSource("/bin/true", {}, {}), options)
                .status.code(),
            absl::StatusCode::kNotFound);
  // No watch relisted through all of it.
  EXPECT_EQ(Relists(*host_), 0u);
}

TEST_F(HostTest, OperatorFileEditsApplyLive) {
  const fs::path file = dir_ / "operators.yaml";
  auto write = [&](const std::string& concurrency, const std::string& extra) {
    std::ofstream out(file);
    out << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
        << "spec:\n  plugins:\n  - name: webapp\n    exec:\n      command: "
        << Runfile("plugins/webapp/webapp")
        << "\n      env: {WEBAPP_RECORD_DIR: " << (dir_ / "records").string()
        << ", TSAN_OPTIONS: \"" << tsan_options_ << "\"}\n"
        << "  controllers:\n  - name: webapp\n    maxConcurrentReconciles: " << concurrency << "\n"
        << extra;
  };
  write("2", "");
  StartOperators(config::LoadOperators(file.string()), [&](HostOptions& options) {
    options.operator_path = file.string();
    options.watch_interval = absl::Milliseconds(100);
  });
  if (HasFatalFailure()) return;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  EXPECT_TRUE(absl::StrContains(host_->manager().DumpYaml(), "max: 2"));
  const uint64_t relists = Relists(*host_);

  // An edit of the file is picked up by the watcher and applied: the controller restarts with
  // the new concurrency, its watches held.
  write("3", "");
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(host_->manager().DumpYaml(), "max: 3") &&
           host_->manager().Ready().ok();
  })) << host_->manager().DumpYaml();
  EXPECT_EQ(Relists(*host_), relists);
  // The WebApp controller still works.
  ASSERT_TRUE(host_->client()
                  .Create(WebApp(""), R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1",
    "kind":"WebApp","metadata":{"name":"e","namespace":"default"},"spec":{"image":"a"}})")
                  .ok());
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "e", ""}).is_null();
  }));

  // An invalid edit is refused with a precise error; nothing changes.
  write("0", "");
  absl::StatusOr<config::OperatorSetDiff> refused = host_->Reload(/*dry_run=*/false);
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "maxConcurrentReconciles"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(host_->last_reload_error(), "operators.yaml:"))
      << host_->last_reload_error();
  EXPECT_TRUE(absl::StrContains(host_->manager().DumpYaml(), "max: 3"));

  // An empty file (an editor half-way through, or a mistake) never deletes every operator.
  write("", "");
  { std::ofstream truncate(file, std::ios::trunc); }
  absl::StatusOr<config::OperatorSetDiff> empty = host_->Reload(/*dry_run=*/false);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
  EXPECT_TRUE(absl::StrContains(empty.status().message(), "no Operator document"))
      << empty.status();
  EXPECT_TRUE(host_->manager().Ready().ok()) << host_->manager().Ready();

  // A second operator document is added live, then deleted without touching the first.
  write("3",
        "---\napiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: extra}\n"
        "spec:\n  plugins:\n  - name: web2\n    exec:\n      command: " +
            Runfile("runtime/plugin/testing/test_plugin_main") + "\n      env: {TSAN_OPTIONS: \"" +
            tsan_options_ + "\"}\n");
  absl::StatusOr<config::OperatorSetDiff> added = host_->Reload(/*dry_run=*/false);
  ASSERT_TRUE(added.ok()) << added.status();
  // The watcher may have applied the edit first; either way "shop" is never touched.
  EXPECT_TRUE(added->added == std::vector<std::string>{"extra"} || added->empty())
      << absl::StrJoin(added->added, ",");
  EXPECT_TRUE(added->removed.empty());
  EXPECT_TRUE(
      Eventually([&] { return absl::StrContains(host_->manager().DumpYaml(), "plugin: web2"); }));
  write("3", "");
  // (The watcher may apply the edit before this Reload: the end state is what is checked.)
  absl::StatusOr<config::OperatorSetDiff> removed = host_->Reload(/*dry_run=*/false);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_TRUE(removed->added.empty());
  std::vector<std::string> running;
  for (const config::OperatorSpec& op : host_->manager().Operators()) running.push_back(op.name);
  EXPECT_EQ(running, std::vector<std::string>{"shop"});
  EXPECT_FALSE(absl::StrContains(host_->manager().DumpYaml(), "plugin: web2"));
  EXPECT_TRUE(host_->manager().Ready().ok()) << host_->manager().Ready();

  // spec.leaderElection is read at start only: a reload that changes it says so in the log,
  // and a reload back to what the host started with says nothing.
  std::mutex log_mu;
  std::vector<std::string> warnings;
  common::SetLogSink([&](absl::string_view line) {
    if (!absl::StrContains(line, "spec.leaderElection changed")) return;
    std::lock_guard<std::mutex> lock(log_mu);
    warnings.emplace_back(line);
  });
  write("3", "  leaderElection: {leaseName: shop}\n");
  absl::StatusOr<config::OperatorSetDiff> with_block = host_->Reload(/*dry_run=*/false);
  EXPECT_TRUE(with_block.ok()) << with_block.status();
  std::vector<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(log_mu);
    seen.swap(warnings);
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(absl::StrContains(seen[0], "takes effect at the next start")) << seen[0];
  EXPECT_TRUE(absl::StrContains(seen[0], "operators.yaml")) << seen[0];
  write("3", "");
  absl::StatusOr<config::OperatorSetDiff> reverted = host_->Reload(/*dry_run=*/false);
  EXPECT_TRUE(reverted.ok()) << reverted.status();
  common::SetLogSink(nullptr);
  std::lock_guard<std::mutex> lock(log_mu);
  EXPECT_TRUE(warnings.empty()) << absl::StrJoin(warnings, "\n");
}

// An operator with a Lease of its own: the host leads it (the only candidate), dispatches it
// through its fence, shows it in the dump and /readyz, and refuses a reload that changes the
// set of operators or their blocks (each Lease is set up at start), while other edits apply.
TEST_F(HostTest, PerOperatorLeaseLeadsAndFixesTheOperatorSet) {
  const fs::path file = dir_ / "operators.yaml";
  auto write = [&](const std::string& concurrency, const std::string& block,
                   const std::string& extra) {
    std::ofstream out(file);
    out << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
        << "spec:\n  plugins:\n  - name: webapp\n    exec:\n      command: "
        << Runfile("plugins/webapp/webapp") << "\n      env: {TSAN_OPTIONS: \"" << tsan_options_
        << "\"}\n"
        << "  controllers:\n  - name: webapp\n    maxConcurrentReconciles: " << concurrency
        << "\n  leaderElection: {perOperator: true, leaseDuration: 4s, renewDeadline: 3s, "
        << "retryPeriod: 1s" << block << "}\n"
        << extra;
  };
  write("2", "", "");
  absl::StatusOr<std::vector<config::OperatorSpec>> operators =
      config::LoadOperators(file.string());
  StartOperators(operators, [&](HostOptions& options) {
    options.operator_path = file.string();
    options.watch_interval = absl::Hours(1);  // reloads only through Reload() here
    LeaderElectionOptions le;
    le.lease_namespace = "default";
    le.lease_name = "ctrlhost-shop";
    le.identity = "host-1";
    le.lease_duration = absl::Seconds(4);
    le.renew_deadline = absl::Seconds(3);
    le.retry_period = absl::Seconds(1);
    options.operator_leases["shop"] = le;
  });
  if (HasFatalFailure()) return;
  ASSERT_NE(host_->operator_elector("shop"), nullptr);
  EXPECT_EQ(host_->operator_elector("other"), nullptr);
  ASSERT_TRUE(Eventually([&] { return host_->manager().dispatching("shop"); }));
  const json lease =
      Get(kube::ResourceRef{"coordination.k8s.io", "v1", "leases", "default", "ctrlhost-shop", ""});
  EXPECT_EQ(At(lease, "/spec/holderIdentity"), "host-1") << lease.dump();
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  const auto [status, ready] = Readyz();
  EXPECT_EQ(status, 200) << ready;
  EXPECT_TRUE(absl::StrContains(ready,
                                "[+]leader ok: operator shop: leading (Lease "
                                "default/ctrlhost-shop)"))
      << ready;
  // Writes go through the operator's fence: the WebApp converges.
  ASSERT_TRUE(host_->client()
                  .Create(WebApp(""), R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1",
    "kind":"WebApp","metadata":{"name":"f","namespace":"default"},"spec":{"image":"a"}})")
                  .ok());
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "f", ""}).is_null();
  }));

  // Adding an operator, or changing the block, is refused with the reason; nothing applied.
  write("2", "",
        "---\napiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: extra}\n"
        "spec:\n  plugins:\n  - name: web2\n    exec: {command: /bin/true}\n"
        "  leaderElection: {perOperator: true}\n");
  absl::StatusOr<config::OperatorSetDiff> added = host_->Reload(/*dry_run=*/false);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kFailedPrecondition) << added.status();
  EXPECT_TRUE(absl::StrContains(added.status().message(), "fixed at start")) << added.status();
  EXPECT_TRUE(absl::StrContains(host_->last_reload_error(), "needs a restart"))
      << host_->last_reload_error();
  write("2", ", leaseName: other", "");
  EXPECT_EQ(host_->Reload(/*dry_run=*/false).status().code(),
            absl::StatusCode::kFailedPrecondition);
  std::vector<std::string> running;
  for (const config::OperatorSpec& op : host_->manager().Operators()) running.push_back(op.name);
  EXPECT_EQ(running, std::vector<std::string>{"shop"});
  // Any other edit applies as usual.
  write("3", "", "");
  absl::StatusOr<config::OperatorSetDiff> changed = host_->Reload(/*dry_run=*/false);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(host_->manager().DumpYaml(), "max: 3") &&
           host_->manager().Ready().ok();
  })) << host_->manager().DumpYaml();
  EXPECT_TRUE(host_->manager().dispatching("shop"));
  EXPECT_EQ(host_->leadership_lost(), "");
}

// A plugin the host does not start: it dials the endpoint. The test runs the WebApp plugin
// itself (and kills it by PID).
TEST_F(HostTest, EndpointPluginAndOverrides) {
  char dir_template[] = "/tmp/ctrlhost-endpoint-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string socket = absl::StrCat(dir_template, "/webapp.sock");
  const std::string address = absl::StrCat("unix://", socket);
  const std::string binary = Runfile("plugins/webapp/webapp");
  const std::string env = absl::StrCat("CTRLHOST_PLUGIN_ADDRESS=", address);
  const std::string records = absl::StrCat("WEBAPP_RECORD_DIR=", (dir_ / "records").string());
  const std::string tsan = absl::StrCat("TSAN_OPTIONS=", tsan_options_);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char* argv[] = {const_cast<char*>(binary.c_str()), nullptr};
    char* envp[] = {const_cast<char*>(env.c_str()), const_cast<char*>(records.c_str()),
                    const_cast<char*>(tsan.c_str()), nullptr};
    ::execve(binary.c_str(), argv, envp);
    ::_exit(127);
  }
  const std::string yaml = absl::StrCat(R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata: {name: remote}
spec:
  plugins:
  - name: webapp
    endpoint: {address: ")",
                                        address, R"("}
  controllers:
  - name: webapp
    maxConcurrentReconciles: 2
    namespaces: [team-a]
  - name: nothing-like-this
    plugin: webapp
)");
  StartOperators(config::ParseOperators(yaml, "remote.yaml"));
  if (HasFatalFailure()) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return;
  }
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  EXPECT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  ASSERT_TRUE(host_->client()
                  .Create(kube::ResourceRef{"", "v1", "namespaces", "", "", ""},
                          R"({"metadata":{"name":"team-a"}})")
                  .ok());
  for (const char* ns : {"default", "team-a"}) {
    const std::string web = absl::StrCat(
        R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp","metadata":{"name":"w",)",
        R"("namespace":")", ns, R"("},"spec":{"image":"nginx"}})");
    ASSERT_TRUE(
        host_->client()
            .Create(kube::ResourceRef{"apps.ctrlhost.dev", "v1alpha1", "webapps", ns, "", ""}, web)
            .ok());
  }
  // Only the overridden namespace is reconciled.
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "team-a", "w", ""}).is_null();
  }));
  EXPECT_TRUE(Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "w", ""}).is_null());
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "max: 2")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "configError:")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "nothing-like-this")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, address)) << dump;
  host_->Stop();
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  fs::remove_all(dir_template);
}

// Issue 13 item 5: /readyz stayed 200 while the API server was down and every watch failed.
TEST_F(HostTest, ReadyzReportsStaleCachesWhileTheApiServerIsDownAndRecovers) {
  absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> cluster = StartCluster(0);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const int port = (*cluster)->port();
  const std::string kubeconfig = (*cluster)->kubeconfig_path();
  StartOperators(config::ParseOperators(WebAppOperatorYaml(), "operator.yaml"),
                 [&](HostOptions& options) {
                   options.kubeconfigs = {kubeconfig};
                   options.watch_stale_after = absl::Seconds(1);
                 });
  if (HasFatalFailure()) return;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  EXPECT_EQ(Readyz().first, 200) << Readyz().second;

  (*cluster)->Stop();
  cluster->reset();
  // The caches keep serving for the grace period, then readiness says which watch is stale,
  // for how long and why.
  std::pair<int, std::string> readyz;
  EXPECT_TRUE(Eventually([&] {
    readyz = Readyz();
    return readyz.first == 503 &&
           absl::StrContains(readyz.second,
                             "controller webapp: watch apps.ctrlhost.dev/v1alpha1 WebApp stale: "
                             "failing for ");
  })) << readyz.second;
  EXPECT_TRUE(absl::StrContains(readyz.second, "[-]controllers failed: ")) << readyz.second;
  EXPECT_TRUE(absl::StrContains(readyz.second, "[+]api-server ok")) << readyz.second;
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "failingSince:")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "consecutiveFailures:")) << dump;

  // The server comes back on the same address: the watches resume and readiness recovers alone.
  cluster = StartCluster(port);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(Eventually([&] {
    readyz = Readyz();
    return readyz.first == 200;
  })) << readyz.second;
  host_->Stop();
}

// Issue 13 item 5: a host started while its cluster is unreachable exited; now it serves its
// health endpoints, says why it is not ready, and starts its controllers once the server answers.
TEST_F(HostTest, StartsWhileTheApiServerIsUnreachableAndStartsControllersOnceItAnswers) {
  absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> cluster = StartCluster(0);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const int port = (*cluster)->port();
  const std::string url = (*cluster)->url();
  const std::string kubeconfig = (*cluster)->kubeconfig_path();
  (*cluster)->Stop();  // the kubeconfig and certificates stay; the port is closed
  cluster->reset();
  StartOperators(config::ParseOperators(WebAppOperatorYaml(), "operator.yaml"),
                 [&](HostOptions& options) {
                   options.kubeconfigs = {kubeconfig};
                   options.discovery_backoff = absl::Milliseconds(100);
                   options.discovery_max_backoff = absl::Milliseconds(500);
                 });
  if (HasFatalFailure()) return;
  std::pair<int, std::string> readyz = Readyz();
  EXPECT_EQ(readyz.first, 503);
  EXPECT_TRUE(absl::StrContains(
      readyz.second, absl::StrCat("[-]api-server failed: API server ", url, " unreachable for ")))
      << readyz.second;
  EXPECT_TRUE(absl::StrContains(readyz.second, "; retrying discovery")) << readyz.second;
  EXPECT_FALSE(host_->ApiServerCheck().ok());

  cluster = StartCluster(port);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(Eventually([&] { return host_->ApiServerCheck().ok(); })) << host_->ApiServerCheck();
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  EXPECT_TRUE(Eventually([&] { return Readyz().first == 200; })) << Readyz().second;
  const std::string web = R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"late","namespace":"default"},"spec":{"image":"nginx"}})";
  ASSERT_TRUE(host_->client().Create(WebApp(""), web).ok());
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "late", ""}).is_null();
  }));
  host_->Stop();
}

// Issue 25: the host's own client used the kubeconfig's token and shared the users' seats, so
// clients holding them (LISTs they do not read, writes whose body never comes) starved the
// host's informers and writes with 429s. It uses the server's in-memory system token, which has
// seats of its own.
TEST_F(HostTest, RegressionUsersHoldingEverySeatDoNotStarveTheHostsClient) {
  StartOperators(std::vector<config::OperatorSpec>{}, [](HostOptions& options) {
    options.apiserver.max_requests_inflight = 1;
    options.apiserver.max_mutating_requests_inflight = 1;
    options.apiserver.write_stall_timeout = absl::Hours(1);  // held until the test ends
    options.rest.max_attempts = 1;                           // a 429 is an error at once
  });
  if (HasFatalFailure()) return;
  const std::string token =
      std::string(absl::StripAsciiWhitespace(ReadFile((dir_ / "data" / "token").string())));
  ASSERT_EQ(token.size(), 64u);
  const int port = std::atoi(host_->api_url().c_str() + host_->api_url().rfind(':') + 1);
  // A LIST larger than the largest socket send buffer plus 4 MiB, whose client reads nothing:
  // it holds the one user read seat. A create whose body never arrives holds the one user
  // write seat.
  std::istringstream wmem(ReadFile("/proc/sys/net/ipv4/tcp_wmem"));
  int64_t wmem_min = 0, wmem_default = 0, wmem_max = 0;
  wmem >> wmem_min >> wmem_default >> wmem_max;
  const int64_t list_bytes = std::max<int64_t>(wmem_max, 4 << 20) + (4 << 20);
  const kube::ResourceRef configmaps{"", "v1", "configmaps", "default", "", ""};
  const std::string value(100 * 1024, 'x');
  for (int64_t i = 0; i * static_cast<int64_t>(value.size()) < list_bytes; ++i) {
    ASSERT_TRUE(host_->client()
                    .Create(configmaps, absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                                                     R"("metadata":{"name":"cm-)", i,
                                                     R"("},"data":{"v":")", value, R"("}})"))
                    .ok());
  }
  apiserver::testing::RawTlsClient list(port, /*receive_buffer=*/4096);
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(list.Send(absl::StrCat("GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\n",
                                     "Host: x\r\nAuthorization: Bearer ", token, "\r\n\r\n")));
  apiserver::testing::RawTlsClient write(port);
  ASSERT_TRUE(write.ok());
  ASSERT_TRUE(write.Send(apiserver::testing::RequestWithPendingBody(
      "POST", "/api/v1/namespaces/default/configmaps", token)));
  httplib::Client user(host_->api_url());
  user.enable_server_certificate_verification(false);
  user.set_bearer_token_auth(token);
  EXPECT_TRUE(Eventually([&] {
    auto r = user.Get("/api/v1/namespaces/default");
    return r && r->status == 429;
  }));
  EXPECT_TRUE(Eventually([&] {
    auto r = user.Post("/api/v1/namespaces/default/configmaps",
                       R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"u-"}})",
                       "application/json");
    return r && r->status == 429;
  }));
  // The host's client reads and writes meanwhile.
  absl::StatusOr<std::string> got =
      host_->client().Get(kube::ResourceRef{"", "v1", "namespaces", "", "default", ""});
  EXPECT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::string> created = host_->client().Create(
      configmaps, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"by-host"}})");
  EXPECT_TRUE(created.ok()) << created.status();
  list.Close();
  write.Close();
  host_->Stop();
}

}  // namespace
}  // namespace ctrlhost::manager
