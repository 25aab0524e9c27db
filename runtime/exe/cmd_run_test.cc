#include "runtime/exe/cmd_run.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/exe/flags.h"
#include "runtime/plugin/sandbox.h"

namespace ctrlhost::exe {
namespace {

namespace fs = std::filesystem;

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }

  std::string Touch(const std::string& relative) {
    fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n";
    return path.string();
  }

  RunFlags Flags(const std::string& file) {
    RunFlags flags;
    flags.file = file;
    return flags;
  }

  fs::path root_;
};

TEST_F(RunCommandTest, SingleFileWithEmbeddedApiServer) {
  const std::string file = Touch("op.yaml");
  absl::StatusOr<RunPlan> plan = PlanRun(Flags(file), std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->operator_files, std::vector<std::string>{file});
  EXPECT_FALSE(plan->from_directory);
  EXPECT_TRUE(plan->kubeconfigs.empty());
  // Relative paths are made absolute once, here: nothing downstream sees a relative one.
  EXPECT_EQ(plan->data_dir, (fs::current_path() / ".ctrlhost").string());
  EXPECT_EQ(plan->admin_socket, (fs::current_path() / ".ctrlhost/admin.sock").string());
  EXPECT_EQ(plan->metrics_addr, "127.0.0.1:9090");
}

TEST_F(RunCommandTest, DirectoryLoadsYamlFilesSortedAndOneLevelOnly) {
  const std::string b = Touch("ops/b.yml");
  const std::string a = Touch("ops/a.yaml");
  Touch("ops/README.md");
  Touch("ops/nested/c.yaml");
  absl::StatusOr<RunPlan> plan = PlanRun(Flags((root_ / "ops").string()), std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->operator_files, (std::vector<std::string>{a, b}));
  EXPECT_TRUE(plan->from_directory);
}

TEST_F(RunCommandTest, MissingFile) {
  absl::StatusOr<RunPlan> plan = PlanRun(Flags("missing.yaml"), std::nullopt);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(), "--file \"missing.yaml\": no such file or directory");
}

TEST_F(RunCommandTest, DirectoryWithoutOperatorFiles) {
  Touch("empty/notes.txt");
  const std::string dir = (root_ / "empty").string();
  EXPECT_EQ(PlanRun(Flags(dir), std::nullopt).status().message(),
            "--file \"" + dir + "\": the directory contains no .yaml or .yml files");
}

TEST_F(RunCommandTest, KubeconfigFlag) {
  RunFlags flags = Flags(Touch("op.yaml"));
  flags.kubeconfig = (root_ / "nope").string();
  EXPECT_EQ(PlanRun(flags, std::nullopt).status().message(),
            "--kubeconfig \"" + flags.kubeconfig + "\": no such file or directory");
  flags.kubeconfig = root_.string();
  EXPECT_EQ(PlanRun(flags, std::nullopt).status().message(),
            "--kubeconfig \"" + flags.kubeconfig + "\": not a regular file");
  flags.kubeconfig = Touch("kubeconfig");
  // The flag wins over $KUBECONFIG.
  absl::StatusOr<RunPlan> plan = PlanRun(flags, std::string("/elsewhere"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kubeconfigs, std::vector<std::string>{flags.kubeconfig});
  EXPECT_EQ(plan->kubeconfig_source, "--kubeconfig");
}

TEST_F(RunCommandTest, KubeconfigEnvironmentListSkipsMissingFiles) {
  const std::string config = Touch("config");
  absl::StatusOr<RunPlan> plan =
      PlanRun(Flags(Touch("op.yaml")), "/does/not/exist:" + config + ":");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kubeconfigs, std::vector<std::string>{config});
  EXPECT_EQ(plan->kubeconfig_source, "$KUBECONFIG");
}

