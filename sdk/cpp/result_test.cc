#include "sdk/cpp/result.h"

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"

namespace ctrlhost::sdk {
namespace {

Request MakeRequest(bool finalizing = false, bool gone = false) {
  pluginpb::ReconcileCall call;
  call.set_controller("webapp");
  call.set_namespace_("team-a");
  call.set_name("shop");
  call.set_finalizing(finalizing);
  if (!gone) {
    call.set_object(R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
      "metadata":{"name":"shop","namespace":"team-a","labels":{"app":"shop"}}})");
  }
  return *Request::FromCall(call);
}

const std::set<pluginpb::Capability> kAll = AllSdkCapabilities();

// First contact (a Go plugin's author): a label-selected ConfigMap controller that owns
// ConfigMaps gave its children the primary's labels by default, so each child matched the
// selector and became a primary itself. Objects of the primary's own kind (any version) get no
// default labels; other kinds still do. The same in every SDK (e2e/conformance checks it).
TEST(ResultTest, RegressionChildrenOfThePrimarysKindGetNoDefaultLabels) {
  pluginpb::ReconcileCall call;
  call.set_controller("hello");
  call.set_namespace_("team-a");
  call.set_name("cm");
  call.set_object(R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"cm","namespace":"team-a","labels":{"hello":"true"}}})");
  Result r;
  r.Desire(NewObject("v1", "ConfigMap", "cm-hello"));
  r.Desire(NewObject("v1", "Secret", "cm-secret"));
  r.Desire(NewObject("v1", "ConfigMap", "cm-explicit"))["metadata"]["labels"] = {
      {"hello-copy", "true"}};
  absl::StatusOr<pluginpb::ReconcileResponse> resp =
      r.ToResponse(*Request::FromCall(call), 1, kAll);
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->desired_objects_size(), 3);
  EXPECT_EQ(nlohmann::json::parse(resp->desired_objects(0))["metadata"],
            (nlohmann::json{{"name", "cm-hello"}, {"namespace", "team-a"}}));
  EXPECT_EQ(nlohmann::json::parse(resp->desired_objects(1))["metadata"]["labels"],
            (nlohmann::json{{"hello", "true"}}));
  EXPECT_EQ(nlohmann::json::parse(resp->desired_objects(2))["metadata"]["labels"],
            (nlohmann::json{{"hello-copy", "true"}}));
}

TEST(ResultTest, FullResponse) {
  Result r;
  nlohmann::json& dep = r.Desire(NewObject("apps/v1", "Deployment"));
  dep["spec"]["replicas"] = 3;
  nlohmann::json& cm = r.Desire(NewObject("v1", "ConfigMap", "shop-config"));
  cm["metadata"]["labels"] = {{"own", "yes"}};
  r.Desire(NewObject("apps.ctrlhost.dev/v1alpha1", "WebApp"));  // The primary: no labels added.
  r.Status()["readyReplicas"] = 2;
  r.MergeStatus({{"phase", "Progressing"}, {"old", nullptr}});
  r.SetCondition("Ready", false, "Progressing", "2/3");
  r.SetCondition("Ready", ConditionStatus::kUnknown, "Waiting");  // Replaces by type.
  r.Event(EventType::kWarning, "Scaled", "scaled to 3");
  r.PatchPrimary(PatchType::kMergePatch, {{"metadata", {{"labels", {{"x", "y"}}}}}});
  r.PatchOwned("v1", "ConfigMap", "shop-config", PatchType::kJsonPatch,
               nlohmann::json::array({{{"op", "test"}, {"path", "/data/a"}, {"value", "1"}}}),
               "17");
  r.PatchPrimaryStatus(PatchType::kMergePatch, {{"x", 1}});
  r.SetRequeueAfter(absl::Milliseconds(1500));
  absl::StatusOr<pluginpb::ReconcileResponse> resp = r.ToResponse(MakeRequest(), 9, kAll);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->request_id(), 9u);
  ASSERT_EQ(resp->desired_objects_size(), 3);
  nlohmann::json d0 = nlohmann::json::parse(resp->desired_objects(0));
  EXPECT_EQ(d0["metadata"]["name"], "shop");
  EXPECT_EQ(d0["metadata"]["namespace"], "team-a");
  EXPECT_EQ(d0["metadata"]["labels"]["app"], "shop");
  EXPECT_EQ(d0["spec"]["replicas"], 3);
  nlohmann::json d1 = nlohmann::json::parse(resp->desired_objects(1));
  EXPECT_EQ(d1["metadata"]["labels"], (nlohmann::json{{"own", "yes"}}));
  nlohmann::json d2 = nlohmann::json::parse(resp->desired_objects(2));
  EXPECT_FALSE(d2["metadata"].contains("labels"));
  EXPECT_EQ(nlohmann::json::parse(resp->status()),
            (nlohmann::json{{"readyReplicas", 2}, {"phase", "Progressing"}, {"old", nullptr}}));
  ASSERT_EQ(resp->conditions_size(), 1);
  EXPECT_EQ(resp->conditions(0).status(), pluginpb::CONDITION_STATUS_UNKNOWN);
  EXPECT_EQ(resp->conditions(0).reason(), "Waiting");
  ASSERT_EQ(resp->events_size(), 1);
  EXPECT_EQ(resp->events(0).type(), pluginpb::EVENT_TYPE_WARNING);
  ASSERT_EQ(resp->patches_size(), 3);
  EXPECT_EQ(resp->patches(0).target(), pluginpb::PATCH_TARGET_PRIMARY);
  EXPECT_EQ(resp->patches(1).target(), pluginpb::PATCH_TARGET_OWNED);
  EXPECT_EQ(resp->patches(1).type(), pluginpb::PATCH_TYPE_JSON_PATCH);
  EXPECT_EQ(resp->patches(1).resource_version(), "17");
  EXPECT_EQ(resp->patches(1).name(), "shop-config");
  EXPECT_EQ(resp->patches(2).target(), pluginpb::PATCH_TARGET_PRIMARY_STATUS);
  EXPECT_EQ(resp->requeue_after().seconds(), 1);
  EXPECT_EQ(resp->requeue_after().nanos(), 500000000);
  EXPECT_FALSE(resp->has_error());
  EXPECT_FALSE(resp->finalized());
}

