#include "runtime/manager/shard_ring.h"

#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/client.h"
#include "runtime/manager/lease.h"

namespace ctrlhost::manager {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Verdict = controller::KeyGate::Verdict;

// The tests' shard hash of a key. Real keys hash their primary's uid, a random UUID; the tests'
// keys differ in their last characters only, whose FNV-1a hashes share their top bits, so they
// are mixed (splitmix64's finaliser) to spread over the buckets as uids do.
uint64_t H(absl::string_view key) {
  uint64_t h = controller::ShardHash(key);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

TEST(ShardRingOptionsTest, Validation) {
  ShardRingOptions options;
  options.lease_namespace = "default";
  options.ring = "ctrlhost";
  options.identity = "a";
  EXPECT_TRUE(ValidateShardRing(options).ok());
  options.ring = "not a label";
  EXPECT_THAT(ValidateShardRing(options).message(), HasSubstr("shard ring: the ring name"));
  options.ring = "ctrlhost";
  options.identity = "a,b";
  EXPECT_THAT(ValidateShardRing(options).message(), HasSubstr("must not contain ','"));
  options.identity = "a";
  options.renew_deadline = absl::Seconds(20);
  EXPECT_THAT(ValidateShardRing(options).message(),
              HasSubstr("shard ring: leaseDuration (15s) must be greater than renewDeadline"));
  EXPECT_EQ(ShardLeaseName("ring", "Web-Host_0a1B"), "ring-web-host-0a1b");
}

class ShardRingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("shard_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
    client_ = &api_->client();
  }
  static void TearDownTestSuite() {
    client_ = nullptr;
    delete api_;
  }

  // A member of this test's own ring, on the shared fake clock (the loop is not started: the
  // test drives SyncOnce).
  std::unique_ptr<ShardRing> Member(const std::string& identity) {
    ShardRingOptions options;
    options.lease_namespace = "default";
    options.ring = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options.identity = identity;
    options.clock = &clock_;
    auto ring = ShardRing::Create(
        client_, options,
        [this, identity](const std::vector<std::string>&, const std::vector<std::string>& now) {
          views_[identity].push_back(now);
        });
    EXPECT_TRUE(ring.ok()) << ring.status();
    return ring.ok() ? *std::move(ring) : nullptr;
  }

  // A key `owner` owns when both hosts are members, and not under `owner` alone... i.e. one
  // that moves from `from` to `to` when `to` joins.
  static std::string KeyMoving(const std::string& from, const std::string& to) {
    for (int i = 0;; ++i) {
      const std::string key = absl::StrCat("default/k", i);
      if (ShardAssignment({from, to}).OwnerOf(H(key)) == to) return key;
    }
  }

  static apiserver::testing::EmbeddedApiServer* api_;
  static kube::Client* client_;
  common::FakeClock clock_;
  std::map<std::string, std::vector<std::vector<std::string>>> views_;
};

apiserver::testing::EmbeddedApiServer* ShardRingTest::api_ = nullptr;
kube::Client* ShardRingTest::client_ = nullptr;

TEST_F(ShardRingTest, AKeyMovesOnlyOnceItsOldOwnerDrained) {
  auto a = Member("host-a");
  const std::string key = KeyMoving("host-a", "host-b");
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kNotMine);  // not joined yet: owns nothing
  ASSERT_TRUE(a->SyncOnce());
  EXPECT_THAT(views_["host-a"], ElementsAre(ElementsAre("host-a")));
  ASSERT_TRUE(a->SyncOnce());                       // publishes {host-a}, reads again
  ASSERT_EQ(a->Begin(key, H(key)), Verdict::kRun);  // in flight on host-a

  auto b = Member("host-b");
  ASSERT_TRUE(b->SyncOnce());
  EXPECT_THAT(b->Status().view, ElementsAre("host-a", "host-b"));
  ASSERT_TRUE(b->SyncOnce());  // publishes {host-a, host-b}
  EXPECT_THAT(b->Status().adopted, ElementsAre("host-a", "host-b"));
  EXPECT_TRUE(b->Owns(H(key)));
  EXPECT_EQ(b->Begin(key, H(key)), Verdict::kWait);  // host-a still claims it

