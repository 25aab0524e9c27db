#include "runtime/controller/apply/noop.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

TEST(ApplyIsCoveredTest, ServerDefaultsAndOtherFieldsAreTolerated) {
  const json desired = json::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"web","namespace":"a","labels":{"app":"web"}},
      "spec":{"ports":[{"name":"http","port":80,"protocol":"TCP"}]}})");
  const json current = json::parse(R"({"apiVersion":"v1","kind":"Service",
      "metadata":{"name":"web","namespace":"a","uid":"u","resourceVersion":"7",
                  "labels":{"app":"web","other":"x"}},
      "spec":{"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":80}],
              "clusterIP":"10.0.0.1","type":"ClusterIP"},"status":{}})");
  EXPECT_TRUE(ApplyIsCovered(current, desired));
}

TEST(ApplyIsCoveredTest, AnyDifferenceIsNotCovered) {
  const json current = json::parse(R"({"metadata":{"name":"c","labels":{"a":"1"}},
      "data":{"k":"1"},"list":[{"n":1},{"n":2}],"num":1})");
  for (const char* desired : {
           R"({"data":{"k":"2"}})",      // value differs
           R"({"data":{"other":"1"}})",  // member missing
           R"({"metadata":{"labels":{"b":"1"}}})",
           R"({"list":[{"n":1}]})",          // length differs
           R"({"list":[{"n":2},{"n":1}]})",  // order differs
           R"({"num":"1"})",                 // type differs
           R"({"data":"k"})",
           R"({"missing":{"x":1}})",
       }) {
    EXPECT_FALSE(ApplyIsCovered(current, json::parse(desired))) << desired;
  }
  EXPECT_TRUE(ApplyIsCovered(current, json::parse(R"({"num":1.0,"list":[{},{"n":2}]})")));
}

// Issue 13 item 3: kube-apiserver drops a ConfigMap's `data: {}`; the applied configuration
// must still count as covered, or every reconcile writes.
TEST(ApplyIsCoveredTest, EmptyMapsDroppedByTheServerAreCoveredIssue13) {
  const json current = json::parse(R"({"metadata":{"name":"c"}})");
  EXPECT_TRUE(ApplyIsCovered(current, json::parse(R"({"metadata":{"name":"c"},"data":{}})")));
  EXPECT_TRUE(ApplyIsCovered(current, json::parse(R"({"items":[],"x":null})")));
  EXPECT_FALSE(ApplyIsCovered(current, json::parse(R"({"data":{"k":"v"}})")));
}

TEST(MergePatchIsNoopTest, FollowsRfc7386) {
  const json target = json::parse(R"({"phase":"Ready","conditions":[{"type":"A","x":1}],
      "nested":{"a":1,"b":2},"observedGeneration":3})");
  EXPECT_TRUE(MergePatchIsNoop(target, json::parse(R"({"phase":"Ready","nested":{"a":1}})")));
  EXPECT_TRUE(MergePatchIsNoop(target, json::parse(R"({"gone":null})")));
  EXPECT_TRUE(MergePatchIsNoop(target, json::object()));
  EXPECT_TRUE(MergePatchIsNoop(
      target, json::parse(R"({"conditions":[{"type":"A","x":1}],"observedGeneration":3})")));
  for (const char* patch : {
           R"({"phase":"Pending"})",
           R"({"phase":null})",
           R"({"new":1})",
           R"({"conditions":[{"type":"A"}]})",  // arrays replace: a subset is a change
           R"({"nested":{"c":3}})",
           R"({"observedGeneration":4})",
       }) {
    EXPECT_FALSE(MergePatchIsNoop(target, json::parse(patch))) << patch;
  }
  EXPECT_FALSE(MergePatchIsNoop(json(), json::parse(R"({"a":1})")));
  EXPECT_FALSE(MergePatchIsNoop(target, json::array()));
}

}  // namespace
}  // namespace ctrlhost::controller::apply
