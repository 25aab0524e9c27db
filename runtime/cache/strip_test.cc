#include "runtime/cache/strip.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/cache/object.h"
#include "simdjson.h"

namespace ctrlhost::cache {
namespace {

constexpr char kLastApplied[] = "kubectl.kubernetes.io/last-applied-configuration";

// FindStripCutsInTokens over the structural indexes simdjson's DOM parse leaves (what
// ObjectParser does).
absl::Status TokenCuts(const std::string& json, StripSelection selection, StripCuts* cuts) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size(), true).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("simdjson refused it");
  }
  return FindStripCutsInTokens(json,
                               absl::MakeConstSpan(parser.implementation->structural_indexes.get(),
                                                   parser.implementation->n_structural_indexes),
                               selection, cuts);
}

// Strips with the byte scanner, and checks that the token walk agrees: the same bytes for
// compact JSON; for JSON with whitespace, the same document (the token walk's cuts also take
// the whitespace before the next comma or brace).
std::string Strip(const std::string& json, StripSelection selection = {}) {
  StripCuts cuts;
  absl::Status status = FindStripCuts(json, selection, &cuts);
  EXPECT_TRUE(status.ok()) << status << " for " << json;
  if (!status.ok()) return "<error>";
  const std::string by_bytes = ApplyStripCuts(json, cuts);
  StripCuts token_cuts;
  status = TokenCuts(json, selection, &token_cuts);
  EXPECT_TRUE(status.ok()) << status << " for " << json;
  if (status.ok()) {
    const std::string by_tokens = ApplyStripCuts(json, token_cuts);
    if (json.find_first_of(" \n\r\t") == std::string::npos) {
      EXPECT_EQ(by_tokens, by_bytes);
    } else {
      EXPECT_EQ(nlohmann::json::parse(by_tokens), nlohmann::json::parse(by_bytes)) << by_tokens;
    }
  }
  return by_bytes;
}

// What stripping must produce, computed the slow way: a parsed tree with the members erased.
nlohmann::json Expected(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json);
  j["metadata"].erase("managedFields");
  if (j["metadata"].contains("annotations") && j["metadata"]["annotations"].is_object()) {
    auto& a = j["metadata"]["annotations"];
    if (a.contains(kLastApplied)) {
      a.erase(kLastApplied);
      if (a.empty()) j["metadata"].erase("annotations");
    }
  }
  return j;
}

TEST(StripTest, ManagedFieldsAsFirstMiddleAndLastMember) {
  EXPECT_EQ(Strip(R"({"metadata":{"managedFields":[{"a":1}],"name":"x","uid":"u"}})"),
            R"({"metadata":{"name":"x","uid":"u"}})");
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","managedFields":[{"a":1}],"uid":"u"}})"),
            R"({"metadata":{"name":"x","uid":"u"}})");
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","uid":"u","managedFields":[{"a":1}]}})"),
            R"({"metadata":{"name":"x","uid":"u"}})");
  // The only member: an empty metadata object remains (ObjectParser then refuses it: no name).
  EXPECT_EQ(Strip(R"({"metadata":{"managedFields":[]}})"), R"({"metadata":{}})");
}

TEST(StripTest, KeepsEveryOtherByteIncludingWhitespace) {
  const std::string pretty =
      "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\n    \"name\": \"x\",\n"
      "    \"managedFields\": [ { \"f\": { \"f:spec\": {} } } ],\n    \"uid\": \"u\"\n  },\n"
      "  \"spec\": { \"n\": 1.50e3 }\n}";
  EXPECT_EQ(Strip(pretty),
            "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\n    \"name\": \"x\",\n"
            "    \"uid\": \"u\"\n  },\n  \"spec\": { \"n\": 1.50e3 }\n}");
  const std::string leading = "{ \"metadata\" : { \"managedFields\" : null ,  \"name\" : \"x\" } }";
  EXPECT_EQ(Strip(leading), "{ \"metadata\" : { \"name\" : \"x\" } }");
}

