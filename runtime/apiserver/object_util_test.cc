// The cheap metadata readers (ExtractLabels, ReadOwnership) must agree with a full parse.
#include "runtime/apiserver/object_util.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::apiserver {
namespace {

using ::testing::ElementsAre;

// Labels as a full nlohmann parse gives them ({} for anything that is not an object).
std::map<std::string, std::string> ReferenceLabels(const std::string& json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded()) return {};
  return LabelsOf(j);
}

TEST(ExtractLabelsTest, AgreesWithAFullParse) {
  const std::vector<std::string> docs = {
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"app":"web","tier":"db"},"name":"a"}})",
      R"({"metadata":{"labels":{"n":1,"b":true,"z":null,"o":{},"s":"x"}}})",
      R"({"metadata":{"labels":{"esc\"aped":"v\u00e9\n","k\/2":"\ud83d\ude00"}}})",
      R"({"metadata":{"labels":[]}})",
      R"({"metadata":{"labels":"app=web"}})",
      R"({"metadata":[]})",
      R"({"metadata":{"name":"no-labels"}})",
      R"({"spec":{"metadata":{"labels":{"nested":"not-ours"}}}})",
      R"({"metadata":{"labels":{}}})",
      R"([{"metadata":{"labels":{"a":"b"}}}])",
      R"("string")",
      R"({"metadata":{"labels":{"a":"b"}})",  // truncated
      R"(not json)",
      "",
  };
  for (const std::string& doc : docs) {
    EXPECT_EQ(ExtractLabels(doc), ReferenceLabels(doc)) << doc;
  }
  EXPECT_EQ(ExtractLabels(docs[0]),
            (std::map<std::string, std::string>{{"app", "web"}, {"tier", "db"}}));
  EXPECT_EQ(ExtractLabels(docs[1]), (std::map<std::string, std::string>{{"s", "x"}}));
  EXPECT_EQ(ExtractLabels(docs[2]).at("esc\"aped"), "v\xc3\xa9\n");
}

TEST(ExtractLabelsTest, LargeObjects) {
  // Larger than any earlier document on this thread: the padded buffer grows.
  std::string big = R"({"data":{"blob":")" + std::string(1 << 20, 'x') +
                    R"("},"metadata":{"labels":{"size":"big"}}})";
  EXPECT_EQ(ExtractLabels(big), (std::map<std::string, std::string>{{"size", "big"}}));
  EXPECT_EQ(ExtractLabels(R"({"metadata":{"labels":{"size":"small"}}})"),
            (std::map<std::string, std::string>{{"size", "small"}}));
}

TEST(ReadOwnershipTest, UidAndOwners) {
  OwnershipFields f = ReadOwnership(
      R"({"metadata":{"name":"a","ownerReferences":[{"apiVersion":"v1","kind":"X","name":"p","uid":"u1"},)"
      R"({"uid":7},"junk",{"kind":"no-uid"},{"uid":"u2","controller":true}],"uid":"self"},)"
      R"("spec":{"uid":"not-ours"}})");
  EXPECT_TRUE(f.ok);
  EXPECT_EQ(f.uid, "self");
  EXPECT_THAT(f.owner_uids, ElementsAre("u1", "u2"));
}

TEST(ReadOwnershipTest, MissingAndMalformed) {
  OwnershipFields none = ReadOwnership(R"({"metadata":{"name":"a"}})");
  EXPECT_TRUE(none.ok);
  EXPECT_EQ(none.uid, "");
  EXPECT_TRUE(none.owner_uids.empty());
  EXPECT_TRUE(ReadOwnership(R"({"kind":"X"})").ok);
  EXPECT_TRUE(ReadOwnership(R"({"metadata":{"uid":1,"ownerReferences":{}}})").ok);
  EXPECT_EQ(ReadOwnership(R"({"metadata":{"uid":1}})").uid, "");
  EXPECT_FALSE(ReadOwnership("[1,2]").ok);
  EXPECT_FALSE(ReadOwnership("{\"metadata\":").ok);
  EXPECT_FALSE(ReadOwnership("").ok);
}

}  // namespace
}  // namespace ctrlhost::apiserver
