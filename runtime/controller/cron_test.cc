#include "runtime/controller/cron.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::controller {
namespace {

absl::Time Utc(int y, int mo, int d, int h, int mi, int s = 0) {
  return absl::FromCivil(absl::CivilSecond(y, mo, d, h, mi, s), absl::UTCTimeZone());
}

CronSchedule MustParse(const std::string& expression, const std::string& zone = "") {
  absl::StatusOr<CronSchedule> cron = CronSchedule::Parse(expression, zone);
  EXPECT_TRUE(cron.ok()) << expression << ": " << cron.status();
  return *std::move(cron);
}

TEST(CronTest, EveryMinute) {
  CronSchedule cron = MustParse("* * * * *");
  EXPECT_EQ(cron.Next(Utc(2026, 1, 1, 10, 0)), Utc(2026, 1, 1, 10, 1));
  EXPECT_EQ(cron.Next(Utc(2026, 1, 1, 10, 0, 59)), Utc(2026, 1, 1, 10, 1));
  EXPECT_EQ(cron.Next(Utc(2026, 12, 31, 23, 59, 30)), Utc(2027, 1, 1, 0, 0));
}

TEST(CronTest, DailyAtThree) {
  CronSchedule cron = MustParse("0 3 * * *");
  EXPECT_EQ(cron.Next(Utc(2026, 1, 1, 2, 59)), Utc(2026, 1, 1, 3, 0));
  EXPECT_EQ(cron.Next(Utc(2026, 1, 1, 3, 0)), Utc(2026, 1, 2, 3, 0));
}

TEST(CronTest, RangesStepsAndLists) {
  CronSchedule cron = MustParse("*/15 9-17/4 * * *");  // 9, 13, 17 h; 0, 15, 30, 45 min
  EXPECT_EQ(cron.Next(Utc(2026, 3, 2, 8, 0)), Utc(2026, 3, 2, 9, 0));
  EXPECT_EQ(cron.Next(Utc(2026, 3, 2, 9, 50)), Utc(2026, 3, 2, 13, 0));
  EXPECT_EQ(cron.Next(Utc(2026, 3, 2, 17, 45)), Utc(2026, 3, 3, 9, 0));
  CronSchedule list = MustParse("5,10,50-52 0 * * *");
  EXPECT_EQ(list.Next(Utc(2026, 3, 2, 0, 10)), Utc(2026, 3, 2, 0, 50));
  EXPECT_EQ(list.Next(Utc(2026, 3, 2, 0, 51)), Utc(2026, 3, 2, 0, 52));
  EXPECT_EQ(list.Next(Utc(2026, 3, 2, 0, 52)), Utc(2026, 3, 3, 0, 5));
  CronSchedule from = MustParse("10/20 * * * *");  // 10, 30, 50
  EXPECT_EQ(from.Next(Utc(2026, 3, 2, 0, 31)), Utc(2026, 3, 2, 0, 50));
  EXPECT_EQ(from.Next(Utc(2026, 3, 2, 0, 50)), Utc(2026, 3, 2, 1, 10));
}

TEST(CronTest, NamesAndSunday) {
  // 2026-03-02 is a Monday.
  CronSchedule weekdays = MustParse("0 8 * * mon-FRI");
  EXPECT_EQ(weekdays.Next(Utc(2026, 3, 6, 9, 0)), Utc(2026, 3, 9, 8, 0));  // Fri -> Mon
  CronSchedule sunday7 = MustParse("0 0 * * 7");
  CronSchedule sunday0 = MustParse("0 0 * * SUN");
  EXPECT_EQ(sunday7.Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 3, 8, 0, 0));
  EXPECT_EQ(sunday0.Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 3, 8, 0, 0));
  CronSchedule months = MustParse("0 0 1 jan,Jul *");
  EXPECT_EQ(months.Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 7, 1, 0, 0));
  EXPECT_EQ(months.Next(Utc(2026, 7, 1, 0, 0)), Utc(2027, 1, 1, 0, 0));
}

TEST(CronTest, DayOfMonthOrDayOfWeekWhenBothRestricted) {
  // The 13th, or any Friday.
  CronSchedule cron = MustParse("0 0 13 * 5");
  EXPECT_EQ(cron.Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 3, 6, 0, 0));    // Friday 6th
  EXPECT_EQ(cron.Next(Utc(2026, 3, 10, 0, 0)), Utc(2026, 3, 13, 0, 0));  // the 13th (a Friday)
  EXPECT_EQ(cron.Next(Utc(2026, 4, 10, 0, 0)), Utc(2026, 4, 13, 0, 0));  // Monday 13th
  // With a star in one field both must match: the 13th only if it is a Friday.
  CronSchedule both = MustParse("0 0 13 * */1");
  EXPECT_EQ(both.Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 3, 13, 0, 0));
  CronSchedule friday13 = MustParse("0 0 * * 5");
  EXPECT_EQ(friday13.Next(Utc(2026, 3, 7, 0, 0)), Utc(2026, 3, 13, 0, 0));
}

