// RequestSeats: the list share of the read seats, the host's level apart from users', writes
// apart from reads, release when the last copy of a seat goes.
#include "runtime/apiserver/seats.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ctrlhost::apiserver {
namespace {

using Seat = std::shared_ptr<void>;

TEST(RequestSeatsTest, UserLimitsLeaveAQuarterOfTheReadsToSingleObjectReads) {
  EXPECT_EQ(RequestSeats::UserLimits(400, 200).list_reads, 300);
  EXPECT_EQ(RequestSeats::UserLimits(4, 1).list_reads, 3);
  EXPECT_EQ(RequestSeats::UserLimits(2, 1).list_reads, 1);
  EXPECT_EQ(RequestSeats::UserLimits(1, 1).list_reads, 0);  // one seat: nothing to split
  EXPECT_EQ(RequestSeats::UserLimits(0, 0).reads, 0);       // no limit
}

// Issue 25: 400 clients holding LISTs took every read seat and a plain GET got 429.
TEST(RequestSeatsTest, RegressionListsCannotTakeEveryReadSeat) {
  RequestSeats seats(RequestSeats::UserLimits(4, 1), RequestSeats::UserLimits(4, 1));
  std::vector<Seat> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(seats.Admit(RequestSeats::kUser, RequestSeats::kList));
    ASSERT_NE(held.back(), nullptr) << i;
  }
  EXPECT_EQ(seats.Admit(RequestSeats::kUser, RequestSeats::kList), nullptr);
  Seat get = seats.Admit(RequestSeats::kUser, RequestSeats::kRead);
  EXPECT_NE(get, nullptr);
  // Every read seat is now taken.
  EXPECT_EQ(seats.Admit(RequestSeats::kUser, RequestSeats::kRead), nullptr);
  EXPECT_EQ(seats.in_use(RequestSeats::kUser).reads, 4);
  EXPECT_EQ(seats.in_use(RequestSeats::kUser).lists, 3);
  // Writes have their own.
  EXPECT_NE(seats.Admit(RequestSeats::kUser, RequestSeats::kWrite), nullptr);
  held.pop_back();
  EXPECT_NE(seats.Admit(RequestSeats::kUser, RequestSeats::kList), nullptr);
}

TEST(RequestSeatsTest, SingleObjectReadsMayUseEveryReadSeat) {
  RequestSeats seats(RequestSeats::UserLimits(4, 1), RequestSeats::UserLimits(4, 1));
  std::vector<Seat> held;
  for (int i = 0; i < 4; ++i) held.push_back(seats.Admit(RequestSeats::kUser, RequestSeats::kRead));
  for (const Seat& s : held) EXPECT_NE(s, nullptr);
  EXPECT_EQ(seats.Admit(RequestSeats::kUser, RequestSeats::kList), nullptr);
}

// Issue 25: the host's own client shared the users' seats and was starved with them.
TEST(RequestSeatsTest, RegressionTheSystemLevelHasSeatsOfItsOwn) {
  RequestSeats seats(RequestSeats::UserLimits(1, 1), RequestSeats::UserLimits(1, 1));
  Seat read = seats.Admit(RequestSeats::kUser, RequestSeats::kList);
  Seat write = seats.Admit(RequestSeats::kUser, RequestSeats::kWrite);
  ASSERT_NE(read, nullptr);
  ASSERT_NE(write, nullptr);
  EXPECT_EQ(seats.Admit(RequestSeats::kUser, RequestSeats::kRead), nullptr);
  EXPECT_EQ(seats.Admit(RequestSeats::kUser, RequestSeats::kWrite), nullptr);
  Seat system_read = seats.Admit(RequestSeats::kSystem, RequestSeats::kList);
  Seat system_write = seats.Admit(RequestSeats::kSystem, RequestSeats::kWrite);
  EXPECT_NE(system_read, nullptr);
  EXPECT_NE(system_write, nullptr);
  EXPECT_EQ(seats.in_use(RequestSeats::kUser).reads, 1);
  EXPECT_EQ(seats.in_use(RequestSeats::kSystem).reads, 1);
}

TEST(RequestSeatsTest, ASeatIsReleasedWithItsLastCopyEvenAfterTheSeats) {
  Seat copy;
  {
    RequestSeats seats(RequestSeats::UserLimits(1, 1), RequestSeats::UserLimits(1, 1));
    Seat seat = seats.Admit(RequestSeats::kUser, RequestSeats::kRead);
    copy = seat;
    seat.reset();
    EXPECT_EQ(seats.in_use(RequestSeats::kUser).reads, 1);
    EXPECT_EQ(seats.Admit(RequestSeats::kUser, RequestSeats::kRead), nullptr);
    copy.reset();
    EXPECT_EQ(seats.in_use(RequestSeats::kUser).reads, 0);
    copy = seats.Admit(RequestSeats::kUser, RequestSeats::kRead);
    EXPECT_NE(copy, nullptr);
  }
  copy.reset();  // the counters outlive the RequestSeats
}

TEST(RequestSeatsTest, ZeroIsNoLimit) {
  RequestSeats seats(RequestSeats::UserLimits(0, 0), SeatLimits{});
  std::vector<Seat> held;
  for (int i = 0; i < 1000; ++i) {
    held.push_back(
        seats.Admit(RequestSeats::kUser, i % 2 ? RequestSeats::kList : RequestSeats::kWrite));
    ASSERT_NE(held.back(), nullptr);
  }
}

}  // namespace
}  // namespace ctrlhost::apiserver