// In a Pod (KUBERNETES_SERVICE_HOST set) with no kubeconfig the host works against that cluster
// with the Pod's service account, not the embedded server; a kubeconfig still wins.
TEST_F(RunCommandTest, InClusterWhenServiceHostIsSetAndNoKubeconfig) {
  absl::StatusOr<RunPlan> plan =
      PlanRun(Flags(Touch("op.yaml")), std::nullopt, std::string("10.0.0.1"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->in_cluster);
  EXPECT_TRUE(plan->kubeconfigs.empty());
  EXPECT_EQ(ClusterOriginLine(*plan, "https://10.0.0.1:443"),
            "cluster: https://10.0.0.1:443 in-cluster (the Pod's service account, "
            "$KUBERNETES_SERVICE_HOST)");
  const std::string config = Touch("config");
  plan = PlanRun(Flags(Touch("op.yaml")), config, std::string("10.0.0.1"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->in_cluster);
  EXPECT_EQ(plan->kubeconfig_source, "$KUBECONFIG");
  // Empty means unset: the embedded server.
  plan = PlanRun(Flags(Touch("op.yaml")), std::nullopt, std::string());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->in_cluster);
}

TEST_F(RunCommandTest, KubeconfigEnvironmentWithNoExistingFile) {
  EXPECT_EQ(PlanRun(Flags(Touch("op.yaml")), std::string("/a:/b")).status().message(),
            "$KUBECONFIG is \"/a:/b\" but none of its files exist; unset it to use the embedded "
            "API server");
  // An empty $KUBECONFIG means unset.
  EXPECT_TRUE(PlanRun(Flags(Touch("op.yaml")), std::string()).ok());
}

// Issue 13 item 5: a $KUBECONFIG left set was used silently.
TEST_F(RunCommandTest, ClusterOriginLineSaysWhereTheClusterCameFrom) {
  const std::string config = Touch("config");
  absl::StatusOr<RunPlan> plan = PlanRun(Flags(Touch("op.yaml")), config);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(ClusterOriginLine(*plan, "https://10.0.0.1:6443"),
            "cluster: https://10.0.0.1:6443 from $KUBECONFIG=" + config +
                " (not the embedded API server; unset KUBECONFIG to use it)");
  RunFlags flags = Flags(Touch("op.yaml"));
  flags.kubeconfig = config;
  plan = PlanRun(flags, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(ClusterOriginLine(*plan, "https://10.0.0.1:6443"),
            "cluster: https://10.0.0.1:6443 from --kubeconfig " + config);
  plan = PlanRun(Flags(Touch("op.yaml")), std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(ClusterOriginLine(*plan, "https://127.0.0.1:6443"), "");
}

TEST_F(RunCommandTest, WatchStaleAfter) {
  RunFlags flags = Flags(Touch("op.yaml"));
  EXPECT_EQ(PlanRun(flags, std::nullopt)->watch_stale_after, absl::Seconds(30));
  flags.watch_stale_after = absl::Minutes(2);
  EXPECT_EQ(PlanRun(flags, std::nullopt)->watch_stale_after, absl::Minutes(2));
  flags.watch_stale_after = absl::ZeroDuration();
  EXPECT_EQ(PlanRun(flags, std::nullopt).status().message(),
            "--watch-stale-after must be positive");
}

TEST_F(RunCommandTest, LeaderElection) {
  RunFlags flags = Flags(Touch("op.yaml"));
  EXPECT_FALSE(PlanRun(flags, std::nullopt)->leader_election.has_value());
  flags.leader_elect = true;
  absl::StatusOr<RunPlan> plan = PlanRun(flags, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->leader_election.has_value());
  EXPECT_EQ(plan->leader_election->lease_name, "ctrlhost");
  EXPECT_EQ(plan->leader_election->lease_namespace, "default");
  EXPECT_EQ(plan->leader_election->lease_duration, absl::Seconds(15));
  EXPECT_EQ(plan->leader_election->renew_deadline, absl::Seconds(10));
  EXPECT_EQ(plan->leader_election->retry_period, absl::Seconds(2));
  EXPECT_FALSE(plan->leader_election->identity.empty());
  // $POD_NAMESPACE unless the flag names one.
  EXPECT_EQ(PlanRun(flags, std::nullopt, std::nullopt, "ops")->leader_election->lease_namespace,
            "ops");
  flags.leader_elect_resource_namespace = "ha";
  flags.leader_elect_identity = "host-a";
  plan = PlanRun(flags, std::nullopt, std::nullopt, "ops");
  EXPECT_EQ(plan->leader_election->lease_namespace, "ha");
  EXPECT_EQ(plan->leader_election->identity, "host-a");
  flags.leader_elect_renew_deadline = absl::Seconds(15);
  EXPECT_EQ(PlanRun(flags, std::nullopt).status().message(),
            "--leader-elect-*: leader election: leaseDuration (15s) must be greater than "
            "renewDeadline (15s)");
}

// Issue 16: leader election from spec.leaderElection; the flags the command line gives win.
TEST_F(RunCommandTest, LeaderElectionFromOperatorFiles) {
  RunFlags flags = Flags(Touch("op.yaml"));
  flags.leader_elect_identity = "host-a";
  config::OperatorSpec a, b;
  a.leader_election = config::LeaderElectionSpec{.lease_duration = absl::Seconds(20),
                                                 .renew_deadline = absl::Seconds(12),
                                                 .lease_name = "web-leader",
                                                 .location = {"a.yaml", 9, 3}};
  b.leader_election = config::LeaderElectionSpec{
      .retry_period = absl::Seconds(3), .lease_namespace = "ops", .location = {"b.yaml", 7, 3}};
  absl::StatusOr<RunPlan> plan = PlanRun(flags, std::nullopt, std::nullopt, "pods");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->leader_election.has_value());
  // No block: the flags alone decide.
  ASSERT_TRUE(ResolveLeaderElection(flags, {config::OperatorSpec{}}, "pods", &*plan).ok());
  EXPECT_FALSE(plan->leader_election.has_value());
  // A block turns it on; the documents' fields merge, the rest are the flags' defaults.
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  ASSERT_TRUE(plan->leader_election.has_value());
  EXPECT_EQ(plan->leader_election->lease_name, "web-leader");
  EXPECT_EQ(plan->leader_election->lease_namespace, "ops");
  EXPECT_EQ(plan->leader_election->identity, "host-a");
  EXPECT_EQ(plan->leader_election->lease_duration, absl::Seconds(20));
  EXPECT_EQ(plan->leader_election->renew_deadline, absl::Seconds(12));
  EXPECT_EQ(plan->leader_election->retry_period, absl::Seconds(3));
  // A flag the command line gave wins over the file; one left at its default does not.
  flags.leader_elect_lease_duration = absl::Seconds(30);
  flags.leader_elect_resource_namespace = "ha";
  flags.leader_elect_resource_name = "other";
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  EXPECT_EQ(plan->leader_election->lease_duration, absl::Seconds(20));
  EXPECT_EQ(plan->leader_election->lease_namespace, "ops");
  EXPECT_EQ(plan->leader_election->lease_name, "web-leader");
  flags.leader_elect_given = {"leader-elect-lease-duration", "leader-elect-resource-namespace",
                              "leader-elect-resource-name"};
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  EXPECT_EQ(plan->leader_election->lease_duration, absl::Seconds(30));
  EXPECT_EQ(plan->leader_election->lease_namespace, "ha");
  EXPECT_EQ(plan->leader_election->lease_name, "other");
  EXPECT_EQ(plan->leader_election->renew_deadline, absl::Seconds(12));
  // An explicit --leader-elect=false turns it off despite the blocks.
  flags.leader_elect_given.insert("leader-elect");
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  EXPECT_FALSE(plan->leader_election.has_value());
  flags.leader_elect_given.clear();
  // The merged values obey the flags' rules; the error names the blocks.
  flags.leader_elect_renew_deadline = absl::Seconds(20);
  flags.leader_elect_given = {"leader-elect-renew-deadline"};
  EXPECT_EQ(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).message(),
            "a.yaml:9:3, b.yaml:7:3: spec.leaderElection merged with the --leader-elect-* flags "
            "and their defaults: leader election: leaseDuration (20s) must be greater than "
            "renewDeadline (20s)");
  flags.leader_elect_given.clear();
  // Two documents that disagree: one host has one Lease.
  config::OperatorSpec c;
  c.leader_election = config::LeaderElectionSpec{.lease_duration = absl::Seconds(25),
                                                 .lease_name = "web-leader",
                                                 .location = {"c.yaml", 5, 3}};
  EXPECT_EQ(ResolveLeaderElection(flags, {a, b, c}, "pods", &*plan).message(),
            "c.yaml:5:3: spec.leaderElection.leaseDuration: 25s differs from 20s set at "
            "a.yaml:9:3 (the host has one Lease for all its operators)");
  // A block excludes --shard-ring like --leader-elect does.
  flags.shard_ring = "web";
  EXPECT_EQ(ResolveLeaderElection(flags, {a}, "pods", &*plan).message(),
            "--shard-ring and spec.leaderElection (a.yaml:9:3) exclude each other: with leader "
            "election only the leader dispatches, so the standbys' shares of the keys would "
            "never run");
}

TEST_F(RunCommandTest, PerOperatorLeases) {
  RunFlags flags = Flags(Touch("op.yaml"));
  flags.leader_elect_identity = "host-a";
  config::OperatorSpec a, b, c;
  a.name = "alpha";
  a.leader_election = config::LeaderElectionSpec{.lease_duration = absl::Seconds(6),
                                                 .renew_deadline = absl::Seconds(4),
                                                 .retry_period = absl::Seconds(1),
                                                 .per_operator = true,
                                                 .location = {"a.yaml", 9, 3}};
  b.name = "beta";
  b.leader_election = config::LeaderElectionSpec{.lease_name = "beta-lease",
                                                 .lease_namespace = "ops",
                                                 .per_operator = true,
                                                 .location = {"b.yaml", 7, 3}};
  c.name = "gamma";
  c.location = {"c.yaml", 1, 1};
  absl::StatusOr<RunPlan> plan = PlanRun(flags, std::nullopt, std::nullopt, "pods");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  EXPECT_FALSE(plan->leader_election.has_value());
  ASSERT_EQ(plan->operator_leases.size(), 2u);
  const manager::LeaderElectionOptions& alpha = plan->operator_leases.at("alpha");
  EXPECT_EQ(alpha.lease_name, "ctrlhost-alpha");
  EXPECT_EQ(alpha.lease_namespace, "pods");
  EXPECT_EQ(alpha.identity, "host-a");
  EXPECT_EQ(alpha.lease_duration, absl::Seconds(6));
  EXPECT_EQ(alpha.renew_deadline, absl::Seconds(4));
  EXPECT_EQ(alpha.retry_period, absl::Seconds(1));
  const manager::LeaderElectionOptions& beta = plan->operator_leases.at("beta");
  EXPECT_EQ(beta.lease_name, "beta-lease");
  EXPECT_EQ(beta.lease_namespace, "ops");
  EXPECT_EQ(beta.lease_duration, absl::Seconds(15));  // the flag's default
  // The block's own fields win over a flag; a flag fills what it leaves out.
  flags.leader_elect_lease_duration = absl::Seconds(20);
  flags.leader_elect_given = {"leader-elect-lease-duration"};
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  EXPECT_EQ(plan->operator_leases.at("alpha").lease_duration, absl::Seconds(6));
  EXPECT_EQ(plan->operator_leases.at("beta").lease_duration, absl::Seconds(20));
  flags.leader_elect_given.clear();
  flags.leader_elect_lease_duration = absl::Seconds(15);
  // Every operator needs one once one has one.
  EXPECT_EQ(ResolveLeaderElection(flags, {a, c}, "pods", &*plan).message(),
            "a.yaml:9:3: operator alpha: spec.leaderElection.perOperator: once an operator has a "
            "Lease of its own, every operator of the host must (spec.leaderElection: "
            "{perOperator: true}); an operator without one would run on every host: gamma "
            "(c.yaml:1:1)");
  EXPECT_TRUE(plan->operator_leases.empty());
  // Two operators cannot share one Lease.
  config::OperatorSpec d = b;
  d.name = "delta";
  d.leader_election->location = {"d.yaml", 4, 3};
  EXPECT_EQ(ResolveLeaderElection(flags, {b, d}, "pods", &*plan).message(),
            "d.yaml:4:3: operator delta: spec.leaderElection: Lease ops/beta-lease is already the "
            "Lease of b.yaml:7:3: operator beta: spec.leaderElection (each operator needs its "
            "own)");
  // Merged values obey the flags' rules.
  flags.leader_elect_renew_deadline = absl::Seconds(30);
  EXPECT_EQ(ResolveLeaderElection(flags, {b}, "pods", &*plan).message(),
            "b.yaml:7:3: operator beta: spec.leaderElection merged with the --leader-elect-* "
            "flags and their defaults: leader election: leaseDuration (15s) must be greater than "
            "renewDeadline (30s)");
  flags.leader_elect_renew_deadline = absl::Seconds(10);
  // --leader-elect and --shard-ring exclude them; --leader-elect=false turns them off.
  flags.leader_elect = true;
  EXPECT_EQ(ResolveLeaderElection(flags, {a}, "pods", &*plan).message(),
            "a.yaml:9:3: operator alpha: spec.leaderElection.perOperator and --leader-elect "
            "exclude each other (the host-wide Lease would decide for operators that have their "
            "own)");
  flags.leader_elect = false;
  flags.leader_elect_given = {"leader-elect"};
  ASSERT_TRUE(ResolveLeaderElection(flags, {a, b}, "pods", &*plan).ok());
  EXPECT_TRUE(plan->operator_leases.empty());
  EXPECT_FALSE(plan->leader_election.has_value());
  flags.leader_elect_given.clear();
  flags.shard_ring = "web";
  EXPECT_EQ(ResolveLeaderElection(flags, {a}, "pods", &*plan).message(),
            "--shard-ring and a.yaml:9:3: operator alpha: spec.leaderElection.perOperator exclude "
            "each other: a host that does not hold an operator's Lease would never run its share "
            "of that operator's keys");
}

// Per-operator Leases through the command line: one preview line per operator.
TEST_F(RunCommandTest, PerOperatorLeasesPreview) {
  const std::string file = Touch("ops.yaml");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  leaderElection: {perOperator: true, leaseDuration: 20s}\n"
         "  plugins:\n  - name: web\n    exec: {command: /bin/true}\n"
         "---\napiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: cart}\n"
         "spec:\n  leaderElection: {perOperator: true, leaseName: cart-lease}\n"
         "  plugins:\n  - name: web\n    exec: {command: /bin/true}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview", "--leader-elect-identity",
                           "me", "--leader-elect-resource-namespace", "ha"},
                          out, err),
            kExitOk)
      << err.str();
  EXPECT_TRUE(absl::StrContains(out.str(),
                                "leader election of operator cart: Lease ha/cart-lease, identity "
                                "me, lease 15s, renew deadline 10s, retry 2s\n"
                                "leader election of operator shop: Lease ha/ctrlhost-shop, "
                                "identity me, lease 20s, renew deadline 10s, retry 2s\n"))
      << out.str();
  EXPECT_FALSE(absl::StrContains(out.str(), "leader election: Lease")) << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(
      RunRunCommand({"-f", file, "--data-dir", "/d", "--preview", "--leader-elect"}, out2, err2),
      kExitFailure);
  EXPECT_TRUE(absl::StrContains(err2.str(),
                                "spec.leaderElection.perOperator and --leader-elect "
                                "exclude each other"))
      << err2.str();
}

