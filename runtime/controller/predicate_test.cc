#include "runtime/controller/predicate.h"

#include <memory>
#include <string>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"

namespace ctrlhost::controller {
namespace {

std::shared_ptr<const cache::Object> Obj(const std::string& json) {
  cache::ObjectParser parser;
  absl::StatusOr<std::shared_ptr<const cache::Object>> object = parser.Parse(json);
  EXPECT_TRUE(object.ok()) << object.status() << " for " << json;
  return object.ok() ? *object : nullptr;
}

// A primary with generation 3 and the given metadata extras, spec and status.
std::shared_ptr<const cache::Object> Primary(const std::string& meta_extra,
                                             const std::string& spec = "{}",
                                             const std::string& status = "{}",
                                             const std::string& rv = "1") {
  return Obj(R"({"metadata":{"name":"a","namespace":"ns","generation":3,"resourceVersion":")" + rv +
             "\"" + meta_extra + R"(},"spec":)" + spec + R"(,"status":)" + status + "}");
}

TEST(PrimaryPredicateTest, StatusOnlyChangeDoesNotTrigger) {
  pluginpb::Predicates defaults;
  auto old_object = Primary("", "{}", R"({"ready":false})", "1");
  auto new_object = Primary("", "{}", R"({"ready":true})", "2");
  EXPECT_FALSE(PrimaryUpdateTriggers(defaults, *old_object, *new_object));
  pluginpb::Predicates all;
  all.set_primary_status_changes(true);
  EXPECT_TRUE(PrimaryUpdateTriggers(all, *old_object, *new_object));
}

TEST(PrimaryPredicateTest, EachMetadataChangeTriggers) {
  pluginpb::Predicates defaults;
  auto base = Primary(R"(,"labels":{"a":"1"},"annotations":{"x":"1"},"finalizers":["f"])");
  const std::string changes[] = {
      R"(,"labels":{"a":"2"},"annotations":{"x":"1"},"finalizers":["f"])",
      R"(,"labels":{"a":"1","b":"1"},"annotations":{"x":"1"},"finalizers":["f"])",
      R"(,"labels":{"a":"1"},"annotations":{"x":"2"},"finalizers":["f"])",
      R"(,"labels":{"a":"1"},"finalizers":["f"])",
      R"(,"labels":{"a":"1"},"annotations":{"x":"1"},"finalizers":[])",
      R"(,"labels":{"a":"1"},"annotations":{"x":"1"},"finalizers":["f"],)"
      R"("deletionTimestamp":"2026-01-01T00:00:00Z")",
      R"(,"labels":{"a":"1"},"annotations":{"x":"1"},"finalizers":["f"],"ownerReferences":[)"
      R"({"apiVersion":"v1","kind":"X","name":"o","uid":"u"}])",
  };
  for (const std::string& change : changes) {
    EXPECT_TRUE(PrimaryUpdateTriggers(defaults, *base, *Primary(change, "{}", "{}", "2")))
        << change;
  }
  auto same = Primary(R"(,"labels":{"a":"1"},"annotations":{"x":"1"},"finalizers":["f"])", "{}",
                      R"({"phase":"x"})", "2");
  EXPECT_FALSE(PrimaryUpdateTriggers(defaults, *base, *same));
}

TEST(PrimaryPredicateTest, GenerationChangeTriggers) {
  auto old_object = Obj(R"({"metadata":{"name":"a","generation":1},"spec":{"r":1}})");
  auto new_object = Obj(R"({"metadata":{"name":"a","generation":2},"spec":{"r":2}})");
  EXPECT_TRUE(PrimaryUpdateTriggers(pluginpb::Predicates(), *old_object, *new_object));
}

TEST(PrimaryPredicateTest, KindsWithoutGenerationCompareContent) {
  auto old_object =
      Obj(R"({"metadata":{"name":"a","resourceVersion":"1"},"data":{"k":"1"},"status":{}})");
  auto data_changed =
      Obj(R"({"metadata":{"name":"a","resourceVersion":"2"},"data":{"k":"2"},"status":{}})");
  auto status_changed =
      Obj(R"({"metadata":{"name":"a","resourceVersion":"2","managedFields":[{}]},)"
          R"("data":{"k":"1"},"status":{"x":1}})");
  EXPECT_TRUE(PrimaryUpdateTriggers(pluginpb::Predicates(), *old_object, *data_changed));
  EXPECT_FALSE(PrimaryUpdateTriggers(pluginpb::Predicates(), *old_object, *status_changed));
}

TEST(ChildPredicateTest, StatusChangesTriggerUnlessIgnored) {
  auto old_object = Obj(R"({"metadata":{"name":"c","generation":1},"status":{"ready":1}})");
  auto status = Obj(R"({"metadata":{"name":"c","generation":1},"status":{"ready":2}})");
  auto spec = Obj(R"({"metadata":{"name":"c","generation":2},"spec":{},"status":{"ready":1}})");
  pluginpb::Predicates defaults;
  EXPECT_TRUE(ChildUpdateTriggers(defaults, *old_object, *status));
  pluginpb::Predicates ignore;
  ignore.set_ignore_child_status_changes(true);
  EXPECT_FALSE(ChildUpdateTriggers(ignore, *old_object, *status));
  EXPECT_TRUE(ChildUpdateTriggers(ignore, *old_object, *spec));
  EXPECT_FALSE(ChildUpdateTriggers(ignore, *old_object, *old_object));
}

// Issue 13 item 3: kube-apiserver 1.20 bumps a child's resourceVersion on a server-side apply
// that changes only managedFields timestamps; that event must not reconcile the owner again.
TEST(ChildPredicateTest, ResourceVersionOrManagedFieldsOnlyChangeDoesNotTriggerIssue13) {
  auto old_object = Obj(R"({"metadata":{"name":"c","resourceVersion":"1","managedFields":[)"
                        R"({"manager":"m","time":"2026-01-01T00:00:00Z"}]},"data":{"k":"1"}})");
  auto bumped = Obj(R"({"metadata":{"name":"c","resourceVersion":"2","managedFields":[)"
                    R"({"manager":"m","time":"2026-01-01T00:00:09Z"}]},"data":{"k":"1"}})");
  auto rv_only = Obj(R"({"metadata":{"name":"c","resourceVersion":"3"},"data":{"k":"1"}})");
  auto data = Obj(R"({"metadata":{"name":"c","resourceVersion":"4"},"data":{"k":"2"}})");
  auto status =
      Obj(R"({"metadata":{"name":"c","resourceVersion":"5"},"data":{"k":"1"},"status":{"x":1}})");
  pluginpb::Predicates defaults;
  EXPECT_FALSE(ChildUpdateTriggers(defaults, *old_object, *bumped));
  EXPECT_FALSE(ChildUpdateTriggers(defaults, *old_object, *rv_only));
  EXPECT_FALSE(ChildUpdateTriggers(defaults, *old_object, *old_object));
  EXPECT_TRUE(ChildUpdateTriggers(defaults, *old_object, *data));
  EXPECT_TRUE(ChildUpdateTriggers(defaults, *old_object, *status));
  pluginpb::Predicates ignore;
  ignore.set_ignore_child_status_changes(true);
  EXPECT_FALSE(ChildUpdateTriggers(ignore, *old_object, *bumped));
  EXPECT_TRUE(ChildUpdateTriggers(ignore, *old_object, *data));
}

TEST(PrimaryPredicateTest, ResourceVersionOnlyChangeNeverTriggersIssue13) {
  auto old_object = Primary("", "{}", R"({"ready":true})", "1");
  auto bumped = Primary("", "{}", R"({"ready":true})", "2");
  auto status = Primary("", "{}", R"({"ready":false})", "3");
  pluginpb::Predicates all;
  all.set_primary_status_changes(true);
  EXPECT_FALSE(PrimaryUpdateTriggers(all, *old_object, *bumped));
  EXPECT_TRUE(PrimaryUpdateTriggers(all, *old_object, *status));
  EXPECT_FALSE(PrimaryUpdateTriggers(pluginpb::Predicates(), *old_object, *bumped));
  // Kinds without a generation: a bare resourceVersion bump does not trigger either.
  auto cm = Obj(R"({"metadata":{"name":"a","resourceVersion":"1"},"data":{"k":"1"}})");
  auto cm_bumped = Obj(R"({"metadata":{"name":"a","resourceVersion":"2"},"data":{"k":"1"}})");
  EXPECT_FALSE(PrimaryUpdateTriggers(pluginpb::Predicates(), *cm, *cm_bumped));
}

TEST(MetadataChangedTest, AnnotationsOfNonObjectMetadataAndBadTypes) {
  // Annotation values that are not strings still compare (the parser keeps them in the JSON).
  auto a = Obj(R"({"metadata":{"name":"a","annotations":{"x":"1"}}})");
  auto b = Obj(R"({"metadata":{"name":"a","annotations":{"x":"1"}},"spec":{"y":1}})");
  EXPECT_FALSE(MetadataChanged(*a, *b));
  EXPECT_TRUE(ChangedBesidesStatus(*a, *b));
}

TEST(MetadataChangedTest, MalformedJsonTriggers) {
  // An Object built directly from bytes that are not JSON (the parser never produces one, but
  // the predicate must not crash on it).
  cache::ObjectMeta meta;
  meta.name = "a";
  cache::Object broken("{not json", meta);
  cache::Object fine(R"({"metadata":{"name":"a"}})", meta);
  EXPECT_TRUE(MetadataChanged(broken, fine));
  EXPECT_TRUE(ChangedBesidesStatus(broken, fine));
  EXPECT_TRUE(PrimaryUpdateTriggers(pluginpb::Predicates(), broken, fine));
  EXPECT_FALSE(OnlyBookkeepingChanged(broken, fine));
  EXPECT_TRUE(ChildUpdateTriggers(pluginpb::Predicates(), broken, fine));
  cache::Object array("[1,2]", meta);
  EXPECT_TRUE(MetadataChanged(array, array));
}

}  // namespace
}  // namespace ctrlhost::controller
