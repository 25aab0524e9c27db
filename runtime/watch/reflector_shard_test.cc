// The reflector's sharding (ReflectorOptions::shard) against the fake server, both as a server
// that applies KEP-5866's selector and as one that ignores it.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/watch/fake_lister_watcher.h"
#include "runtime/watch/mirror_handler_for_tests.h"
#include "runtime/watch/reflector.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::watch {
namespace {

const absl::uint128 kTop = absl::uint128(1) << 64;
const absl::uint128 kHalf = absl::uint128(1) << 63;
const std::vector<HashRange> kLow = {{0, kHalf}};
const std::vector<HashRange> kHigh = {{0x8000000000000000ull, kTop}};

std::map<std::string, std::string> StoreContent(const cache::Store& store) {
  std::map<std::string, std::string> out;
  for (const auto& object : store.List()) {
    out[std::string(object->key())] = std::string(object->json());
  }
  return out;
}

// The fake server names its objects' uids "uid-<ns>/<name>".
bool InRanges(const std::vector<HashRange>& ranges, const std::string& key) {
  return RangesContain(ranges, kube::Fnv1a64("uid-" + key));
}

// The name of the i-th test object. The number comes first: FNV-1a's top bits barely move
// when only the last characters differ (uids "uid-ns/o0".."o29" all hash to the upper half).
std::string Name(int i, absl::string_view what = "obj") { return absl::StrCat(i, "-", what); }

// A name in ns "ns" whose uid hashes into `ranges`.
std::string NameIn(const std::vector<HashRange>& ranges, absl::string_view what) {
  for (int i = 0;; ++i) {
    if (InRanges(ranges, "ns/" + Name(i, what))) return Name(i, what);
  }
}

class ReflectorShardTest : public ::testing::TestWithParam<bool> {
 protected:
  ReflectorShardTest() { server_->SetShardSelectorSupport(ServerApplies()); }
  ~ReflectorShardTest() override {
    if (reflector_ != nullptr) reflector_->Stop();
  }

  bool ServerApplies() const { return GetParam(); }

  void StartReflector(ShardBy by = ShardBy::kUid) {
    ReflectorOptions options;
    options.clock = &clock_;
    options.seed = 42;
    options.description = "sharded";
    options.page_size = 4;
    options.shard = scope_;
    options.shard_by = by;
    reflector_ = std::make_unique<Reflector>(server_, options);
    handler_ = std::make_shared<MirrorHandler>();
    reflector_->AddHandler(handler_);
    reflector_->Start();
  }

  // The server's objects in `ranges`: what the cache must hold.
  std::map<std::string, std::string> Want(const std::vector<HashRange>& ranges) const {
    std::map<std::string, std::string> out;
    for (const auto& [key, json] : server_->Snapshot()) {
      if (InRanges(ranges, key)) out[key] = json;
    }
    return out;
  }

  // Bounded real-time polling; the fake clock moves so that no backoff waits for real.
  bool WaitFor(const std::function<bool()>& done) {
    return WaitAdvancing(clock_, done, absl::Milliseconds(100));
  }

  // The store and the handler hold exactly the server's objects in `ranges`, and a watch runs.
  void ExpectHolds(const std::vector<HashRange>& ranges) {
    auto converged = [&] {
      const auto want = Want(ranges);
      return reflector_->HasSynced() && StoreContent(reflector_->store()) == want &&
             handler_->mirror() == want && server_->open_watches() == 1 &&
             reflector_->state() == ReflectorState::kWatching;
    };
    EXPECT_TRUE(WaitFor(converged));
    EXPECT_EQ(StoreContent(reflector_->store()), Want(ranges));
    EXPECT_EQ(handler_->mirror(), Want(ranges));
    EXPECT_TRUE(handler_->errors().empty()) << handler_->errors()[0];
  }

  size_t CountIn(const std::vector<HashRange>& ranges) const { return Want(ranges).size(); }

  common::FakeClock clock_;
  std::shared_ptr<FakeListerWatcher> server_ = std::make_shared<FakeListerWatcher>();
  std::shared_ptr<ShardScope> scope_ = std::make_shared<ShardScope>();
  std::unique_ptr<Reflector> reflector_;
  std::shared_ptr<MirrorHandler> handler_;
};

INSTANTIATE_TEST_SUITE_P(Servers, ReflectorShardTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ServerApplies" : "ServerIgnores";
                         });

