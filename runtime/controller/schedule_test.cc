#include "runtime/controller/schedule.h"

#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::controller {
namespace {

// Collects firings; waits for them with a bounded real-time deadline.
class Firings {
 public:
  void Add(pluginpb::Reason reason, absl::Duration spread) {
    common::MutexLock lock(&mu_);
    reasons_.push_back(reason);
    spreads_.push_back(spread);
    cv_.SignalAll();
  }
  bool WaitFor(size_t n) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (reasons_.size() < n) {
      if (cv_.WaitWithDeadline(&mu_, deadline) && reasons_.size() < n) return false;
    }
    return true;
  }
  std::vector<pluginpb::Reason> reasons() {
    common::MutexLock lock(&mu_);
    return reasons_;
  }
  std::vector<absl::Duration> spreads() {
    common::MutexLock lock(&mu_);
    return spreads_;
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<pluginpb::Reason> reasons_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> spreads_ ABSL_GUARDED_BY(mu_);
};

TEST(SchedulerOptionsTest, FromSpec) {
  pluginpb::ControllerSpec spec;
  spec.set_name("c");
  spec.mutable_resync_period()->set_seconds(600);
  spec.add_schedules()->set_cron("0 3 * * *");
  auto* paris = spec.add_schedules();
  paris->set_cron("@hourly");
  paris->set_time_zone("Europe/Paris");
  absl::StatusOr<SchedulerOptions> options = SchedulerOptionsFromSpec(spec);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->resync_period, absl::Minutes(10));
  EXPECT_EQ(options->schedules.size(), 2u);

  spec.add_schedules()->set_cron("0 25 * * *");
  absl::Status status = SchedulerOptionsFromSpec(spec).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("schedules[2]"), absl::string_view::npos) << status;

  pluginpb::ControllerSpec negative;
  negative.mutable_resync_period()->set_seconds(-1);
  EXPECT_FALSE(SchedulerOptionsFromSpec(negative).ok());
  pluginpb::ControllerSpec zone;
  auto* bad_zone = zone.add_schedules();
  bad_zone->set_cron("* * * * *");
  bad_zone->set_time_zone("Nowhere/Special");
  EXPECT_FALSE(SchedulerOptionsFromSpec(zone).ok());
}

TEST(SchedulerTest, ResyncFiresEveryPeriodWithSpread) {
  common::FakeClock clock(absl::FromUnixSeconds(1'800'000'000));
  Firings firings;
  SchedulerOptions options;
  options.resync_period = absl::Minutes(10);
  options.clock = &clock;
  Scheduler scheduler(options, [&](pluginpb::Reason r, absl::Duration s) { firings.Add(r, s); });
  ASSERT_TRUE(scheduler.Start().ok());
  clock.Advance(absl::Minutes(10));
  ASSERT_TRUE(firings.WaitFor(1));
  clock.Advance(absl::Minutes(10));
  ASSERT_TRUE(firings.WaitFor(2));
  // A big jump collapses the missed periods into one firing.
  clock.Advance(absl::Hours(5));
  ASSERT_TRUE(firings.WaitFor(3));
  scheduler.Stop();
  EXPECT_EQ(firings.reasons().size(), 3u);
  for (pluginpb::Reason r : firings.reasons()) EXPECT_EQ(r, pluginpb::REASON_RESYNC);
  EXPECT_EQ(firings.spreads()[0], absl::Minutes(1));
}

TEST(SchedulerTest, CronFiresAtItsTimes) {
  // 2027-01-15 08:00:00 UTC.
  common::FakeClock clock(
      absl::FromCivil(absl::CivilSecond(2027, 1, 15, 8, 0, 0), absl::UTCTimeZone()));
  Firings firings;
  absl::StatusOr<CronSchedule> cron = CronSchedule::Parse("30 8 * * *");
  ASSERT_TRUE(cron.ok());
  SchedulerOptions options;
  options.schedules.push_back(*cron);
  options.clock = &clock;
  Scheduler scheduler(options, [&](pluginpb::Reason r, absl::Duration s) { firings.Add(r, s); });
  EXPECT_EQ(scheduler.NextFiring(clock.Now()), clock.Now() + absl::Minutes(30));
  ASSERT_TRUE(scheduler.Start().ok());
  clock.Advance(absl::Minutes(29));
  clock.Advance(absl::Minutes(1));
  ASSERT_TRUE(firings.WaitFor(1));
  clock.Advance(absl::Hours(24));
  ASSERT_TRUE(firings.WaitFor(2));
  scheduler.Stop();
  EXPECT_EQ(firings.reasons()[0], pluginpb::REASON_SCHEDULE);
  EXPECT_EQ(firings.spreads()[0], absl::ZeroDuration());
}

TEST(SchedulerTest, NothingScheduledStartsNoThreadAndStopIsIdempotent) {
  Firings firings;
  Scheduler scheduler(SchedulerOptions{},
                      [&](pluginpb::Reason r, absl::Duration s) { firings.Add(r, s); });
  ASSERT_TRUE(scheduler.Start().ok());
  scheduler.Stop();
  scheduler.Stop();
  EXPECT_TRUE(firings.reasons().empty());
  EXPECT_EQ(scheduler.NextFiring(absl::Now()), absl::InfiniteFuture());
}

}  // namespace
}  // namespace ctrlhost::controller