TEST(CronTest, LeapDayAndMonthEnds) {
  CronSchedule leap = MustParse("0 0 29 2 *");
  EXPECT_EQ(leap.Next(Utc(2026, 1, 1, 0, 0)), Utc(2028, 2, 29, 0, 0));
  CronSchedule thirty_first = MustParse("0 12 31 * *");
  EXPECT_EQ(thirty_first.Next(Utc(2026, 4, 1, 0, 0)), Utc(2026, 5, 31, 12, 0));
}

TEST(CronTest, Macros) {
  EXPECT_EQ(MustParse("@hourly").Next(Utc(2026, 1, 1, 10, 30)), Utc(2026, 1, 1, 11, 0));
  EXPECT_EQ(MustParse("@daily").Next(Utc(2026, 1, 1, 10, 30)), Utc(2026, 1, 2, 0, 0));
  EXPECT_EQ(MustParse("@midnight").Next(Utc(2026, 1, 1, 10, 30)), Utc(2026, 1, 2, 0, 0));
  EXPECT_EQ(MustParse("@weekly").Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 3, 8, 0, 0));
  EXPECT_EQ(MustParse("@monthly").Next(Utc(2026, 3, 2, 0, 0)), Utc(2026, 4, 1, 0, 0));
  EXPECT_EQ(MustParse("@yearly").Next(Utc(2026, 3, 2, 0, 0)), Utc(2027, 1, 1, 0, 0));
  EXPECT_EQ(MustParse("@ANNUALLY").Next(Utc(2026, 3, 2, 0, 0)), Utc(2027, 1, 1, 0, 0));
}

TEST(CronTest, TimeZones) {
  CronSchedule paris = MustParse("0 3 * * *", "Europe/Paris");
  // Winter: UTC+1.
  EXPECT_EQ(paris.Next(Utc(2026, 1, 10, 0, 0)), Utc(2026, 1, 10, 2, 0));
  // Summer: UTC+2.
  EXPECT_EQ(paris.Next(Utc(2026, 7, 10, 0, 0)), Utc(2026, 7, 10, 1, 0));
  EXPECT_EQ(MustParse("0 3 * * *", "UTC").Next(Utc(2026, 1, 10, 0, 0)), Utc(2026, 1, 10, 3, 0));
}

TEST(CronTest, DaylightSavingTransitions) {
  // Europe/Paris 2026: clocks go forward at 02:00 on March 29 (01:00 UTC), back at 03:00 on
  // October 25 (01:00 UTC).
  CronSchedule skipped = MustParse("30 2 * * *", "Europe/Paris");
  // 02:30 does not exist on March 29: it fires at the transition, once.
  EXPECT_EQ(skipped.Next(Utc(2026, 3, 28, 12, 0)), Utc(2026, 3, 29, 1, 0));
  EXPECT_EQ(skipped.Next(Utc(2026, 3, 29, 1, 0)), Utc(2026, 3, 30, 0, 30));
  CronSchedule repeated = MustParse("30 2 * * *", "Europe/Paris");
  // 02:30 happens twice on October 25: only the first (00:30 UTC) fires.
  EXPECT_EQ(repeated.Next(Utc(2026, 10, 24, 12, 0)), Utc(2026, 10, 25, 0, 30));
  EXPECT_EQ(repeated.Next(Utc(2026, 10, 25, 0, 30)), Utc(2026, 10, 26, 1, 30));
  CronSchedule every_minute = MustParse("* * * * *", "Europe/Paris");
  EXPECT_EQ(every_minute.Next(Utc(2026, 3, 29, 0, 59)), Utc(2026, 3, 29, 1, 0));
  EXPECT_EQ(every_minute.Next(Utc(2026, 3, 29, 1, 0)), Utc(2026, 3, 29, 1, 1));
}

TEST(CronTest, RejectsMalformedExpressions) {
  const char* bad[] = {
      "",
      "* * * *",
      "* * * * * *",
      "60 * * * *",
      "* 24 * * *",
      "* * 0 * *",
      "* * 32 * *",
      "* * * 13 *",
      "* * * * 8",
      "5-1 * * * *",
      "*/0 * * * *",
      "*/x * * * *",
      "a * * * *",
      "1,,2 * * * *",
      "-1 * * * *",
      "* * * foo *",
      "@often",
      "0 0 30 2 *",
      "0 0 31 4,6 *",
      "1/ * * * *",
      "1-2-3 * * * *",
      "+1 * * * *",
      "*/-1 * * * *",
  };
  for (const char* expression : bad) {
    absl::StatusOr<CronSchedule> cron = CronSchedule::Parse(expression);
    EXPECT_EQ(cron.status().code(), absl::StatusCode::kInvalidArgument) << expression;
  }
  EXPECT_THAT(CronSchedule::Parse("61 * * * *").status().message(), ::testing::HasSubstr("minute"));
  EXPECT_EQ(CronSchedule::Parse("* * * * *", "Mars/Olympus").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CronTest, InfiniteInputs) {
  CronSchedule cron = MustParse("* * * * *");
  EXPECT_EQ(cron.Next(absl::InfiniteFuture()), absl::InfiniteFuture());
  EXPECT_EQ(cron.Next(absl::InfinitePast()), absl::UnixEpoch() + absl::Minutes(1));
}

}  // namespace
}  // namespace ctrlhost::controller
