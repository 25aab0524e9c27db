#include "runtime/manager/watch_readiness.h"

#include "absl/strings/str_cat.h"

namespace ctrlhost::manager {
namespace {

std::string Seconds(absl::Duration d) {
  if (d < absl::Seconds(1)) return "0s";
  return absl::FormatDuration(absl::Trunc(d, absl::Seconds(1)));
}

}  // namespace

std::string WatchReadinessProblem(const watch::ReflectorMetrics& metrics, absl::Time now,
                                  absl::Duration stale_after) {
  const std::string watch = absl::StrCat("watch ", metrics.description);
  if (!metrics.failing) {
    return metrics.synced ? "" : absl::StrCat(watch, " not synced");
  }
  const std::string failing_for = Seconds(now - metrics.failing_since);
  const std::string& error =
      metrics.last_error_message.empty() ? metrics.last_error : metrics.last_error_message;
  if (metrics.last_error_code == absl::StatusCode::kPermissionDenied) {
    return absl::StrCat(watch, " forbidden (403) for ", failing_for, ": ", error);
  }
  if (metrics.last_error_code == absl::StatusCode::kUnauthenticated) {
    return absl::StrCat(watch, " unauthorized (401) for ", failing_for, ": ", error);
  }
  if (!metrics.synced) {
    return absl::StrCat(watch, " not synced: failing for ", failing_for, ": ", error);
  }
  if (now - metrics.failing_since >= stale_after) {
    return absl::StrCat(watch, " stale: failing for ", failing_for, ": ", error);
  }
  return "";
}

}  // namespace ctrlhost::manager