  ASSERT_TRUE(a->SyncOnce());  // sees host-b; cannot publish while the key runs
  EXPECT_FALSE(a->Owns(H(key)));
  EXPECT_EQ(a->Status().draining, 1u);
  ASSERT_TRUE(a->SyncOnce());
  EXPECT_THAT(a->Status().adopted, ElementsAre("host-a"));
  ASSERT_TRUE(b->SyncOnce());
  EXPECT_EQ(b->Begin(key, H(key)), Verdict::kWait);

  a->End(key);  // drained
  ASSERT_TRUE(a->SyncOnce());
  EXPECT_THAT(a->Status().adopted, ElementsAre("host-a", "host-b"));
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kNotMine);
  ASSERT_TRUE(b->SyncOnce());
  EXPECT_EQ(b->Begin(key, H(key)), Verdict::kRun);
  b->End(key);
}

TEST_F(ShardRingTest, ADeadMembersKeysMoveAfterLeaseDuration) {
  auto a = Member("host-a");
  auto b = Member("host-b");
  for (int i = 0; i < 3; ++i) {  // join, publish, read the other's publication
    ASSERT_TRUE(a->SyncOnce());
    ASSERT_TRUE(b->SyncOnce());
  }
  const std::string key = KeyMoving("host-a", "host-b");
  ASSERT_EQ(b->Begin(key, H(key)), Verdict::kRun);  // b dies with it in flight
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kNotMine);
  // host-b stops renewing; host-a keeps polling.
  for (int i = 0; i < 7; ++i) {
    clock_.Advance(absl::Seconds(2));
    ASSERT_TRUE(a->SyncOnce());
  }
  EXPECT_THAT(a->Status().view, ElementsAre("host-a", "host-b"));  // 14 s: still live
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kNotMine);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(a->SyncOnce());  // 16 s > leaseDuration: host-b is gone
  EXPECT_THAT(a->Status().view, ElementsAre("host-a"));
  EXPECT_THAT(views_["host-a"].back(), ElementsAre("host-a"));
  ASSERT_TRUE(a->SyncOnce());  // publish, read
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kRun);
  a->End(key);
  // host-b, cut off, stopped starting keys at renewDeadline.
  EXPECT_FALSE(b->Status().active);
  const std::string moving = KeyMoving("host-a", "host-b");
  EXPECT_EQ(b->Begin(moving, H(moving)), Verdict::kWait);
}

TEST_F(ShardRingTest, LeavingDeletesTheLeaseAndHandsOverAtOnce) {
  auto a = Member("host-a");
  auto b = Member("host-b");
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a->SyncOnce());
    ASSERT_TRUE(b->SyncOnce());
  }
  const std::string key = KeyMoving("host-a", "host-b");
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kNotMine);
  b->Stop(/*leave=*/true);
  EXPECT_TRUE(kube::IsNotFound(client_
                                   ->Get({.group = "coordination.k8s.io",
                                          .version = "v1",
                                          .resource = "leases",
                                          .namespace_name = "default",
                                          .name = ShardLeaseName(a->options().ring, "host-b")})
                                   .status()));
  ASSERT_TRUE(a->SyncOnce());
  ASSERT_TRUE(a->SyncOnce());
  EXPECT_EQ(a->Begin(key, H(key)), Verdict::kRun);
  a->End(key);
}

