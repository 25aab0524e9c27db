#include "runtime/controller/apply/validate.h"

#include <functional>
#include <string>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/testing/test_controllers.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::CachedObject;
using testing::ContextFor;
using ::testing::HasSubstr;

constexpr char kWebApp[] = R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
    "metadata":{"name":"web","namespace":"team","uid":"u-web","generation":3,
                "resourceVersion":"10"}})";

class ValidateTest : public ::testing::Test {
 protected:
  ControllerInfo webapp_ = testing::WebAppController();
  ReconcileContext context_ = ContextFor(&webapp_, CachedObject(kWebApp));
};

TEST_F(ValidateTest, EmptyResponseIsAnEmptyPlan) {
  absl::StatusOr<Plan> plan = ValidateResponse(context_, pluginpb::ReconcileResponse());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->applies.empty());
  EXPECT_FALSE(plan->status.has_value());
  EXPECT_FALSE(plan->requeue_after.has_value());
}

TEST_F(ValidateTest, DesiredChildGetsNamespaceAndControllerReference) {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"web-config","ownerReferences":[{"apiVersion":"v1","kind":"Secret",
                  "name":"other","uid":"u-other"}]},"data":{"a":"1"}})");
  response.add_desired_objects(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
      "metadata":{"name":"web"},"spec":{"x":1}})");
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->applies.size(), 2u);
  const PlannedApply& child = plan->applies[0];
  EXPECT_EQ(child.ref.resource, "configmaps");
  EXPECT_EQ(child.ref.namespace_name, "team");
  EXPECT_EQ(child.object["metadata"]["namespace"], "team");
  const json owners = child.object["metadata"]["ownerReferences"];
  ASSERT_EQ(owners.size(), 2u);
  EXPECT_EQ(owners[1], json::parse(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
      "name":"web","uid":"u-web","controller":true,"blockOwnerDeletion":true})"));
  const PlannedApply& self = plan->applies[1];
  EXPECT_TRUE(self.is_primary);
  EXPECT_EQ(self.ref.resource, "webapps");
  EXPECT_FALSE(self.object["metadata"].contains("ownerReferences"));
}

TEST_F(ValidateTest, PatchPreconditionsAndStatusTargets) {
  pluginpb::ReconcileResponse response;
  pluginpb::Patch* json_patch = response.add_patches();
  json_patch->set_target(pluginpb::PATCH_TARGET_OWNED);
  json_patch->set_api_version("apps/v1");
  json_patch->set_kind("Deployment");
  json_patch->set_name("web");
  json_patch->set_type(pluginpb::PATCH_TYPE_JSON_PATCH);
  json_patch->set_patch(R"([{"op":"test","path":"/spec/replicas","value":1}])");
  json_patch->set_resource_version("42");
  pluginpb::Patch* merge = response.add_patches();
  merge->set_target(pluginpb::PATCH_TARGET_PRIMARY_STATUS);
  merge->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  merge->set_patch(R"({"status":{"phase":"Ready"}})");
  merge->set_resource_version("43");
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->patches.size(), 2u);
  EXPECT_EQ(plan->patches[0].ref.resource, "deployments");
  EXPECT_EQ(plan->patches[0].ref.namespace_name, "team");
  EXPECT_TRUE(plan->patches[0].has_test_op);
  EXPECT_EQ(json::parse(plan->patches[0].body)[0],
            json::parse(R"({"op":"replace","path":"/metadata/resourceVersion","value":"42"})"));
  EXPECT_EQ(plan->patches[1].ref.subresource, "status");
  EXPECT_TRUE(plan->patches[1].targets_primary);
  EXPECT_EQ(json::parse(plan->patches[1].body)["metadata"]["resourceVersion"], "43");
}

