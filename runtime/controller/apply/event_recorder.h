// Records core/v1 Events about objects, aggregating repeats, in the spirit of client-go's
// record.EventRecorder and its correlator (much simplified).
//
//   apply::EventRecorder recorder(&client, {.component = "ctrlhost"});
//   apply::InvolvedObject web{"example.com/v1", "WebApp", "default", "web", uid};
//   absl::Status s = recorder.Record(web, "Warning", "InvalidResponse", "desired_objects[0]: ...");
//
// Aggregation: an event identical to one this recorder wrote (same involved object, type,
// reason and message) less than `aggregation_window` ago is not created again: the earlier
// Event's `count` is raised and its `lastTimestamp` moved to now with one merge patch. When
// that Event has vanished (expired, deleted) a new one is created. Counts are best effort: two
// threads recording the same event at once may patch out of order, and a restarted host starts
// counting afresh. At most `max_tracked` recent events are remembered; past that, the entries
// older than the window are dropped, then all of them.
//
// Events go to the involved object's namespace ("default" for cluster-scoped objects, as
// client-go does); names are "<object name>.<hex>" and unique per recorder. Reasons and messages
// (plugin and server text) are stored with control characters and invalid UTF-8 escaped
// (common::EscapeUnprintable: a newline as "\\n", ESC as "\\x1b"), messages then cut to
// `max_message_bytes`.
//
// Thread-safe: the aggregation table is guarded by mu_; API calls are made without it held.
#ifndef CTRLHOST_RUNTIME_CONTROLLER_APPLY_EVENT_RECORDER_H_
#define CTRLHOST_RUNTIME_CONTROLLER_APPLY_EVENT_RECORDER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/client.h"

namespace ctrlhost::controller::apply {

// The object an event is about (core/v1 ObjectReference).
struct InvolvedObject {
  std::string api_version;  // "v1", "example.com/v1"
  std::string kind;
  std::string namespace_;  // "" for cluster-scoped objects
  std::string name;
  std::string uid;  // may be empty (an object already gone)
};

struct EventRecorderOptions {
  common::Clock* clock = common::Clock::Real();  // borrowed; for timestamps and the window
  std::string component = "ctrlhost";            // source.component and reportingComponent
  absl::Duration aggregation_window = absl::Minutes(10);
  size_t max_tracked = 4096;
  size_t max_message_bytes = 1024;  // longer messages are cut (at a UTF-8 boundary)
};

class EventRecorder {
 public:
  // `client` is borrowed and must outlive the recorder.
  explicit EventRecorder(kube::Client* client, EventRecorderOptions options = {});
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Creates the Event, or raises the count of the identical recent one: one API write.
  // `type` is "Normal" or "Warning". Returns the API error, if any.
  absl::Status Record(const InvolvedObject& object, absl::string_view type,
                      absl::string_view reason, absl::string_view message);

 private:
  struct Recent {
    std::string namespace_;
    std::string name;
    int64_t count = 0;
    absl::Time last_seen;
  };
  absl::Status Create(const std::string& key, const InvolvedObject& object, absl::string_view type,
                      absl::string_view reason, const std::string& message, absl::Time now);
  void Remember(const std::string& key, Recent recent, absl::Time now);

  kube::Client* const client_;
  const EventRecorderOptions options_;

  common::Mutex mu_;
  absl::flat_hash_map<std::string, Recent> recent_ ABSL_GUARDED_BY(mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ctrlhost::controller::apply

#endif  // CTRLHOST_RUNTIME_CONTROLLER_APPLY_EVENT_RECORDER_H_
