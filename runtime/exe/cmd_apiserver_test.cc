#include "runtime/exe/cmd_apiserver.h"

#include <sstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ctrlhost::exe {
namespace {

TEST(ApiServerFlagsTest, Defaults) {
  FlagSet flags("ctrlhost apiserver", "");
  ApiServerFlags values;
  AddApiServerFlags(flags, &values);
  ASSERT_TRUE(flags.Parse({}).ok());
  EXPECT_EQ(values.data_dir, ".ctrlhost");
  EXPECT_EQ(values.bind, "127.0.0.1");
  EXPECT_EQ(values.port, 6443);
  EXPECT_FALSE(values.insecure_http);
  EXPECT_EQ(values.storage_sync, "full");
  EXPECT_EQ(values.compaction_retain_revisions, 10000);
  EXPECT_FALSE(values.print_kubeconfig_path);
  EXPECT_EQ(values.max_connections, 8192);
  EXPECT_EQ(values.max_requests_inflight, 400);
  EXPECT_EQ(values.max_mutating_requests_inflight, 200);
  EXPECT_EQ(values.write_stall_timeout, absl::Seconds(10));
  EXPECT_EQ(values.watch_threads, 2);
  EXPECT_EQ(values.watch_stall_timeout, absl::Seconds(10));
}

TEST(ApiServerFlagsTest, ParsesEveryFlag) {
  FlagSet flags("ctrlhost apiserver", "");
  ApiServerFlags values;
  AddApiServerFlags(flags, &values);
  ASSERT_TRUE(
      flags
          .Parse({"--data-dir=/d", "--bind", "0.0.0.0", "--port", "0", "--insecure-http",
                  "--storage-sync", "normal", "--compaction-retain-revisions=5",
                  "--print-kubeconfig-path", "--max-connections=100", "--max-requests-inflight=7",
                  "--max-mutating-requests-inflight=0", "--write-stall-timeout=3s",
                  "--watch-threads=0", "--watch-stall-timeout=2s"})
          .ok());
  EXPECT_EQ(values.watch_threads, 0);
  EXPECT_EQ(values.watch_stall_timeout, absl::Seconds(2));
  EXPECT_EQ(values.write_stall_timeout, absl::Seconds(3));
  EXPECT_EQ(values.max_connections, 100);
  EXPECT_EQ(values.max_requests_inflight, 7);
  EXPECT_EQ(values.max_mutating_requests_inflight, 0);
  EXPECT_EQ(values.data_dir, "/d");
  EXPECT_EQ(values.bind, "0.0.0.0");
  EXPECT_EQ(values.port, 0);
  EXPECT_TRUE(values.insecure_http);
  EXPECT_EQ(values.storage_sync, "normal");
  EXPECT_EQ(values.compaction_retain_revisions, 5);
  EXPECT_TRUE(values.print_kubeconfig_path);
}

TEST(ApiServerFlagsTest, RejectsBadValues) {
  FlagSet flags("ctrlhost apiserver", "");
  ApiServerFlags values;
  AddApiServerFlags(flags, &values);
  EXPECT_EQ(flags.Parse({"--port", "70000"}).status().message(),
            "--port must be between 0 and 65535, got 70000");
  EXPECT_EQ(flags.Parse({"--storage-sync=off"}).status().message(),
            "invalid value \"off\" for --storage-sync: must be one of full, normal");
  EXPECT_EQ(flags.Parse({"--compaction-retain-revisions=0"}).status().message(),
            "--compaction-retain-revisions must be between 1 and 2147483647, got 0");
  // Issue 14: the log named a --max-connections flag that did not exist.
  EXPECT_EQ(flags.Parse({"--max-connections=0"}).status().message(),
            "--max-connections must be between 1 and 1000000, got 0");
  EXPECT_EQ(flags.Parse({"--max-requests-inflight=-1"}).status().message(),
            "--max-requests-inflight must be between 0 and 1000000, got -1");
  EXPECT_EQ(flags.Parse({"--max-mutating-requests-inflight=x"}).status().message().empty(), false);
  EXPECT_EQ(flags.Parse({"--write-stall-timeout=10ms"}).status().message(),
            "--write-stall-timeout must be at least 100ms, got 10ms");
}

// KEP-5866 is on by default; --feature-gates=ShardedListAndWatch=false serves as Kubernetes
// before 1.36 (the shard selector ignored). Unknown gates and values are precise errors.
TEST(ApiServerFlagsTest, FeatureGates) {
  apiserver::ApiServerOptions options;
  EXPECT_TRUE(options.sharded_list_and_watch);
  ASSERT_TRUE(ApplyFeatureGates("", &options).ok());
  EXPECT_TRUE(options.sharded_list_and_watch);
  ASSERT_TRUE(ApplyFeatureGates(" ShardedListAndWatch = false ", &options).ok());
  EXPECT_FALSE(options.sharded_list_and_watch);
  ASSERT_TRUE(ApplyFeatureGates("ShardedListAndWatch=true", &options).ok());
  EXPECT_TRUE(options.sharded_list_and_watch);
  EXPECT_EQ(ApplyFeatureGates("ShardedListAndWatch=true,Foo=false", &options).message(),
            "--feature-gates: unknown feature gate \"Foo\" (known: ShardedListAndWatch)");
  EXPECT_EQ(ApplyFeatureGates("ShardedListAndWatch=off", &options).message(),
            "--feature-gates: ShardedListAndWatch must be true or false, not \"off\"");
  EXPECT_EQ(ApplyFeatureGates("ShardedListAndWatch", &options).message(),
            "--feature-gates: ShardedListAndWatch must be true or false, not \"\"");
  std::ostringstream out, err;
  EXPECT_EQ(RunApiServerCommand({"--feature-gates", "Nope=true"}, out, err), kExitUsage);
  EXPECT_TRUE(absl::StrContains(err.str(), "unknown feature gate \"Nope\"")) << err.str();
}

TEST(ApiServerCommandTest, UsageErrorExitsTwo) {
  std::ostringstream out, err;
  EXPECT_EQ(RunApiServerCommand({"--prot", "1"}, out, err), kExitUsage);
  EXPECT_TRUE(absl::StrContains(err.str(), "(did you mean --port?)")) << err.str();
}

}  // namespace
}  // namespace ctrlhost::exe