// First contact (a Go plugin's author): the hello examples set a condition on a ConfigMap,
// which has no status; the host wrote it with a merge patch a real API server drops, the embedded
// server kept it, and `ctrlhost test --check` accepted it. Refused for every kind without a
// status subresource, with what to do instead; events and the object's own fields stay allowed.
TEST_F(ValidateTest, RegressionStatusOnAKindWithoutStatusSubresourceIsRefused) {
  ControllerInfo hello = webapp_;
  hello.primary.group = "";
  hello.primary.version = "v1";
  hello.primary.resource = "configmaps";
  hello.primary.kind = "ConfigMap";
  hello.primary.has_status = false;
  const ReconcileContext context =
      ContextFor(&hello, CachedObject(R"({"apiVersion":"v1","kind":"ConfigMap",
          "metadata":{"name":"hi","namespace":"team","uid":"u-hi","resourceVersion":"4"}})"));
  pluginpb::ReconcileResponse conditions;
  pluginpb::Condition* ready = conditions.add_conditions();
  ready->set_type("Ready");
  ready->set_status(pluginpb::CONDITION_STATUS_TRUE);
  ready->set_reason("Copied");
  EXPECT_EQ(ValidateResponse(context, conditions).status().message(),
            "conditions: kind v1 ConfigMap has no status subresource, so it has no status to "
            "write; record the outcome with an event instead");
  pluginpb::ReconcileResponse status;
  status.set_status(R"({"phase":"Copied"})");
  EXPECT_THAT(std::string(ValidateResponse(context, status).status().message()),
              HasSubstr("status: kind v1 ConfigMap has no status subresource"));
  pluginpb::ReconcileResponse status_patch;
  pluginpb::Patch* patch = status_patch.add_patches();
  patch->set_target(pluginpb::PATCH_TARGET_PRIMARY_STATUS);
  patch->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  patch->set_patch(R"({"status":{"phase":"Copied"}})");
  EXPECT_THAT(std::string(ValidateResponse(context, status_patch).status().message()),
              HasSubstr("patches[0]: a PRIMARY_STATUS patch needs a status subresource; kind v1 "
                        "ConfigMap has none"));
  pluginpb::ReconcileResponse event_and_patch;
  pluginpb::Event* event = event_and_patch.add_events();
  event->set_type(pluginpb::EVENT_TYPE_NORMAL);
  event->set_reason("Copied");
  pluginpb::Patch* own = event_and_patch.add_patches();
  own->set_target(pluginpb::PATCH_TARGET_PRIMARY);
  own->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  own->set_patch(R"({"metadata":{"annotations":{"copied":"yes"}}})");
  EXPECT_TRUE(ValidateResponse(context, event_and_patch).ok());
  // The same answers pass for a kind that has one.
  EXPECT_TRUE(ValidateResponse(context_, conditions).ok());
  EXPECT_TRUE(ValidateResponse(context_, status).ok());
}

// Attack run, item 5: sizes are checked on the raw text before anything is parsed; each write
// up to kMaxWriteBytes, all writes (and events) up to kMaxResponseWriteBytes. Event and error
// messages are kept up to 32 KiB, not copied whole.
TEST_F(ValidateTest, SizeLimitsNameTheItemAndTheLimit) {
  // A desired object exactly at the limit passes the size check (and is then validated).
  const std::string head = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},)"
                           R"("data":{"v":")";
  const std::string at_limit = head + std::string(kMaxWriteBytes - head.size() - 3, 'x') + "\"}}";
  ASSERT_EQ(at_limit.size(), kMaxWriteBytes);
  pluginpb::ReconcileResponse ok;
  ok.add_desired_objects(at_limit);
  ASSERT_TRUE(ValidateResponse(context_, ok).ok());

  struct Case {
    std::function<void(pluginpb::ReconcileResponse*)> make;
    std::string message;
  };
  const std::string over(kMaxWriteBytes + 1, ' ');
  const std::vector<Case> cases = {
      {[&](auto* r) { r->add_desired_objects(over); },
       "desired_objects[0]: 3145729 bytes, more than the 3145728 bytes one write may carry"},
      {[&](auto* r) {
         r->add_patches()->set_patch("{}");
         r->add_patches()->set_patch(over);
       },
       "patches[1]: 3145729 bytes"},
      {[&](auto* r) {
         r->set_status(std::string(kMaxWriteBytes - 10, ' '));
         r->add_conditions()->set_message(std::string(32, 'm'));
       },
       "status and conditions: 3145750 bytes"},
      {[&](auto* r) {
         for (int i = 0; i < 6; ++i) r->add_desired_objects(std::string(kMaxWriteBytes, ' '));
       },
       "the desired objects, patches, status, conditions and events total 18874368 bytes, more "
       "than the 16777216 bytes one response may write"},
  };
  for (const Case& c : cases) {
    pluginpb::ReconcileResponse response;
    c.make(&response);
    absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
    ASSERT_FALSE(plan.ok()) << c.message;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr(c.message));
  }

  pluginpb::ReconcileResponse long_texts;
  pluginpb::Event* event = long_texts.add_events();
  event->set_type(pluginpb::EVENT_TYPE_WARNING);
  event->set_reason("Long");
  event->set_message(std::string(1 << 20, 'e'));
  long_texts.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  long_texts.mutable_error()->set_message(std::string(1 << 20, 'r'));
  absl::StatusOr<Plan> plan = ValidateResponse(context_, long_texts);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->events[0].message().size(), 32768u);
  EXPECT_EQ(plan->error_message, std::string(32768, 'r') + "... (1048576 bytes, cut)");
}

