#include "runtime/cache/object.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::cache {
namespace {

constexpr char kPod[] = R"({"apiVersion":"v1","kind":"Pod","metadata":{
  "name":"web-1","namespace":"default","uid":"u1","resourceVersion":"42","generation":3,
  "labels":{"tier":"front","app":"web"},
  "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"big\":1}","keep":"x"},
  "managedFields":[{"manager":"kubectl","operation":"Apply","fieldsV1":{"f:spec":{}}}],
  "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"rs1",
                      "controller":true}],
  "finalizers":["a/b","c/d"],"deletionTimestamp":"2026-01-01T00:00:00Z"},
  "spec":{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}]}],
          "ratio":0.5,"big":12345678901234,"s":"quote\" backslash\\ tab\t"}})";

TEST(ObjectParserTest, ParsesMetadata) {
  ObjectParser parser;
  auto object = parser.Parse(kPod);
  ASSERT_TRUE(object.ok()) << object.status();
  const ObjectMeta& m = (*object)->meta();
  EXPECT_EQ(m.namespace_, "default");
  EXPECT_EQ(m.name, "web-1");
  EXPECT_EQ(m.uid, "u1");
  EXPECT_EQ(m.resource_version, "42");
  EXPECT_EQ(m.generation, 3);
  ASSERT_EQ(m.labels.size(), 2u);
  EXPECT_EQ(m.labels[0].first, "app");  // sorted
  EXPECT_EQ(*(*object)->Label("tier"), "front");
  EXPECT_FALSE((*object)->Label("missing").has_value());
  EXPECT_EQ((*object)->name(), "web-1");
  EXPECT_EQ((*object)->namespace_(), "default");
  EXPECT_EQ((*object)->uid(), "u1");
  EXPECT_EQ((*object)->resource_version(), "42");
  EXPECT_EQ((*object)->generation(), 3);
  EXPECT_EQ((*object)->owner_uid(0), "rs1");
  EXPECT_TRUE((*object)->owner_is_controller(0));
  EXPECT_EQ((*object)->finalizer(1), "c/d");
  ASSERT_EQ(m.owner_references.size(), 1u);
  EXPECT_EQ(m.owner_references[0], (OwnerReference{"apps/v1", "ReplicaSet", "web", "rs1", true}));
  EXPECT_EQ(m.finalizers, (std::vector<std::string>{"a/b", "c/d"}));
  EXPECT_EQ(m.deletion_timestamp, "2026-01-01T00:00:00Z");
  EXPECT_EQ((*object)->key(), "default/web-1");
  EXPECT_GT((*object)->MemoryBytes(), (*object)->json().size());
}

TEST(ObjectParserTest, StripsManagedFieldsAndLastAppliedKeepingEverythingElse) {
  ObjectParser parser;
  auto object = parser.Parse(kPod);
  ASSERT_TRUE(object.ok()) << object.status();
  nlohmann::json want = nlohmann::json::parse(kPod);
  want["metadata"].erase("managedFields");
  want["metadata"]["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
  nlohmann::json got = nlohmann::json::parse(std::string((*object)->json()));
  EXPECT_EQ(got, want);
}

TEST(ObjectParserTest, DropsAnnotationsWhenOnlyLastAppliedWasThere) {
  ObjectParser parser;
  auto object = parser.Parse(
      R"({"metadata":{"name":"a","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->json(), R"({"metadata":{"name":"a"}})");
}

TEST(ObjectParserTest, KeepsBytesWhenNothingToStrip) {
  ObjectParser parser;
  const std::string json = R"({"metadata": {"name":"a", "annotations": {"x": "y"}}, "data":{}})";
  auto object = parser.Parse(json);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->json(), json);
}

TEST(ObjectParserTest, StrippingCanBeTurnedOff) {
  ObjectParser parser(ParseOptions{false, false});
  auto object = parser.Parse(kPod);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->json(), kPod);
}

