#include "runtime/common/proto_time.h"

#include <cstdint>

namespace ctrlhost::common {
namespace {

constexpr int64_t kNanosPerSecond = 1000000000;

}  // namespace

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  google::protobuf::Timestamp out;
  const int64_t nanos = absl::ToUnixNanos(t);
  int64_t seconds = nanos / kNanosPerSecond;
  int64_t remainder = nanos % kNanosPerSecond;
  if (remainder < 0) {
    seconds -= 1;
    remainder += kNanosPerSecond;
  }
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(remainder));
  return out;
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  out.set_seconds(nanos / kNanosPerSecond);
  out.set_nanos(static_cast<int32_t>(nanos % kNanosPerSecond));
  return out;
}

}  // namespace ctrlhost::common