TEST_F(ValidateTest, RequeueErrorAndFinalized) {
  pluginpb::ReconcileResponse response;
  response.mutable_requeue_after()->set_seconds(5);
  response.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  response.mutable_error()->set_message("busy");
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->requeue_after, absl::Seconds(5));
  EXPECT_TRUE(plan->has_error);
  EXPECT_EQ(plan->error_message, "busy");
  EXPECT_EQ(plan->error_reason, "");
  EXPECT_FALSE(plan->error_retry_after.has_value());

  // finalized is honoured only for a primary being deleted with our finalizer.
  ReconcileContext finalizing =
      ContextFor(&webapp_, CachedObject(R"({"metadata":{"name":"web","namespace":"team","uid":"u",
          "deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["ctrlhost.dev/cleanup"]}})"));
  pluginpb::ReconcileResponse done;
  done.set_finalized(true);
  plan = ValidateResponse(finalizing, done);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->finalized);
}

TEST_F(ValidateTest, ErrorReasonAndRetryAfter) {
  pluginpb::ReconcileResponse response;
  response.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  response.mutable_error()->set_reason("QuotaExceeded");
  response.mutable_error()->mutable_retry_after()->set_seconds(30);
  response.mutable_error()->mutable_retry_after()->set_nanos(500'000'000);
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->error_reason, "QuotaExceeded");
  EXPECT_EQ(plan->error_retry_after, absl::Seconds(30) + absl::Milliseconds(500));

  // Zero is a valid hint (no wait beyond the backoff); the reason may use the full alphabet.
  response.mutable_error()->set_reason("Dependency:Not_Ready,2");
  response.mutable_error()->mutable_retry_after()->Clear();
  plan = ValidateResponse(context_, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->error_retry_after, absl::ZeroDuration());
}

TEST_F(ValidateTest, NamespacePrimaryOwnsObjectsInsideIt) {
  ControllerInfo tenant = testing::TenantController();
  ReconcileContext context =
      ContextFor(&tenant, CachedObject(R"({"metadata":{"name":"acme","uid":"u-acme"}})"));
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}})");
  response.add_desired_objects(R"({"apiVersion":"rbac.authorization.k8s.io/v1",
      "kind":"ClusterRole","metadata":{"name":"acme-reader"}})");
  absl::StatusOr<Plan> plan = ValidateResponse(context, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->applies[0].ref.namespace_name, "acme");
  EXPECT_EQ(plan->applies[1].ref.namespace_name, "");

  pluginpb::ReconcileResponse outside;
  outside.add_desired_objects(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"other"}})");
  plan = ValidateResponse(context, outside);
  EXPECT_THAT(plan.status().message(), HasSubstr("outside the primary's \"acme\""));
}

// A response the validation refuses: `build` fills it in, `message` is a substring of the error.
struct InvalidCase {
  const char* name;
  void (*build)(pluginpb::ReconcileResponse*);
  const char* message;
};

pluginpb::Patch* AddPatch(pluginpb::ReconcileResponse* r, pluginpb::PatchTarget target,
                          pluginpb::PatchType type, const std::string& body) {
  pluginpb::Patch* p = r->add_patches();
  p->set_target(target);
  p->set_type(type);
  p->set_patch(body);
  return p;
}