// The same through the command line: the file's block and which flags were given.
TEST_F(RunCommandTest, LeaderElectionPreviewFileAndFlags) {
  const std::string file = Touch("op.yaml");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  leaderElection: {leaseDuration: 20s, leaseName: shop, leaseNamespace: ops}\n"
         "  plugins:\n  - name: web\n    exec: {command: /bin/true}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(
      RunRunCommand({"-f", file, "--data-dir", "/d", "--preview", "--leader-elect-identity", "me"},
                    out, err),
      kExitOk)
      << err.str();
  EXPECT_TRUE(absl::StrContains(out.str(),
                                "leader election: Lease ops/shop, identity me, lease 20s, renew "
                                "deadline 10s, retry 2s\n"))
      << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(RunRunCommand(
                {"-f", file, "--data-dir", "/d", "--preview", "--leader-elect-identity", "me",
                 "--leader-elect-lease-duration", "16s", "--leader-elect-resource-namespace", "ha"},
                out2, err2),
            kExitOk)
      << err2.str();
  EXPECT_TRUE(absl::StrContains(out2.str(),
                                "leader election: Lease ha/shop, identity me, lease "
                                "16s, renew deadline 10s, retry 2s\n"))
      << out2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview", "--leader-elect=false"},
                          out3, err3),
            kExitOk)
      << err3.str();
  EXPECT_FALSE(absl::StrContains(out3.str(), "leader election:")) << out3.str();
  std::ostringstream out4, err4;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview",
                           "--leader-elect-renew-deadline", "20s"},
                          out4, err4),
            kExitFailure);
  EXPECT_TRUE(absl::StrContains(err4.str(),
                                "op.yaml:5:19: spec.leaderElection merged with the "
                                "--leader-elect-* flags"))
      << err4.str();
}

