#include "runtime/manager/watch_readiness.h"

#include "gtest/gtest.h"

namespace ctrlhost::manager {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

watch::ReflectorMetrics Synced() {
  watch::ReflectorMetrics m;
  m.description = "v1 ConfigMap ns=x";
  m.synced = true;
  return m;
}

watch::ReflectorMetrics Failing(watch::ReflectorMetrics m, absl::Duration for_how_long,
                                absl::Status error) {
  m.failing = true;
  m.failing_since = kNow - for_how_long;
  m.last_error = error.ToString();
  m.last_error_code = error.code();
  m.last_error_message = std::string(error.message());
  return m;
}

TEST(WatchReadinessProblemTest, HealthyAndNotYetSynced) {
  EXPECT_EQ(WatchReadinessProblem(Synced(), kNow, absl::Seconds(30)), "");
  watch::ReflectorMetrics listing = Synced();
  listing.synced = false;
  EXPECT_EQ(WatchReadinessProblem(listing, kNow, absl::Seconds(30)),
            "watch v1 ConfigMap ns=x not synced");
}

TEST(WatchReadinessProblemTest, ASyncedCacheIsStaleOnlyAfterTheGracePeriod) {
  const absl::Status down = absl::UnavailableError("connect to 127.0.0.1:6443: connection refused");
  EXPECT_EQ(
      WatchReadinessProblem(Failing(Synced(), absl::Seconds(29), down), kNow, absl::Seconds(30)),
      "");
  EXPECT_EQ(
      WatchReadinessProblem(Failing(Synced(), absl::Seconds(45.7), down), kNow, absl::Seconds(30)),
      "watch v1 ConfigMap ns=x stale: failing for 45s: connect to 127.0.0.1:6443: "
      "connection refused");
}

TEST(WatchReadinessProblemTest, ACacheThatNeverListedSaysWhyAtOnce) {
  watch::ReflectorMetrics m = Synced();
  m.synced = false;
  EXPECT_EQ(WatchReadinessProblem(Failing(m, absl::Seconds(2), absl::UnavailableError("refused")),
                                  kNow, absl::Seconds(30)),
            "watch v1 ConfigMap ns=x not synced: failing for 2s: refused");
}

TEST(WatchReadinessProblemTest, ForbiddenKeepsKubesMessageAndFailsAtOnce) {
  const std::string message =
      "configmaps is forbidden: User \"system:serviceaccount:x:op\" cannot list resource "
      "\"configmaps\" in API group \"\" in the namespace \"x\"";
  for (bool synced : {true, false}) {
    watch::ReflectorMetrics m = Synced();
    m.synced = synced;
    EXPECT_EQ(
        WatchReadinessProblem(Failing(m, absl::Seconds(1), absl::PermissionDeniedError(message)),
                              kNow, absl::Seconds(30)),
        "watch v1 ConfigMap ns=x forbidden (403) for 1s: " + message);
  }
  EXPECT_EQ(WatchReadinessProblem(
                Failing(Synced(), absl::ZeroDuration(), absl::UnauthenticatedError("Unauthorized")),
                kNow, absl::Seconds(30)),
            "watch v1 ConfigMap ns=x unauthorized (401) for 0s: Unauthorized");
}

}  // namespace
}  // namespace ctrlhost::manager