const InvalidCase kInvalidCases[] = {
    {"NotJson", [](auto* r) { r->add_desired_objects("{nope"); },
     "desired_objects[0]: not valid JSON"},
    {"TooDeep",
     [](auto* r) { r->add_desired_objects(std::string(100000, '[') + std::string(100000, ']')); },
     "desired_objects[0]: nested deeper than 1000 levels"},
    {"DeepPatch",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_MERGE_PATCH,
                R"({"a":)" + std::string(5000, '[') + std::string(5000, ']') + "}");
     },
     "patches[0]: nested deeper"},
    {"VersionPathTraversal",
     [](auto* r) {
       r->add_desired_objects(R"({"apiVersion":"apps/v1/../../../api/v1","kind":"Deployment",
             "metadata":{"name":"a"}})");
     },
     "apiVersion \"apps/v1/../../../api/v1\" is not group/version"},
    {"NamePathTraversal",
     [](auto* r) {
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":".."}})");
     },
     "metadata.name \"..\""},
    {"NameWithSlash",
     [](auto* r) {
       r->add_desired_objects(
           R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a/status"}})");
     },
     "metadata.name \"a/status\""},
    {"BadNamespace",
     [](auto* r) {
       r->add_desired_objects(
           R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"../x"}})");
     },
     "metadata.namespace \"../x\" is not a valid name"},
    {"OwnedPatchBadName",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_MERGE_PATCH, "{}");
       p->set_api_version("v1");
       p->set_kind("ConfigMap");
       p->set_name("%2e%2e");
     },
     "patches[0]: name \"%2e%2e\""},
    {"OwnedPatchBadVersion",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_MERGE_PATCH, "{}");
       p->set_api_version("v1/../../apis");
       p->set_kind("ConfigMap");
       p->set_name("c");
     },
     "needs api_version (group/version)"},
    {"NotObject", [](auto* r) { r->add_desired_objects("[1]"); },
     "desired_objects[0]: not a JSON object"},
    {"NoApiVersion",
     [](auto* r) { r->add_desired_objects(R"({"kind":"ConfigMap","metadata":{"name":"a"}})"); },
     "apiVersion missing"},
    {"NoKind",
     [](auto* r) { r->add_desired_objects(R"({"apiVersion":"v1","metadata":{"name":"a"}})"); },
     "kind missing"},
    {"NoName", [](auto* r) { r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap"})"); },
     "metadata missing"},
    {"EmptyName",
     [](auto* r) {
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{}})");
     },
     "metadata.name missing"},
    {"NotOwned",
     [](auto* r) {
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}})");
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}})");
       r->add_desired_objects(
           R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"a"}})");
     },
     "desired_objects[2]: kind apps/v1 StatefulSet is not owned by controller webapp"},
    {"OtherPrimary",
     [](auto* r) {
       r->add_desired_objects(
           R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp","metadata":{"name":"other"}})");
     },
     "kind ctrlhost.dev/v1 WebApp is not owned"},
    {"OtherNamespace",
     [](auto* r) {
       r->add_desired_objects(
           R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"x"}})");
     },
     "namespace \"x\" is outside the primary's \"team\""},
    {"Duplicate",
     [](auto* r) {
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}})");
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}})");
     },
     "desired_objects[1]: duplicate"},
    {"ForeignController",
     [](auto* r) {
       r->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",
             "ownerReferences":[{"uid":"x","controller":true}]}})");
     },
     "another controller"},
    {"PatchNoTarget",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_UNSPECIFIED, pluginpb::PATCH_TYPE_MERGE_PATCH, "{}");
     },
     "patches[0]: target is unspecified"},
    {"PatchNoType",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_UNSPECIFIED, "{}");
     },
     "patches[0]: type is unspecified"},
    {"PrimaryPatchNamesOther",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY_STATUS, pluginpb::PATCH_TYPE_MERGE_PATCH, "{}")
           ->set_name("other");
     },
     "must not name another object"},
    {"OwnedPatchNotOwned",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_MERGE_PATCH, "{}");
       p->set_api_version("v1");
       p->set_kind("Secret");
       p->set_name("s");
     },
     "kind v1 Secret is not owned by controller webapp"},
    {"OwnedPatchNoName",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_MERGE_PATCH, "{}");
       p->set_api_version("v1");
       p->set_kind("ConfigMap");
     },
     "needs a name"},
    // Issue 13 item 8: an OWNED patch stripped the ownerReferences of another's child.
    {"OwnedMergePatchStripsOwnerReferencesIssue13",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_MERGE_PATCH,
                    R"({"metadata":{"ownerReferences":null}})");
       p->set_api_version("v1");
       p->set_kind("ConfigMap");
       p->set_name("c");
     },
     "patches[0]: an OWNED patch must not change metadata.ownerReferences"},
    {"OwnedJsonPatchRemovesOwnerReferenceIssue13",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_JSON_PATCH,
                    R"([{"op":"remove","path":"/metadata/ownerReferences/0"}])");
       p->set_api_version("v1");
       p->set_kind("ConfigMap");
       p->set_name("c");
     },
     "must not change metadata.ownerReferences"},
    {"OwnedJsonPatchReplacesMetadata",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_JSON_PATCH,
                    R"([{"op":"replace","path":"/metadata","value":{}}])");
       p->set_api_version("v1");
       p->set_kind("ConfigMap");
       p->set_name("c");
     },
     "must not change metadata.ownerReferences"},
    {"OwnedJsonPatchMovesOwnerReferences",
     [](auto* r) {
       pluginpb::Patch* p =
           AddPatch(r, pluginpb::PATCH_TARGET_OWNED, pluginpb::PATCH_TYPE_JSON_PATCH,
                    R"([{"op":"move","from":"/metadata/ownerReferences",
                                      "path":"/data/x"}])");
       p->set_api_version("v1");
       p->set_kind("ConfigMap");
       p->set_name("c");
     },
     "must not change metadata.ownerReferences"},
    {"JsonPatchNotArray",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_JSON_PATCH, "{}");
     },
     "must be an array"},
    {"JsonPatchBadOp",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_JSON_PATCH,
                R"([{"op":"frobnicate","path":"/a"}])");
     },
     "patches[0].patch[0]: unknown op \"frobnicate\""},
    {"JsonPatchNoValue",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_JSON_PATCH,
                R"([{"op":"add","path":"/a"}])");
     },
     "\"value\" missing"},
    {"JsonPatchBadPath",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_JSON_PATCH,
                R"([{"op":"remove","path":"a"}])");
     },
     "not a JSON pointer"},
    {"MergePatchNotObject",
     [](auto* r) {
       AddPatch(r, pluginpb::PATCH_TARGET_PRIMARY, pluginpb::PATCH_TYPE_MERGE_PATCH, "[]");
     },
     "a merge patch must be a JSON object"},
    {"StatusNotObject", [](auto* r) { r->set_status("\"Ready\""); }, "status: not a JSON object"},
    {"ConditionNoType",
     [](auto* r) {
       pluginpb::Condition* c = r->add_conditions();
       c->set_status(pluginpb::CONDITION_STATUS_TRUE);
       c->set_reason("Ok");
     },
     "conditions[0]: type is empty"},
    {"ConditionNoStatus",
     [](auto* r) {
       pluginpb::Condition* c = r->add_conditions();
       c->set_type("Ready");
       c->set_reason("Ok");
     },
     "conditions[0]: status is unspecified"},
    {"ConditionBadReason",
     [](auto* r) {
       pluginpb::Condition* c = r->add_conditions();
       c->set_type("Ready");
       c->set_status(pluginpb::CONDITION_STATUS_TRUE);
       c->set_reason("not ok!");
     },
     "must be CamelCase"},
    {"EventNoType", [](auto* r) { r->add_events()->set_reason("Scaled"); },
     "events[0]: type is unspecified"},
    {"EventNoReason", [](auto* r) { r->add_events()->set_type(pluginpb::EVENT_TYPE_NORMAL); },
     "events[0]: reason is empty"},
    {"NegativeRequeue", [](auto* r) { r->mutable_requeue_after()->set_seconds(-1); },
     "requeue_after: negative"},
    {"BadDuration",
     [](auto* r) {
       r->mutable_requeue_after()->set_seconds(1);
       r->mutable_requeue_after()->set_nanos(-5);
     },
     "requeue_after: not a valid Duration"},
    {"ErrorNoKind", [](auto* r) { r->mutable_error()->set_message("x"); },
     "error: kind is unspecified"},
    {"ErrorBadReason",
     [](auto* r) {
       r->mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
       r->mutable_error()->set_reason("quota exceeded");
     },
     "error: reason \"quota exceeded\" must be CamelCase"},
    {"ErrorReasonTooLong",
     [](auto* r) {
       r->mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
       r->mutable_error()->set_reason(std::string(129, 'A'));
     },
     "at most 128 characters"},
    {"ErrorNegativeRetryAfter",
     [](auto* r) {
       r->mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
       r->mutable_error()->mutable_retry_after()->set_nanos(-1);
     },
     "error.retry_after: negative"},
    {"ErrorBadRetryAfter",
     [](auto* r) {
       r->mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
       r->mutable_error()->mutable_retry_after()->set_seconds(315'576'000'001);
     },
     "error.retry_after: not a valid Duration"},
    {"TerminalRetryAfter",
     [](auto* r) {
       r->mutable_error()->set_kind(pluginpb::ERROR_KIND_TERMINAL);
       r->mutable_error()->mutable_retry_after()->set_seconds(5);
     },
     "error: retry_after is only allowed on a retryable error"},
    {"FinalizedNotFinalizing", [](auto* r) { r->set_finalized(true); },
     "finalized: the primary is not being deleted"},
};

