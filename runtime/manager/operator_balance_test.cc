#include "runtime/manager/operator_balance.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/client.h"

namespace ctrlhost::manager {
namespace {

// Polls a condition another thread makes true (never used to wait for time to pass). Bounded at
// 60 s: each condition needs a few real requests to the API server, and tools/test runs this
// beside real Kubernetes clusters (10 s was missed there once).
bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 12000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(FairShareTest, CeilingOfOperatorsOverHosts) {
  EXPECT_EQ(FairShare(4, 1), 4);
  EXPECT_EQ(FairShare(4, 2), 2);
  EXPECT_EQ(FairShare(4, 3), 2);
  EXPECT_EQ(FairShare(5, 2), 3);
  EXPECT_EQ(FairShare(2, 5), 1);
  EXPECT_EQ(FairShare(4, 0), 4);  // membership not read yet: this host alone
}

TEST(OperatorRingNameTest, SameSetSameRingInAnyOrder) {
  const std::string name = OperatorRingName({"beta", "alpha"});
  EXPECT_EQ(name, OperatorRingName({"alpha", "beta"}));
  EXPECT_NE(name, OperatorRingName({"alpha", "beta", "gamma"}));
  EXPECT_EQ(name.rfind("ctrlhost-operators-", 0), 0u) << name;
  EXPECT_EQ(name.size(), std::string("ctrlhost-operators-").size() + 8);
}

// Host "a": one elector per operator on the embedded API server, a balancer over them whose
// members the test sets, and the same fake clock everywhere (it moves only when a test says).
class OperatorBalancerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("balance_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
    client_ = &api_->client();
  }
  static void TearDownTestSuite() {
    client_ = nullptr;
    delete api_;
  }

  void TearDown() override {
    if (balancer_ != nullptr) balancer_->Stop();
    for (auto& e : electors_) e->Stop(/*release=*/false);
    for (auto& e : others_) e->Stop(/*release=*/false);
  }

  LeaderElectionOptions Options(const std::string& op, const std::string& identity) {
    LeaderElectionOptions options;
    options.lease_namespace = "default";
    options.lease_name =
        absl::StrCat(::testing::UnitTest::GetInstance()->current_test_info()->name(), "-", op);
    for (char& c : options.lease_name) c = static_cast<char>(std::tolower(c));
    options.identity = identity;
    options.lease_duration = absl::Seconds(3);
    options.renew_deadline = absl::Seconds(2);
    options.retry_period = absl::Seconds(1);
    options.clock = &clock_;
    return options;
  }

  // Host a's balancer and electors (started) for `ops`, with `members` as its view.
  void StartHostA(const std::vector<std::string>& ops) {
    ops_ = ops;
    OperatorBalancerOptions options;
    options.clock = &clock_;
    balancer_ = std::make_unique<OperatorBalancer>(
        ops, "a",
        [this] {
          common::MutexLock lock(&mu_);
          return members_;
        },
        options);
    for (const std::string& op : ops) {
      LeaderCallbacks callbacks;
      OperatorBalancer* balancer = balancer_.get();
      callbacks.may_acquire = [balancer, op](const AcquireAttempt& attempt) {
        return balancer->MayAcquire(op, attempt);
      };
      callbacks.on_stopped_leading = [this](const std::string& reason) {
        if (reason == kLeaseHandedOver) ++handed_over_;
      };
      auto elector = LeaderElector::Create(client_, Options(op, "a"), std::move(callbacks));
      ASSERT_TRUE(elector.ok()) << elector.status();
      balancer_->Attach(op, elector->get());
      electors_.push_back(*std::move(elector));
    }
    for (auto& e : electors_) e->Start();
  }

  void SetMembers(std::vector<std::string> members) {
    common::MutexLock lock(&mu_);
    members_ = std::move(members);
  }

  // Another host's elector for `op` (no loop: the test drives it).
  LeaderElector* Other(const std::string& op, const std::string& identity) {
    auto elector = LeaderElector::Create(client_, Options(op, identity), {});
    EXPECT_TRUE(elector.ok()) << elector.status();
    others_.push_back(*std::move(elector));
    return others_.back().get();
  }

