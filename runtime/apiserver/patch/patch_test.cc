#include "runtime/apiserver/patch/patch.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;

const json kDoc = json::parse(R"({
  "apiVersion": "v1", "kind": "ConfigMap",
  "metadata": {"name": "cm", "labels": {"a": "1"}},
  "data": {"k": "v"},
  "list": [1, 2, 3]
})");

TEST(PatchTypeTest, ContentTypes) {
  EXPECT_EQ(*PatchTypeFromContentType("application/json-patch+json"), PatchType::kJsonPatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/merge-patch+json; charset=utf-8"),
            PatchType::kMergePatch);
  EXPECT_EQ(*PatchTypeFromContentType(" Application/Strategic-Merge-Patch+JSON "),
            PatchType::kStrategicMergePatch);
  EXPECT_EQ(*PatchTypeFromContentType("application/apply-patch+yaml"), PatchType::kApplyPatch);
  for (PatchType t : {PatchType::kJsonPatch, PatchType::kMergePatch,
                      PatchType::kStrategicMergePatch, PatchType::kApplyPatch}) {
    EXPECT_EQ(*PatchTypeFromContentType(ContentTypeOf(t)), t);
  }
}

TEST(PatchTypeTest, UnknownContentTypeIs415) {
  for (const char* ct : {"application/json", "", "text/plain", "application/json-patch"}) {
    absl::StatusOr<PatchType> t = PatchTypeFromContentType(ct);
    ASSERT_FALSE(t.ok()) << ct;
    EXPECT_EQ(kube::HttpCode(t.status()), 415);
    EXPECT_EQ(kube::Reason(t.status()), "UnsupportedMediaType");
    EXPECT_NE(t.status().message().find("application/strategic-merge-patch+json"),
              std::string::npos);
  }
}

struct JsonPatchCase {
  std::string name;
  std::string patch;
  std::string want;  // the expected document, or "" when an error is expected
  int want_code = 0;
};

class JsonPatchTest : public testing::TestWithParam<JsonPatchCase> {};

