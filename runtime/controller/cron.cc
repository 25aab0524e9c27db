#include "runtime/controller/cron.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ctrlhost::controller {
namespace {

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const char* const* names;  // names[i] is value min + i; nullptr when the field has none
};

constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",  "JUL",
                                       "AUG", "SEP", "OCT", "NOV", "DEC", nullptr};
constexpr const char* kWeekdayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", nullptr};

constexpr FieldSpec kFields[] = {
    {"minute", 0, 59, nullptr},           {"hour", 0, 23, nullptr},
    {"day of month", 1, 31, nullptr},     {"month", 1, 12, kMonthNames},
    {"day of week", 0, 7, kWeekdayNames},
};

absl::Status FieldError(const FieldSpec& field, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("cron ", field.name, " field \"", text, "\": ", why));
}

absl::StatusOr<int> ParseValue(const FieldSpec& field, absl::string_view field_text,
                               absl::string_view value) {
  int n = 0;
  if (absl::SimpleAtoi(value, &n) && !value.empty() && absl::ascii_isdigit(value[0])) {
    if (n < field.min || n > field.max) {
      return FieldError(field, field_text,
                        absl::StrCat(value, " is out of range ", field.min, "-", field.max));
    }
    return n;
  }
  if (field.names != nullptr) {
    for (int i = 0; field.names[i] != nullptr; ++i) {
      if (absl::EqualsIgnoreCase(value, field.names[i])) return field.min + i;
    }
  }
  return FieldError(field, field_text, absl::StrCat("\"", value, "\" is not a valid value"));
}

// Parses one field into a bit set.
absl::StatusOr<uint64_t> ParseField(const FieldSpec& field, absl::string_view text) {
  if (text.empty()) return FieldError(field, text, "empty");
  uint64_t bits = 0;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (item.empty()) return FieldError(field, text, "empty list item");
    absl::string_view range = item;
    int step = 1;
    bool has_step = false;
    if (size_t slash = item.find('/'); slash != absl::string_view::npos) {
      range = item.substr(0, slash);
      absl::string_view step_text = item.substr(slash + 1);
      if (!absl::SimpleAtoi(step_text, &step) || step_text.empty() ||
          !absl::ascii_isdigit(step_text[0]) || step < 1 || step > field.max) {
        return FieldError(field, text, absl::StrCat("bad step \"", step_text, "\""));
      }
      has_step = true;
    }
    int lo = field.min;
    int hi = field.max;
    if (range == "*") {
      // the whole range
    } else if (size_t dash = range.find('-'); dash != absl::string_view::npos) {
      absl::StatusOr<int> a = ParseValue(field, text, range.substr(0, dash));
      if (!a.ok()) return a.status();
      absl::StatusOr<int> b = ParseValue(field, text, range.substr(dash + 1));
      if (!b.ok()) return b.status();
      if (*a > *b) {
        return FieldError(field, text, absl::StrCat("range ", range, " runs backwards"));
      }
      lo = *a;
      hi = *b;
    } else {
      absl::StatusOr<int> a = ParseValue(field, text, range);
      if (!a.ok()) return a.status();
      lo = *a;
      hi = has_step ? field.max : *a;  // "N/STEP": N to the maximum
    }
    for (int v = lo; v <= hi; v += step) bits |= uint64_t{1} << v;
  }
  return bits;
}

absl::string_view ExpandMacro(absl::string_view expression) {
  const std::string lower = absl::AsciiStrToLower(expression);
  if (lower == "@yearly" || lower == "@annually") return "0 0 1 1 *";
  if (lower == "@monthly") return "0 0 1 * *";
  if (lower == "@weekly") return "0 0 * * 0";
  if (lower == "@daily" || lower == "@midnight") return "0 0 * * *";
  if (lower == "@hourly") return "0 * * * *";
  return expression;
}

}  // namespace

