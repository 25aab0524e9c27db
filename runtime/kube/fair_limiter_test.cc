// FairLimiter on a FakeClock: the burst, waiting for the clock, deadlines, and the weighted
// shares of tenants that wait together (operators first, then their controllers).
#include "runtime/kube/fair_limiter.h"

#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"

namespace ctrlhost::kube {
namespace {

const absl::Time kFar = absl::InfiniteFuture();

TEST(FairLimiterTest, BurstThenWaitsForTheClock) {
  common::FakeClock clock;
  FairLimiter limiter(/*qps=*/1, /*burst=*/2, &clock);
  const ApiTenant host;
  EXPECT_TRUE(limiter.Acquire(host, kFar).ok());
  EXPECT_TRUE(limiter.Acquire(host, kFar).ok());
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    EXPECT_TRUE(limiter.Acquire(host, kFar).ok());
    done = true;
  });
  while (limiter.Figures()[0].waiting == 0) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_FALSE(done.load());  // fake time has not moved
  clock.Advance(absl::Seconds(1));
  waiter.join();
  EXPECT_TRUE(done.load());
  const std::vector<FairLimiter::TenantFigures> figures = limiter.Figures();
  ASSERT_EQ(figures.size(), 1u);
  EXPECT_EQ(figures[0].granted_total, 3u);
  EXPECT_EQ(figures[0].waited_total, 1u);
}

TEST(FairLimiterTest, ADeadlineBeforeTheTurnIsRefusedWithoutTakingAToken) {
  common::FakeClock clock;
  FairLimiter limiter(/*qps=*/1, /*burst=*/1, &clock);
  const ApiTenant a{"a", "c"};
  ASSERT_TRUE(limiter.Acquire(a, kFar).ok());
  std::atomic<bool> refused{false};
  std::thread waiter([&] {
    const absl::Status s = limiter.Acquire(a, clock.Now() + absl::Milliseconds(500));
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("--kube-api-qps"));
    refused = true;
  });
  while (limiter.Figures()[0].waiting == 0) absl::SleepFor(absl::Milliseconds(1));
  clock.Advance(absl::Milliseconds(500));
  waiter.join();
  EXPECT_TRUE(refused.load());
  // The token that comes at 1 s is still there for the next request.
  clock.Advance(absl::Milliseconds(500));
  EXPECT_TRUE(limiter.Acquire(a, clock.Now()).ok());
}

TEST(FairLimiterTest, ZeroQpsIsUnlimited) {
  common::FakeClock clock;
  FairLimiter limiter(0, 1, &clock);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Acquire({"a", "c"}, clock.Now()).ok());
  EXPECT_EQ(limiter.Figures()[0].granted_total, 1000u);
}