TEST_P(ReflectorShardTest, CachesOnlyItsShardFromListsAndEvents) {
  for (int i = 0; i < 30; ++i) server_->Set("ns", Name(i), "v");
  const size_t out_of_range = 30 - CountIn(kLow);
  ASSERT_GT(CountIn(kLow), 5u);
  ASSERT_GT(out_of_range, 5u);
  scope_->Set(kLow);
  StartReflector();
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(30)));
  ExpectHolds(kLow);
  EXPECT_EQ(server_->last_list_options().shard_selector, UidShardSelector(kLow));
  EXPECT_EQ(server_->last_watch_options().shard_selector, UidShardSelector(kLow));

  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_mode, ServerApplies() ? "server" : "client");
  EXPECT_EQ(m.shard_generation, 1u);
  EXPECT_EQ(m.shard_filtered_total, ServerApplies() ? 0u : out_of_range);
  EXPECT_EQ(m.shard_relists_total, 0u);
  EXPECT_EQ(m.objects, CountIn(kLow));

  // Events: one out of range, then one in range, whose arrival means the first was handled.
  const std::string outside = NameIn(kHigh, "new-high-");
  const std::string inside = NameIn(kLow, "new-low-");
  server_->Set("ns", outside, "v");
  server_->Set("ns", outside, "changed");
  server_->Delete("ns", outside);
  server_->Set("ns", inside, "v");
  ExpectHolds(kLow);
  EXPECT_EQ(reflector_->store().Get("ns", outside), nullptr);
  ASSERT_NE(reflector_->store().Get("ns", inside), nullptr);
  m = reflector_->Metrics();
  // A server that ignores the selector sends the three events; the reflector drops them.
  EXPECT_EQ(m.shard_filtered_total, ServerApplies() ? 0u : out_of_range + 3);
  EXPECT_EQ(m.relists_total, 0u);
  EXPECT_EQ(handler_->deletes(), 0);
}

TEST_P(ReflectorShardTest, ScopeChangeRelistsWithExactAddsAndDeletes) {
  for (int i = 0; i < 30; ++i) server_->Set("ns", Name(i), "v");
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(kLow);
  const int low = static_cast<int>(CountIn(kLow));
  const int high = static_cast<int>(CountIn(kHigh));
  EXPECT_EQ(handler_->adds(), low);

  scope_->Set(kHigh);
  ExpectHolds(kHigh);
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().shard_generation == 2; }));
  EXPECT_EQ(handler_->adds(), low + high);
  EXPECT_EQ(handler_->deletes(), low);
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_relists_total, 1u);
  EXPECT_EQ(m.relists_total, 1u);
  EXPECT_EQ(m.shard_mode, ServerApplies() ? "server" : "client");
  EXPECT_EQ(server_->last_watch_options().shard_selector, UidShardSelector(kHigh));

  // The whole space: no selector at all, everything cached.
  scope_->Set({{0, kTop}});
  ExpectHolds({{0, kTop}});
  EXPECT_EQ(handler_->adds(), low + high + low);
  EXPECT_EQ(handler_->deletes(), low);
  EXPECT_EQ(server_->last_list_options().shard_selector, "");
  EXPECT_EQ(server_->last_watch_options().shard_selector, "");
  EXPECT_EQ(reflector_->Metrics().shard_mode, "client");
}

TEST_P(ReflectorShardTest, ChangeDuringAListIsNotLost) {
  for (int i = 0; i < 30; ++i) server_->Set("ns", Name(i), "v");
  scope_->Set(kLow);
  // The first list page is served after the scope moved to the other half.
  server_->OnNextList([&] { scope_->Set(kHigh); });
  StartReflector();
  ExpectHolds(kHigh);
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().shard_generation == 2; }));
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_relists_total, 1u);
  EXPECT_EQ(m.lists_total, 2u);
  EXPECT_EQ(handler_->deletes(), static_cast<int>(CountIn(kLow)));
}

