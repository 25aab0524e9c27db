// The applier's request economy against the embedded API server: no-op writes are skipped
// (a steady state makes zero requests) and the first status write of a new object does not
// conflict with the host's own finalizer patch. Issue 13, items 2 and 3.
#include <string>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/apply/testing/applier_fixture.h"
#include "runtime/controller/apply/testing/test_controllers.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::ApplierTest;
using testing::ConfigMaps;

std::string ConfigMap(const json& data) {
  return json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", "web-config"}, {"labels", {{"app", "web"}}}}},
              {"data", data}}
      .dump();
}

pluginpb::ReconcileResponse Answer(const json& data) {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMap(data));
  response.add_desired_objects(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
      "metadata":{"name":"web","labels":{"managed":"yes"}}})");
  response.set_status(R"({"phase":"Ready","replicas":1})");
  pluginpb::Condition* ready = response.add_conditions();
  ready->set_type("Ready");
  ready->set_status(pluginpb::CONDITION_STATUS_TRUE);
  ready->set_reason("Available");
  return response;
}

TEST_F(ApplierTest, SteadyStateMakesNoRequestsIssue13) {
  CreateWebApp("web");
  const pluginpb::ReconcileResponse answer = Answer({{"v", "1"}});
  ApplyOutcome first = applier_.Apply(CachedContext("web"), answer);
  ASSERT_EQ(first.kind, OutcomeKind::kDone) << first.status;
  EXPECT_EQ(first.writes, 3u);  // ConfigMap, primary, status
  const std::string cm_rv =
      Parse(client_->Get(ConfigMaps(ns_, "web-config")))["metadata"]["resourceVersion"];
  const std::string web_rv = Live("web")["metadata"]["resourceVersion"];

  // The same answer again, N times, against the caches the watches would hold: no request.
  for (int i = 0; i < 5; ++i) {
    const ReconcileContext context = CachedContext("web");
    const int64_t before = rest_->attempts();
    ApplyOutcome again = applier_.Apply(context, answer);
    EXPECT_EQ(again.kind, OutcomeKind::kDone) << again.status;
    EXPECT_EQ(again.writes, 0u);
    EXPECT_EQ(again.skipped, 3u);
    EXPECT_EQ(rest_->attempts() - before, 0) << "round " << i;
  }
  EXPECT_EQ(Parse(client_->Get(ConfigMaps(ns_, "web-config")))["metadata"]["resourceVersion"],
            cm_rv);
  EXPECT_EQ(Live("web")["metadata"]["resourceVersion"], web_rv);

  // A changed field is written.
  ApplyOutcome changed = applier_.Apply(CachedContext("web"), Answer({{"v", "2"}, {"w", "3"}}));
  EXPECT_EQ(changed.writes, 1u) << changed.status;
  EXPECT_EQ(Parse(client_->Get(ConfigMaps(ns_, "web-config")))["data"]["v"], "2");
  // A field no longer sent is covered by the object, but the apply is not a no-op: the server
  // removes what this manager stopped applying.
  ApplyOutcome dropped = applier_.Apply(CachedContext("web"), Answer({{"v", "2"}}));
  EXPECT_EQ(dropped.writes, 1u) << dropped.status;
  EXPECT_FALSE(Parse(client_->Get(ConfigMaps(ns_, "web-config")))["data"].contains("w"));
  // Someone else changed an applied field: the cache shows it, the apply puts it back.
  ASSERT_TRUE(client_
                  ->Patch(ConfigMaps(ns_, "web-config"), kube::PatchType::kMerge,
                          R"({"data":{"v":"edited"}})")
                  .ok());
  ApplyOutcome restored = applier_.Apply(CachedContext("web"), Answer({{"v", "2"}}));
  EXPECT_EQ(restored.writes, 1u) << restored.status;
  EXPECT_EQ(Parse(client_->Get(ConfigMaps(ns_, "web-config")))["data"]["v"], "2");
}

// kube-apiserver 1.20 drops a ConfigMap's `data: {}`; a desired empty map must still count as
// applied, or every reconcile writes (and, on kube, bumps the resourceVersion).
TEST_F(ApplierTest, EmptyDataIsNotRewrittenIssue13) {
  CreateWebApp("web");
  const pluginpb::ReconcileResponse answer = Answer(json::object());
  ASSERT_EQ(applier_.Apply(CachedContext("web"), answer).kind, OutcomeKind::kDone);
  ApplyOutcome again = applier_.Apply(CachedContext("web"), answer);
  EXPECT_EQ(again.writes, 0u) << again.status;
}

// Without the host's caches (no stores in the context) nothing is skipped: the applier cannot
// know the current objects without reading them.
TEST_F(ApplierTest, WithoutCachesAppliesAreNotSkipped) {
  CreateWebApp("web");
  const pluginpb::ReconcileResponse answer = Answer({{"v", "1"}});
  ASSERT_EQ(applier_.Apply(Context("web"), answer).kind, OutcomeKind::kDone);
  ApplyOutcome again = applier_.Apply(Context("web"), answer);
  EXPECT_EQ(again.kind, OutcomeKind::kDone) << again.status;
  EXPECT_EQ(again.writes, 2u);  // ConfigMap, primary; the status is unchanged
}

// Issue 13 item 2: the first status write of a new object used the cached resourceVersion,
// which predates the host's own finalizer patch: a 409, a GET and a second PATCH every time.
TEST_F(ApplierTest, FirstStatusWriteAfterFinalizerDoesNotConflictIssue13) {
  CreateWebApp("web");
  ReconcileContext context = CachedContext("web");  // no finalizer yet, as the cache has it
  const cache::ObjectPtr first_seen = context.primary;
  int64_t before = rest_->attempts();
  absl::StatusOr<cache::ObjectPtr> ensured = applier_.EnsureFinalizer(context);
  ASSERT_TRUE(ensured.ok()) << ensured.status();
  ASSERT_NE(*ensured, nullptr);
  EXPECT_EQ(rest_->attempts() - before, 1);  // one PATCH, no GET
  ASSERT_EQ((*ensured)->finalizer_count(), 1u);
  EXPECT_EQ(std::string((*ensured)->resource_version()),
            Live("web")["metadata"]["resourceVersion"].get<std::string>());

  context.primary = *ensured;  // what the runner does with the answer
  pluginpb::ReconcileResponse status;
  status.set_status(R"({"phase":"Ready"})");
  before = rest_->attempts();
  ApplyOutcome outcome = applier_.Apply(context, status);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 1u);
  EXPECT_EQ(rest_->attempts() - before, 1);  // one status PATCH, no 409, no GET
  EXPECT_EQ(Live("web")["status"]["phase"], "Ready");

  // A stale cache (the live object has the finalizer already): the `test` fails, one GET, no
  // write.
  before = rest_->attempts();
  ReconcileContext before_finalizer = context;
  before_finalizer.primary = first_seen;
  ensured = applier_.EnsureFinalizer(before_finalizer);
  ASSERT_TRUE(ensured.ok()) << ensured.status();
  EXPECT_EQ(*ensured, nullptr);  // nothing written
  EXPECT_EQ(rest_->attempts() - before, 2);
  EXPECT_EQ(Live("web")["metadata"]["finalizers"].size(), 1u);
}

}  // namespace
}  // namespace ctrlhost::controller::apply
