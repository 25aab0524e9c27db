// The whole host in-process (host_test_fixture.h): plugins and their controllers, limits, cache
// caps, crashes, health, names, endpoint plugins and overrides.
#include "runtime/manager/host.h"

#include "runtime/manager/host_test_fixture.h"

namespace ctrlhost::manager {
namespace {

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

}  // namespace
}  // namespace ctrlhost::manager
