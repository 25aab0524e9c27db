// The applier against the embedded API server: desired objects, validation, pruning, patches.
#include "runtime/controller/apply/applier.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/conditions.h"
#include "runtime/controller/apply/testing/applier_fixture.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/controller/apply/validate.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::ApplierTest;
using testing::CachedObject;
using testing::ConfigMapJson;
using testing::ConfigMaps;
using testing::ContextFor;
using ::testing::HasSubstr;
using testing::Ref;
using testing::WebApps;

TEST_F(ApplierTest, AppliesChildrenWithControllerOwnerReference) {
  const json primary = json::parse(CreateWebApp("web"));
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("web-config"));
  response.add_desired_objects(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
      "metadata":{"name":"web","labels":{"managed":"yes"}}})");
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 2u);

  json cm = Parse(client_->Get(ConfigMaps(ns_, "web-config")));
  EXPECT_EQ(cm["data"]["v"], "1");
  ASSERT_EQ(cm["metadata"]["ownerReferences"].size(), 1u);
  const json& owner = cm["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["uid"], primary["metadata"]["uid"]);
  EXPECT_EQ(owner["kind"], "WebApp");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(owner["blockOwnerDeletion"], true);
  EXPECT_EQ(cm["metadata"]["managedFields"][0]["manager"], "ctrlhost-webapp");
  // The primary was applied to itself, without an owner reference.
  json live = Live("web");
  EXPECT_EQ(live["metadata"]["labels"]["managed"], "yes");
  EXPECT_FALSE(live["metadata"].contains("ownerReferences"));

  // Applying the same answer again converges (server-side apply is idempotent).
  response.set_desired_objects(0, ConfigMapJson("web-config", "2"));
  outcome = applier_.Apply(Context("web"), response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(Parse(client_->Get(ConfigMaps(ns_, "web-config")))["data"]["v"], "2");
}

TEST_F(ApplierTest, InvalidResponseWritesNothingAndRecordsWhy) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("ok-config"));
  response.add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}})");
  response.add_desired_objects(
      R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db"}})");
  response.set_status(R"({"phase":"Ready"})");
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(outcome.status.message(),
            "desired_objects[2]: kind apps/v1 StatefulSet is not owned by controller webapp");
  // Nothing of the response was written.
  EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, "ok-config")).status()));
  json live = Live("web");
  EXPECT_FALSE(live["status"].contains("phase"));
  // A Warning event and Reconciled=False say why.
  std::vector<json> events = EventsWithReason("InvalidResponse");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_THAT(events[0]["message"].get<std::string>(), HasSubstr("desired_objects[2]"));
  EXPECT_EQ(events[0]["involvedObject"]["uid"], live["metadata"]["uid"]);
  EXPECT_EQ(events[0]["source"]["component"], "ctrlhost");
  json reconciled = Condition(live, "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["status"], "False");
  EXPECT_EQ(reconciled["reason"], "InvalidResponse");
}

// Regression (attack run, item 5): one answer just under the 64 MiB message limit took the
// host from 33 MB to 300-650 MB (parsed JSON, copies of it, the write sent anyway) and left no
// event: the API server answered 413, which was retried quietly. Sizes are checked before
// anything is parsed: a write over kMaxWriteBytes (the request body kube-apiserver takes) or
// writes over kMaxResponseWriteBytes in all refuse the answer, terminally, with an
// InvalidResponse event and Reconciled=False saying which limit.
TEST_F(ApplierTest, RegressionOversizedAnswerIsRefusedWithAnEvent) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse one;
  one.add_desired_objects(ConfigMapJson("huge", std::string(kMaxWriteBytes, 'x')));
  ApplyOutcome outcome = applier_.Apply(Context("web"), one);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal) << outcome.status;
  EXPECT_THAT(std::string(outcome.status.message()),
              HasSubstr(absl::StrCat("desired_objects[0]: ", kMaxWriteBytes + 81,
                                     " bytes, more than the 3145728 bytes")));
  EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, "huge")).status()));
  std::vector<json> events = EventsWithReason("InvalidResponse");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_THAT(events[0]["message"].get<std::string>(),
              HasSubstr("desired_objects[0]: 3145809 bytes, more than the 3145728 bytes one "
                        "write may carry"));
  EXPECT_EQ(Condition(Live("web"), "Reconciled")["reason"], "InvalidResponse");

  // Each write under the limit, all of them together over it.
  pluginpb::ReconcileResponse many;
  const size_t each = kMaxWriteBytes - 1024;
  for (size_t i = 0; i * each <= kMaxResponseWriteBytes; ++i) {
    many.add_desired_objects(ConfigMapJson(absl::StrCat("part-", i), std::string(each - 100, 'x')));
  }
  outcome = applier_.Apply(Context("web"), many);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal) << outcome.status;
  EXPECT_THAT(std::string(outcome.status.message()),
              HasSubstr("more than the 16777216 bytes one response may write"));
  EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, "part-0")).status()));
  events = EventsWithReason("InvalidResponse");
  ASSERT_EQ(events.size(), 2u);
}

