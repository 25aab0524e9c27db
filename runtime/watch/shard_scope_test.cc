#include "runtime/watch/shard_scope.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cache/object.h"
#include "runtime/kube/shard_selector.h"

namespace ctrlhost::watch {
namespace {

const absl::uint128 kTop = absl::uint128(1) << 64;
const absl::uint128 kHalf = absl::uint128(1) << 63;

std::shared_ptr<const cache::Object> Parse(const std::string& json) {
  cache::ObjectParser parser;
  auto object = parser.Parse(json);
  EXPECT_TRUE(object.ok()) << object.status();
  return object.ok() ? *object : nullptr;
}

TEST(ShardHashOfTest, HashesTheUidOrTheControllerOwnersUid) {
  std::shared_ptr<const cache::Object> plain = Parse(R"({"metadata":{"name":"x","uid":"a"}})");
  // FNV-1a 64 of "a", the reference value.
  EXPECT_EQ(ShardHashOf(*plain, ShardBy::kUid), 0xaf63dc4c8601ec8cull);
  // No owner: a child follows its own uid.
  EXPECT_EQ(ShardHashOf(*plain, ShardBy::kOwnerUid), 0xaf63dc4c8601ec8cull);

  std::shared_ptr<const cache::Object> child =
      Parse(R"({"metadata":{"name":"x","uid":"a","ownerReferences":[)"
            R"({"apiVersion":"v1","kind":"A","name":"other","uid":"not-controller"},)"
            R"({"apiVersion":"v1","kind":"B","name":"boss","uid":"foobar","controller":true}]}})");
  EXPECT_EQ(ShardHashOf(*child, ShardBy::kUid), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(ShardHashOf(*child, ShardBy::kOwnerUid), 0x85944171f73967e8ull);  // "foobar"

  // Owners without controller=true do not count: the object's own uid.
  std::shared_ptr<const cache::Object> orphan =
      Parse(R"({"metadata":{"name":"x","uid":"a","ownerReferences":[)"
            R"({"apiVersion":"v1","kind":"A","name":"o","uid":"foobar","controller":false}]}})");
  EXPECT_EQ(ShardHashOf(*orphan, ShardBy::kOwnerUid), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(ShardByName(ShardBy::kUid), "uid");
  EXPECT_EQ(ShardByName(ShardBy::kOwnerUid), "ownerUid");
}

TEST(RangesTest, ContainAtTheEdgesOfTheHashSpace) {
  const std::vector<HashRange> high = {{0x8000000000000000ull, kTop}};
  EXPECT_TRUE(RangesContain(high, ~0ull));
  EXPECT_TRUE(RangesContain(high, 0x8000000000000000ull));
  EXPECT_FALSE(RangesContain(high, 0x7fffffffffffffffull));
  const std::vector<HashRange> low = {{0, kHalf}};
  EXPECT_TRUE(RangesContain(low, 0));
  EXPECT_FALSE(RangesContain(low, 0x8000000000000000ull));  // the end is exclusive
  EXPECT_FALSE(RangesContain({}, 0));

  EXPECT_TRUE(RangesCoverAll({{0, kTop}}));
  EXPECT_TRUE(RangesCoverAll({{0x8000000000000000ull, kTop}, {0, kHalf}}));
  EXPECT_FALSE(RangesCoverAll({{0, kTop - 1}}));
  EXPECT_FALSE(RangesCoverAll({{1, kTop}}));
  EXPECT_FALSE(RangesCoverAll({}));
}

TEST(UidShardSelectorTest, WritesKep5866Text) {
  EXPECT_EQ(UidShardSelector({}), "");
  const std::string text = UidShardSelector({{0, kHalf}, {0xc000000000000000ull, kTop}});
  EXPECT_EQ(text,
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000') || "
            "shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')");
  auto parsed = kube::ShardSelector::Parse(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Matches("a") ==
              RangesContain({{0, kHalf}, {0xc000000000000000ull, kTop}}, kube::Fnv1a64("a")));
}

TEST(ShardScopeTest, StartsEmptyAndNormalisesRanges) {
  ShardScope scope;
  EXPECT_EQ(scope.Get().generation, 0u);
  EXPECT_TRUE(scope.Get().ranges.empty());
  EXPECT_FALSE(scope.Contains(0));
  scope.Set({{0x20, 0x30}, {0x5, 0x5}, {0x10, 0x20}, {0x0, 0x8}});
  const ShardScope::Snapshot s = scope.Get();
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(s.ranges, (std::vector<HashRange>{{0x0, 0x8}, {0x10, 0x30}}));
  EXPECT_TRUE(scope.Contains(0x2f));
  EXPECT_FALSE(scope.Contains(0x30));
  EXPECT_FALSE(scope.Contains(0x8));
}

TEST(ShardScopeTest, ListenersAreCalledOnChangesOnly) {
  ShardScope scope;
  int calls = 0;
  uint64_t seen_generation = 0;
  const int id = scope.AddListener([&] {
    ++calls;
    seen_generation = scope.Get().generation;  // allowed from a listener
  });
  // The first Set ends generation 0 even when it sets no ranges.
  scope.Set({});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_generation, 1u);
  scope.Set({});
  EXPECT_EQ(calls, 1);
  scope.Set({{0, kHalf}});
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(seen_generation, 2u);
  // The same hashes, written differently: no change.
  scope.Set({{0x1000, kHalf}, {0, 0x1000}});
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(scope.Get().generation, 2u);
  scope.Set({{0x8000000000000000ull, kTop}});
  EXPECT_EQ(calls, 3);

  scope.RemoveListener(id);
  scope.Set({{0, kTop}});
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(scope.Get().generation, 4u);
  scope.RemoveListener(id);  // unknown ids are ignored
}

// RemoveListener waits for a call in progress: once it returns, the listener's state may go.
TEST(ShardScopeTest, RemoveListenerWaitsForARunningCall) {
  ShardScope scope;
  std::atomic<bool> entered{false};
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  const int id = scope.AddListener([&] {
    entered = true;
    while (!release) std::this_thread::yield();
    finished = true;
  });
  std::thread setter([&] { scope.Set({{0, kHalf}}); });
  while (!entered) std::this_thread::yield();
  std::atomic<bool> removed{false};
  std::thread remover([&] {
    scope.RemoveListener(id);
    removed = true;
    EXPECT_TRUE(finished);
  });
  release = true;
  remover.join();
  setter.join();
  EXPECT_TRUE(removed);
  EXPECT_TRUE(finished);
}

TEST(ShardScopeTest, ConcurrentSetsAndReadsAreConsistent) {
  ShardScope scope;
  std::atomic<int> calls{0};
  const int id = scope.AddListener([&] { ++calls; });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&scope, t] {
      for (int i = 0; i < 200; ++i) {
        scope.Set({{static_cast<uint64_t>(t * 1000 + i), kTop}});
        const ShardScope::Snapshot s = scope.Get();
        EXPECT_EQ(s.ranges.size(), 1u);
        EXPECT_GE(s.generation, 1u);
      }
    });
  }
  for (auto& t : threads) t.join();
  scope.RemoveListener(id);
  EXPECT_EQ(static_cast<uint64_t>(calls.load()), scope.Get().generation);
}

