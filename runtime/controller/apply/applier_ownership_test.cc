// Controller ownership against the embedded API server (docs/protocol.md §6):
// a desired object or an OWNED patch may only touch objects whose controller is the primary.
// An existing object with another controller, or with none, is refused (no adoption), with a
// terminal error, a Warning event and Reconciled=False, and nothing of the response written.
#include <string>
#include <vector>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/apply/testing/applier_fixture.h"
#include "runtime/controller/apply/testing/test_controllers.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::ApplierTest;
using testing::ConfigMapJson;
using testing::ConfigMaps;
using ::testing::HasSubstr;

pluginpb::Patch OwnedPatch(pluginpb::PatchType type, const std::string& name,
                           const std::string& body) {
  pluginpb::Patch patch;
  patch.set_target(pluginpb::PATCH_TARGET_OWNED);
  patch.set_type(type);
  patch.set_api_version("v1");
  patch.set_kind("ConfigMap");
  patch.set_name(name);
  patch.set_patch(body);
  return patch;
}

class OwnershipTest : public ApplierTest {
 protected:
  // WebApps "a" and "b"; "a" owns ConfigMap "a-child".
  void SetUp() override {
    ApplierTest::SetUp();
    webapp_.owns[0].delete_absent = false;  // responses here name only what they patch
    a_uid_ = json::parse(CreateWebApp("a"))["metadata"]["uid"];
    CreateWebApp("b");
    pluginpb::ReconcileResponse child;
    child.add_desired_objects(ConfigMapJson("a-child"));
    ASSERT_EQ(applier_.Apply(CachedContext("a"), child).kind, OutcomeKind::kDone);
  }
  json Child(const std::string& name) { return Parse(client_->Get(ConfigMaps(ns_, name))); }
  void ExpectRefused(const ApplyOutcome& outcome, const std::string& what) {
    EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal) << outcome.status;
    EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition) << outcome.status;
    EXPECT_THAT(std::string(outcome.status.message()), HasSubstr(what));
    json reconciled = Condition(Live("b"), "Reconciled");
    ASSERT_FALSE(reconciled.is_null());
    EXPECT_EQ(reconciled["reason"], kReasonNotControlled);
    EXPECT_FALSE(EventsWithReason(kReasonNotControlled).empty());
  }
  std::string a_uid_;
};

TEST_F(OwnershipTest, DesiredObjectControlledByAnotherPrimaryIsRefusedIssue13) {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("a-child", "taken"));
  response.set_status(R"({"phase":"Stolen"})");
  for (bool cached : {true, false}) {
    ExpectRefused(applier_.Apply(cached ? CachedContext("b") : Context("b"), response),
                  "is controlled by another object");
    const json cm = Child("a-child");
    EXPECT_EQ(cm["data"]["v"], "1");
    ASSERT_EQ(cm["metadata"]["ownerReferences"].size(), 1u);
    EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["uid"], a_uid_);
    EXPECT_FALSE(Live("b")["status"].contains("phase"));  // nothing of the response written
  }
}

TEST_F(OwnershipTest, ExistingObjectWithoutControllerIsNotAdoptedIssue13) {
  ASSERT_TRUE(client_->Create(ConfigMaps(ns_), ConfigMapJson("loose", "mine")).ok());
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("loose", "ours"));
  const ApplyOutcome outcome = applier_.Apply(CachedContext("b"), response);
  ExpectRefused(outcome, "has no controller");
  const json cm = Child("loose");
  EXPECT_EQ(cm["data"]["v"], "mine");
  EXPECT_FALSE(cm["metadata"].contains("ownerReferences"));
  // What to do, and what the runner needs to reconcile again once the object is deleted.
  EXPECT_THAT(std::string(outcome.status.message()),
              HasSubstr("delete it (WebApp " + ns_ +
                        "/b is reconciled again when it is gone) or "
                        "rename the child"));
  EXPECT_EQ(outcome.reason, kReasonNotControlled);
  ASSERT_EQ(outcome.blocked_by.size(), 1u);
  EXPECT_EQ(outcome.blocked_by[0].owned_index, 0);
  EXPECT_EQ(outcome.blocked_by[0].namespace_, ns_);
  EXPECT_EQ(outcome.blocked_by[0].name, "loose");
}

