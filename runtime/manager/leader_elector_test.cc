#include "runtime/manager/leader_elector.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/common/clock.h"
#include "runtime/kube/client.h"
#include "runtime/manager/lease.h"

namespace ctrlhost::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Polls a condition another thread makes true (never used to wait for time to pass).
bool Eventually(const std::function<bool()>& condition) {
  for (int i = 0; i < 2000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

class LeaderElectorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("leader_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
    client_ = &api_->client();
  }
  static void TearDownTestSuite() {
    client_ = nullptr;
    delete api_;
  }

  // A candidate on this test's own Lease, on the shared fake clock.
  std::unique_ptr<LeaderElector> Candidate(const std::string& identity,
                                           LeaderCallbacks callbacks = {}) {
    LeaderElectionOptions options;
    options.lease_namespace = "default";
    options.lease_name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : options.lease_name) c = static_cast<char>(std::tolower(c));
    options.identity = identity;
    options.clock = &clock_;
    auto elector = LeaderElector::Create(client_, options, std::move(callbacks));
    EXPECT_TRUE(elector.ok()) << elector.status();
    return elector.ok() ? *std::move(elector) : nullptr;
  }

  json Lease(const LeaderElector& e) {
    auto got = client_->Get({.group = "coordination.k8s.io",
                             .version = "v1",
                             .resource = "leases",
                             .namespace_name = "default",
                             .name = e.options().lease_name});
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? json::parse(*got) : json();
  }

  static apiserver::testing::EmbeddedApiServer* api_;
  static kube::Client* client_;
  common::FakeClock clock_;
};

apiserver::testing::EmbeddedApiServer* LeaderElectorTest::api_ = nullptr;
kube::Client* LeaderElectorTest::client_ = nullptr;

TEST(LeaderElectionOptionsTest, ClientGoRules) {
  LeaderElectionOptions options;
  options.lease_namespace = "default";
  options.lease_name = "ctrlhost";
  options.identity = "a";
  EXPECT_TRUE(ValidateLeaderElection(options).ok());
  options.renew_deadline = absl::Seconds(15);
  EXPECT_THAT(ValidateLeaderElection(options).message(),
              HasSubstr("leaseDuration (15s) must be greater than renewDeadline (15s)"));
  options.renew_deadline = absl::Milliseconds(2400);
  EXPECT_THAT(ValidateLeaderElection(options).message(),
              HasSubstr("must be greater than 1.2 x retryPeriod (2s)"));
  options.renew_deadline = absl::Seconds(10);
  options.identity = "";
  EXPECT_THAT(ValidateLeaderElection(options).message(), HasSubstr("identity"));
}