TEST_F(RunCommandTest, ShardRing) {
  RunFlags flags = Flags(Touch("op.yaml"));
  EXPECT_FALSE(PlanRun(flags, std::nullopt)->shard_ring.has_value());
  flags.shard_ring = "web";
  flags.leader_elect_identity = "host-a";
  flags.leader_elect_retry_period = absl::Seconds(1);
  flags.leader_elect_renew_deadline = absl::Seconds(3);
  flags.leader_elect_lease_duration = absl::Seconds(4);
  absl::StatusOr<RunPlan> plan = PlanRun(flags, std::nullopt, std::nullopt, "ops");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->shard_ring.has_value());
  EXPECT_EQ(plan->shard_ring->ring, "web");
  EXPECT_EQ(plan->shard_ring->lease_namespace, "ops");
  EXPECT_EQ(plan->shard_ring->identity, "host-a");
  EXPECT_EQ(plan->shard_ring->lease_duration, absl::Seconds(4));
  EXPECT_EQ(plan->shard_ring->poll_period, absl::Milliseconds(500));
  flags.shard_ring = "bad ring";
  EXPECT_NE(std::string(PlanRun(flags, std::nullopt).status().message())
                .find("--shard-ring: shard ring: the ring name \"bad ring\""),
            std::string::npos);
  flags.shard_ring = "web";
  flags.leader_elect = true;
  EXPECT_NE(std::string(PlanRun(flags, std::nullopt).status().message())
                .find("--shard-ring and --leader-elect exclude each other"),
            std::string::npos);
}