class InvalidResponseTest : public ValidateTest,
                            public ::testing::WithParamInterface<InvalidCase> {};

TEST_P(InvalidResponseTest, NamesTheOffendingItem) {
  pluginpb::ReconcileResponse response;
  GetParam().build(&response);
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(ValidateTest, InvalidResponseTest, ::testing::ValuesIn(kInvalidCases),
                         [](const ::testing::TestParamInfo<InvalidCase>& info) {
                           return std::string(info.param.name);
                         });

TEST_F(ValidateTest, GonePrimaryAllowsOnlyEventsErrorAndRequeue) {
  ReconcileContext gone = ContextFor(&webapp_, nullptr, "team", "web");
  pluginpb::ReconcileResponse ok;
  ok.add_events()->set_type(pluginpb::EVENT_TYPE_NORMAL);
  ok.mutable_events(0)->set_reason("Forgotten");
  ok.mutable_requeue_after()->set_seconds(1);
  EXPECT_TRUE(ValidateResponse(gone, ok).ok());
  pluginpb::ReconcileResponse status;
  status.set_status("{}");
  EXPECT_THAT(ValidateResponse(gone, status).status().message(), HasSubstr("the primary is gone"));
}

// Capabilities (docs/protocol.md section 2): a response that uses a feature whose capability is
// not in effect on the connection that carried it is refused as a whole, naming the field and
// the capability. One test per capability a response can need, then the positive cases.

// Every capability this host knows, less `missing`.
Capabilities AllBut(pluginpb::Capability missing) {
  Capabilities in_effect;
  for (int value = pluginpb::Capability_MIN; value <= pluginpb::Capability_MAX; ++value) {
    if (!pluginpb::Capability_IsValid(value) || value == pluginpb::CAPABILITY_UNSPECIFIED ||
        value == missing) {
      continue;
    }
    in_effect.push_back(static_cast<pluginpb::Capability>(value));
  }
  return in_effect;
}

pluginpb::ReconcileResponse WithDesiredChild() {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-config"}})");
  return response;
}