TEST_F(OwnershipTest, OwnedPatchOnAnotherPrimarysChildIsRefusedIssue13) {
  for (pluginpb::PatchType type :
       {pluginpb::PATCH_TYPE_MERGE_PATCH, pluginpb::PATCH_TYPE_JSON_PATCH}) {
    pluginpb::ReconcileResponse response;
    *response.add_patches() =
        OwnedPatch(type, "a-child",
                   type == pluginpb::PATCH_TYPE_MERGE_PATCH
                       ? R"({"data":{"v":"patched"}})"
                       : R"([{"op":"replace","path":"/data/v","value":"patched"}])");
    ExpectRefused(applier_.Apply(CachedContext("b"), response), "is not controlled by WebApp");
    EXPECT_EQ(Child("a-child")["data"]["v"], "1");
    EXPECT_EQ(Child("a-child")["metadata"]["ownerReferences"][0]["uid"], a_uid_);
  }
  // An object with no controller is not the primary's child either.
  ASSERT_TRUE(client_->Create(ConfigMaps(ns_), ConfigMapJson("loose", "mine")).ok());
  pluginpb::ReconcileResponse loose;
  *loose.add_patches() =
      OwnedPatch(pluginpb::PATCH_TYPE_MERGE_PATCH, "loose", R"({"data":{"v":"patched"}})");
  ExpectRefused(applier_.Apply(Context("b"), loose), "it has no controller");
  EXPECT_EQ(Child("loose")["data"]["v"], "mine");
}

// A primary deleted and created again under the same name: its predecessor's children are
// the garbage collector's, soon; the new primary retries (never a terminal refusal).
TEST_F(OwnershipTest, ChildOfAnEarlierPrimaryOfTheSameNameIsRetried) {
  // A second, live owner keeps the embedded server's garbage collector from deleting the child
  // while the test looks at it (its controller, the earlier b, is gone).
  const json anchor = Parse(client_->Create(
      ConfigMaps(ns_),
      json{{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "anchor"}}}}
          .dump()));
  ASSERT_TRUE(client_
                  ->Create(ConfigMaps(ns_), json{{"apiVersion", "v1"},
                                                 {"kind", "ConfigMap"},
                                                 {"metadata",
                                                  {{"name", "b-config"},
                                                   {"ownerReferences",
                                                    {{{"apiVersion", "ctrlhost.dev/v1"},
                                                      {"kind", "WebApp"},
                                                      {"name", "b"},
                                                      {"uid", "uid-of-an-earlier-b"},
                                                      {"controller", true}},
                                                     {{"apiVersion", "v1"},
                                                      {"kind", "ConfigMap"},
                                                      {"name", "anchor"},
                                                      {"uid", anchor["metadata"]["uid"]}}}}}}}
                                                .dump())
                  .ok());
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("b-config"));
  ApplyOutcome outcome = applier_.Apply(CachedContext("b"), response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry) << outcome.status;
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("earlier WebApp"));
  EXPECT_FALSE(Child("b-config")["data"].contains("v"));
}

TEST_F(OwnershipTest, OwnedPatchOnOwnChildWorks) {
  for (pluginpb::PatchType type :
       {pluginpb::PATCH_TYPE_MERGE_PATCH, pluginpb::PATCH_TYPE_JSON_PATCH}) {
    pluginpb::ReconcileResponse response;
    *response.add_patches() =
        OwnedPatch(type, "a-child",
                   type == pluginpb::PATCH_TYPE_MERGE_PATCH
                       ? R"({"data":{"v":"merge"}})"
                       : R"([{"op":"replace","path":"/data/v","value":"json"}])");
    ApplyOutcome outcome = applier_.Apply(CachedContext("a"), response);
    EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
    EXPECT_EQ(Child("a-child")["data"]["v"],
              type == pluginpb::PATCH_TYPE_MERGE_PATCH ? "merge" : "json");
  }
  // A child this response creates may be patched in the same response.
  pluginpb::ReconcileResponse create_and_patch;
  create_and_patch.add_desired_objects(ConfigMapJson("a-new"));
  *create_and_patch.add_patches() =
      OwnedPatch(pluginpb::PATCH_TYPE_MERGE_PATCH, "a-new", R"({"metadata":{"labels":{"x":"y"}}})");
  ApplyOutcome outcome = applier_.Apply(CachedContext("a"), create_and_patch);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(Child("a-new")["metadata"]["labels"]["x"], "y");
  // A target the cache does not hold (yet): retried with backoff, nothing written.
  pluginpb::ReconcileResponse missing;
  *missing.add_patches() =
      OwnedPatch(pluginpb::PATCH_TYPE_MERGE_PATCH, "missing", R"({"data":{"v":"x"}})");
  outcome = applier_.Apply(CachedContext("a"), missing);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ctrlhost::controller::apply