TEST_F(RunCommandTest, AdminSocketFollowsDataDirUnlessGiven) {
  RunFlags flags = Flags(Touch("op.yaml"));
  flags.data_dir = "/var/lib/ctrlhost";
  EXPECT_EQ(PlanRun(flags, std::nullopt)->admin_socket, "/var/lib/ctrlhost/admin.sock");
  flags.admin_socket = "/run/ctrlhost.sock";
  EXPECT_EQ(PlanRun(flags, std::nullopt)->admin_socket, "/run/ctrlhost.sock");
  // Relative ones, as a newcomer types them, become absolute (the plugin sandbox refuses
  // relative hidden paths).
  flags.data_dir = "state/../.ctrlhost/demo/";
  flags.admin_socket = "";
  absl::StatusOr<RunPlan> plan = PlanRun(flags, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->data_dir, (fs::current_path() / ".ctrlhost/demo").string());
  EXPECT_EQ(plan->admin_socket, (fs::current_path() / ".ctrlhost/demo/admin.sock").string());
  flags.admin_socket = "run/admin.sock";
  EXPECT_EQ(PlanRun(flags, std::nullopt)->admin_socket,
            (fs::current_path() / "run/admin.sock").string());
}

TEST_F(RunCommandTest, BadMetricsAddress) {
  RunFlags flags = Flags(Touch("op.yaml"));
  flags.metrics_addr = "9090";
  EXPECT_EQ(PlanRun(flags, std::nullopt).status().message(),
            "invalid value \"9090\" for --metrics-addr: expected HOST:PORT");
}