pluginpb::ReconcileResponse WithCondition() {
  pluginpb::ReconcileResponse response;
  pluginpb::Condition* condition = response.add_conditions();
  condition->set_type("Ready");
  condition->set_status(pluginpb::CONDITION_STATUS_TRUE);
  condition->set_reason("AllGood");
  return response;
}

TEST_F(ValidateTest, DesiredObjectsNeedServerSideApply) {
  context_.capabilities = AllBut(pluginpb::CAPABILITY_SERVER_SIDE_APPLY);
  pluginpb::ReconcileResponse response = WithDesiredChild();
  response.set_status(R"({"phase":"Ready"})");
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "desired_objects: requires CAPABILITY_SERVER_SIDE_APPLY, which is not in effect on "
            "this plugin connection");
  // The desired primary itself is an apply too.
  pluginpb::ReconcileResponse self;
  self.add_desired_objects(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
      "metadata":{"name":"web"},"spec":{"x":1}})");
  EXPECT_THAT(ValidateResponse(context_, self).status().message(),
              HasSubstr("CAPABILITY_SERVER_SIDE_APPLY"));
}

TEST_F(ValidateTest, ConditionsNeedConditions) {
  context_.capabilities = AllBut(pluginpb::CAPABILITY_CONDITIONS);
  absl::StatusOr<Plan> plan = ValidateResponse(context_, WithCondition());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "conditions: requires CAPABILITY_CONDITIONS, which is not in effect on this plugin "
            "connection");
  // Conditions written through `status` need no capability: that is the way without it.
  pluginpb::ReconcileResponse through_status;
  through_status.set_status(R"({"conditions":[{"type":"Ready","status":"True"}]})");
  EXPECT_TRUE(ValidateResponse(context_, through_status).ok());
}

