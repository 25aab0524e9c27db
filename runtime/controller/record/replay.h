// ReplayJudge: compares a new answer to a recorded call with the answer that was recorded, by
// what the host would do with each (apply::Outcome, as for plugin shadows). `ctrlhost replay`
// uses it for every record.
//
//   record::ReplayJudge judge(reader->header());
//   apply::OutcomeDiff diff = judge.Compare(record, new_answer);
//   if (!diff.same) ... diff.summary, diff.patch (from the recorded answer to the new one) ...
//
// Thread-safe after construction (Compare is const and keeps no state).
#ifndef CTRLHOST_RUNTIME_CONTROLLER_RECORD_REPLAY_H_
#define CTRLHOST_RUNTIME_CONTROLLER_RECORD_REPLAY_H_

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/controller/apply/compare.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::controller::record {

class ReplayJudge {
 public:
  explicit ReplayJudge(const pluginpb::RecordingHeader& header);

  // `answer` is what a plugin answered now to `record.call()`. Its Secret values are digested
  // first when the recording's are. A record without a response (its dispatch failed) compares
  // as {"failed": ...}; replays skip those.
  apply::OutcomeDiff Compare(const pluginpb::ReconcileRecord& record, DispatchResult answer) const;
  // The controller the recording was made for.
  const ControllerInfo& controller() const { return info_; }

 private:
  ControllerInfo info_;
  bool redact_ = true;
  bool primary_is_secret_ = false;
};

}  // namespace ctrlhost::controller::record

#endif  // CTRLHOST_RUNTIME_CONTROLLER_RECORD_REPLAY_H_
