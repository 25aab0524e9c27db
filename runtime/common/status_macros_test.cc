#include "runtime/common/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

absl::Status FailIf(bool fail, int* calls) {
  ++*calls;
  return fail ? absl::InvalidArgumentError("bad") : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool fail, int* calls) {
  ++*calls;
  if (fail) return absl::NotFoundError("none");
  return std::make_unique<int>(7);
}

absl::Status UseReturnIfError(bool fail, int* calls) {
  RETURN_IF_ERROR(FailIf(fail, calls));
  return absl::OkStatus();
}

absl::StatusOr<int> UseAssignOrReturn(bool fail, int* calls) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> v, MakeInt(fail, calls));  // move-only value
  int doubled = 0;
  ASSIGN_OR_RETURN(auto again, MakeInt(false, calls));  // two in one scope
  doubled = *v + *again;
  return doubled;
}

TEST(StatusMacrosTest, ReturnIfErrorPropagatesOnceEvaluated) {
  int calls = 0;
  EXPECT_TRUE(UseReturnIfError(false, &calls).ok());
  absl::Status s = UseReturnIfError(true, &calls);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 2);
}

TEST(StatusMacrosTest, AssignOrReturnMovesValueOrReturnsError) {
  int calls = 0;
  absl::StatusOr<int> ok = UseAssignOrReturn(false, &calls);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 14);
  EXPECT_EQ(calls, 2);
  absl::StatusOr<int> err = UseAssignOrReturn(true, &calls);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(calls, 3);  // stopped at the first failure
}

}  // namespace
}  // namespace ctrlhost::common