TEST_P(JsonPatchTest, Applies) {
  const JsonPatchCase& c = GetParam();
  absl::StatusOr<json> got = ApplyJsonPatch(kDoc, c.patch);
  if (c.want_code != 0) {
    ASSERT_FALSE(got.ok()) << got->dump();
    EXPECT_EQ(kube::HttpCode(got.status()), c.want_code) << got.status();
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status();
  json want = kDoc;
  want.merge_patch(json::parse(c.want));
  EXPECT_EQ(*got, want) << got->dump();
}

INSTANTIATE_TEST_SUITE_P(
    Ops, JsonPatchTest,
    testing::ValuesIn(std::vector<JsonPatchCase>{
        {"AddMember", R"([{"op":"add","path":"/data/x","value":"y"}])", R"({"data":{"x":"y"}})"},
        {"AddReplacesMember", R"([{"op":"add","path":"/data/k","value":2}])",
         R"({"data":{"k":2}})"},
        {"AddArrayInsert", R"([{"op":"add","path":"/list/1","value":9}])", R"({"list":[1,9,2,3]})"},
        {"AddArrayAppend", R"([{"op":"add","path":"/list/-","value":9}])", R"({"list":[1,2,3,9]})"},
        {"AddArrayAtEnd", R"([{"op":"add","path":"/list/3","value":9}])", R"({"list":[1,2,3,9]})"},
        {"RemoveMember", R"([{"op":"remove","path":"/metadata/labels/a"}])",
         R"({"metadata":{"labels":{"a":null}}})"},
        {"RemoveArrayItem", R"([{"op":"remove","path":"/list/0"}])", R"({"list":[2,3]})"},
        {"Replace", R"([{"op":"replace","path":"/data/k","value":"w"}])", R"({"data":{"k":"w"}})"},
        {"Move", R"([{"op":"move","from":"/data/k","path":"/metadata/labels/k"}])",
         R"({"data":{"k":null},"metadata":{"labels":{"k":"v"}}})"},
        {"Copy", R"([{"op":"copy","from":"/data","path":"/copied"}])", R"({"copied":{"k":"v"}})"},
        {"TestPasses",
         R"([{"op":"test","path":"/data/k","value":"v"},{"op":"add","path":"/data/t","value":1}])",
         R"({"data":{"t":1}})"},
        {"TestMissingAgainstNullPasses", R"([{"op":"test","path":"/data/nope","value":null}])",
         "{}"},
        {"EscapedPointer", R"([{"op":"add","path":"/metadata/labels/a~1b~0c","value":"x"}])",
         R"({"metadata":{"labels":{"a/b~c":"x"}}})"},
        {"Empty", "[]", "{}"},
        // Does not apply: 422 Invalid.
        {"TestFails", R"([{"op":"test","path":"/data/k","value":"other"}])", "", 422},
        {"TestFailsAfterEarlierOps",
         R"([{"op":"add","path":"/data/x","value":1},{"op":"test","path":"/data/x","value":2}])",
         "", 422},
        {"TestMissingPath", R"([{"op":"test","path":"/data/nope","value":"v"}])", "", 422},
        {"AddMissingParent", R"([{"op":"add","path":"/spec/a/b","value":1}])", "", 422},
        {"AddIntoScalar", R"([{"op":"add","path":"/data/k/x","value":1}])", "", 422},
        {"AddIndexOutOfRange", R"([{"op":"add","path":"/list/7","value":1}])", "", 422},
        {"AddBadIndex", R"([{"op":"add","path":"/list/x","value":1}])", "", 422},
        {"RemoveMissing", R"([{"op":"remove","path":"/data/nope"}])", "", 422},
        {"RemoveIndexOutOfRange", R"([{"op":"remove","path":"/list/3"}])", "", 422},
        {"RemoveRoot", R"([{"op":"remove","path":""}])", "", 422},
        {"ReplaceMissing", R"([{"op":"replace","path":"/data/nope","value":1}])", "", 422},
        {"MoveFromMissing", R"([{"op":"move","from":"/nope","path":"/data/x"}])", "", 422},
        {"MoveIntoChild", R"([{"op":"move","from":"/data","path":"/data/sub"}])", "", 422},
        {"CopyToMissingParent", R"([{"op":"copy","from":"/data","path":"/a/b"}])", "", 422},
        // Malformed: 400 BadRequest.
        {"NotJson", "[{", "", 400},
        {"NotArray", R"({"op":"add"})", "", 400},
        {"OpNotObject", R"([1])", "", 400},
        {"UnknownOp", R"([{"op":"frobnicate","path":"/data"}])", "", 400},
        {"MissingOp", R"([{"path":"/data"}])", "", 400},
        {"MissingPath", R"([{"op":"remove"}])", "", 400},
        {"PathNotString", R"([{"op":"remove","path":1}])", "", 400},
        {"PathNoSlash", R"([{"op":"remove","path":"data"}])", "", 400},
        {"BadEscape", R"([{"op":"remove","path":"/data/~2"}])", "", 400},
        {"MissingValue", R"([{"op":"add","path":"/data/x"}])", "", 400},
        {"MissingFrom", R"([{"op":"copy","path":"/data/x"}])", "", 400},
    }),
    [](const testing::TestParamInfo<JsonPatchCase>& info) { return info.param.name; });

TEST(JsonPatchTest, FailingTestIs422LikeKubeApiserver) {
  absl::StatusOr<json> got =
      ApplyJsonPatch(kDoc, R"([{"op":"test","path":"/data/k","value":"other"}])");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 422);
  EXPECT_EQ(kube::Reason(got.status()), "Invalid");
  EXPECT_EQ(got.status().message(),
            "the server rejected our request due to an error in our request");
  kube::StatusDetails details = kube::Details(got.status());
  ASSERT_EQ(details.causes.size(), 1u);
  EXPECT_EQ(details.causes[0].field, "/data/k");
  EXPECT_NE(details.causes[0].message.find("test failed"), std::string::npos);
}

TEST(JsonPatchTest, TooManyOperationsIs413) {
  json ops = json::array();
  for (int i = 0; i < 10001; ++i)
    ops.push_back({{"op", "test"}, {"path", "/data/k"}, {"value", "v"}});
  absl::StatusOr<json> got = ApplyJsonPatch(kDoc, ops.dump());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 413);
}

TEST(DepthTest, DeeplyNestedBodiesAreRefused) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const std::string deep_object = "{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}";
  absl::StatusOr<json> got =
      ApplyJsonPatch(kDoc, "[{\"op\":\"add\",\"path\":\"/x\",\"value\":" + deep + "}]");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 400);
  got = ApplyMergePatch(kDoc, deep_object);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 400);
  got = ApplyStrategicMergePatch(kDoc, deep_object, BuiltinMergeStrategy("", "ConfigMap"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 400);
}