TEST(LeaderElectionOptionsTest, IdentityAndMicroTime) {
  EXPECT_THAT(DefaultIdentity(), MatchesRegex(".+_[0-9a-f]{8}"));
  EXPECT_NE(DefaultIdentity(), DefaultIdentity());
  EXPECT_EQ(FormatMicroTime(absl::FromUnixMicros(1'800'000'000'123'456)),
            "2027-01-15T08:00:00.123456Z");
}

TEST_F(LeaderElectorTest, FirstCandidateCreatesTheLease) {
  auto a = Candidate("host-a");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  json spec = Lease(*a)["spec"];
  EXPECT_EQ(spec["holderIdentity"], "host-a");
  EXPECT_EQ(spec["leaseDurationSeconds"], 15);
  EXPECT_EQ(spec["leaseTransitions"], 0);
  EXPECT_EQ(spec["renewTime"], FormatMicroTime(clock_.Now()));
  EXPECT_EQ(spec["acquireTime"], FormatMicroTime(clock_.Now()));
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(a->TryAcquireOrRenew());  // renewal: acquireTime and transitions kept
  spec = Lease(*a)["spec"];
  EXPECT_EQ(spec["renewTime"], FormatMicroTime(clock_.Now()));
  EXPECT_EQ(spec["acquireTime"], FormatMicroTime(clock_.Now() - absl::Seconds(2)));
  EXPECT_EQ(spec["leaseTransitions"], 0);
}

TEST_F(LeaderElectorTest, StandbyTakesOverOnlyAfterLeaseDurationWithoutRenewal) {
  auto a = Candidate("host-a");
  auto b = Candidate("host-b");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());  // b sees the record now
  EXPECT_EQ(b->Status().holder, "host-a");
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(a->TryAcquireOrRenew());  // a renews: b's expiry starts again
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock_.Advance(absl::Seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());  // 14 s since b saw the renewal
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(b->TryAcquireOrRenew());  // 15 s: expired
  json spec = Lease(*b)["spec"];
  EXPECT_EQ(spec["holderIdentity"], "host-b");
  EXPECT_EQ(spec["leaseTransitions"], 1);
  EXPECT_EQ(spec["acquireTime"], FormatMicroTime(clock_.Now()));
  EXPECT_FALSE(a->TryAcquireOrRenew());  // a cannot renew a Lease it lost
  EXPECT_EQ(a->Status().holder, "host-b");
}

TEST_F(LeaderElectorTest, ReleasedLeaseIsTakenAtTheNextAttempt) {
  auto a = Candidate("host-a");
  auto b = Candidate("host-b");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());
  ASSERT_TRUE(a->Release().ok());
  json spec = Lease(*a)["spec"];
  EXPECT_EQ(spec["holderIdentity"], "");
  EXPECT_EQ(spec["leaseDurationSeconds"], 1);
  ASSERT_TRUE(b->TryAcquireOrRenew());  // no waiting for an expiry
  EXPECT_EQ(Lease(*b)["spec"]["leaseTransitions"], 1);
  ASSERT_TRUE(a->Release().ok());  // not a's any more: nothing written
  EXPECT_EQ(Lease(*b)["spec"]["holderIdentity"], "host-b");
}

TEST_F(LeaderElectorTest, StaleResourceVersionLosesTheRace) {
  auto a = Candidate("host-a");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  json stale = Lease(*a);
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(a->TryAcquireOrRenew());  // a new renewTime: a new resourceVersion
  stale["spec"]["holderIdentity"] = "intruder";
  auto updated = client_->Update({.group = "coordination.k8s.io",
                                  .version = "v1",
                                  .resource = "leases",
                                  .namespace_name = "default",
                                  .name = a->options().lease_name},
                                 stale.dump());
  EXPECT_EQ(updated.status().code(), absl::StatusCode::kAborted) << updated.status();
  EXPECT_EQ(Lease(*a)["spec"]["holderIdentity"], "host-a");
}

TEST_F(LeaderElectorTest, LoopLeadsThenStopsLeadingAtOnceWhenAnotherHolderTakesTheLease) {
  std::atomic<int> started{0};
  std::atomic<int> renewed{0};
  std::string stopped_reason;
  std::atomic<bool> stopped{false};
  LeaderCallbacks callbacks;
  callbacks.on_started_leading = [&](absl::Time) { ++started; };
  callbacks.on_renewed = [&](absl::Time) { ++renewed; };
  callbacks.on_stopped_leading = [&](const std::string& reason) {
    stopped_reason = reason;
    stopped = true;
  };
  auto a = Candidate("host-a", callbacks);
  a->Start();
  ASSERT_TRUE(Eventually([&] { return started == 1; }));
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(Eventually([&] { return renewed >= 1; }));
  // Another writer takes the Lease: a's renewals fail from now on.
  json lease = Lease(*a);
  lease["spec"]["holderIdentity"] = "intruder";
  ASSERT_TRUE(client_
                  ->Update({.group = "coordination.k8s.io",
                            .version = "v1",
                            .resource = "leases",
                            .namespace_name = "default",
                            .name = a->options().lease_name},
                           lease.dump())
                  .ok());
  // Regression: the old leader went on leading (and writing) until renewDeadline after it had
  // read the new holder. It steps down as soon as it sees it: the fake clock never moves here,
  // so only the Lease watch (or an attempt) can end its leadership.
  ASSERT_TRUE(Eventually([&] { return stopped.load(); }));
  EXPECT_THAT(stopped_reason, HasSubstr("the Lease is held by intruder now"));
  EXPECT_FALSE(a->Status().leading);
  a->Stop(/*release=*/true);  // not leading: nothing released
  EXPECT_EQ(Lease(*a)["spec"]["holderIdentity"], "intruder");
}