TEST_F(ValidateTest, TaskMessagesNeedBackgroundTasks) {
  context_.capabilities = AllBut(pluginpb::CAPABILITY_BACKGROUND_TASKS);
  pluginpb::ReconcileResponse enqueue;
  enqueue.mutable_task_enqueue()->set_controller("webapp");
  enqueue.mutable_task_enqueue()->set_name("web");
  absl::StatusOr<Plan> plan = ValidateResponse(context_, enqueue);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message(),
            "task_enqueue: requires CAPABILITY_BACKGROUND_TASKS, which is not in effect on this "
            "plugin connection");
  pluginpb::ReconcileResponse status;
  status.mutable_task_status()->set_controller("webapp");
  status.mutable_task_status()->set_state(pluginpb::TASK_STATE_RUNNING);
  EXPECT_EQ(ValidateResponse(context_, status).status().message(),
            "task_status: requires CAPABILITY_BACKGROUND_TASKS, which is not in effect on this "
            "plugin connection");
}

// With the capability in effect a background task's message is still not part of an answer:
// it travels alone with request_id 0, and the applier would otherwise drop it unseen.
TEST_F(ValidateTest, TaskMessagesInAnAnswerAreRefusedEvenWithBackgroundTasks) {
  context_.capabilities = AllBut(pluginpb::CAPABILITY_UNSPECIFIED);  // every capability
  pluginpb::ReconcileResponse enqueue;
  enqueue.mutable_task_enqueue()->set_controller("webapp");
  EXPECT_THAT(ValidateResponse(context_, enqueue).status().message(),
              HasSubstr("task_enqueue: a background task's message is sent on its own"));
}

// The capability check comes first and names the first feature missing its capability, even
// when the response has other faults too.
TEST_F(ValidateTest, CapabilityIsCheckedBeforeTheRest) {
  context_.capabilities = Capabilities{};
  pluginpb::ReconcileResponse response = WithCondition();
  response.add_desired_objects("{not json");
  EXPECT_THAT(ValidateResponse(context_, response).status().message(),
              HasSubstr("desired_objects: requires CAPABILITY_SERVER_SIDE_APPLY"));
}

TEST_F(ValidateTest, FeaturesAreAcceptedWithTheirCapabilities) {
  context_.capabilities =
      Capabilities{pluginpb::CAPABILITY_SERVER_SIDE_APPLY, pluginpb::CAPABILITY_CONDITIONS};
  pluginpb::ReconcileResponse response = WithDesiredChild();
  *response.add_conditions() = WithCondition().conditions(0);
  absl::StatusOr<Plan> plan = ValidateResponse(context_, response);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->applies.size(), 1u);
  EXPECT_EQ(plan->conditions.size(), 1u);
  // Without either capability, a response using neither feature is fine: patches, status,
  // events, requeue and error need none.
  context_.capabilities = Capabilities{};
  pluginpb::ReconcileResponse plain;
  pluginpb::Patch* patch = plain.add_patches();
  patch->set_target(pluginpb::PATCH_TARGET_PRIMARY_STATUS);
  patch->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  patch->set_patch(R"({"status":{"phase":"Ready"}})");
  plain.set_status(R"({"phase":"Ready"})");
  plain.add_events()->set_type(pluginpb::EVENT_TYPE_NORMAL);
  plain.mutable_events(0)->set_reason("Synced");
  plain.mutable_requeue_after()->set_seconds(5);
  plain.mutable_error()->set_kind(pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_TRUE(ValidateResponse(context_, plain).ok()) << ValidateResponse(context_, plain).status();
}

// A context without capabilities (an answer the host made itself, e.g. RouteDispatcher's
// AmbiguousRoute with its Reconciled condition) is not checked against any.
TEST_F(ValidateTest, UncheckedWhenTheConnectionIsUnknown) {
  ASSERT_FALSE(context_.capabilities.has_value());
  pluginpb::ReconcileResponse response = WithDesiredChild();
  *response.add_conditions() = WithCondition().conditions(0);
  EXPECT_TRUE(ValidateResponse(context_, response).ok());
}

}  // namespace
}  // namespace ctrlhost::controller::apply
