#include "sdk/cpp/request.h"

#include <memory>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"

namespace ctrlhost::sdk {
namespace {

pluginpb::ReconcileCall MakeCall() {
  pluginpb::ReconcileCall call;
  call.set_controller("webapp");
  call.set_namespace_("team-a");
  call.set_name("shop");
  call.set_uid("u-1");
  call.set_reason(pluginpb::REASON_CHILD_CHANGED);
  call.set_attempt(2);
  call.set_trace_id("abc");
  call.mutable_deadline()->set_seconds(1800000000);
  call.set_object(R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"shop","namespace":"team-a","generation":7,"resourceVersion":"42",
                "labels":{"tier":"front","n":3},"annotations":{"a":"b"}},
    "spec":{"replicas":3},"status":{"phase":"Ready"}})");
  pluginpb::RawObject* child = call.add_children();
  child->set_api_version("apps/v1");
  child->set_kind("Deployment");
  child->set_object(
      R"({"metadata":{"name":"shop","namespace":"team-a"},"status":{"readyReplicas":2}})");
  pluginpb::RawObject* related = call.add_related_objects();
  related->set_api_version("v1");
  related->set_kind("ConfigMap");
  related->set_object(R"({"metadata":{"name":"settings","namespace":"ops"}})");
  return call;
}

TEST(RequestTest, TypedAccessors) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  absl::StatusOr<Request> req = Request::FromCall(MakeCall(), flag);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->controller(), "webapp");
  EXPECT_EQ(req->namespace_(), "team-a");
  EXPECT_EQ(req->name(), "shop");
  EXPECT_EQ(req->uid(), "u-1");
  EXPECT_EQ(req->reason_name(), "ChildChanged");
  EXPECT_EQ(req->attempt(), 2u);
  EXPECT_EQ(req->deadline(), absl::FromUnixSeconds(1800000000));
  EXPECT_TRUE(req->exists());
  EXPECT_FALSE(req->finalizing());
  EXPECT_FALSE(req->deleting());
  EXPECT_EQ(req->generation(), 7);
  EXPECT_EQ(req->resource_version(), "42");
  EXPECT_EQ(req->kind(), "WebApp");
  EXPECT_EQ(req->api_version(), "apps.ctrlhost.dev/v1alpha1");
  EXPECT_EQ(req->spec().value("replicas", 0), 3);
  EXPECT_EQ(req->status().value("phase", ""), "Ready");
  // Non-string label values are skipped rather than thrown on.
  EXPECT_EQ(req->labels(), (std::map<std::string, std::string>{{"tier", "front"}}));
  EXPECT_EQ(req->label("tier"), "front");
  EXPECT_EQ(req->label("n"), std::nullopt);
  EXPECT_EQ(req->annotation("a"), "b");
  ASSERT_EQ(req->ChildrenOfKind("Deployment").size(), 1u);
  EXPECT_TRUE(req->ChildrenOfKind("Deployment", "apps/v2").empty());
  const nlohmann::json* dep = req->Child("Deployment", "shop");
  ASSERT_NE(dep, nullptr);
  EXPECT_EQ((*dep)["status"]["readyReplicas"], 2);
  EXPECT_EQ(req->Child("Deployment", "other"), nullptr);
  EXPECT_NE(req->Related("ConfigMap", "settings", "ops"), nullptr);
  EXPECT_EQ(req->Related("ConfigMap", "settings", "team-a"), nullptr);
  EXPECT_EQ(req->RelatedOfKind("ConfigMap").size(), 1u);
  EXPECT_TRUE(req->call().object().empty());  // Bytes not kept twice.
  EXPECT_FALSE(req->cancelled());
  flag->store(true);
  EXPECT_TRUE(req->cancelled());
}

TEST(RequestTest, GonePrimaryAndMissingPartsReadAsEmpty) {
  pluginpb::ReconcileCall call;
  call.set_name("gone");
  call.set_reason(static_cast<pluginpb::Reason>(99));  // From a later version: only a hint.
  absl::StatusOr<Request> req = Request::FromCall(call);
  ASSERT_TRUE(req.ok());
  EXPECT_FALSE(req->exists());
  EXPECT_TRUE(req->spec().is_object());
  EXPECT_TRUE(req->spec().empty());
  EXPECT_TRUE(req->labels().empty());
  EXPECT_EQ(req->generation(), 0);
  EXPECT_EQ(req->reason_name(), "Unspecified");
  EXPECT_EQ(req->deadline(), absl::InfiniteFuture());
  EXPECT_FALSE(req->cancelled());
}

TEST(RequestTest, DeletingAndFinalizing) {
  pluginpb::ReconcileCall call = MakeCall();
  call.set_object(R"({"metadata":{"name":"shop","deletionTimestamp":"2026-01-01T00:00:00Z"}})");
  call.set_finalizing(true);
  absl::StatusOr<Request> req = Request::FromCall(call);
  ASSERT_TRUE(req.ok());
  EXPECT_TRUE(req->deleting());
  EXPECT_TRUE(req->finalizing());
}

TEST(RequestTest, BadJsonIsAnError) {
  pluginpb::ReconcileCall call = MakeCall();
  call.set_object("{not json");
  EXPECT_EQ(Request::FromCall(call).status().code(), absl::StatusCode::kInvalidArgument);
  call = MakeCall();
  call.set_object("[1,2]");
  EXPECT_EQ(Request::FromCall(call).status().code(), absl::StatusCode::kInvalidArgument);
  call = MakeCall();
  call.mutable_children(0)->set_object(std::string("{\"a\":\"\xff\"}"));
  EXPECT_EQ(Request::FromCall(call).status().code(), absl::StatusCode::kInvalidArgument);
  call = MakeCall();
  call.mutable_related_objects(0)->set_object("42");
  absl::Status s = Request::FromCall(call).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("related v1/ConfigMap"), std::string::npos) << s;
}

TEST(RequestTest, FindPath) {
  nlohmann::json obj = {{"a", {{"b", {{"c", 1}}}}}, {"x", 2}};
  ASSERT_NE(FindPath(obj, "a.b.c"), nullptr);
  EXPECT_EQ(*FindPath(obj, "a.b.c"), 1);
  EXPECT_EQ(FindPath(obj, "a.b.d"), nullptr);
  EXPECT_EQ(FindPath(obj, "x.y"), nullptr);  // Through a non-object.
}

}  // namespace
}  // namespace ctrlhost::sdk