// A graceful hand-over does not wait for the standby's next retry: its watch on the Lease sees
// the release. The fake clock never moves here, so only the watch can wake the standby.
TEST_F(LeaderElectorTest, StandbyAcquiresAReleasedLeaseWithoutWaitingForItsRetry) {
  auto a = Candidate("host-a");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  std::atomic<int> started{0};
  LeaderCallbacks callbacks;
  callbacks.on_started_leading = [&](absl::Time) { ++started; };
  auto b = Candidate("host-b", callbacks);
  b->Start();
  ASSERT_TRUE(Eventually([&] { return b->Status().holder == "host-a"; }));  // tried, lost
  std::this_thread::sleep_for(std::chrono::milliseconds(200));              // let its watch start
  EXPECT_EQ(started, 0);
  ASSERT_TRUE(a->Release().ok());
  ASSERT_TRUE(Eventually([&] { return started == 1; }));
  EXPECT_EQ(Lease(*b)["spec"]["holderIdentity"], "host-b");
  b->Stop(/*release=*/false);
}

TEST_F(LeaderElectorTest, StopReleasesTheLease) {
  std::atomic<int> started{0};
  std::string stopped_reason;
  LeaderCallbacks callbacks;
  callbacks.on_started_leading = [&](absl::Time) { ++started; };
  callbacks.on_stopped_leading = [&](const std::string& reason) { stopped_reason = reason; };
  auto a = Candidate("host-a", callbacks);
  a->Start();
  ASSERT_TRUE(Eventually([&] { return started == 1; }));
  a->Stop(/*release=*/true);
  EXPECT_EQ(stopped_reason, "released");
  EXPECT_EQ(Lease(*a)["spec"]["holderIdentity"], "");
}

// Balancing (operator_balance.h): may_acquire gates taking a Lease this host does not hold,
// never a renewal, and says what it is asked about.
TEST_F(LeaderElectorTest, MayAcquireGatesTakingALeaseButNeverARenewal) {
  std::atomic<bool> may{false};
  std::vector<AcquireAttempt> asked;
  LeaderCallbacks callbacks;
  callbacks.may_acquire = [&](const AcquireAttempt& attempt) {
    asked.push_back(attempt);
    return may.load();
  };
  auto a = Candidate("host-a", callbacks);
  EXPECT_FALSE(a->TryAcquireOrRenew());  // absent: not created
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_FALSE(asked[0].exists);
  EXPECT_TRUE(a->Status().acquire_deferred);
  EXPECT_EQ(a->Status().last_error, "");
  auto got = client_->Get({.group = "coordination.k8s.io",
                           .version = "v1",
                           .resource = "leases",
                           .namespace_name = "default",
                           .name = a->options().lease_name});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();

  may = true;
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(a->Status().acquire_deferred);
  ASSERT_EQ(asked.size(), 2u);
  may = false;
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(a->TryAcquireOrRenew());  // a renewal: not asked
  EXPECT_EQ(asked.size(), 2u);
  EXPECT_EQ(Lease(*a)["spec"]["renewTime"], FormatMicroTime(clock_.Now()));
}