// Every kind of invalid item refuses the whole response: the valid parts before it are not
// written either, and each refusal is recorded against the primary.
TEST_F(ApplierTest, EachValidationFailureWritesNothing) {
  CreateWebApp("web");
  const std::vector<std::function<void(pluginpb::ReconcileResponse*)>> breakers = {
      [](auto* r) { r->add_desired_objects("{not json"); },
      [](auto* r) {
        r->add_desired_objects(R"({"apiVersion":"v1","kind":"Secret",
                                               "metadata":{"name":"s"}})");
      },
      [](auto* r) {
        r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap",
                                               "metadata":{"name":"x","namespace":"kube-system"}})");
      },
      [](auto* r) { r->add_patches()->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH); },
      [](auto* r) {
        pluginpb::Patch* p = r->add_patches();
        p->set_target(pluginpb::PATCH_TARGET_PRIMARY);
        p->set_type(pluginpb::PATCH_TYPE_JSON_PATCH);
        p->set_patch(R"({"op":"add"})");
      },
      [](auto* r) { r->add_conditions()->set_type("Ready"); },
      [](auto* r) { r->add_events()->set_reason("NoType"); },
      [](auto* r) { r->mutable_requeue_after()->set_seconds(-3); },
      [](auto* r) { r->mutable_error()->set_message("no kind"); },
      [](auto* r) { r->set_finalized(true); },
  };
  for (size_t i = 0; i < breakers.size(); ++i) {
    pluginpb::ReconcileResponse response;
    response.add_desired_objects(ConfigMapJson(absl::StrCat("valid-", i)));
    response.set_status(R"({"phase":"Written"})");
    pluginpb::Event* event = response.add_events();
    event->set_type(pluginpb::EVENT_TYPE_NORMAL);
    event->set_reason("ShouldNotAppear");
    breakers[i](&response);
    ApplyOutcome outcome = applier_.Apply(Context("web"), response);
    EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal) << i;
    EXPECT_EQ(outcome.status.code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, absl::StrCat("valid-", i))).status()))
        << i;
    EXPECT_FALSE(Live("web")["status"].contains("phase")) << i;
    EXPECT_EQ(EventsWithReason("InvalidResponse").size(), i + 1) << i;
  }
  EXPECT_TRUE(EventsWithReason("ShouldNotAppear").empty());
}

