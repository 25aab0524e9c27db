#include "bench/e2e_burst/burst_controller.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sdk/cpp/testing.h"

namespace ctrlhost::bench {
namespace {

namespace st = sdk::testing;
using nlohmann::json;

json Burst(int64_t generation) {
  return json{{"apiVersion", "burst.bench.ctrlhost.dev/v1"},
              {"kind", "Burst"},
              {"metadata", {{"name", "b-1"}, {"namespace", "default"}, {"generation", generation}}},
              {"spec", {{"size", 1}}}};
}

TEST(BurstControllerTest, ReportsDoneWithTheObservedGeneration) {
  auto controller = MakeBurstController().Build();
  ASSERT_TRUE(controller.ok()) << controller.status();
  st::RequestBuilder req(Burst(3));
  req.Controller("burst");
  st::Outcome out = st::Reconcile(**controller, req.Call());
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_TRUE(out.desired.empty());
  EXPECT_EQ(out.status, (json{{"phase", "Done"}, {"observedGeneration", 3}}));
}

TEST(BurstControllerTest, GoneOrDeletingObjectsGetNoStatus) {
  auto controller = MakeBurstController().Build();
  ASSERT_TRUE(controller.ok()) << controller.status();
  st::Outcome gone = st::Reconcile(
      **controller, st::RequestBuilder::Gone("default", "b-1").Controller("burst").Call());
  EXPECT_TRUE(gone.ok()) << gone.error_message();
  EXPECT_TRUE(gone.status.is_null());

  json deleting = Burst(1);
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  deleting["metadata"]["finalizers"] = json::array({"x/y"});
  st::RequestBuilder req(deleting);
  req.Controller("burst");
  st::Outcome out = st::Reconcile(**controller, req.Call());
  EXPECT_TRUE(out.ok()) << out.error_message();
  EXPECT_TRUE(out.status.is_null());
}

TEST(BurstControllerTest, ObjectWithoutMetadataDoesNotCrash) {
  auto controller = MakeBurstController().Build();
  ASSERT_TRUE(controller.ok()) << controller.status();
  st::RequestBuilder req(json{{"apiVersion", "burst.bench.ctrlhost.dev/v1"}, {"kind", "Burst"}});
  req.Controller("burst");
  st::Outcome out = st::Reconcile(**controller, req.Call());
  // Reconciled like any object: a missing metadata.generation reads as 0.
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_TRUE(out.desired.empty());
  EXPECT_EQ(out.status, (json{{"phase", "Done"}, {"observedGeneration", 0}}));

  // The same controller goes on with the next object as usual.
  st::RequestBuilder next(Burst(5));
  next.Controller("burst");
  st::Outcome after = st::Reconcile(**controller, next.Call());
  ASSERT_TRUE(after.ok()) << after.error_message();
  EXPECT_EQ(after.status, (json{{"phase", "Done"}, {"observedGeneration", 5}}));
}

}  // namespace
}  // namespace ctrlhost::bench