TEST_P(ReflectorShardTest, NothingInScopeMakesNoRequestsButSyncs) {
  for (int i = 0; i < 10; ++i) server_->Set("ns", Name(i), "v");
  ASSERT_GT(CountIn(kLow), 0u);
  StartReflector();  // generation 0: the ring has not said anything yet
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(30)));
  EXPECT_TRUE(reflector_->HasSynced());
  EXPECT_EQ(reflector_->store().Size(), 0u);
  EXPECT_EQ(server_->list_calls(), 0);
  EXPECT_EQ(server_->watch_calls(), 0);
  EXPECT_EQ(reflector_->Metrics().shard_mode, "");

  scope_->Set(kLow);
  ExpectHolds(kLow);
  EXPECT_EQ(reflector_->Metrics().shard_relists_total, 1u);

  // The host gives up every range: the cache empties and the watch ends.
  scope_->Set({});
  EXPECT_TRUE(WaitFor([&] {
    return reflector_->store().Size() == 0 && handler_->mirror().empty() &&
           server_->open_watches() == 0;
  }));
  EXPECT_EQ(handler_->deletes(), static_cast<int>(CountIn(kLow)));
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().shard_generation == 2; }));
}

// Children follow their controller owner: never a selector, always filtered by the reflector,
// and a child whose owner changes to one out of range leaves the cache.
TEST_P(ReflectorShardTest, OwnerUidShardsFollowTheControllerOwner) {
  scope_->Set(kLow);
  StartReflector(ShardBy::kOwnerUid);
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(30)));
  ASSERT_TRUE(server_->WaitForWatchCalls(1, absl::Seconds(30)));
  EXPECT_EQ(server_->last_list_options().shard_selector, "");
  EXPECT_EQ(server_->last_watch_options().shard_selector, "");

  std::string low_owner, high_owner;
  for (int i = 0; low_owner.empty() || high_owner.empty(); ++i) {
    const std::string uid = absl::StrCat("owner-", i);
    (RangesContain(kLow, kube::Fnv1a64(uid)) ? low_owner : high_owner) = uid;
  }
  auto child = [](const std::string& owner, int rv) {
    return absl::StrCat(R"({"metadata":{"name":"child","namespace":"ns","uid":"c1",)",
                        R"("resourceVersion":")", rv, R"(","ownerReferences":[{"apiVersion":"v1",)",
                        R"("kind":"Owner","name":"o","uid":")", owner,
                        R"(","controller":true}]}})");
  };
  server_->InjectEvent({EventType::kAdded, child(low_owner, 500)});
  EXPECT_TRUE(WaitFor([&] { return reflector_->store().Get("ns", "child") != nullptr; }));
  server_->InjectEvent({EventType::kModified, child(high_owner, 501)});
  EXPECT_TRUE(WaitFor([&] { return reflector_->store().Get("ns", "child") == nullptr; }));
  EXPECT_EQ(handler_->deletes(), 1);
  EXPECT_TRUE(handler_->mirror().empty());
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_mode, "client");
  EXPECT_EQ(m.shard_filtered_total, 1u);
  EXPECT_TRUE(handler_->errors().empty()) << handler_->errors()[0];
}

// A server that refuses the selector (422) is listed again without it, and the reflector
// filters alone.
TEST_P(ReflectorShardTest, RefusedSelectorFallsBackToClientFiltering) {
  for (int i = 0; i < 12; ++i) server_->Set("ns", Name(i), "v");
  scope_->Set(kLow);
  server_->FailNextCalls(1, absl::InvalidArgumentError("shardSelector: Invalid value"));
  StartReflector();
  ExpectHolds(kLow);
  EXPECT_EQ(server_->last_list_options().shard_selector, "");
  EXPECT_EQ(server_->last_watch_options().shard_selector, "");
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_mode, "client");
  EXPECT_EQ(m.errors_total, 0u);
}

// After Stop the scope no longer calls into the reflector (which may be gone).
TEST_P(ReflectorShardTest, StopRemovesTheListener) {
  scope_->Set(kLow);
  StartReflector();
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(30)));
  reflector_->Stop();
  reflector_.reset();
  scope_->Set(kHigh);  // a use after free under ASan/TSan if the listener stayed
  EXPECT_EQ(scope_->Get().generation, 2u);
}

}  // namespace
}  // namespace ctrlhost::watch