TEST(FairLimiterTest, WeightsMustBePositiveAndFinite) {
  common::FakeClock clock;
  FairLimiter limiter(10, 1, &clock);
  EXPECT_TRUE(limiter.SetOperatorWeight("a", 2.5).ok());
  EXPECT_EQ(limiter.SetOperatorWeight("a", 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.SetOperatorWeight("a", -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limiter.SetControllerWeight("a", "c", std::numeric_limits<double>::infinity()).code(),
            absl::StatusCode::kInvalidArgument);
}

// Tenants that each keep `threads` requests waiting; the test moves the clock in 10 ms steps
// (one token at qps 100) once every thread waits, so each token goes to a tenant that fair
// queuing (or a reserve) chose among all the waiting ones.
class Contention {
 public:
  explicit Contention(FairLimiter* limiter, common::FakeClock* clock)
      : limiter_(limiter), clock_(clock) {}
  ~Contention() { StopAll(); }

  void Start(const ApiTenant& tenant, int threads) {
    auto t = std::make_unique<Tenant>();
    t->tenant = tenant;
    for (int i = 0; i < threads; ++i) {
      t->threads.emplace_back([this, t = t.get()] {
        while (!t->stop.load()) {
          if (limiter_->Acquire(t->tenant, kFar).ok()) ++t->granted;
        }
      });
    }
    expected_waiting_ += threads;
    tenants_.push_back(std::move(t));
    WaitAllWaiting();
  }

  // Moves the clock until `tokens` more were granted; returns the grants per
  // "operator/controller".
  std::map<std::string, int> Run(int tokens) {
    std::map<std::string, int> before = Granted();
    const int goal = Total() + tokens;
    while (Total() < goal) Step();
    return Since(before);
  }
  // Moves the clock by `d` in 10 ms steps; returns the grants per "operator/controller".
  std::map<std::string, int> Spend(absl::Duration d) {
    std::map<std::string, int> before = Granted();
    for (absl::Duration spent; spent < d; spent += absl::Milliseconds(10)) Step();
    return Since(before);
  }
  int Total() const {
    int total = 0;
    for (const auto& t : tenants_) total += t->granted.load();
    return total;
  }

 private:
  struct Tenant {
    ApiTenant tenant;
    std::atomic<bool> stop{false};
    std::atomic<int> granted{0};
    std::vector<std::thread> threads;
  };

  size_t Waiting(const ApiTenant& tenant) const {
    for (const FairLimiter::TenantFigures& f : limiter_->Figures()) {
      if (f.operator_name == tenant.operator_name && f.controller == tenant.controller) {
        return f.waiting;
      }
    }
    return 0;
  }
  // One 10 ms step: until a grant was seen and every thread waits again. A step may grant
  // nothing (the shared bucket repays a reserve's overdraft): then every thread waits for a
  // short real while, which only costs steps.
  void Step() {
    const int target = Total() + 1;
    clock_->Advance(absl::Milliseconds(10));
    const absl::Time give_up = absl::Now() + absl::Milliseconds(20);
    while (true) {
      size_t waiting = 0;
      for (const FairLimiter::TenantFigures& f : limiter_->Figures()) waiting += f.waiting;
      if (static_cast<int>(waiting) == expected_waiting_ &&
          (Total() >= target || absl::Now() > give_up)) {
        return;
      }
      absl::SleepFor(absl::Microseconds(100));  // polling a condition, not waiting for time
    }
  }
  std::map<std::string, int> Since(const std::map<std::string, int>& before) const {
    std::map<std::string, int> after = Granted();
    for (auto& [name, n] : after) n -= before.at(name);
    return after;
  }
  std::map<std::string, int> Granted() const {
    std::map<std::string, int> out;
    for (const auto& t : tenants_) {
      out[t->tenant.operator_name + "/" + t->tenant.controller] = t->granted.load();
    }
    return out;
  }
  // Until every running thread waits again (and at least `granted_at_least` grants were seen).
  void WaitAllWaiting(int granted_at_least = 0) {
    while (true) {
      size_t waiting = 0;
      for (const FairLimiter::TenantFigures& f : limiter_->Figures()) waiting += f.waiting;
      if (static_cast<int>(waiting) == expected_waiting_ && Total() >= granted_at_least) return;
      absl::SleepFor(absl::Microseconds(100));  // polling a condition, not waiting for time
    }
  }
  void StopAll() {
    for (auto& t : tenants_) t->stop = true;
    for (auto& t : tenants_) {
      for (std::thread& th : t->threads) {
        while (th.joinable()) {
          clock_->Advance(absl::Seconds(1));
          if (Waiting(t->tenant) == 0) th.join();
        }
      }
    }
  }

  FairLimiter* const limiter_;
  common::FakeClock* const clock_;
  std::vector<std::unique_ptr<Tenant>> tenants_;
  int expected_waiting_ = 0;
};

TEST(FairLimiterTest, WaitingOperatorsShareByWeight) {
  common::FakeClock clock;
  FairLimiter limiter(100, 1, &clock);
  ASSERT_TRUE(limiter.Acquire({}, kFar).ok());  // the burst is used up
  ASSERT_TRUE(limiter.SetOperatorWeight("heavy", 3).ok());
  Contention c(&limiter, &clock);
  c.Start({"heavy", "writer"}, 4);
  c.Start({"light", "writer"}, 4);
  std::map<std::string, int> grants = c.Run(400);
  EXPECT_NEAR(grants["heavy/writer"], 300, 15);
  EXPECT_NEAR(grants["light/writer"], 100, 5);
}

TEST(FairLimiterTest, AnOperatorAloneGetsEveryTokenAndNoCreditForIdleTime) {
  common::FakeClock clock;
  FairLimiter limiter(100, 1, &clock);
  ASSERT_TRUE(limiter.Acquire({}, kFar).ok());
  Contention c(&limiter, &clock);
  c.Start({"busy", "c"}, 4);
  std::map<std::string, int> alone = c.Run(200);
  EXPECT_GE(alone["busy/c"], 200);
  // The newcomer was idle for 200 tokens: from now on it gets its half, not a catch-up burst.
  c.Start({"newcomer", "c"}, 4);
  std::map<std::string, int> shared = c.Run(200);
  EXPECT_NEAR(shared["newcomer/c"], 100, 5);
  EXPECT_NEAR(shared["busy/c"], 100, 5);
}

TEST(FairLimiterTest, AnOperatorsShareIsSplitBetweenItsControllers) {
  common::FakeClock clock;
  FairLimiter limiter(100, 1, &clock);
  ASSERT_TRUE(limiter.Acquire({}, kFar).ok());
  ASSERT_TRUE(limiter.SetControllerWeight("x", "big", 3).ok());
  Contention c(&limiter, &clock);
  c.Start({"x", "big"}, 4);
  c.Start({"x", "small"}, 4);
  c.Start({"y", "only"}, 4);
  std::map<std::string, int> grants = c.Run(400);
  EXPECT_NEAR(grants["y/only"], 200, 10);
  EXPECT_NEAR(grants["x/big"], 150, 8);
  EXPECT_NEAR(grants["x/small"], 50, 5);
}

// Operator A keeps 8 requests waiting on a 50 QPS budget; B makes 10 requests a second, less
// than its half. B is served at once every time (its reserve fills at 25 a second), and A gets
// the rest. Without reserves B would wait for the next token behind A every time.
TEST(FairLimiterTest, AnOperatorUnderItsShareIsServedAtOnce) {
  common::FakeClock clock;
  FairLimiter limiter(50, 10, &clock);
  Contention c(&limiter, &clock);
  c.Start({"a", "writer"}, 8);
  int a_granted = 0;
  for (int i = 0; i < 50; ++i) {
    // The deadline is now: only a request that needs no wait can succeed.
    ASSERT_TRUE(limiter.Acquire({"b", "writer"}, clock.Now()).ok()) << "request " << i;
    a_granted += c.Spend(absl::Milliseconds(100))["a/writer"];
  }
  // 5 s at 50 QPS: 250 tokens; B took 50; A the rest (give or take the overdraft).
  EXPECT_NEAR(a_granted, 200, 12);
}

// Reserves overdraw the shared bucket but never the budget: two saturating operators and the
// host's own requests together stay within qps * time + 2 * burst.
TEST(FairLimiterTest, ReservesKeepTheHostWithinItsBudget) {
  common::FakeClock clock;
  FairLimiter limiter(100, 5, &clock);
  ASSERT_TRUE(limiter.SetOperatorWeight("x", 3).ok());
  Contention c(&limiter, &clock);
  c.Start({"x", "c"}, 4);
  c.Start({"y", "c"}, 4);
  c.Start({"", "host"}, 2);
  const int before = c.Total();
  std::map<std::string, int> grants = c.Spend(absl::Seconds(10));
  const int total = c.Total() - before;
  EXPECT_LE(total, 1000 + 2 * 5);
  EXPECT_GE(total, 900);  // steps that grant late lose tokens to the cap, never add any
  // Shares by weight among the three operators: 3 : 1 : 1.
  EXPECT_NEAR(grants["x/c"], 600, 30);
  EXPECT_NEAR(grants["y/c"], 200, 15);
  EXPECT_NEAR(grants["/host"], 200, 15);
}

}  // namespace
}  // namespace ctrlhost::kube