TEST_F(LeaderElectorTest, MayAcquireIsToldTheExpiredHolderAndHowLongTheLeaseWasVacant) {
  std::vector<AcquireAttempt> asked;
  LeaderCallbacks callbacks;
  callbacks.may_acquire = [&](const AcquireAttempt& attempt) {
    asked.push_back(attempt);
    return false;
  };
  auto a = Candidate("host-a");
  auto b = Candidate("host-b", callbacks);
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());  // held: not asked
  EXPECT_TRUE(asked.empty());
  EXPECT_FALSE(b->Status().acquire_deferred);
  clock_.Advance(absl::Seconds(18));  // expired 3 s ago on b's clock
  EXPECT_FALSE(b->TryAcquireOrRenew());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_TRUE(asked[0].exists);
  EXPECT_EQ(asked[0].previous_holder, "host-a");
  EXPECT_EQ(asked[0].vacant_for, absl::Seconds(3));
  EXPECT_EQ(Lease(*a)["spec"]["holderIdentity"], "host-a");  // not taken

  ASSERT_TRUE(a->TryAcquireOrRenew());  // a renews (its own: never asked)
  ASSERT_TRUE(a->Release().ok());
  EXPECT_FALSE(b->TryAcquireOrRenew());  // b sees it released now
  clock_.Advance(absl::Seconds(4));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[1].previous_holder, "");
  EXPECT_EQ(asked[1].vacant_for, absl::ZeroDuration());
  EXPECT_EQ(asked[2].vacant_for, absl::Seconds(4));
}

// HandOver: the callback runs while the Lease is still held (nobody else leads yet), then the
// Lease is released, and the elector stays a candidate: it leads again once may_acquire lets
// it. The fake clock never moves: the Lease watch and AttemptNow() drive the standby.
TEST_F(LeaderElectorTest, HandOverReleasesTheLeaseAndStaysACandidate) {
  std::atomic<bool> may{true};
  std::atomic<int> started{0};
  std::atomic<int> handed_over{0};
  std::string holder_during_hand_over;
  LeaderCallbacks callbacks;
  callbacks.on_started_leading = [&](absl::Time) { ++started; };
  callbacks.may_acquire = [&](const AcquireAttempt&) { return may.load(); };
  std::unique_ptr<LeaderElector> a;
  callbacks.on_stopped_leading = [&](const std::string& reason) {
    if (reason != kLeaseHandedOver) return;  // Stop's "released" at the end
    EXPECT_FALSE(a->Status().leading);
    holder_during_hand_over = Lease(*a)["spec"]["holderIdentity"].get<std::string>();
    ++handed_over;
  };
  a = Candidate("host-a", callbacks);
  EXPECT_FALSE(a->HandOver());  // not leading
  a->Start();
  ASSERT_TRUE(Eventually([&] { return started == 1; }));
  may = false;
  ASSERT_TRUE(a->HandOver());
  ASSERT_TRUE(Eventually([&] { return handed_over == 1; }));
  EXPECT_EQ(holder_during_hand_over, "host-a");
  ASSERT_TRUE(Eventually([&] { return Lease(*a)["spec"]["holderIdentity"] == ""; }));
  // Its own watch sees the release and it attempts at once: may_acquire says no.
  ASSERT_TRUE(Eventually([&] { return a->Status().acquire_deferred; }));
  EXPECT_EQ(started, 1);
  EXPECT_FALSE(a->Status().leading);

  may = true;
  a->AttemptNow();
  ASSERT_TRUE(Eventually([&] { return started == 2; }));
  json spec = Lease(*a)["spec"];
  EXPECT_EQ(spec["holderIdentity"], "host-a");
  EXPECT_EQ(spec["leaseTransitions"], 1);
  EXPECT_TRUE(a->Status().leading);
  a->Stop(/*release=*/true);
  EXPECT_EQ(Lease(*a)["spec"]["holderIdentity"], "");
  EXPECT_EQ(handed_over, 1);
}
}  // namespace
}  // namespace ctrlhost::manager
