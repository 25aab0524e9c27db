#include "runtime/manager/counting_dispatcher.h"

#include <utility>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"

namespace ctrlhost::manager {

CountingDispatcher::CountingDispatcher(controller::Dispatcher* target, common::Clock* clock)
    : target_(target), clock_(clock != nullptr ? clock : common::Clock::Real()) {}

const char* CountingDispatcher::ResultLabel(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    case absl::StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case absl::StatusCode::kInvalidArgument:
      return "invalid";
    default:
      return "error";
  }
}

void CountingDispatcher::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                                  controller::ReconcileCallback done) {
  const absl::Time start = clock_->Now();
  {
    common::MutexLock lock(&mu_);
    ++figures_.in_flight;
  }
  target_->Dispatch(std::move(call), deadline,
                    [this, start, done = std::move(done)](controller::DispatchResult result) {
                      const absl::Duration took = clock_->Now() - start;
                      {
                        common::MutexLock lock(&mu_);
                        --figures_.in_flight;
                        ++figures_.requests_total[ResultLabel(result.response.status())];
                        figures_.duration.Observe(took);
                      }
                      done(std::move(result));
                    });
}

PluginRequestFigures CountingDispatcher::Figures() const {
  common::MutexLock lock(&mu_);
  return figures_;
}

}  // namespace ctrlhost::manager