// A live member of the older scheme (rendezvous hashing by key; no members annotation) may
// claim any key: none starts here while it is live. This host's Lease names only itself in the
// annotation older hosts read, so they wait on every key too. Once it expires, keys run.
TEST_F(ShardRingTest, AnOlderSchemeMemberStopsEveryKeyWhileLive) {
  const std::string ring = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  nlohmann::json old = {{"apiVersion", "coordination.k8s.io/v1"},
                        {"kind", "Lease"},
                        {"metadata",
                         {{"name", ShardLeaseName(ring, "old-host")},
                          {"namespace", "default"},
                          {"labels", {{kShardRingLabel, ring}}},
                          {"annotations", {{kShardViewAnnotation, "old-host"}}}}},
                        {"spec", {{"holderIdentity", "old-host"}, {"leaseDurationSeconds", 15}}}};
  ASSERT_TRUE(
      CreateLease(client_, LeaseRef("default", ShardLeaseName(ring, "old-host")), old).ok());
  auto a = Member("host-a");
  // Said once in the log, not at every poll.
  std::atomic<int> warnings{0};
  common::SetLogSink([&](absl::string_view line) {
    if (absl::StrContains(line, "older sharding scheme")) ++warnings;
  });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a->SyncOnce());
  common::SetLogSink(nullptr);
  EXPECT_EQ(warnings.load(), 1);
  int waiting = 0;
  for (int i = 0; i < 50; ++i) {
    const std::string key = absl::StrCat("default/k", i);
    if (!a->Owns(H(key))) continue;
    EXPECT_EQ(a->Begin(key, H(key)), Verdict::kWait) << key;
    ++waiting;
  }
  EXPECT_GT(waiting, 0);
  ASSERT_EQ(a->Status().peers.size(), 1u);
  EXPECT_TRUE(a->Status().peers[0].older_scheme);
  absl::StatusOr<nlohmann::json> mine =
      GetLease(client_, LeaseRef("default", ShardLeaseName(ring, "host-a")));
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ((*mine)["metadata"]["annotations"][kShardViewAnnotation], "host-a");
  // Join order: the Leases' creation times (the same second: then by identity).
  EXPECT_THAT((*mine)["metadata"]["annotations"][kShardMembersAnnotation].get<std::string>(),
              AnyOf("host-a,old-host", "old-host,host-a"));
  clock_.Advance(absl::Seconds(16));  // the old host stopped renewing: it expires
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a->SyncOnce());
  EXPECT_THAT(a->Status().view, ElementsAre("host-a"));
  EXPECT_EQ(a->Begin("default/k0", H("default/k0")), Verdict::kRun);
  a->End("default/k0");
}

// A member whose clock is far off (its renewTime an hour ahead) is judged on this host's clock
// only: live while its record changes, gone leaseDuration after it stopped changing, whatever
// its timestamps say. Its place in the join order is the API server's creationTimestamp.
TEST_F(ShardRingTest, AMemberWithAClockFarOffIsJudgedOnThisHostsClock) {
  const std::string ring = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const kube::ResourceRef ref = LeaseRef("default", ShardLeaseName(ring, "skewed"));
  nlohmann::json lease = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata",
       {{"name", ref.name},
        {"namespace", "default"},
        {"labels", {{kShardRingLabel, ring}}},
        {"annotations", {{kShardMembersAnnotation, "skewed"}, {kShardGenerationAnnotation, "1"}}}}},
      {"spec",
       {{"holderIdentity", "skewed"},
        {"leaseDurationSeconds", 15},
        {"renewTime", "2099-01-01T00:00:00.000000Z"}}}};
  ASSERT_TRUE(CreateLease(client_, ref, lease).ok());
  auto a = Member("host-a");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(a->SyncOnce());
  EXPECT_EQ(a->Status().view.size(), 2u);
  // It renews (its record changes) every 10 s of this host's clock, with a time far ahead.
  for (int round = 0; round < 3; ++round) {
    clock_.Advance(absl::Seconds(10));
    absl::StatusOr<nlohmann::json> current = GetLease(client_, ref);
    ASSERT_TRUE(current.ok()) << current.status();
    (*current)["spec"]["renewTime"] = absl::StrCat("2099-01-01T00:00:", 10 + round, ".000000Z");
    ASSERT_TRUE(UpdateLease(client_, ref, *current).ok());
    ASSERT_TRUE(a->SyncOnce());
    EXPECT_EQ(a->Status().view.size(), 2u) << round;
  }
  // It stops renewing: gone once its record has not changed for leaseDuration here.
  clock_.Advance(absl::Seconds(14));
  ASSERT_TRUE(a->SyncOnce());
  EXPECT_EQ(a->Status().view.size(), 2u);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(a->SyncOnce());
  EXPECT_THAT(a->Status().view, ElementsAre("host-a"));
}

