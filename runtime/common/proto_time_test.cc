#include "runtime/common/proto_time.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

TEST(ToProtoTimestampTest, SplitsSecondsAndNanos) {
  const google::protobuf::Timestamp ts =
      ToProtoTimestamp(absl::FromUnixSeconds(1'800'000'000) + absl::Nanoseconds(123456789));
  EXPECT_EQ(ts.seconds(), 1'800'000'000);
  EXPECT_EQ(ts.nanos(), 123456789);
}

TEST(ToProtoTimestampTest, EpochIsZero) {
  const google::protobuf::Timestamp ts = ToProtoTimestamp(absl::UnixEpoch());
  EXPECT_EQ(ts.seconds(), 0);
  EXPECT_EQ(ts.nanos(), 0);
}

// Before 1970 the nanos stay non-negative: -1.25 s is seconds -2, nanos 750000000.
TEST(ToProtoTimestampTest, BeforeEpochBorrowsASecond) {
  const google::protobuf::Timestamp ts =
      ToProtoTimestamp(absl::UnixEpoch() - absl::Milliseconds(1250));
  EXPECT_EQ(ts.seconds(), -2);
  EXPECT_EQ(ts.nanos(), 750000000);
}

TEST(ToProtoTimestampTest, InfiniteTimesSaturate) {
  const google::protobuf::Timestamp future = ToProtoTimestamp(absl::InfiniteFuture());
  EXPECT_EQ(future.seconds(), std::numeric_limits<int64_t>::max() / 1000000000);
  EXPECT_GE(future.nanos(), 0);
  const google::protobuf::Timestamp past = ToProtoTimestamp(absl::InfinitePast());
  EXPECT_LT(past.seconds(), 0);
  EXPECT_GE(past.nanos(), 0);
  EXPECT_LT(past.nanos(), 1000000000);
}

TEST(ToProtoDurationTest, SplitsSecondsAndNanos) {
  const google::protobuf::Duration d = ToProtoDuration(absl::Seconds(90) + absl::Nanoseconds(5));
  EXPECT_EQ(d.seconds(), 90);
  EXPECT_EQ(d.nanos(), 5);
}

// A negative Duration carries the sign in both fields.
TEST(ToProtoDurationTest, NegativeKeepsOneSign) {
  const google::protobuf::Duration d = ToProtoDuration(-absl::Milliseconds(1500));
  EXPECT_EQ(d.seconds(), -1);
  EXPECT_EQ(d.nanos(), -500000000);
}

TEST(ToProtoDurationTest, SubNanosecondTruncates) {
  const google::protobuf::Duration d = ToProtoDuration(absl::Nanoseconds(1) / 4);
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), 0);
}

}  // namespace
}  // namespace ctrlhost::common
