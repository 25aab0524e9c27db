#include "runtime/common/yaml_json.h"

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

TEST(YamlJsonTest, PlainScalarsAreTypedQuotedStayStrings) {
  auto j = YamlToJson(R"(
replicas: 3
ratio: 0.5
enabled: true
nothing: ~
also: null
version: "3"
word: hello
big: 12345678901234
neg: -7
hex: 0x1F
)");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["replicas"], 3);
  EXPECT_EQ((*j)["ratio"], 0.5);
  EXPECT_EQ((*j)["enabled"], true);
  EXPECT_TRUE((*j)["nothing"].is_null());
  EXPECT_TRUE((*j)["also"].is_null());
  EXPECT_EQ((*j)["version"], "3");
  EXPECT_EQ((*j)["word"], "hello");
  EXPECT_EQ((*j)["big"], 12345678901234);
  EXPECT_EQ((*j)["neg"], -7);
  EXPECT_EQ((*j)["hex"], 31);
}

TEST(YamlJsonTest, NestedStructuresAndBlockScalars) {
  auto j = YamlToJson("a:\n  - x: 1\n  - |\n    line1\n    line2\nb: {c: [1, 2]}\n");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"][0]["x"], 1);
  EXPECT_EQ((*j)["a"][1], "line1\nline2\n");
  EXPECT_EQ((*j)["b"]["c"], nlohmann::json::array({1, 2}));
}

TEST(YamlJsonTest, ErrorsNameTheLine) {
  auto j = YamlToJson("a: 1\nb: [unclosed\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("line"), absl::string_view::npos) << j.status();
  auto dup = YamlToJson("a: 1\na: 2\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("line 2"), absl::string_view::npos) << dup.status();
}

TEST(YamlJsonTest, MultipleDocuments) {
  auto docs = YamlDocumentsToJson("a: 1\n---\n---\nb: 2\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[1]["b"], 2);
  EXPECT_FALSE(YamlToJson("a: 1\n---\nb: 2\n").ok());
}

TEST(YamlJsonTest, RoundTripKeepsTypes) {
  nlohmann::json in = {{"s", "3"},
                       {"n", 3},
                       {"b", false},
                       {"t", "true"},
                       {"e", ""},
                       {"null", nullptr},
                       {"l", {1, "x", 2.5}},
                       {"m", "a\nb"},
                       {"m2", "x\ny\n"},
                       {"colon", "a: b"},
                       {"empty", nlohmann::json::array()}};
  auto out = YamlToJson(JsonToYaml(in));
  ASSERT_TRUE(out.ok()) << out.status() << "\n" << JsonToYaml(in);
  EXPECT_EQ(*out, in) << JsonToYaml(in);
}

}  // namespace
}  // namespace ctrlhost::common
