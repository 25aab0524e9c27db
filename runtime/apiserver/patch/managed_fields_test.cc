#include "runtime/apiserver/patch/managed_fields.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/apiserver/patch/field_set.h"

namespace ctrlhost::apiserver {
namespace {

using nlohmann::json;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);  // 2023-11-14T22:13:20Z

TEST(FieldSetTest, FieldsV1RoundTrip) {
  const json v1 = json::parse(R"({"f:metadata":{"f:labels":{"f:app":{}}},
      "f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{
        "k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}}}})");
  absl::StatusOr<FieldSet> set = FieldSet::FromFieldsV1(v1);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->Has({"f:spec", "f:replicas"}));
  EXPECT_FALSE(set->Has({"f:spec"}));
  EXPECT_TRUE(set->Has({"f:spec", "f:template", "f:spec", "f:containers", R"(k:{"name":"web"})"}));
  EXPECT_EQ(set->ToFieldsV1(), v1);
  EXPECT_EQ(set->Members().size(), 5u);
}

TEST(FieldSetTest, FromFieldsV1RejectsGarbage) {
  EXPECT_FALSE(FieldSet::FromFieldsV1(json::array()).ok());
  EXPECT_FALSE(FieldSet::FromFieldsV1(json::parse(R"({"spec":{}})")).ok());
  EXPECT_FALSE(FieldSet::FromFieldsV1(json::parse(R"({"f:spec":1})")).ok());
}

TEST(FieldSetTest, SetAlgebra) {
  FieldSet a, b;
  a.Insert({"f:spec", "f:a"});
  a.Insert({"f:spec", "f:b"});
  b.Insert({"f:spec", "f:b"});
  b.Insert({"f:spec", "f:c"});
  EXPECT_EQ(a.Union(b).Members().size(), 3u);
  EXPECT_EQ(a.Intersection(b).Members(), std::vector<FieldSet::Path>({{"f:spec", "f:b"}}));
  EXPECT_EQ(a.Difference(b).Members(), std::vector<FieldSet::Path>({{"f:spec", "f:a"}}));
  EXPECT_TRUE(a.Difference(a).empty());
  // Regression (ASan): removing the last leaf of a branch prunes the emptied parents.
  a.RemoveTree({"f:spec", "f:a"});
  EXPECT_EQ(a.Members(), std::vector<FieldSet::Path>({{"f:spec", "f:b"}}));
  a.RemoveTree({"f:spec", "f:b"});
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.ToFieldsV1(), json::object());
}

TEST(FieldSetTest, PathStrings) {
  EXPECT_EQ(FieldSet::PathString({"f:spec", "f:replicas"}), ".spec.replicas");
  EXPECT_EQ(FieldSet::PathString({"f:spec", "f:containers", R"(k:{"name":"web"})", "f:image"}),
            R"(.spec.containers[name="web"].image)");
  EXPECT_EQ(FieldSet::PathString({"f:ports", R"(k:{"containerPort":80})"}),
            ".ports[containerPort=80]");
  EXPECT_EQ(FieldSet::PathString({"f:metadata", "f:finalizers", R"(v:"x")"}),
            R"(.metadata.finalizers[="x"])");
  EXPECT_EQ(FieldSet::PathString({"f:list", "i:0"}), ".list[0]");
}

TEST(ManagedFieldsTest, FieldSetOfUsesStrategyAndStripsIdentity) {
  const json obj = json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"d","namespace":"n","uid":"u","resourceVersion":"1",
                  "labels":{"app":"web"},"finalizers":["f"]},
      "spec":{"replicas":1,"paused":null,"template":{"spec":{
        "containers":[{"name":"web","image":"i","ports":[{"containerPort":80}]}],
        "tolerations":[{"key":"k"}]}}}})");
  absl::StatusOr<FieldSet> set =
      FieldSetOf(obj, &BuiltinMergeStrategy("apps", "Deployment")->root());
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->ToFieldsV1(), json::parse(R"({
      "f:metadata":{"f:labels":{"f:app":{}},"f:finalizers":{"v:\"f\"":{}}},
      "f:spec":{"f:replicas":{},"f:template":{"f:spec":{
        "f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},
          "f:ports":{"k:{\"containerPort\":80}":{".":{},"f:containerPort":{}}}}},
        "f:tolerations":{}}}}})"));
}

TEST(ManagedFieldsTest, FieldSetOfRejectsBadAssociativeLists) {
  const MergeStrategy::Node* root = &BuiltinMergeStrategy("apps", "Deployment")->root();
  EXPECT_FALSE(FieldSetOf(json::parse(R"({"spec":{"template":{"spec":{
      "containers":[{"image":"no-name"}]}}}})"),
                          root)
                   .ok());
  EXPECT_FALSE(FieldSetOf(json::parse(R"({"spec":{"template":{"spec":{
      "containers":[{"name":"a"},{"name":"a"}]}}}})"),
                          root)
                   .ok());
}

TEST(ManagedFieldsTest, DiffFields) {
  const json before = json::parse(R"({"spec":{"a":1,"b":2,"m":{"x":1}},"list":[1]})");
  const json after = json::parse(R"({"spec":{"a":1,"b":3,"c":4},"list":[1,2]})");
  absl::StatusOr<FieldDiff> d = DiffFields(&before, after, nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->added.ToFieldsV1(), json::parse(R"({"f:spec":{"f:c":{}}})"));
  EXPECT_EQ(d->modified.ToFieldsV1(), json::parse(R"({"f:list":{},"f:spec":{"f:b":{}}})"));
  EXPECT_EQ(d->removed.ToFieldsV1(), json::parse(R"({"f:spec":{"f:m":{"f:x":{}}}})"));
}

