#include "runtime/controller/type_meta.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/field_path.h"

namespace ctrlhost::controller {
namespace {

std::string WithTypeMetaForTest(const std::string& json) {
  return WithTypeMeta(json, "v1", "ConfigMap");
}

TEST(TypeMetaTest, AddsOnlyWhatIsMissing) {
  EXPECT_EQ(WithTypeMetaForTest(R"({"metadata":{}})"),
            R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{}})");
  EXPECT_EQ(WithTypeMetaForTest(R"( {"kind":"X","metadata":{}})"),
            R"( {"apiVersion":"v1","kind":"X","metadata":{}})");
  EXPECT_EQ(WithTypeMetaForTest(R"({"apiVersion":"a/b","kind":"X"})"),
            R"({"apiVersion":"a/b","kind":"X"})");
  EXPECT_EQ(WithTypeMetaForTest("{}"), R"({"apiVersion":"v1","kind":"ConfigMap"})");
  EXPECT_EQ(WithTypeMetaForTest("[1]"), "[1]");
  EXPECT_EQ(WithTypeMetaForTest("{broken"), "{broken");
}

TEST(TypeMetaTest, ShapeObject) {
  std::vector<FieldPath> strip = {*FieldPath::Parse("spec.items[].secret"),
                                  *FieldPath::Parse("status")};
  nlohmann::json shaped = nlohmann::json::parse(ShapeObject(
      R"({"metadata":{"name":"a"},"spec":{"items":[{"secret":1,"k":2},3]},"status":{}})", "v1", "X",
      false, strip));
  EXPECT_EQ(shaped, nlohmann::json::parse(R"({"apiVersion":"v1","kind":"X",
    "metadata":{"name":"a"},"spec":{"items":[{"k":2},3]}})"));
  EXPECT_EQ(nlohmann::json::parse(
                ShapeObject(R"({"metadata":{"name":"a"},"data":{}})", "v1", "X", true, {})),
            nlohmann::json::parse(R"({"apiVersion":"v1","kind":"X","metadata":{"name":"a"}})"));
  EXPECT_EQ(ShapeObject("[1]", "v1", "X", true, strip), "[1]");
  EXPECT_EQ(ShapeObject("{bad", "v1", "X", true, strip), "{bad");
}

}  // namespace
}  // namespace ctrlhost::controller