  int Leading() {
    int n = 0;
    for (auto& e : electors_) n += e->Status().leading ? 1 : 0;
    return n;
  }
  LeaderElector* Of(const std::string& op) {
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i] == op) return electors_[i].get();
    }
    return nullptr;
  }

  // Moves the fake clock on by `seconds`, one second at a time, each time waiting until every
  // leader renewed (retryPeriod is 1 s), so that no leader loses its Lease to the clock.
  void AdvanceKeepingLeases(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      clock_.Advance(absl::Seconds(1));
      ASSERT_TRUE(Eventually([&] {
        for (auto& e : electors_) {
          const LeaderStatus s = e->Status();
          if (s.leading && s.last_renewal != clock_.Now()) return false;
        }
        return true;
      }));
    }
  }

  static apiserver::testing::EmbeddedApiServer* api_;
  static kube::Client* client_;
  common::FakeClock clock_;
  common::Mutex mu_;
  std::vector<std::string> members_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> ops_;
  std::unique_ptr<OperatorBalancer> balancer_;
  std::vector<std::unique_ptr<LeaderElector>> electors_;
  std::vector<std::unique_ptr<LeaderElector>> others_;
  std::atomic<int> handed_over_{0};
};

apiserver::testing::EmbeddedApiServer* OperatorBalancerTest::api_ = nullptr;
kube::Client* OperatorBalancerTest::client_ = nullptr;

TEST_F(OperatorBalancerTest, AHostAloneTakesEveryFreeLeaseAndAJoinedOneOnlyItsShare) {
  SetMembers({"a", "b"});  // b is a member but holds nothing yet
  StartHostA({"op1", "op2", "op3", "op4"});
  ASSERT_TRUE(Eventually([&] { return Leading() == 2; }));
  // The two others stay free: a holds its fair share (ceil(4 / 2)).
  for (auto& e : electors_) {
    if (!e->Status().leading) {
      ASSERT_TRUE(Eventually([&] { return e->Status().acquire_deferred; }));
    }
  }
  EXPECT_EQ(Leading(), 2);
  OperatorBalanceStatus status = balancer_->Status();
  EXPECT_EQ(status.hosts, 2);
  EXPECT_EQ(status.fair_share, 2);
  EXPECT_EQ(status.led.size(), 2u);

  std::string standby;
  for (const std::string& op : ops_) {
    if (!Of(op)->Status().leading) standby = op;
  }
  // An expired Lease (its holder stopped renewing) is a failover: taken whatever the share.
  AcquireAttempt expired;
  expired.exists = true;
  expired.previous_holder = "b";
  EXPECT_TRUE(balancer_->MayAcquire(standby, expired));
  // A Lease free for leaseDuration that nobody took: taken too; free for less: not.
  AcquireAttempt free;
  free.exists = true;
  free.vacant_for = absl::Seconds(3);
  EXPECT_TRUE(balancer_->MayAcquire(standby, free));
  free.vacant_for = absl::Seconds(2);
  EXPECT_FALSE(balancer_->MayAcquire(standby, free));

  // b leaves: a is alone, so its fair share is all four, and its standbys try at once.
  SetMembers({"a"});
  balancer_->BalanceOnce();
  ASSERT_TRUE(Eventually([&] { return Leading() == 4; }));
  EXPECT_EQ(balancer_->Status().fair_share, 4);
  EXPECT_EQ(handed_over_, 0);
}

