#include "runtime/watch/registry.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/watch/fake_lister_watcher.h"

namespace ctrlhost::watch {
namespace {

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest()
      : registry_(
            [this](const WatchKey& key) -> absl::StatusOr<std::shared_ptr<ListerWatcher>> {
              ++factory_calls_;
              if (key.kind == "Unknown") return absl::NotFoundError("no kind Unknown");
              auto server = std::make_shared<FakeListerWatcher>();
              server->Set("ns", "a", key.kind);
              common::MutexLock lock(&mu_);
              servers_.push_back(server);
              return server;
            },
            Defaults(&clock_)) {}

  static ReflectorOptions Defaults(common::Clock* clock) {
    ReflectorOptions options;
    options.clock = clock;
    return options;
  }

  std::shared_ptr<FakeListerWatcher> server(size_t i) {
    common::MutexLock lock(&mu_);
    return servers_.at(i);
  }

  common::FakeClock clock_;
  std::atomic<int> factory_calls_{0};
  common::Mutex mu_;
  std::vector<std::shared_ptr<FakeListerWatcher>> servers_ ABSL_GUARDED_BY(mu_);
  ReflectorRegistry registry_;
};

TEST_F(RegistryTest, OneReflectorPerKeyStoppedWithTheLastHandle) {
  const WatchKey pods{"", "v1", "Pod", "default"};
  auto first = registry_.Acquire(pods);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = registry_.Acquire(pods);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(factory_calls_.load(), 1);
  EXPECT_EQ(registry_.RefCount(pods), 2);
  ASSERT_TRUE((*first)->WaitForSync(absl::Seconds(20)));
  EXPECT_EQ((*second)->store().Size(), 1u);
  EXPECT_EQ((*first)->Metrics().description, "v1 Pod ns=default");

  WatchKey other_selector = pods;
  other_selector.label_selector = "app=web";
  auto third = registry_.Acquire(other_selector);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->get(), first->get());
  EXPECT_EQ(registry_.size(), 2u);
  EXPECT_EQ(registry_.Metrics().size(), 2u);

  ASSERT_TRUE(server(0)->WaitForWatchCalls(1, absl::Seconds(20)));
  first->Release();
  EXPECT_EQ(registry_.RefCount(pods), 1);
  EXPECT_EQ((*second)->state(), ReflectorState::kWatching);
  ReflectorHandle moved = *std::move(second);
  EXPECT_EQ(registry_.RefCount(pods), 1);
  moved.Release();
  EXPECT_EQ(registry_.RefCount(pods), 0);
  EXPECT_EQ(registry_.size(), 1u);
  EXPECT_EQ(server(0)->open_watches(), 0);  // stopped

  auto again = registry_.Acquire(pods);  // a new reflector
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(factory_calls_.load(), 3);
}

TEST_F(RegistryTest, FactoryErrorsAreReturned) {
  auto handle = registry_.Acquire({"example.com", "v1", "Unknown"});
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.size(), 0u);
}

TEST_F(RegistryTest, StrippingIsPartOfTheKey) {
  WatchKey stripped{"", "v1", "ConfigMap"};
  WatchKey full = stripped;
  full.strip_managed_fields = false;
  auto a = registry_.Acquire(stripped);
  auto b = registry_.Acquire(full);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(full.ToString(), "v1 ConfigMap unstripped");
}

TEST_F(RegistryTest, ConcurrentAcquireAndReleaseShareOneReflector) {
  const WatchKey key{"apps", "v1", "Deployment"};
  auto keep = registry_.Acquire(key);  // keeps it alive throughout
  ASSERT_TRUE(keep.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto handle = registry_.Acquire(key);
        ASSERT_TRUE(handle.ok());
        EXPECT_EQ(handle->get(), keep->get());
        (*handle)->store().Size();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(factory_calls_.load(), 1);
  EXPECT_EQ(registry_.RefCount(key), 1);

  // Without a keeper, racing first users still end with nothing alive.
  keep->Release();
  threads.clear();
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto handle = registry_.Acquire(key);
        ASSERT_TRUE(handle.ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(registry_.size(), 0u);
}

// An unsharded controller and a sharded one, or two scopes, never share a cache; the same
// scope and ShardBy do. The registry hands the scope to the reflector.
TEST_F(RegistryTest, KeysWithDifferentScopesAreDifferentReflectors) {
  const WatchKey plain{"", "v1", "ConfigMap", "default"};
  auto scope = std::make_shared<ShardScope>();
  scope->Set({{0, absl::uint128(1) << 64}});
  WatchKey sharded = plain;
  sharded.shard = scope;
  WatchKey by_owner = sharded;
  by_owner.shard_by = ShardBy::kOwnerUid;
  WatchKey other_scope = plain;
  other_scope.shard = std::make_shared<ShardScope>();
  WatchKey same_scope = plain;
  same_scope.shard = scope;

  EXPECT_FALSE(plain == sharded);
  EXPECT_FALSE(sharded == by_owner);
  EXPECT_FALSE(sharded == other_scope);
  EXPECT_TRUE(sharded == same_scope);
  // Without a scope ShardBy means nothing.
  WatchKey plain_by_owner = plain;
  plain_by_owner.shard_by = ShardBy::kOwnerUid;
  EXPECT_TRUE(plain == plain_by_owner);
  EXPECT_EQ(absl::HashOf(plain), absl::HashOf(plain_by_owner));
  EXPECT_EQ(absl::HashOf(sharded), absl::HashOf(same_scope));
  EXPECT_EQ(sharded.ToString(), "v1 ConfigMap ns=default shard=uid");
  EXPECT_EQ(by_owner.ToString(), "v1 ConfigMap ns=default shard=ownerUid");

  std::vector<ReflectorHandle> handles;
  for (const WatchKey& key : {plain, sharded, by_owner, other_scope, same_scope}) {
    auto handle = registry_.Acquire(key);
    ASSERT_TRUE(handle.ok()) << handle.status();
    handles.push_back(*std::move(handle));
  }
  EXPECT_EQ(registry_.size(), 4u);
  EXPECT_EQ(factory_calls_.load(), 4);
  EXPECT_NE(handles[0].get(), handles[1].get());
  EXPECT_EQ(handles[1].get(), handles[4].get());
  ASSERT_TRUE(handles[1]->WaitForSync(absl::Seconds(20)));
  EXPECT_EQ(handles[1]->store().Size(), 1u);  // the whole space: everything
  ASSERT_TRUE(handles[3]->WaitForSync(absl::Seconds(20)));
  EXPECT_EQ(handles[3]->store().Size(), 0u);  // a scope never set: nothing
  EXPECT_EQ(handles[1]->Metrics().shard_generation, 1u);
}

}  // namespace
}  // namespace ctrlhost::watch