absl::StatusOr<CronSchedule> CronSchedule::Parse(absl::string_view expression,
                                                 absl::string_view time_zone) {
  CronSchedule cron;
  cron.expression_ = std::string(expression);
  if (time_zone.empty() || time_zone == "UTC") {
    cron.zone_ = absl::UTCTimeZone();
  } else if (!absl::LoadTimeZone(std::string(time_zone), &cron.zone_)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown time zone \"", time_zone, "\""));
  }
  absl::string_view text = absl::StripAsciiWhitespace(expression);
  if (!text.empty() && text[0] == '@') {
    absl::string_view expanded = ExpandMacro(text);
    if (expanded == text) {
      return absl::InvalidArgumentError(absl::StrCat("unknown cron macro \"", text, "\""));
    }
    text = expanded;
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression \"", expression, "\" has ", fields.size(),
                     " fields; want 5 (minute hour day-of-month month day-of-week)"));
  }
  uint64_t bits[5];
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<uint64_t> field = ParseField(kFields[i], fields[i]);
    if (!field.ok()) return field.status();
    bits[i] = *field;
  }
  cron.minutes_ = bits[0];
  cron.hours_ = static_cast<uint32_t>(bits[1]);
  cron.days_ = static_cast<uint32_t>(bits[2]);
  cron.months_ = static_cast<uint32_t>(bits[3]);
  cron.weekdays_ = static_cast<uint32_t>(bits[4]);
  if (cron.weekdays_ & (1u << 7)) cron.weekdays_ = (cron.weekdays_ & 0x7f) | 1u;  // 7 = Sunday
  cron.days_star_ = fields[2][0] == '*';
  cron.weekdays_star_ = fields[4][0] == '*';
  // Every day-of-month/month combination exists within eight years (Feb 29 included), so a
  // schedule without a firing in that window never fires.
  if (cron.Next(absl::FromCivil(absl::CivilSecond(2000, 1, 1), absl::UTCTimeZone())) ==
      absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression \"", expression, "\" never fires"));
  }
  return cron;
}

bool CronSchedule::DayMatches(int day_of_month, int month, int weekday) const {
  if (!(months_ & (1u << month))) return false;
  const bool dom = days_ & (1u << day_of_month);
  const bool dow = weekdays_ & (1u << weekday);
  if (days_star_ || weekdays_star_) return dom && dow;
  return dom || dow;
}

absl::Time CronSchedule::Next(absl::Time after) const {
  if (after == absl::InfiniteFuture()) return absl::InfiniteFuture();
  if (after == absl::InfinitePast()) after = absl::UnixEpoch();
  const absl::CivilMinute start = absl::CivilMinute(zone_.At(after).cs) + 1;
  const absl::CivilDay first_day(start);
  const absl::CivilDay last_day = first_day + 8 * 366;
  for (absl::CivilDay day = first_day; day < last_day; ++day) {
    if (!(months_ & (1u << day.month()))) {
      day = absl::CivilDay(absl::CivilMonth(day) + 1) - 1;  // the loop steps to the 1st
      continue;
    }
    const int weekday = static_cast<int>(absl::GetWeekday(day));  // Monday = 0 in absl
    if (!DayMatches(day.day(), day.month(), (weekday + 1) % 7)) continue;
    for (int hour = 0; hour < 24; ++hour) {
      if (!(hours_ & (1u << hour))) continue;
      for (int minute = 0; minute < 60; ++minute) {
        if (!(minutes_ & (uint64_t{1} << minute))) continue;
        const absl::CivilMinute candidate(day.year(), day.month(), day.day(), hour, minute);
        if (candidate < start) continue;
        const absl::TimeZone::TimeInfo info = zone_.At(absl::CivilSecond(candidate));
        absl::Time t = info.pre;
        if (info.kind == absl::TimeZone::TimeInfo::SKIPPED) t = info.trans;
        if (t > after) return t;
      }
    }
  }
  return absl::InfiniteFuture();
}

}  // namespace ctrlhost::controller