TEST(StripTest, AdjacentRemovedMembers) {
  const std::string last_applied = std::string(R"("annotations":{")") + kLastApplied + R"(":"{}"})";
  EXPECT_EQ(Strip(R"({"metadata":{"managedFields":[],)" + last_applied + R"(,"name":"x"}})"),
            R"({"metadata":{"name":"x"}})");
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","managedFields":[],)" + last_applied + "}}"),
            R"({"metadata":{"name":"x"}})");
  EXPECT_EQ(Strip(R"({"metadata":{)" + last_applied + R"(,"name":"x","managedFields":[]}})"),
            R"({"metadata":{"name":"x"}})");
  // Duplicated members are all removed.
  EXPECT_EQ(Strip(R"({"metadata":{"managedFields":[],"name":"x","managedFields":[1]}})"),
            R"({"metadata":{"name":"x"}})");
}

TEST(StripTest, AnnotationsKeepTheOthers) {
  const std::string la = std::string("\"") + kLastApplied + "\":\"{\\\"big\\\":1}\"";
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","annotations":{)" + la + R"(,"b":"2"}}})"),
            R"({"metadata":{"name":"x","annotations":{"b":"2"}}})");
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","annotations":{"a":"1",)" + la + R"(,"b":"2"}}})"),
            R"({"metadata":{"name":"x","annotations":{"a":"1","b":"2"}}})");
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","annotations":{"a":"1",)" + la + "}}}"),
            R"({"metadata":{"name":"x","annotations":{"a":"1"}}})");
  // Only last-applied: the map goes.
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","annotations":{)" + la + "}}}"),
            R"({"metadata":{"name":"x"}})");
  // An empty map or one without last-applied stays as it is.
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","annotations":{}}})"),
            R"({"metadata":{"name":"x","annotations":{}}})");
  StripCuts cuts = {{1, 2}};
  EXPECT_TRUE(
      FindStripCuts(R"({"metadata":{"name":"x","annotations":{"a":"b"}}})", {}, &cuts).ok());
  EXPECT_TRUE(cuts.empty());
}

TEST(StripTest, OnlyTopLevelMetadataIsTouched) {
  const std::string nested =
      R"({"spec":{"template":{"metadata":{"managedFields":[1],"name":"t"}},"managedFields":2},)"
      R"("metadata":{"name":"x","labels":{"managedFields":"v"},"managedFields":[]},)"
      R"("status":{"s":"\"managedFields\":[]"}})";
  EXPECT_EQ(
      Strip(nested),
      R"({"spec":{"template":{"metadata":{"managedFields":[1],"name":"t"}},"managedFields":2},)"
      R"("metadata":{"name":"x","labels":{"managedFields":"v"}},)"
      R"("status":{"s":"\"managedFields\":[]"}})");
}

TEST(StripTest, EscapedStringsAndUnicode) {
  const std::string json =
      R"({"a":"brace } bracket ] quote \" backslash \\","metadata":{"name":"caf\u00e9 é 日本",)"
      R"("managedFields":[{"k:{\"name\":\"a]\"}":{"x":"\\\\"}}],"uid":"\\"},)"
      R"("data":{"emoji":"😀 \ud83d\ude00","tail\\":"\\\""}})";
  const std::string got = Strip(json);
  EXPECT_EQ(nlohmann::json::parse(got), Expected(json));
  EXPECT_EQ(got.find("managedFields"), std::string::npos);
  // Keys spelled with escapes are the same keys to a JSON parser, so they are stripped too.
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","managed\u0046ields":[]}})"),
            R"({"metadata":{"name":"x"}})");
  EXPECT_EQ(Strip(R"({"meta\u0064ata":{"name":"x","managedFields":[]}})"),
            R"({"meta\u0064ata":{"name":"x"}})");
  // A key that only resembles it stays.
  EXPECT_EQ(Strip(R"({"metadata":{"name":"x","managedFields\u00e9":[]}})"),
            R"({"metadata":{"name":"x","managedFields\u00e9":[]}})");
}

