#include "runtime/controller/mapper.h"

#include <string>
#include <thread>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cache/object.h"
#include "runtime/cache/store.h"
#include "runtime/controller/field_path.h"

namespace ctrlhost::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

cache::ObjectPtr Obj(const std::string& json) {
  cache::ObjectParser parser;
  absl::StatusOr<cache::ObjectPtr> object = parser.Parse(json);
  EXPECT_TRUE(object.ok()) << object.status() << " for " << json;
  return object.ok() ? *object : nullptr;
}

std::vector<std::string> Keys(const std::vector<cache::ObjectPtr>& objects) {
  std::vector<std::string> keys;
  for (const auto& o : objects) keys.emplace_back(o->key());
  return keys;
}

const PrimaryKind kWebApp{"example.com", "WebApp", true};
const PrimaryKind kCluster{"example.com", "Tenant", false};

constexpr char kChild[] = R"({"metadata":{"name":"c","namespace":"ns","uid":"cu",
  "ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"u1","controller":true},
    {"apiVersion":"example.com/v2","kind":"WebApp","name":"other","uid":"u2"},
    {"apiVersion":"other.com/v1","kind":"WebApp","name":"foreign","uid":"u3"},
    {"apiVersion":"example.com/v1","kind":"Database","name":"db","uid":"u4"}]}})";

TEST(ApiVersionTest, CoreAndGroups) {
  EXPECT_EQ(ApiVersion("", "v1"), "v1");
  EXPECT_EQ(ApiVersion("apps", "v1"), "apps/v1");
  EXPECT_EQ(GroupOf("v1"), "");
  EXPECT_EQ(GroupOf("apps/v1"), "apps");
}

TEST(SelfMapperTest, MapsToOwnKey) {
  auto mapper = SelfMapper();
  EXPECT_THAT(mapper->Map(*Obj(R"({"metadata":{"name":"a","namespace":"ns"}})")),
              ElementsAre("ns/a"));
  EXPECT_THAT(mapper->Map(*Obj(R"({"metadata":{"name":"a"}})")), ElementsAre("a"));
}

TEST(OwnerMapperTest, MatchesGroupAndKindOfEveryOwner) {
  auto mapper = OwnerMapper(kWebApp, /*controller_only=*/false);
  EXPECT_THAT(mapper->Map(*Obj(kChild)), UnorderedElementsAre("ns/web", "ns/other"));
}

TEST(OwnerMapperTest, ControllerOnly) {
  auto mapper = OwnerMapper(kWebApp, /*controller_only=*/true);
  EXPECT_THAT(mapper->Map(*Obj(kChild)), ElementsAre("ns/web"));
}

TEST(OwnerMapperTest, ClusterScopedPrimaryKeyHasNoNamespace) {
  auto mapper = OwnerMapper(PrimaryKind{"example.com", "WebApp", false}, true);
  EXPECT_THAT(mapper->Map(*Obj(kChild)), ElementsAre("web"));
}

TEST(OwnerMapperTest, NoOwnersNoKeys) {
  auto mapper = OwnerMapper(kWebApp, false);
  EXPECT_THAT(mapper->Map(*Obj(R"({"metadata":{"name":"c","namespace":"ns"}})")), IsEmpty());
}

TEST(OwnerMapperTest, MapEventUnionsOldAndNewOwners) {
  auto mapper = OwnerMapper(kWebApp, true);
  auto old_object = Obj(R"({"metadata":{"name":"c","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"a","uid":"1","controller":true}]}})");
  auto new_object = Obj(R"({"metadata":{"name":"c","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"b","uid":"2","controller":true}]}})");
  EXPECT_THAT(mapper->MapEvent(old_object, new_object), ElementsAre("ns/a", "ns/b"));
  EXPECT_THAT(mapper->MapEvent(nullptr, new_object), ElementsAre("ns/b"));
  EXPECT_THAT(mapper->MapEvent(old_object, old_object), ElementsAre("ns/a"));
  EXPECT_THAT(mapper->MapEvent(nullptr, nullptr), IsEmpty());
}

TEST(OwnerMapperTest, RelatedUsesOwnerUidIndex) {
  cache::Store children;
  children.Upsert(Obj(kChild));
  children.Upsert(Obj(R"({"metadata":{"name":"d","namespace":"ns","ownerReferences":[
    {"apiVersion":"example.com/v1","kind":"WebApp","name":"web","uid":"u1"}]}})"));
  children.Upsert(Obj(R"({"metadata":{"name":"e","namespace":"ns"}})"));
  auto primary = Obj(R"({"metadata":{"name":"web","namespace":"ns","uid":"u1"}})");
  EXPECT_THAT(Keys(OwnerMapper(kWebApp, true)->Related(*primary, children)), ElementsAre("ns/c"));
  EXPECT_THAT(Keys(OwnerMapper(kWebApp, false)->Related(*primary, children)),
              UnorderedElementsAre("ns/c", "ns/d"));
}

