#include "runtime/controller/record/replay.h"

#include <utility>

#include "runtime/cache/object.h"
#include "runtime/controller/record/recording.h"

namespace ctrlhost::controller::record {

ReplayJudge::ReplayJudge(const pluginpb::RecordingHeader& header)
    : info_(FromRecorded(header)),
      redact_(!header.secret_data()),
      primary_is_secret_(PrimaryIsSecret(header.controller())) {}

apply::OutcomeDiff ReplayJudge::Compare(const pluginpb::ReconcileRecord& record,
                                        DispatchResult answer) const {
  const pluginpb::ReconcileCall& call = record.call();
  ReconcileContext context;
  context.controller = &info_;
  context.namespace_ = call.namespace_();
  context.name = call.name();
  context.attempt = call.attempt() > 0 ? call.attempt() - 1 : 0;
  context.trace_id = call.trace_id();
  if (!call.object().empty()) {
    cache::ObjectParser parser;
    absl::StatusOr<std::shared_ptr<const cache::Object>> primary = parser.Parse(call.object());
    // A primary the host sent always parses; one that does not is judged as gone, alike for both.
    if (primary.ok()) context.primary = *std::move(primary);
  }
  if (redact_ && answer.response.ok()) RedactSecrets(&*answer.response, primary_is_secret_);
  DispatchResult recorded =
      record.has_response()
          ? DispatchResult(record.response())
          : DispatchResult(absl::Status(static_cast<absl::StatusCode>(record.failure().code()),
                                        record.failure().message()));
  return apply::CompareOutcomes(apply::Outcome(context, recorded), apply::Outcome(context, answer));
}

}  // namespace ctrlhost::controller::record