TEST_F(RunCommandTest, ApiServerMaxConnectionsIsValidated) {
  const std::string file = Touch("op.yaml");
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--apiserver-max-connections=0", "--preview"}, out, err),
            kExitUsage);
  EXPECT_TRUE(absl::StrContains(err.str(),
                                "--apiserver-max-connections must be between 1 and 1000000, got 0"))
      << err.str();
}

TEST_F(RunCommandTest, CommandPrintsPreview) {
  const std::string file = Touch("op.yaml");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  plugins:\n  - name: web\n    exec: {command: /bin/sh, args: [-v]}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview"}, out, err), kExitOk)
      << err.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "preview")) << out.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "  " + file + "\n")) << out.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "admin API: unix:///d/admin.sock")) << out.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "  plugin web: exec /bin/sh -v\n")) << out.str();
}

// Regression: a missing command passed --preview.
TEST_F(RunCommandTest, PreviewRefusesCommandsThatCannotStart) {
  const std::string file = Touch("op.yaml");
  const std::string not_executable = Touch("plugin.txt");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  plugins:\n"
         "  - {name: gone, exec: {command: /nonexistent/web}}\n"
         "  - {name: lost, exec: {command: no-such-plugin-in-path}}\n"
         "  - {name: text, exec: {command: "
      << not_executable
      << "}}\n"
         "  - {name: fine, exec: {command: sh}}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview"}, out, err), kExitFailure);
  EXPECT_EQ(out.str(), "");
  EXPECT_TRUE(absl::StrContains(
      err.str(), "operator shop, plugin gone: command \"/nonexistent/web\": no such file"))
      << err.str();
  EXPECT_TRUE(absl::StrContains(
      err.str(), "plugin lost: command \"no-such-plugin-in-path\": not found in $PATH"))
      << err.str();
  EXPECT_TRUE(absl::StrContains(err.str(),
                                "plugin text: command \"" + not_executable + "\": not executable"))
      << err.str();
  EXPECT_FALSE(absl::StrContains(err.str(), "plugin fine")) << err.str();
}