// docs/protocol.md section 2: a response using a feature whose capability is not in effect on
// its connection is refused like any invalid one: nothing of it written, a terminal outcome, a
// Warning event on the primary naming the field and the capability. With the capability, the
// same response is applied.
TEST_F(ApplierTest, FeatureWithoutItsCapabilityWritesNothing) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("web-config"));
  response.set_status(R"({"phase":"Ready"})");
  pluginpb::Condition* condition = response.add_conditions();
  condition->set_type("Available");
  condition->set_status(pluginpb::CONDITION_STATUS_TRUE);
  condition->set_reason("Serving");
  pluginpb::Event* event = response.add_events();
  event->set_type(pluginpb::EVENT_TYPE_NORMAL);
  event->set_reason("ShouldNotAppear");

  ReconcileContext context = Context("web");
  context.capabilities = Capabilities{pluginpb::CAPABILITY_CONDITIONS};  // no server-side apply
  ApplyOutcome outcome = applier_.Apply(context, response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outcome.status.message(),
            "desired_objects: requires CAPABILITY_SERVER_SIDE_APPLY, which is not in effect on "
            "this plugin connection");
  // Nothing of the response was written (the refusal's own records follow below).
  EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, "web-config")).status()));
  json live = Live("web");
  EXPECT_FALSE(live["status"].contains("phase"));
  EXPECT_TRUE(Condition(live, "Available").is_null());
  EXPECT_TRUE(EventsWithReason("ShouldNotAppear").empty());
  std::vector<json> events = EventsWithReason("InvalidResponse");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_THAT(events[0]["message"].get<std::string>(),
              HasSubstr("desired_objects: requires CAPABILITY_SERVER_SIDE_APPLY"));
  EXPECT_EQ(events[0]["involvedObject"]["uid"], live["metadata"]["uid"]);

  // The conditions alone, on a connection without CAPABILITY_CONDITIONS.
  pluginpb::ReconcileResponse conditions_only;
  *conditions_only.add_conditions() = *condition;
  context = Context("web");
  context.capabilities = Capabilities{pluginpb::CAPABILITY_SERVER_SIDE_APPLY};
  outcome = applier_.Apply(context, conditions_only);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_THAT(std::string(outcome.status.message()),
              HasSubstr("conditions: requires CAPABILITY_CONDITIONS"));
  EXPECT_TRUE(Condition(Live("web"), "Available").is_null());
  EXPECT_EQ(EventsWithReason("InvalidResponse").size(), 2u);

  // Both in effect: the first response is applied whole.
  context = Context("web");
  context.capabilities =
      Capabilities{pluginpb::CAPABILITY_SERVER_SIDE_APPLY, pluginpb::CAPABILITY_CONDITIONS};
  outcome = applier_.Apply(context, response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "web-config")).ok());
  live = Live("web");
  EXPECT_EQ(live["status"]["phase"], "Ready");
  EXPECT_EQ(Condition(live, "Available")["status"], "True");
  EXPECT_EQ(EventsWithReason("ShouldNotAppear").size(), 1u);
}

TEST_F(ApplierTest, AppliesBuiltInKinds) {
  const json primary = json::parse(CreateWebApp("web"));
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"web"},
      "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
              "template":{"metadata":{"labels":{"app":"web"}},
                          "spec":{"containers":[{"name":"web","image":"nginx:1.25"}]}}}})");
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  json deployment = Parse(client_->Get(Ref("apps", "v1", "deployments", ns_, "web")));
  EXPECT_EQ(deployment["spec"]["replicas"], 2);
  EXPECT_EQ(deployment["metadata"]["ownerReferences"][0]["uid"], primary["metadata"]["uid"]);

  // A later apply by the same manager that drops a field gives it up (apply semantics).
  response.set_desired_objects(0, R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"web","labels":{"tier":"front"}},
      "spec":{"selector":{"matchLabels":{"app":"web"}},
              "template":{"metadata":{"labels":{"app":"web"}},
                          "spec":{"containers":[{"name":"web","image":"nginx:1.26"}]}}}})");
  outcome = applier_.Apply(Context("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  deployment = Parse(client_->Get(Ref("apps", "v1", "deployments", ns_, "web")));
  EXPECT_EQ(deployment["metadata"]["labels"]["tier"], "front");
  EXPECT_EQ(deployment["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.26");
  EXPECT_EQ(deployment["metadata"]["ownerReferences"].size(), 1u);
}

TEST_F(ApplierTest, DeleteAbsentPrunesOnlyOwnChildren) {
  CreateWebApp("web");
  CreateWebApp("other");
  pluginpb::ReconcileResponse both;
  both.add_desired_objects(ConfigMapJson("keep"));
  both.add_desired_objects(ConfigMapJson("drop"));
  ASSERT_EQ(applier_.Apply(Context("web"), both).kind, OutcomeKind::kDone);
  pluginpb::ReconcileResponse others;
  others.add_desired_objects(ConfigMapJson("theirs"));
  ASSERT_EQ(applier_.Apply(Context("other"), others).kind, OutcomeKind::kDone);
  ASSERT_TRUE(client_->Create(ConfigMaps(ns_), ConfigMapJson("unowned")).ok());

  pluginpb::ReconcileResponse keep_only;
  keep_only.add_desired_objects(ConfigMapJson("keep"));
  ApplyOutcome outcome = applier_.Apply(Context("web"), keep_only);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 2u);  // one apply, one delete
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "keep")).ok());
  EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, "drop")).status()));
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "theirs")).ok());
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "unowned")).ok());

  // A response with an error prunes nothing.
  pluginpb::ReconcileResponse failing;
  failing.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  failing.mutable_error()->set_message("backend down");
  EXPECT_EQ(applier_.Apply(Context("web"), failing).kind, OutcomeKind::kRetry);
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "keep")).ok());
}