TEST_F(OperatorBalancerTest, ExtraLeasesAreHandedOverOneAtATimeHighestNameFirst) {
  SetMembers({"a"});
  StartHostA({"op1", "op2", "op3", "op4"});
  ASSERT_TRUE(Eventually([&] { return Leading() == 4; }));
  balancer_->BalanceOnce();
  EXPECT_EQ(balancer_->Status().hand_overs, 0);

  SetMembers({"a", "b"});  // b joins
  balancer_->BalanceOnce();
  EXPECT_EQ(balancer_->Status().handing_over, "op4");
  ASSERT_TRUE(Eventually([&] { return handed_over_ == 1 && Of("op4")->Status().holder.empty(); }));
  EXPECT_FALSE(Of("op4")->Status().leading);
  // Its own standby sees the release and may not take it back (a holds 3 >= 2).
  ASSERT_TRUE(Eventually([&] { return Of("op4")->Status().acquire_deferred; }));
  balancer_->BalanceOnce();  // under way until another host holds it: no second hand-over
  EXPECT_EQ(balancer_->Status().hand_overs, 1);
  EXPECT_EQ(Leading(), 3);

  LeaderElector* b4 = Other("op4", "b");
  ASSERT_TRUE(b4->TryAcquireOrRenew());
  ASSERT_TRUE(Eventually([&] { return Of("op4")->Status().holder == "b"; }));  // a's watch
  balancer_->BalanceOnce();  // op4 is over: op3 next
  EXPECT_EQ(balancer_->Status().handing_over, "op3");
  EXPECT_EQ(balancer_->Status().hand_overs, 2);
  ASSERT_TRUE(Eventually([&] { return handed_over_ == 2 && Of("op3")->Status().holder.empty(); }));
  LeaderElector* b3 = Other("op3", "b");
  ASSERT_TRUE(b3->TryAcquireOrRenew());
  ASSERT_TRUE(Eventually([&] { return Of("op3")->Status().holder == "b"; }));
  balancer_->BalanceOnce();
  OperatorBalanceStatus status = balancer_->Status();
  EXPECT_EQ(status.handing_over, "");
  EXPECT_EQ(status.hand_overs, 2);
  EXPECT_EQ(status.led, (std::vector<std::string>{"op1", "op2"}));
  EXPECT_EQ(status.fair_share, 2);

  // b stops gracefully: it leaves (a alone), then releases; a takes both again, whose electors
  // were standbys since their hand-over.
  SetMembers({"a"});
  balancer_->BalanceOnce();
  ASSERT_TRUE(b4->Release().ok());
  ASSERT_TRUE(b3->Release().ok());
  ASSERT_TRUE(Eventually([&] { return Leading() == 4; }));
  EXPECT_EQ(handed_over_, 2);
}

// A hand-over no other host takes: a takes the Lease back once it stood free for leaseDuration
// (better an extra share than no leader) and does not hand it over again until the members
// change (no ping-pong).
TEST_F(OperatorBalancerTest, AHandOverNobodyTakesIsTakenBackAndBalancingPauses) {
  SetMembers({"a"});
  StartHostA({"op1", "op2", "op3", "op4"});
  ASSERT_TRUE(Eventually([&] { return Leading() == 4; }));
  SetMembers({"a", "b"});
  balancer_->BalanceOnce();
  ASSERT_TRUE(Eventually([&] { return Of("op4")->Status().acquire_deferred; }));
  AdvanceKeepingLeases(5);  // leaseDuration (3 s) and a standby's retry (<= 1.2 s)
  ASSERT_TRUE(Eventually([&] { return Of("op4")->Status().leading; }));
  balancer_->BalanceOnce();
  OperatorBalanceStatus status = balancer_->Status();
  EXPECT_EQ(status.handing_over, "");
  EXPECT_NE(status.paused.find("no other host took it"), std::string::npos) << status.paused;
  balancer_->BalanceOnce();
  EXPECT_EQ(balancer_->Status().hand_overs, 1);
  EXPECT_EQ(Leading(), 4);

  SetMembers({"a", "b", "c"});  // the members change: balancing resumes
  balancer_->BalanceOnce();
  status = balancer_->Status();
  EXPECT_EQ(status.paused, "");
  EXPECT_EQ(status.handing_over, "op4");
  EXPECT_EQ(status.hand_overs, 2);
}

}  // namespace
}  // namespace ctrlhost::manager