// First contact (a Go plugin's author): as root, --preview passed a plugin in Bazel's output
// tree under /root that uid 200000 (--plugin-user auto) cannot execute, and the host then
// refused it. The preview checks as the plugin's user and says what to do. Switching users needs
// root outside Bazel's sandbox; there the host's-user half runs alone.
TEST_F(RunCommandTest, PreviewChecksThePluginAsTheUserItRunsAs) {
  const fs::path private_dir = root_ / "private";
  fs::create_directories(private_dir);
  fs::permissions(private_dir, fs::perms::owner_all);  // 0700, like /root
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  const std::string plugin = (private_dir / "plugin").string();
  std::ofstream(plugin) << "#!/bin/sh\nexit 0\n";
  fs::permissions(plugin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  const std::string file = Touch("op.yaml");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  plugins:\n  - {name: first, exec: {command: /bin/true}}\n"
         "  - {name: web, exec: {command: "
      << plugin << "}}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview", "--plugin-user", "host"},
                          out, err),
            kExitOk)
      << err.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "  plugin web: exec " + plugin +
                                               " \n    runs as the "
                                               "host's user\n"))
      << out.str();
  if (!plugin::CanSwitchUser(kAutoPluginUidBase + 1)) {
    GTEST_SKIP() << "cannot switch users here (Bazel's sandbox maps only root)";
  }
  std::ostringstream auto_out, auto_err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview"}, auto_out, auto_err),
            kExitFailure);
  EXPECT_EQ(auto_out.str(), "");
  // The second plugin in start order runs as 200001.
  for (const std::string& part :
       {"operator shop, plugin web: cannot execute plugin command \"" + plugin +
            "\": Permission denied",
        std::string("the plugin runs as uid 200001"), std::string("--plugin-user host")}) {
    EXPECT_TRUE(absl::StrContains(auto_err.str(), part)) << part << "\n" << auto_err.str();
  }
  EXPECT_FALSE(absl::StrContains(auto_err.str(), "plugin first")) << auto_err.str();
  // Once uid 200001 can reach it, the preview passes and says who runs what.
  fs::permissions(private_dir, fs::perms::owner_all | fs::perms::others_exec);
  std::ostringstream ok_out, ok_err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview"}, ok_out, ok_err), kExitOk)
      << ok_err.str();
  EXPECT_TRUE(absl::StrContains(ok_out.str(),
                                "  plugin first: exec /bin/true \n    runs as uid "
                                "200000\n"))
      << ok_out.str();
  EXPECT_TRUE(absl::StrContains(ok_out.str(), "    runs as uid 200001\n")) << ok_out.str();
}