pluginpb::WatchedKind NameLabel(const std::string& label) {
  pluginpb::WatchedKind w;
  w.mutable_label()->set_name_label(label);
  return w;
}

TEST(NameLabelMapperTest, LabelValueNamesPrimaryInSameNamespace) {
  auto mapper = MapperFor(NameLabel("example.com/webapp"), kWebApp, nullptr);
  ASSERT_TRUE(mapper.ok()) << mapper.status();
  EXPECT_THAT(
      (*mapper)->Map(*Obj(
          R"({"metadata":{"name":"s","namespace":"ns","labels":{"example.com/webapp":"web"}}})")),
      ElementsAre("ns/web"));
  EXPECT_THAT(
      (*mapper)->Map(*Obj(R"({"metadata":{"name":"s","namespace":"ns","labels":{"x":"y"}}})")),
      IsEmpty());
  EXPECT_THAT(
      (*mapper)->Map(
          *Obj(R"({"metadata":{"name":"s","namespace":"ns","labels":{"example.com/webapp":""}}})")),
      IsEmpty());
}

TEST(NameLabelMapperTest, ClusterScopedPrimaryAndRelated) {
  auto mapper = MapperFor(NameLabel("tenant"), kCluster, nullptr);
  ASSERT_TRUE(mapper.ok());
  EXPECT_THAT((*mapper)->Map(
                  *Obj(R"({"metadata":{"name":"s","namespace":"ns","labels":{"tenant":"t1"}}})")),
              ElementsAre("t1"));
  cache::Store watched;
  watched.Upsert(Obj(R"({"metadata":{"name":"a","namespace":"n1","labels":{"tenant":"t1"}}})"));
  watched.Upsert(Obj(R"({"metadata":{"name":"b","namespace":"n2","labels":{"tenant":"t1"}}})"));
  watched.Upsert(Obj(R"({"metadata":{"name":"c","namespace":"n2","labels":{"tenant":"t2"}}})"));
  EXPECT_THAT(Keys((*mapper)->Related(*Obj(R"({"metadata":{"name":"t1"}})"), watched)),
              UnorderedElementsAre("n1/a", "n2/b"));
  auto namespaced = MapperFor(NameLabel("tenant"), kWebApp, nullptr);
  EXPECT_THAT(
      Keys((*namespaced)->Related(*Obj(R"({"metadata":{"name":"t1","namespace":"n2"}})"), watched)),
      ElementsAre("n2/b"));
}

pluginpb::WatchedKind SelectorPath(const std::string& path) {
  pluginpb::WatchedKind w;
  w.mutable_label()->set_primary_selector_path(path);
  return w;
}

TEST(SelectorPathMapperTest, MatchLabelsExpressionsAndPlainMaps) {
  auto mapper = MapperFor(SelectorPath("spec.selector"), kWebApp, nullptr);
  ASSERT_TRUE(mapper.ok()) << mapper.status();
  auto a = Obj(R"({"metadata":{"name":"a","namespace":"ns"},"spec":{"selector":{"app":"web"}}})");
  auto b = Obj(R"({"metadata":{"name":"b","namespace":"ns"},"spec":{"selector":{
    "matchLabels":{"tier":"front"},
    "matchExpressions":[{"key":"app","operator":"In","values":["web","api"]}]}}})");
  auto c =
      Obj(R"({"metadata":{"name":"c","namespace":"other"},"spec":{"selector":{"app":"web"}}})");
  auto empty = Obj(R"({"metadata":{"name":"e","namespace":"ns"},"spec":{"selector":{}}})");
  auto bad = Obj(R"({"metadata":{"name":"f","namespace":"ns"},"spec":{"selector":{"app":3}}})");
  auto bad_expr = Obj(R"({"metadata":{"name":"g","namespace":"ns"},"spec":{"selector":{
    "matchExpressions":[{"key":"app","operator":"Sometimes"}]}}})");
  auto none = Obj(R"({"metadata":{"name":"h","namespace":"ns"},"spec":"nope"})");
  for (const auto& p : {a, b, c, empty, bad, bad_expr, none}) (*mapper)->ObservePrimary(nullptr, p);

  auto pod =
      Obj(R"({"metadata":{"name":"p","namespace":"ns","labels":{"app":"web","tier":"front"}}})");
  EXPECT_THAT((*mapper)->Map(*pod), UnorderedElementsAre("ns/a", "ns/b"));
  auto back =
      Obj(R"({"metadata":{"name":"p","namespace":"ns","labels":{"app":"web","tier":"back"}}})");
  EXPECT_THAT((*mapper)->Map(*back), ElementsAre("ns/a"));

  // The selector changes: the index follows; a deleted primary leaves it.
  auto a2 = Obj(R"({"metadata":{"name":"a","namespace":"ns"},"spec":{"selector":{"app":"db"}}})");
  (*mapper)->ObservePrimary(a, a2);
  (*mapper)->ObservePrimary(b, nullptr);
  EXPECT_THAT((*mapper)->Map(*pod), IsEmpty());

  cache::Store pods;
  pods.Upsert(pod);
  pods.Upsert(Obj(R"({"metadata":{"name":"q","namespace":"ns","labels":{"app":"db"}}})"));
  pods.Upsert(Obj(R"({"metadata":{"name":"r","namespace":"other","labels":{"app":"db"}}})"));
  EXPECT_THAT(Keys((*mapper)->Related(*a2, pods)), ElementsAre("ns/q"));
  EXPECT_THAT(Keys((*mapper)->Related(*empty, pods)), IsEmpty());
  EXPECT_THAT(Keys((*mapper)->Related(*none, pods)), IsEmpty());
}