TEST(ResultTest, ErrorsAndFinalized) {
  absl::StatusOr<pluginpb::ReconcileResponse> resp =
      Result::RetryableError("later").ToResponse(MakeRequest(), 1, kAll);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->error().kind(), pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_EQ(resp->error().message(), "later");
  resp = Result::TerminalError("bad spec").ToResponse(MakeRequest(), 1, kAll);
  EXPECT_EQ(resp->error().kind(), pluginpb::ERROR_KIND_TERMINAL);
  EXPECT_EQ(Result::FromStatus(absl::InvalidArgumentError("x")).error()->kind,
            ErrorKind::kTerminal);
  EXPECT_EQ(Result::FromStatus(absl::UnavailableError("x")).error()->kind, ErrorKind::kRetryable);
  EXPECT_FALSE(Result::FromStatus(absl::OkStatus()).error().has_value());

  resp = Result::Finalized().ToResponse(MakeRequest(/*finalizing=*/true), 1, kAll);
  ASSERT_TRUE(resp.ok());
  EXPECT_TRUE(resp->finalized());
  // Finalized outside a finalizing request, or with an error: refused.
  EXPECT_FALSE(Result::Finalized().ToResponse(MakeRequest(), 1, kAll).ok());
  Result both = Result::Finalized();
  both.SetError(ErrorKind::kRetryable, "x");
  EXPECT_FALSE(both.ToResponse(MakeRequest(true), 1, kAll).ok());
}

TEST(ResultTest, ErrorReasonAndRetryAfter) {
  absl::StatusOr<pluginpb::ReconcileResponse> resp =
      Result::RetryableError("bucket quota used up", "QuotaExceeded",
                             absl::Seconds(30) + absl::Milliseconds(500))
          .ToResponse(MakeRequest(), 1, kAll);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->error().kind(), pluginpb::ERROR_KIND_RETRYABLE);
  EXPECT_EQ(resp->error().reason(), "QuotaExceeded");
  EXPECT_EQ(resp->error().retry_after().seconds(), 30);
  EXPECT_EQ(resp->error().retry_after().nanos(), 500'000'000);
  resp =
      Result::TerminalError("no such region", "UnknownRegion").ToResponse(MakeRequest(), 1, kAll);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->error().reason(), "UnknownRegion");
  EXPECT_FALSE(resp->error().has_retry_after());
  resp = Result::RetryableError("later").ToResponse(MakeRequest(), 1, kAll);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->error().reason(), "");
  EXPECT_FALSE(resp->error().has_retry_after());

  // Refused as the host would refuse them.
  struct Bad {
    Result result;
    std::string message;
  };
  Result terminal_with_wait;
  terminal_with_wait.SetError(ErrorKind::kTerminal, "x", "", absl::Seconds(1));
  const Bad bad[] = {
      {Result::RetryableError("x", "quota exceeded"),
       "error reason \"quota exceeded\" must be CamelCase"},
      {Result::TerminalError("x", std::string(129, 'A')), "at most 128 characters"},
      {Result::RetryableError("x", "", absl::Seconds(-1)), "negative"},
      {terminal_with_wait, "only allowed on a retryable error"},
  };
  for (const Bad& b : bad) {
    absl::StatusOr<pluginpb::ReconcileResponse> refused =
        b.result.ToResponse(MakeRequest(), 1, kAll);
    ASSERT_FALSE(refused.ok()) << b.message;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(b.message), std::string::npos) << refused.status();
  }
}

