// Cron schedules: the standard five-field syntax, evaluated in a time zone.
//
// Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or JAN-DEC), day of
// week (0-7 or SUN-SAT; 0 and 7 are Sunday). Each field is a comma-separated list of `*`,
// `N`, `N-M`, each optionally followed by `/STEP`, and `N/STEP` meaning N to the field's
// maximum. Names are case-insensitive. The macros @yearly (@annually), @monthly, @weekly,
// @daily (@midnight) and @hourly are accepted too.
//
// Day matching follows Vixie cron: when both day fields are restricted (neither starts with
// `*`), a day matches if either does; otherwise both must.
//
// Daylight saving time: a firing whose local time is skipped (clocks go forward) happens at the
// transition instead, once; a local time that occurs twice (clocks go back) fires only at its
// first occurrence.
//
//   ASSIGN_OR_RETURN(CronSchedule cron, CronSchedule::Parse("30 3 * * MON-FRI", "Europe/Paris"));
//   absl::Time next = cron.Next(clock->Now());
#ifndef CTRLHOST_RUNTIME_CONTROLLER_CRON_H_
#define CTRLHOST_RUNTIME_CONTROLLER_CRON_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ctrlhost::controller {

// An immutable value; const methods are thread-safe.
class CronSchedule {
 public:
  // `time_zone`: an IANA name, or "" / "UTC" for UTC. Errors: kInvalidArgument with the field
  // and the reason for a malformed expression, an unknown time zone, or an expression that
  // never fires (e.g. "0 0 30 2 *").
  static absl::StatusOr<CronSchedule> Parse(absl::string_view expression,
                                            absl::string_view time_zone = "");

  // The first firing strictly after `after` (whole minutes, seconds zero), or InfiniteFuture
  // when there is none within the next eight years (never for a parsed schedule, whose
  // firings recur at least every eight years).
  absl::Time Next(absl::Time after) const;

  const std::string& expression() const { return expression_; }

 private:
  CronSchedule() = default;
  bool DayMatches(int day_of_month, int month, int weekday) const;

  std::string expression_;
  absl::TimeZone zone_;
  uint64_t minutes_ = 0;   // bit i: minute i
  uint32_t hours_ = 0;     // bit i: hour i
  uint32_t days_ = 0;      // bit i: day of month i (1-31)
  uint32_t months_ = 0;    // bit i: month i (1-12)
  uint32_t weekdays_ = 0;  // bit i: weekday i (0 = Sunday)
  bool days_star_ = false;
  bool weekdays_star_ = false;
};

}  // namespace ctrlhost::controller

#endif  // CTRLHOST_RUNTIME_CONTROLLER_CRON_H_
