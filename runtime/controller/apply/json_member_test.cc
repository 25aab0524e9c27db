#include "runtime/controller/apply/json_member.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

TEST(JsonMemberTest, AbsentOrWrongTypeNeverThrows) {
  const json object = {{"kind", "Pod"}, {"metadata", {{"name", 7}}}};
  ASSERT_NE(Member(object, "metadata"), nullptr);
  EXPECT_EQ(Member(object, "spec"), nullptr);
  EXPECT_EQ(Member(json::array({1, 2}), "kind"), nullptr);
  EXPECT_EQ(Member(json("text"), "kind"), nullptr);
  EXPECT_EQ(StringMember(object, "kind"), "Pod");
  EXPECT_EQ(StringMember(*Member(object, "metadata"), "name"), "");  // a number
  EXPECT_EQ(StringMember(object, "missing"), "");
  EXPECT_EQ(StringMember(json(), "kind"), "");
}

}  // namespace
}  // namespace ctrlhost::controller::apply