TEST(ResultTest, GonePrimaryAllowsOnlyEventsErrorRequeue) {
  const Request gone = MakeRequest(false, /*gone=*/true);
  Result ok;
  ok.Event(EventType::kNormal, "Forgotten", "bye");
  ok.SetRequeueAfter(absl::Seconds(1));
  EXPECT_TRUE(ok.ToResponse(gone, 1, kAll).ok());
  Result bad;
  bad.Status()["x"] = 1;
  EXPECT_EQ(bad.ToResponse(gone, 1, kAll).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ResultTest, InvalidOutcomesAreRefused) {
  const Request req = MakeRequest();
  auto fails = [&](Result r) { return !r.ToResponse(req, 1, kAll).ok(); };
  Result r1;
  r1.Desire(nlohmann::json::array());
  EXPECT_TRUE(fails(r1));
  Result r2;
  r2.Desire({{"kind", "ConfigMap"}});  // No apiVersion.
  EXPECT_TRUE(fails(r2));
  Result r3;
  r3.Desire({{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", 5}});
  EXPECT_TRUE(fails(r3));
  Result r4;
  r4.SetCondition("Ready", true, "not camel case");
  EXPECT_TRUE(fails(r4));
  Result r5;
  r5.SetCondition("Ready", true, "");
  EXPECT_TRUE(fails(r5));
  Result r6;
  r6.PatchPrimary(PatchType::kJsonPatch, {{"op", "add"}});  // Not an array.
  EXPECT_TRUE(fails(r6));
  Result r7;
  r7.PatchOwned("v1", "ConfigMap", "", PatchType::kMergePatch, nlohmann::json::object());
  EXPECT_TRUE(fails(r7));
  Result r8;
  r8.SetRequeueAfter(absl::Seconds(-1));
  EXPECT_TRUE(fails(r8));
  Result r9;
  r9.Event(EventType::kNormal, "", "no reason");
  EXPECT_TRUE(fails(r9));
  // Capabilities not in effect.
  Result r10;
  r10.Desire(NewObject("v1", "ConfigMap"));
  absl::Status s = r10.ToResponse(req, 1, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("CAPABILITY_SERVER_SIDE_APPLY"), std::string::npos) << s;
  Result r11;
  r11.SetCondition("Ready", true, "Ok");
  EXPECT_FALSE(r11.ToResponse(req, 1, {}).ok());
}

TEST(ResultTest, InvalidUtf8DoesNotThrow) {
  Result r;
  r.Status()["note"] = std::string("\xff\xfe");
  absl::StatusOr<pluginpb::ReconcileResponse> resp = r.ToResponse(MakeRequest(), 1, kAll);
  ASSERT_TRUE(resp.ok());
  EXPECT_FALSE(resp->status().empty());
}

TEST(ResultTest, MergeCombinesOutcomes) {
  Result a;
  a.Status()["a"] = 1;
  a.SetRequeueAfter(absl::Seconds(30));
  a.SetCondition("Ready", true, "Ok");
  Result b;
  b.Status()["b"] = 2;
  b.SetRequeueAfter(absl::Seconds(5));
  b.SetCondition("Ready", false, "Broken");
  b.SetError(ErrorKind::kTerminal, "boom");
  b.Desire(NewObject("v1", "ConfigMap"));
  a.Merge(std::move(b));
  EXPECT_EQ(*a.status(), (nlohmann::json{{"a", 1}, {"b", 2}}));
  EXPECT_EQ(*a.requeue_after(), absl::Seconds(5));
  ASSERT_EQ(a.conditions().size(), 1u);
  EXPECT_EQ(a.conditions()[0].reason, "Broken");
  EXPECT_EQ(a.error()->message, "boom");
  EXPECT_EQ(a.desired().size(), 1u);
}

TEST(ResultTest, ComposeMergePatchKeepsNulls) {
  nlohmann::json base = {{"a", {{"x", 1}}}, {"b", 1}};
  ComposeMergePatch(&base, {{"a", {{"y", nullptr}}}, {"b", {{"c", 2}}}});
  EXPECT_EQ(base, (nlohmann::json{{"a", {{"x", 1}, {"y", nullptr}}}, {"b", {{"c", 2}}}}));
}

}  // namespace
}  // namespace ctrlhost::sdk