// Issue 13 item 2: the API client's 50 QPS could not be changed from the CLI or the file.
TEST_F(RunCommandTest, ApiClientLimitFromFlagsAndOperatorFilesIssue13) {
  const std::string file = Touch("op.yaml");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  apiClient: {qps: 200, burst: 400}\n"
         "  plugins:\n  - name: web\n    exec: {command: /bin/true}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview"}, out, err), kExitOk)
      << err.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "API client limit: 200 QPS, burst 400\n")) << out.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d", "--preview", "--kube-api-qps", "7.5",
                           "--kube-api-burst", "15"},
                          out2, err2),
            kExitOk)
      << err2.str();
  EXPECT_TRUE(absl::StrContains(out2.str(), "API client limit: 7.5 QPS, burst 15\n")) << out2.str();

  RunFlags flags = Flags(file);
  flags.kube_api_qps = "fast";
  EXPECT_EQ(PlanRun(flags, std::nullopt).status().message(),
            "--kube-api-qps: \"fast\" is not a number of requests per second (0: no limit)");
  flags.kube_api_qps = "-1";
  EXPECT_FALSE(PlanRun(flags, std::nullopt).ok());

  // Several documents: the largest value wins, 0 (no limit) above all; flags win over files.
  config::OperatorSpec a, b, c;
  a.api_client = config::ApiClientSpec{.qps = 20, .burst = 5};
  b.api_client = config::ApiClientSpec{.qps = 80, .burst = std::nullopt};
  RunPlan plan;
  config::ApiClientSpec client = ResolveApiClient(plan, {a, b, c});
  EXPECT_EQ(client.qps, 80);
  EXPECT_EQ(client.burst, 5);
  c.api_client = config::ApiClientSpec{.qps = 0, .burst = std::nullopt};
  EXPECT_EQ(ResolveApiClient(plan, {a, c, b}).qps, 0);
  plan.api_qps = 3;
  EXPECT_EQ(ResolveApiClient(plan, {a, b, c}).qps, 3);
  EXPECT_EQ(ResolveApiClient(RunPlan(), {}).qps, std::nullopt);
}

TEST_F(RunCommandTest, InvalidOperatorFileStartsNothing) {
  const std::string file = Touch("op.yaml");
  {
    std::ofstream f(file);
    f << "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\nmetadata: {name: shop}\n"
         "spec:\n  plugins:\n  - name: web\n    exec: {args: [-v]}\n";
  }
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({"-f", file, "--data-dir", "/d"}, out, err), kExitFailure);
  EXPECT_TRUE(absl::StrContains(err.str(), file + ":7:")) << err.str();
  EXPECT_TRUE(absl::StrContains(err.str(), "spec.plugins[0].exec.command")) << err.str();
  EXPECT_EQ(out.str(), "");
}

TEST_F(RunCommandTest, CommandUsageErrors) {
  std::ostringstream out, err;
  EXPECT_EQ(RunRunCommand({}, out, err), kExitUsage);
  EXPECT_EQ(err.str(),
            "error: missing required flag --file for \"ctrlhost run\"\n"
            "run \"ctrlhost run --help\" for usage\n");
  err.str("");
  EXPECT_EQ(RunRunCommand({"-f", "missing.yaml"}, out, err), kExitUsage);
  EXPECT_EQ(err.str(),
            "error: --file \"missing.yaml\": no such file or directory\n"
            "run \"ctrlhost run --help\" for usage\n");
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace ctrlhost::exe