// Issue 14: 41 operations (an add, then 40 copies of the document into itself) doubled the
// document 40 times (RSS 0.5 -> 6 GB, no answer). Refused once the copies would grow the
// document by more than the limit, whatever the number of operations.
TEST(JsonPatchTest, RegressionCopyIntoItselfBombIs413) {
  json ops = json::array();
  ops.push_back({{"op", "add"}, {"path", "/x"}, {"value", {std::string(10, 'x')}}});
  for (int i = 0; i < 40; ++i) ops.push_back({{"op", "copy"}, {"from", "/x"}, {"path", "/x/-"}});
  absl::StatusOr<json> got = ApplyJsonPatch(kDoc, ops.dump());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 413);
  EXPECT_NE(got.status().message().find("would grow the object by more than"), std::string::npos)
      << got.status();
  // A few copies of a small value are fine.
  json few = json::array();
  few.push_back({{"op", "add"}, {"path", "/x"}, {"value", {"b"}}});
  for (int i = 0; i < 5; ++i) few.push_back({{"op", "copy"}, {"from", "/x"}, {"path", "/x/-"}});
  EXPECT_TRUE(ApplyJsonPatch(kDoc, few.dump()).ok());
}

// Moves that each nest the document one level deeper (cheap: nothing is copied) cannot build
// a document deeper than the nesting limit either.
TEST(JsonPatchTest, MovesCannotNestPastTheLimit) {
  json ops = json::array();
  ops.push_back({{"op", "add"}, {"path", "/x"}, {"value", json::object()}});
  for (int i = 0; i < 1100; ++i) {
    ops.push_back({{"op", "add"}, {"path", "/t"}, {"value", json::object()}});
    ops.push_back({{"op", "move"}, {"from", "/x"}, {"path", "/t/a"}});
    ops.push_back({{"op", "move"}, {"from", "/t"}, {"path", "/x"}});
  }
  absl::StatusOr<json> got = ApplyJsonPatch(kDoc, ops.dump());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("more than 1000 levels"), std::string::npos)
      << got.status();
}

TEST(DepthTest, RegressionFifteenThousandLevelsAreRefusedWithTheLimit) {
  const std::string deep = std::string(15000, '[') + std::string(15000, ']');
  absl::StatusOr<json> got =
      ApplyJsonPatch(kDoc, "[{\"op\":\"add\",\"path\":\"/x\",\"value\":" + deep + "}]");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(kube::HttpCode(got.status()), 400);
  EXPECT_NE(got.status().message().find("more than 1000 levels"), std::string::npos)
      << got.status();
}

struct MergePatchCase {
  std::string name;
  std::string patch;
  std::string want;
  int want_code = 0;
};

class MergePatchTest : public testing::TestWithParam<MergePatchCase> {};

TEST_P(MergePatchTest, Applies) {
  const MergePatchCase& c = GetParam();
  absl::StatusOr<json> got = ApplyMergePatch(kDoc, c.patch);
  if (c.want_code != 0) {
    ASSERT_FALSE(got.ok()) << got->dump();
    EXPECT_EQ(kube::HttpCode(got.status()), c.want_code) << got.status();
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, json::parse(c.want)) << got->dump();
}

INSTANTIATE_TEST_SUITE_P(
    Rfc7386, MergePatchTest,
    testing::ValuesIn(std::vector<MergePatchCase>{
        {"SetAndDelete", R"({"data":{"k":null,"n":"1"},"metadata":{"labels":{"b":"2"}}})",
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"1","b":"2"}},
             "data":{"n":"1"},"list":[1,2,3]})"},
        {"ListsReplaced", R"({"list":[4]})",
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"1"}},
             "data":{"k":"v"},"list":[4]})"},
        {"NullsInNewObjectDropped", R"({"spec":{"a":null,"b":{"c":null,"d":1}}})",
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"1"}},
             "data":{"k":"v"},"list":[1,2,3],"spec":{"b":{"d":1}}})"},
        {"DeleteWholeMap", R"({"data":null})",
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"1"}},
             "list":[1,2,3]})"},
        {"ScalarReplacesMap", R"({"data":"x"})",
         R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","labels":{"a":"1"}},
             "data":"x","list":[1,2,3]})"},
        {"EmptyPatch", "{}", kDoc.dump()},
        {"ArrayPatch", "[1]", "", 400},
        {"StringPatch", R"("x")", "", 400},
        {"NullPatch", "null", "", 400},
        {"NotJson", "{", "", 400},
    }),
    [](const testing::TestParamInfo<MergePatchCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ctrlhost::apiserver
