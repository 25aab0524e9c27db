// The whole host in-process (host_test_fixture.h): what changes while it runs: swaps, edits of
// the operator files, and the operator set fixed by per-operator Leases.
#include "runtime/manager/host.h"
#include "runtime/manager/host_test_fixture.h"

namespace ctrlhost::manager {
namespace {

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

}  // namespace
}  // namespace ctrlhost::manager