TEST(ShardLabelsTest, BucketLabelIsTheTopBitsInDecimal) {
  EXPECT_EQ(ShardBucketLabel(0, 8), "0");
  EXPECT_EQ(ShardBucketLabel(~0ull, 8), "255");
  EXPECT_EQ(ShardBucketLabel(0x80ffffffffffffffull, 8), "128");
  EXPECT_EQ(ShardBucketLabel(0x7fffffffffffffffull, 8), "127");
  EXPECT_EQ(ShardBucketLabel(~0ull, 12), "4095");
  EXPECT_EQ(ShardBucketLabel(0xaf63dc4c8601ec8cull, 8), "175");  // uid "a"
}

TEST(ShardLabelsTest, SelectorListsEveryBucketTheRangesTouch) {
  const ShardLabels labels{"ctrlhost.dev/shard-bucket", 8};
  EXPECT_EQ(ShardLabelSelector(labels, {}), "");
  // Aligned: [0x02.., 0x05..) is buckets 2, 3, 4; the top bucket's end is 2^64.
  EXPECT_EQ(ShardLabelSelector(labels, {{0xfe00000000000000ull, kTop},
                                        {0x0200000000000000ull, 0x0500000000000000ull}}),
            "ctrlhost.dev/shard-bucket in (2,3,4,254,255)");
  // Not aligned: the partly covered buckets too, each once.
  EXPECT_EQ(ShardLabelSelector(labels, {{0x02000000000000ffull, 0x0300000000000001ull},
                                        {0x0300000000000005ull, 0x0300000000000006ull}}),
            "ctrlhost.dev/shard-bucket in (2,3)");
  std::string all = ShardLabelSelector(labels, {{0, kTop}});
  EXPECT_EQ(std::count(all.begin(), all.end(), ','), 255);
  EXPECT_EQ(ShardLabelSelector({"k", 1}, {{0, kHalf}}), "k in (0)");
}

