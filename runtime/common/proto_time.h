// Conversions from absl time types to the protobuf well-known types the protocols carry
// (google.protobuf.Timestamp and Duration), in one place so that every message encodes time the
// same way.
//
//   *request.mutable_deadline() = common::ToProtoTimestamp(absl::Now() + absl::Seconds(30));
//   *response.mutable_requeue_after() = common::ToProtoDuration(absl::Minutes(1));
//
// Thread-safe: pure functions.
#ifndef CTRLHOST_RUNTIME_COMMON_PROTO_TIME_H_
#define CTRLHOST_RUNTIME_COMMON_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace ctrlhost::common {

// `t` as a Timestamp: seconds since the Unix epoch and non-negative nanos (times before 1970
// borrow a second, as the Timestamp contract requires). Times beyond the int64 nanosecond range
// (about 1678 to 2262, absl::InfinitePast/Future among them) saturate to its ends.
google::protobuf::Timestamp ToProtoTimestamp(absl::Time t);

// `d` as a Duration: seconds and nanos of the same sign. Durations beyond the int64 nanosecond
// range (about +-292 years, absl::InfiniteDuration among them) saturate to its ends.
google::protobuf::Duration ToProtoDuration(absl::Duration d);

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_PROTO_TIME_H_