TEST_F(ShardRingTest, LoopRunsOnItsOwn) {
  ShardRingOptions options;
  options.lease_namespace = "default";
  options.ring = "loop";
  options.identity = "host-a";
  options.poll_period = absl::Milliseconds(20);
  auto ring = ShardRing::Create(client_, options, nullptr);
  ASSERT_TRUE(ring.ok()) << ring.status();
  (*ring)->Start();
  bool ready = false;
  for (int i = 0; i < 1000 && !ready; ++i) {
    ready = (*ring)->Begin("default/x", H("default/x")) == Verdict::kRun;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(ready);
  (*ring)->End("default/x");
  EXPECT_TRUE((*ring)->Status().joined);
  (*ring)->Stop(/*leave=*/true);
}

// Random interleavings of polls, starts and ends on three members (one joining late, one
// dying): a key never runs on two members at once, and once the ring is quiet every key runs
// somewhere.
TEST_F(ShardRingTest, NoKeyRunsOnTwoMembersUnderRandomInterleavings) {
  std::vector<std::unique_ptr<ShardRing>> members;
  members.push_back(Member("host-a"));
  members.push_back(Member("host-b"));
  std::vector<std::string> keys;
  for (int i = 0; i < 24; ++i) keys.push_back(absl::StrCat("default/r", i));
  // running[key] = index of the member running it, -1 when none.
  std::map<std::string, int> running;
  for (const std::string& key : keys) running[key] = -1;
  std::mt19937 random(7);
  bool dead_b = false;
  std::map<int, int> starts;  // by member: the interleavings did exercise starts everywhere
  for (int step = 0; step < 600; ++step) {
    if (step == 100) members.push_back(Member("host-c"));
    if (step == 250) {
      dead_b = true;  // host-b stops polling with whatever it runs; its Lease expires
      for (auto& [key, m] : running) {
        if (m == 1) m = -2;  // frozen: a dead host's reconcile never ends, never overlaps
      }
    }
    const int m = static_cast<int>(random() % members.size());
    if (dead_b && m == 1) {
      clock_.Advance(absl::Milliseconds(200));
      continue;
    }
    switch (random() % 3) {
      case 0:
        members[m]->SyncOnce();
        break;
      case 1: {
        const std::string& key = keys[random() % keys.size()];
        if (running[key] == m || running[key] == -2) break;
        if (members[m]->Begin(key, H(key)) != Verdict::kRun) break;
        // Started here: nobody may be running it elsewhere.
        ASSERT_EQ(running[key], -1) << key << " started on member " << m << " while member "
                                    << running[key] << " runs it (step " << step << ")";
        running[key] = m;
        ++starts[m];
        break;
      }
      default: {
        const std::string& key = keys[random() % keys.size()];
        if (running[key] == m) {
          members[m]->End(key);
          running[key] = -1;
        }
      }
    }
  }
  EXPECT_GT(starts[0], 5) << starts[1] << " " << starts[2];
  EXPECT_GT(starts[1], 5);
  EXPECT_GT(starts[2], 5);
  // host-b's frozen keys: it is dead, its Lease expired long ago; the others take them over.
  for (auto& [key, m] : running) {
    if (m >= 0 && !(dead_b && m == 1)) members[m]->End(key);
  }
  clock_.Advance(absl::Seconds(16));
  for (int round = 0; round < 3; ++round) {
    members[0]->SyncOnce();
    members[2]->SyncOnce();
  }
  for (const std::string& key : keys) {
    int runnable = 0;
    for (int m : {0, 2}) {
      if (members[m]->Begin(key, H(key)) == Verdict::kRun) {
        ++runnable;
        members[m]->End(key);
      }
    }
    EXPECT_EQ(runnable, 1) << key;
  }
}

}  // namespace
}  // namespace ctrlhost::manager