TEST(ManagedFieldsTest, DecodeRejectsMalformedEntries) {
  for (const char* bad :
       {R"({"metadata":{"managedFields":{}}})", R"({"metadata":{"managedFields":[1]}})",
        R"({"metadata":{"managedFields":[{"manager":"m","operation":"Poke"}]}})",
        R"({"metadata":{"managedFields":[{"manager":"m","operation":"Apply",
                              "fieldsType":"FieldsV2"}]}})"}) {
    EXPECT_FALSE(DecodeManagedFields(json::parse(bad)).ok()) << bad;
  }
  EXPECT_TRUE(DecodeManagedFields(json::parse(R"({"metadata":{}})"))->empty());
}

TEST(ManagedFieldsTest, EncodeSortsAndDropsEmpty) {
  std::vector<ManagedFieldsEntry> entries(3);
  entries[0] = {"b", "Update", "v1", "2024-01-02T00:00:00Z", "", {}};
  entries[0].fields.Insert({"f:data", "f:x"});
  entries[1] = {"a", "Apply", "v1", "2024-01-03T00:00:00Z", "", {}};
  entries[1].fields.Insert({"f:data", "f:y"});
  entries[2] = {"c", "Update", "v1", "2024-01-01T00:00:00Z", "", {}};  // owns nothing
  json obj = json::parse(R"({"metadata":{"name":"x"}})");
  EncodeManagedFields(entries, &obj);
  const json& mf = obj["metadata"]["managedFields"];
  ASSERT_EQ(mf.size(), 2u);
  EXPECT_EQ(mf[0]["manager"], "a");
  EXPECT_EQ(mf[1]["manager"], "b");
  EXPECT_EQ(mf[1], json::parse(R"({"manager":"b","operation":"Update","apiVersion":"v1",
      "time":"2024-01-02T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:x":{}}}})"));
  EncodeManagedFields({}, &obj);
  EXPECT_FALSE(obj["metadata"].contains("managedFields"));
}

TEST(RecordUpdateTest, CreateOwnsEverythingButIdentity) {
  json obj = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"c","namespace":"n","uid":"u","labels":{"a":"1"}},"data":{"k":"v"}})");
  RecordUpdate(&obj, nullptr, "kubectl-create", "v1", kT0, "");
  ASSERT_EQ(obj["metadata"]["managedFields"].size(), 1u);
  EXPECT_EQ(obj["metadata"]["managedFields"][0], json::parse(R"({"manager":"kubectl-create",
      "operation":"Update","apiVersion":"v1","time":"2023-11-14T22:13:20Z",
      "fieldsType":"FieldsV1",
      "fieldsV1":{"f:data":{"f:k":{}},"f:metadata":{"f:labels":{"f:a":{}}}}})"));
}

TEST(RecordUpdateTest, UpdateMovesOwnershipAndDropsRemovedFields) {
  json v1 = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},
      "data":{"a":"1","b":"2"}})");
  RecordUpdate(&v1, nullptr, "creator", "v1", kT0, "");
  json v2 = v1;
  v2["metadata"].erase("managedFields");  // a client that does not send them back
  v2["data"]["a"] = "changed";
  v2["data"].erase("b");
  v2["data"]["c"] = "3";
  RecordUpdate(&v2, &v1, "editor", "v1", kT0 + absl::Seconds(5), "");
  absl::StatusOr<std::vector<ManagedFieldsEntry>> entries = DecodeManagedFields(v2);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u) << v2.dump();  // creator owns nothing any more
  EXPECT_EQ((*entries)[0].manager, "editor");
  EXPECT_EQ((*entries)[0].time, "2023-11-14T22:13:25Z");
  EXPECT_EQ((*entries)[0].fields.ToFieldsV1(), json::parse(R"({"f:data":{"f:a":{},"f:c":{}}})"));
}

TEST(RecordUpdateTest, NoChangeKeepsEntriesAsTheyWere) {
  json v1 = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},
      "data":{"a":"1"}})");
  RecordUpdate(&v1, nullptr, "creator", "v1", kT0, "");
  json v2 = v1;
  RecordUpdate(&v2, &v1, "other", "v1", kT0 + absl::Hours(1), "");
  EXPECT_EQ(v2, v1);
}

TEST(RecordUpdateTest, StatusSubresourceEntry) {
  json v1 = json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},
      "spec":{"replicas":1}})");
  json v2 = v1;
  v2["status"] = json::parse(R"({"replicas":1,"conditions":[{"type":"Available",
      "status":"True"}]})");
  RecordUpdate(&v2, &v1, "controller", "apps/v1", kT0, "status");
  const json& e = v2["metadata"]["managedFields"][0];
  EXPECT_EQ(e["subresource"], "status");
  EXPECT_EQ(e["fieldsV1"], json::parse(R"({"f:status":{"f:replicas":{},"f:conditions":{
      "k:{\"type\":\"Available\"}":{".":{},"f:status":{},"f:type":{}}}}})"));
}

TEST(RecordUpdateTest, UndecodableEntriesAreReset) {
  json old = json::parse(R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"c","managedFields":"garbage"},"data":{"a":"1"}})");
  json next = old;
  next["data"]["a"] = "2";
  RecordUpdate(&next, &old, "m", "v1", kT0, "");
  ASSERT_EQ(next["metadata"]["managedFields"].size(), 1u);
  EXPECT_EQ(next["metadata"]["managedFields"][0]["fieldsV1"],
            json::parse(R"({"f:data":{"f:a":{}}})"));
}

}  // namespace
}  // namespace ctrlhost::apiserver