pluginpb::Patch MakePatch(pluginpb::PatchTarget target, pluginpb::PatchType type,
                          const std::string& body, const std::string& resource_version = "") {
  pluginpb::Patch p;
  p.set_target(target);
  p.set_type(type);
  p.set_patch(body);
  p.set_resource_version(resource_version);
  return p;
}

TEST_F(ApplierTest, PatchesWithPreconditions) {
  const json created = json::parse(CreateWebApp("web"));
  const std::string rv = created["metadata"]["resourceVersion"];
  ReconcileContext context = Context("web");

  pluginpb::ReconcileResponse merge;
  *merge.add_patches() = MakePatch(pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_MERGE_PATCH,
                                   R"({"spec":{"replicas":2}})", rv);
  ApplyOutcome outcome = applier_.Apply(context, merge);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(Live("web")["spec"]["replicas"], 2);

  // The same precondition is stale now: 409, requeue at once, nothing more written.
  merge.set_status(R"({"phase":"Later"})");
  outcome = applier_.Apply(context, merge);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRequeueNow);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(Live("web")["status"].contains("phase"));

  pluginpb::ReconcileResponse json_patch;
  *json_patch.add_patches() =
      MakePatch(pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_JSON_PATCH,
                R"([{"op":"replace","path":"/spec/replicas","value":3}])", rv);
  EXPECT_EQ(applier_.Apply(context, json_patch).kind, OutcomeKind::kRequeueNow);
  json_patch.mutable_patches(0)->set_resource_version(Live("web")["metadata"]["resourceVersion"]);
  outcome = applier_.Apply(context, json_patch);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(Live("web")["spec"]["replicas"], 3);

  // A failing `test` is a conflict too.
  pluginpb::ReconcileResponse test;
  *test.add_patches() = MakePatch(pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_JSON_PATCH,
                                  R"([{"op":"test","path":"/spec/replicas","value":1},
                                      {"op":"replace","path":"/spec/replicas","value":9}])");
  EXPECT_EQ(applier_.Apply(context, test).kind, OutcomeKind::kRequeueNow);
  EXPECT_EQ(Live("web")["spec"]["replicas"], 3);

  // The status subresource, by patch.
  pluginpb::ReconcileResponse status;
  *status.add_patches() =
      MakePatch(pluginpb::PATCH_TARGET_PRIMARY_STATUS, pluginpb::PATCH_TYPE_MERGE_PATCH,
                R"({"status":{"phase":"Patched"}})");
  EXPECT_EQ(applier_.Apply(context, status).kind, OutcomeKind::kDone);
  EXPECT_EQ(Live("web")["status"]["phase"], "Patched");

  // An owned object that does not exist (yet): retry with backoff.
  pluginpb::ReconcileResponse owned;
  pluginpb::Patch* p = owned.add_patches();
  *p = MakePatch(pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_MERGE_PATCH,
                 R"({"data":{"x":"1"}})");
  p->set_api_version("v1");
  p->set_kind("ConfigMap");
  p->set_name("missing");
  outcome = applier_.Apply(context, owned);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kNotFound);
}

TEST_F(ApplierTest, ServerRejectionIsTerminalWithEvent) {
  CreateWebApp("web");
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("Not_A_Valid_Name"));
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("Not_A_Valid_Name"));
  std::vector<json> events = EventsWithReason("WriteRejected");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0]["message"].get<std::string>(), HasSubstr("Not_A_Valid_Name"));
  json reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["reason"], "WriteRejected");
}

}  // namespace
}  // namespace ctrlhost::controller::apply