pluginpb::WatchedKind FieldPathWatch(const std::string& path) {
  pluginpb::WatchedKind w;
  w.mutable_field_path()->set_primary_field_path(path);
  return w;
}

TEST(FieldPathMapperTest, IndexFollowsPrimaries) {
  auto mapper = MapperFor(FieldPathWatch("spec.volumes[].secret.secretName"), kWebApp, nullptr);
  ASSERT_TRUE(mapper.ok()) << mapper.status();
  auto a = Obj(R"({"metadata":{"name":"a","namespace":"ns"},"spec":{"volumes":[
    {"secret":{"secretName":"s1"}},{"configMap":{"name":"x"}},{"secret":{"secretName":"s2"}}]}})");
  auto b = Obj(R"({"metadata":{"name":"b","namespace":"ns"},"spec":{"volumes":[
    {"secret":{"secretName":"s2"}},{"secret":{"secretName":7}}]}})");
  auto c = Obj(R"({"metadata":{"name":"c","namespace":"other"},"spec":{"volumes":[
    {"secret":{"secretName":"s2"}}]}})");
  auto malformed = Obj(R"({"metadata":{"name":"m","namespace":"ns"},"spec":{"volumes":{"a":1}}})");
  for (const auto& p : {a, b, c, malformed}) (*mapper)->ObservePrimary(nullptr, p);

  auto s1 = Obj(R"({"metadata":{"name":"s1","namespace":"ns"}})");
  auto s2 = Obj(R"({"metadata":{"name":"s2","namespace":"ns"}})");
  EXPECT_THAT((*mapper)->Map(*s1), ElementsAre("ns/a"));
  EXPECT_THAT((*mapper)->Map(*s2), UnorderedElementsAre("ns/a", "ns/b"));
  EXPECT_THAT((*mapper)->Map(*Obj(R"({"metadata":{"name":"s3","namespace":"ns"}})")), IsEmpty());

  auto a2 = Obj(R"({"metadata":{"name":"a","namespace":"ns"},"spec":{"volumes":[]}})");
  (*mapper)->ObservePrimary(a, a2);
  EXPECT_THAT((*mapper)->Map(*s1), IsEmpty());
  EXPECT_THAT((*mapper)->Map(*s2), ElementsAre("ns/b"));
  (*mapper)->ObservePrimary(b, nullptr);
  EXPECT_THAT((*mapper)->Map(*s2), IsEmpty());

  cache::Store secrets;
  secrets.Upsert(s1);
  secrets.Upsert(s2);
  EXPECT_THAT(Keys((*mapper)->Related(*a, secrets)), ElementsAre("ns/s1", "ns/s2"));
  EXPECT_THAT(Keys((*mapper)->Related(*malformed, secrets)), IsEmpty());
}

TEST(FieldPathMapperTest, StringArrayField) {
  auto mapper = MapperFor(FieldPathWatch("spec.configMaps"), kWebApp, nullptr);
  ASSERT_TRUE(mapper.ok());
  (*mapper)->ObservePrimary(
      nullptr,
      Obj(R"({"metadata":{"name":"a","namespace":"ns"},"spec":{"configMaps":["x","y",1]}})"));
  EXPECT_THAT((*mapper)->Map(*Obj(R"({"metadata":{"name":"y","namespace":"ns"}})")),
              ElementsAre("ns/a"));
}

