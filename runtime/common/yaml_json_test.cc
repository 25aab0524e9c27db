#include "runtime/common/yaml_json.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// Regression (found by the body_yaml fuzzer): an octal past int64 threw std::out_of_range out of
// the parser, and the API server answered 500 without a reason.
TEST(YamlJsonTest, RegressionOutOfRangeOctalIsAnErrorNamingTheLine) {
  auto j = YamlToJson("a: 1\nb: 0o1111100000000000000000000000001\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(j.status().message().find("line 2"), absl::string_view::npos) << j.status();
  EXPECT_NE(j.status().message().find("out of range"), absl::string_view::npos) << j.status();
  auto largest = YamlToJson("a: 0o777777777777777777777\nb: 0o17\n");
  ASSERT_TRUE(largest.ok()) << largest.status();
  EXPECT_EQ((*largest)["a"], INT64_MAX);
  EXPECT_EQ((*largest)["b"], 15);
  EXPECT_FALSE(YamlToJson("a: 0o1000000000000000000000\n").ok());
  // A string that would read as such a number is quoted on the way out, and reads back.
  auto back = YamlToJson(JsonToYaml({{"s", "0o1111100000000000000000000000001"}}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)["s"], "0o1111100000000000000000000000001");
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

// Issue 14: a 600-byte body of nested aliases ("billion laughs") grew RSS to 6 GB.
TEST(YamlJsonTest, RegressionBillionLaughsIsRefused) {
  std::string yaml = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    yaml += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) yaml += (i ? ",*" : "*") + prev;
    yaml += "]\n";
    prev = std::string(1, c);
  }
  ASSERT_LT(yaml.size(), 1000u);
  auto out = YamlToJson(yaml);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("expands to too many nodes"), std::string::npos)
      << out.status();
}

TEST(YamlJsonTest, ModestAliasesStillWork) {
  auto out = YamlToJson("base: &b {image: nginx, port: 80}\nx: *b\ny: *b\n");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)["y"]["port"], 80);
}

TEST(YamlJsonTest, DeepFlowNestingIsAnErrorNotACrash) {
  auto out = YamlToJson(std::string(15000, '[') + std::string(15000, ']'));
  EXPECT_FALSE(out.ok());
  out = YamlToJson(std::string(15000 * 2, ' ').replace(0, 30000, [] {
    std::string s;
    for (int i = 0; i < 15000; ++i) s += "- ";
    return s;
  }()) + "x");
  EXPECT_FALSE(out.ok());
}

// Regression (attack run, item 4): past yaml-cpp's own recursion guard (2000) the error was
// its "bad file". The limit is named, for every nesting style, before yaml-cpp builds a tree.
TEST(YamlJsonTest, RegressionDeepNestingNamesTheLimit) {
  std::string block;
  for (int i = 0; i < 100000; ++i) block += "- ";
  std::string mapping;
  for (int i = 0; i < 100000; ++i) mapping += "a: {";
  for (const std::string& text :
       {std::string(100000, '['), absl::StrCat(std::string(100000, '['), std::string(100000, ']')),
        mapping, block + "x", std::string(201, '[') + std::string(201, ']')}) {
    absl::Status checked = CheckYamlStream(text);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << text.substr(0, 20);
    EXPECT_THAT(std::string(checked.message()), HasSubstr("nesting deeper than 200 levels"));
    auto out = YamlDocumentsToJson(text);
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("nesting deeper than 200 levels"));
    EXPECT_THAT(std::string(out.status().message()), Not(HasSubstr("bad file")));
  }
  EXPECT_TRUE(CheckYamlStream(std::string(200, '[') + std::string(200, ']')).ok());
  EXPECT_TRUE(CheckYamlStream("a: [1]\n---\n" + std::string(200, '[') + std::string(200, ']'))
                  .ok());  // the depth is per document
}

// Found by tools/fuzz (body_yaml, patch): yaml-cpp's LoadAll looped for ever, allocating,
// on a flow entry where a document starts.
TEST(YamlJsonTest, RegressionStrayFlowEntryDoesNotHangTheParser) {
  for (const char* text :
       {",", ",a", "\"x\",", "---\n,", "a\n---\n,\n", ",\"path\":\"/spec\",\"value\":x\"}]"}) {
    auto out = YamlDocumentsToJson(text);
    EXPECT_FALSE(out.ok()) << text;
  }
  EXPECT_TRUE(YamlDocumentsToJson("a: 1\n---\nb: 2\n---\n").ok());
}

// Found by tools/fuzz (body_yaml): NUL and other control characters (go-yaml refuses them).
TEST(YamlJsonTest, RegressionControlCharactersAreRefused) {
  auto out = YamlToJson(std::string("me\x1b\0 &tad\0\0\0 a a", 17));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("control characters are not allowed"), std::string::npos);
  EXPECT_TRUE(YamlToJson("a:\tb\r\n").ok());
}

}  // namespace
}  // namespace ctrlhost::common