TEST(ShardLabelsTest, HasShardLabelWantsTheUidsBucket) {
  const ShardLabels labels{"b", 8};
  EXPECT_TRUE(
      HasShardLabel(*Parse(R"({"metadata":{"name":"x","uid":"a","labels":{"b":"175"}}})"), labels));
  EXPECT_FALSE(
      HasShardLabel(*Parse(R"({"metadata":{"name":"x","uid":"a","labels":{"b":"174"}}})"), labels));
  EXPECT_FALSE(HasShardLabel(*Parse(R"({"metadata":{"name":"x","uid":"a"}})"), labels));
}

TEST(ShardScopeTest, EnableLabelsBumpsTheGenerationOnceSet) {
  ShardScope scope;
  int calls = 0;
  const int id = scope.AddListener([&] { ++calls; });
  scope.EnableLabels({"k", 8});  // before the first Set: nothing to list again
  EXPECT_EQ(scope.Get().generation, 0u);
  ASSERT_TRUE(scope.Get().labels.has_value());
  EXPECT_EQ(scope.Get().labels->key, "k");
  scope.Set({{0, kHalf}});
  EXPECT_EQ(scope.Get().generation, 1u);
  scope.EnableLabels({"k", 8});  // no change
  EXPECT_EQ(calls, 1);
  scope.EnableLabels({"k", 99});  // clamped to 16 bits: a change
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(scope.Get().generation, 2u);
  EXPECT_EQ(scope.Get().labels->bucket_bits, 16);
  scope.EnableLabels({});  // off
  EXPECT_EQ(calls, 3);
  EXPECT_FALSE(scope.Get().labels.has_value());
  scope.RemoveListener(id);
}

TEST(ShardScopeTest, MislabeledHandlerIsReplaceable) {
  ShardScope scope;
  std::shared_ptr<const cache::Object> object = Parse(R"({"metadata":{"name":"x","uid":"a"}})");
  scope.ReportMislabeled(*object);  // no handler: nothing happens
  std::vector<std::string> seen;
  scope.SetMislabeledHandler([&](const cache::Object& o) { seen.push_back(std::string(o.uid())); });
  scope.ReportMislabeled(*object);
  EXPECT_EQ(seen, std::vector<std::string>{"a"});
  scope.SetMislabeledHandler(nullptr);
  scope.ReportMislabeled(*object);
  EXPECT_EQ(seen.size(), 1u);
}

}  // namespace
}  // namespace ctrlhost::watch