TEST(EnqueueAllMapperTest, AllOrSameNamespace) {
  cache::Store primaries;
  primaries.Upsert(Obj(R"({"metadata":{"name":"a","namespace":"n1"}})"));
  primaries.Upsert(Obj(R"({"metadata":{"name":"b","namespace":"n2"}})"));
  pluginpb::WatchedKind all;
  all.mutable_enqueue_all();
  auto mapper = MapperFor(all, kWebApp, &primaries);
  ASSERT_TRUE(mapper.ok());
  auto settings = Obj(R"({"metadata":{"name":"settings","namespace":"n1"}})");
  EXPECT_THAT((*mapper)->Map(*settings), UnorderedElementsAre("n1/a", "n2/b"));
  pluginpb::WatchedKind same;
  same.mutable_enqueue_all()->set_same_namespace_only(true);
  auto same_mapper = MapperFor(same, kWebApp, &primaries);
  ASSERT_TRUE(same_mapper.ok());
  EXPECT_THAT((*same_mapper)->Map(*settings), ElementsAre("n1/a"));

  cache::Store watched;
  watched.Upsert(settings);
  watched.Upsert(Obj(R"({"metadata":{"name":"x","namespace":"n2"}})"));
  EXPECT_THAT(Keys((*same_mapper)->Related(*primaries.Get("n2/b"), watched)), ElementsAre("n2/x"));
  EXPECT_EQ((*mapper)->Related(*primaries.Get("n2/b"), watched).size(), 2u);
}

TEST(MapperForTest, RejectsInvalidSpecs) {
  cache::Store store;
  EXPECT_EQ(MapperFor(pluginpb::WatchedKind(), kWebApp, &store).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MapperFor(NameLabel(""), kWebApp, &store).ok());
  pluginpb::WatchedKind no_source;
  no_source.mutable_label();
  EXPECT_FALSE(MapperFor(no_source, kWebApp, &store).ok());
  EXPECT_FALSE(MapperFor(SelectorPath("spec..selector"), kWebApp, &store).ok());
  EXPECT_FALSE(MapperFor(FieldPathWatch(""), kWebApp, &store).ok());
  EXPECT_FALSE(MapperFor(FieldPathWatch("spec.a[0].b"), kWebApp, &store).ok());
  pluginpb::WatchedKind all;
  all.mutable_enqueue_all();
  EXPECT_FALSE(MapperFor(all, kWebApp, nullptr).ok());
  pluginpb::WatchedKind owner;
  owner.mutable_owner_reference();
  EXPECT_TRUE(MapperFor(owner, kWebApp, &store).ok());
}

// Reflector threads call ObservePrimary and Map concurrently (run under TSan in CI).
TEST(FieldPathMapperTest, ConcurrentObserveAndMap) {
  auto mapper = MapperFor(FieldPathWatch("spec.ref"), kWebApp, nullptr);
  ASSERT_TRUE(mapper.ok());
  std::vector<cache::ObjectPtr> versions;
  for (int i = 0; i < 50; ++i) {
    versions.push_back(Obj(R"({"metadata":{"name":"a","namespace":"ns"},"spec":{"ref":"s)" +
                           std::to_string(i % 3) + R"("}})"));
  }
  auto s0 = Obj(R"({"metadata":{"name":"s0","namespace":"ns"}})");
  std::thread writer([&] {
    cache::ObjectPtr previous;
    for (const auto& v : versions) {
      (*mapper)->ObservePrimary(previous, v);
      previous = v;
    }
  });
  size_t hits = 0;
  for (int i = 0; i < 200; ++i) hits += (*mapper)->Map(*s0).size();
  writer.join();
  EXPECT_LE(hits, 200u);
  // The last version (49 % 3 == 1) names s1.
  EXPECT_THAT((*mapper)->Map(*Obj(R"({"metadata":{"name":"s1","namespace":"ns"}})")),
              ElementsAre("ns/a"));
}

TEST(FieldPathTest, ParseAndFind) {
  auto path = FieldPath::Parse("a.b[].c");
  ASSERT_TRUE(path.ok());
  nlohmann::json j = nlohmann::json::parse(R"({"a":{"b":[{"c":"x"},{"c":["y","z"]},{"d":1},5]}})");
  EXPECT_THAT(path->Strings(j), ElementsAre("x", "y", "z"));
  EXPECT_THAT(path->Strings(nlohmann::json::parse(R"({"a":{"b":{"c":"x"}}})")), IsEmpty());
  EXPECT_THAT(path->Strings(nlohmann::json::parse("[1]")), IsEmpty());
  EXPECT_FALSE(FieldPath::Parse(".a").ok());
  EXPECT_FALSE(FieldPath::Parse("a.").ok());
  EXPECT_FALSE(FieldPath::Parse("a[]x").ok());
  EXPECT_FALSE(FieldPath::Parse("[]").ok());
}

}  // namespace
}  // namespace ctrlhost::controller