TEST(ObjectParserTest, ClusterScopedKeyIsTheName) {
  ObjectParser parser;
  auto object = parser.Parse(R"({"kind":"Namespace","metadata":{"name":"ns1"}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->key(), "ns1");
  EXPECT_EQ((*object)->name(), "ns1");
  EXPECT_EQ((*object)->namespace_(), "");
}

TEST(ObjectParserTest, RejectsBadInputWithoutCrashing) {
  ObjectParser parser;
  for (const char* bad : {
           "",
           "{",
           "[]",
           "null",
           R"({"metadata":{}})",
           R"({"metadata":[]})",
           R"({"metadata":{"name":7}})",
           R"({"metadata":{"name":"a","labels":{"x":1}}})",
           R"({"metadata":{"name":"a","labels":[]}})",
           R"({"metadata":{"name":"a","generation":"3"}})",
           R"({"metadata":{"name":"a","finalizers":[1]}})",
           R"({"metadata":{"name":"a","ownerReferences":[1]}})",
           R"({"metadata":{"name":"a","ownerReferences":{}}})",
           "{\"metadata\":{\"name\":\"a\xff\"}}",
       }) {
    auto object = parser.Parse(bad);
    EXPECT_EQ(object.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  // The parser stays usable after errors.
  EXPECT_TRUE(parser.Parse(R"({"metadata":{"name":"ok"}})").ok());
}

TEST(ObjectParserTest, DuplicateLabelKeysLastWinsAndDuplicateFieldsFirstIsRead) {
  ObjectParser parser;
  auto object =
      parser.Parse(R"({"metadata":{"name":"a","name":"b","labels":{"k":"2","a":"x","k":"1"}}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->name(), "a");
  ASSERT_EQ((*object)->label_count(), 2u);
  EXPECT_EQ(*(*object)->Label("k"), "1");
  EXPECT_EQ(*(*object)->Label("a"), "x");
}

TEST(ObjectParserTest, StripsAndReadsMetadataInAnyMemberOrder) {
  ObjectParser parser;
  // Server order (alphabetical, data before metadata) and managedFields between other fields.
  const std::string json =
      R"({"apiVersion":"v1","data":{"k":"}]\"{["},"kind":"ConfigMap","metadata":{)"
      R"("creationTimestamp":"2026-01-01T00:00:00Z","labels":{"app":"x"},)"
      R"("managedFields":[{"fieldsV1":{"f:data":{".":{},"f:k":{}}},"manager":"m"}],)"
      R"("name":"cm","namespace":"ns","ownerReferences":[{"uid":"o1"}],"uid":"u"}})";
  auto object = parser.Parse(json);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->key(), "ns/cm");
  EXPECT_EQ((*object)->owner_uid(0), "o1");
  EXPECT_FALSE((*object)->owner_is_controller(0));  // no `controller` member
  EXPECT_EQ((*object)->json(),
            R"({"apiVersion":"v1","data":{"k":"}]\"{["},"kind":"ConfigMap","metadata":{)"
            R"("creationTimestamp":"2026-01-01T00:00:00Z","labels":{"app":"x"},)"
            R"("name":"cm","namespace":"ns","ownerReferences":[{"uid":"o1"}],"uid":"u"}})");
}

TEST(ObjectParserTest, NullFieldsCountAsAbsent) {
  ObjectParser parser;
  auto object = parser.Parse(R"({"metadata":{"name":"a","labels":null,"finalizers":null}})");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_TRUE((*object)->meta().labels.empty());
}

TEST(ObjectParserTest, ParsesResourceVersionOfABookmark) {
  ObjectParser parser;
  auto rv = parser.ParseResourceVersion(
      R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"77"}})");
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(*rv, "77");
  EXPECT_FALSE(parser.ParseResourceVersion(R"({"metadata":{}})").ok());
  EXPECT_FALSE(parser.ParseResourceVersion("[1").ok());
  EXPECT_FALSE(parser.ParseResourceVersion(R"({"metadata":{"resourceVersion":5}})").ok());
}

}  // namespace
}  // namespace ctrlhost::cache