TEST(StripTest, SelectionTurnsPartsOff) {
  const std::string json = std::string(R"({"metadata":{"name":"x","managedFields":[],)") +
                           R"("annotations":{")" + kLastApplied + R"(":"{}"}}})";
  EXPECT_EQ(Strip(json, {.managed_fields = false, .last_applied = true}),
            R"({"metadata":{"name":"x","managedFields":[]}})");
  EXPECT_EQ(
      Strip(json, {.managed_fields = true, .last_applied = false}),
      std::string(R"({"metadata":{"name":"x","annotations":{")") + kLastApplied + R"(":"{}"}}})");
  EXPECT_EQ(Strip(json, {.managed_fields = false, .last_applied = false}), json);
}

// Every prefix and many single-byte corruptions of a realistic object: the scanner answers
// with cuts inside the input, in order, or kInvalidArgument, and never reads out of bounds
// (run under ASan to check the latter).
TEST(StripTest, MalformedInputNeverCrashes) {
  const std::string json =
      std::string(R"({"kind":"Pod","metadata":{"name":"a\"b","annotations":)") +
      R"({"x":"{[","y":1,")" + kLastApplied + R"(":"v"},"managedFields":)" +
      R"([{"f":{"k:{\"a\":1}":{}}},[true,null,-1.5e2]]},"spec":{"s":"\\"}})";
  StripCuts cuts;
  ASSERT_TRUE(FindStripCuts(json, {}, &cuts).ok());
  auto check = [](const std::string& input) {
    StripCuts cuts;
    absl::Status status = FindStripCuts(input, {}, &cuts);
    if (!status.ok()) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      return;
    }
    size_t at = 0;
    for (const ByteRange& c : cuts) {
      EXPECT_LE(at, c.begin);
      EXPECT_LE(c.begin, c.end);
      EXPECT_LE(c.end, input.size());
      at = c.end;
    }
  };
  for (size_t n = 0; n < json.size(); ++n) check(json.substr(0, n));
  const char replacements[] = {'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\0', 'x'};
  for (size_t i = 0; i < json.size(); ++i) {
    for (char r : replacements) {
      std::string mutated = json;
      mutated[i] = r;
      check(mutated);
    }
  }
  for (const char* bad : {"", "{", "}", "[]", "\"", "{\"metadata\"", "{\"metadata\":",
                          "{\"metadata\":{", "{\"metadata\":{\"managedFields\":[}}",
                          "{\"metadata\":{\"annotations\":{\"a\"}}}", R"({"a":"\"})"}) {
    EXPECT_FALSE(FindStripCuts(bad, {}, &cuts).ok()) << bad;
  }
}

TEST(StripTest, TokenOffsetsOutsideTheInputAreRefused) {
  const std::string json = R"({"metadata":{"name":"x","managedFields":[]}})";
  StripCuts cuts;
  for (const std::vector<uint32_t>& tokens : std::vector<std::vector<uint32_t>>{
           {}, {0}, {0, 1000}, {0, 1, 11, 12, 1u << 31}, {0, 1, 11, 12, 19, 4000000000u}}) {
    absl::Status status = FindStripCutsInTokens(json, tokens, {}, &cuts);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  }
  // And the real indexes work.
  ASSERT_TRUE(TokenCuts(json, {}, &cuts).ok());
  EXPECT_EQ(ApplyStripCuts(json, cuts), R"({"metadata":{"name":"x"}})");
}

// ObjectParser's output equals the slow tree-based stripping for objects of every shape, and
// the same input is refused whole when it is not valid JSON.
TEST(StripTest, ObjectParserMatchesTreeStripping) {
  ObjectParser parser;
  const std::vector<std::string> objects = {
      std::string(
          R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n",)") +
          R"("managedFields":[{"manager":"m","fieldsV1":{"f:data":{".":{}}}}],"labels":{"a":"b"}},)" +
          R"("data":{"k":"v \" } ]"}})",
      std::string(R"({"metadata":{"annotations":{")") + kLastApplied +
          R"(":"{\"metadata\":{\"managedFields\":[]}}","z":"é"},"name":"n","managedFields":null},"x":[]})",
      R"({"metadata":{"name":"plain","annotations":{"a":"b"}},"data":{"managedFields":"no"}})",
  };
  for (const std::string& json : objects) {
    absl::StatusOr<std::shared_ptr<const Object>> object = parser.Parse(json);
    ASSERT_TRUE(object.ok()) << object.status() << json;
    EXPECT_EQ(nlohmann::json::parse(std::string((*object)->json())), Expected(json)) << json;
  }
  // No stripping needed: the exact input bytes.
  EXPECT_EQ((*parser.Parse(objects[2]))->json(), objects[2]);
  for (size_t n = 0; n < objects[0].size(); ++n) {
    EXPECT_FALSE(parser.Parse(objects[0].substr(0, n)).ok());
  }
}

}  // namespace
}  // namespace ctrlhost::cache
