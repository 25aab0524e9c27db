// The applier against the embedded API server, in process, over real HTTPS.
#include "runtime/controller/apply/applier.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/server.h"
#include "runtime/common/clock.h"
#include "runtime/controller/apply/conditions.h"
#include "runtime/controller/apply/test_util.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/kubeconfig.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;
using testing::CachedObject;
using testing::ContextFor;
using ::testing::HasSubstr;

kube::ResourceRef Ref(const std::string& group, const std::string& version,
                      const std::string& resource, const std::string& ns,
                      const std::string& name = "") {
  kube::ResourceRef ref;
  ref.group = group;
  ref.version = version;
  ref.resource = resource;
  ref.namespace_name = ns;
  ref.name = name;
  return ref;
}
kube::ResourceRef WebApps(const std::string& ns, const std::string& name = "") {
  return Ref("ctrlhost.dev", "v1", "webapps", ns, name);
}
kube::ResourceRef ConfigMaps(const std::string& ns, const std::string& name = "") {
  return Ref("", "v1", "configmaps", ns, name);
}

class ApplierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    apiserver::ApiServerOptions options;
    options.data_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/applier_apiserver");
    options.port = 0;
    options.sync_full = false;
    auto server = apiserver::ApiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    auto config = kube::LoadKubeconfigFile(server_->kubeconfig_path());
    ASSERT_TRUE(config.ok()) << config.status();
    auto rest = kube::RestClient::Create(*config);
    ASSERT_TRUE(rest.ok()) << rest.status();
    rest_ = rest->release();
    client_ = new kube::Client(rest_);
    auto crd = client_->Create(
        Ref("apiextensions.k8s.io", "v1", "customresourcedefinitions", ""),
        R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
            "metadata":{"name":"webapps.ctrlhost.dev"},
            "spec":{"group":"ctrlhost.dev","scope":"Namespaced",
                    "names":{"plural":"webapps","singular":"webapp","kind":"WebApp"},
                    "versions":[{"name":"v1","served":true,"storage":true,
                                 "subresources":{"status":{}},
                                 "schema":{"openAPIV3Schema":{"type":"object",
                                   "x-kubernetes-preserve-unknown-fields":true}}}]}})");
    ASSERT_TRUE(crd.ok()) << crd.status();
    // Bounded wait until the new resource is served.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!client_->List(WebApps("default")).ok() && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(client_->List(WebApps("default")).ok());
  }
  static void TearDownTestSuite() {
    delete client_;
    delete rest_;
    delete server_;
  }

  // A fresh namespace per test, named after it.
  void SetUp() override {
    ns_ = absl::StrCat("t-", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (char& ch : ns_) ch = ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
    ASSERT_TRUE(
        client_->Create(Ref("", "v1", "namespaces", ""), json{{"metadata", {{"name", ns_}}}}.dump())
            .ok());
  }

  static json Parse(const absl::StatusOr<std::string>& text) {
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? json::parse(*text) : json();
  }

  // Creates WebApp `name` in the test's namespace; returns it as served.
  std::string CreateWebApp(const std::string& name, const json& extra_metadata = json::object()) {
    json object = {{"apiVersion", "ctrlhost.dev/v1"},
                   {"kind", "WebApp"},
                   {"metadata", {{"name", name}}},
                   {"spec", {{"replicas", 1}}}};
    object["metadata"].update(extra_metadata);
    absl::StatusOr<std::string> created = client_->Create(WebApps(ns_), object.dump());
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : "";
  }
  json Live(const std::string& name) { return Parse(client_->Get(WebApps(ns_, name))); }
  // The context the runner would build from the cached object.
  ReconcileContext Context(const std::string& name) {
    return ContextFor(&webapp_, CachedObject(client_->Get(WebApps(ns_, name)).value()));
  }
  std::vector<json> EventsWithReason(const std::string& reason) {
    std::vector<json> found;
    absl::StatusOr<kube::ObjectList> list = client_->List(Ref("", "v1", "events", ns_));
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return found;
    for (const std::string& item : list->items) {
      json event = json::parse(item);
      if (event.value("reason", "") == reason) found.push_back(event);
    }
    return found;
  }
  // The condition of `type` in object.status.conditions (a copy), or null.
  static json Condition(const json& object, const std::string& type) {
    if (!object.is_object() || !object.contains("status")) return json();
    const json& status = object.at("status");
    if (!status.is_object() || !status.contains("conditions")) return json();
    for (const json& c : status.at("conditions")) {
      if (c.is_object() && c.value("type", "") == type) return c;
    }
    return json();
  }

  static apiserver::ApiServer* server_;
  static kube::RestClient* rest_;
  static kube::Client* client_;
  std::string ns_;
  common::FakeClock clock_;
  ControllerInfo webapp_ = testing::WebAppController();
  Applier applier_{client_, ApplierOptions{.clock = &clock_}};
};

apiserver::ApiServer* ApplierTest::server_ = nullptr;
kube::RestClient* ApplierTest::rest_ = nullptr;
kube::Client* ApplierTest::client_ = nullptr;

std::string ConfigMapJson(const std::string& name, const std::string& value = "1") {
  return json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", name}}},
              {"data", {{"v", value}}}}
      .dump();
}

TEST_F(ApplierTest, AppliesChildrenWithControllerOwnerReference) {
  const json primary = json::parse(CreateWebApp("web"));
  pb::ReconcileResponse response;
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
  pb::ReconcileResponse response;
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

TEST_F(ApplierTest, DeleteAbsentPrunesOnlyOwnChildren) {
  CreateWebApp("web");
  CreateWebApp("other");
  pb::ReconcileResponse both;
  both.add_desired_objects(ConfigMapJson("keep"));
  both.add_desired_objects(ConfigMapJson("drop"));
  ASSERT_EQ(applier_.Apply(Context("web"), both).kind, OutcomeKind::kDone);
  pb::ReconcileResponse others;
  others.add_desired_objects(ConfigMapJson("theirs"));
  ASSERT_EQ(applier_.Apply(Context("other"), others).kind, OutcomeKind::kDone);
  ASSERT_TRUE(client_->Create(ConfigMaps(ns_), ConfigMapJson("unowned")).ok());

  pb::ReconcileResponse keep_only;
  keep_only.add_desired_objects(ConfigMapJson("keep"));
  ApplyOutcome outcome = applier_.Apply(Context("web"), keep_only);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 2u);  // one apply, one delete
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "keep")).ok());
  EXPECT_TRUE(kube::IsNotFound(client_->Get(ConfigMaps(ns_, "drop")).status()));
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "theirs")).ok());
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "unowned")).ok());

  // A response with an error prunes nothing.
  pb::ReconcileResponse failing;
  failing.mutable_error()->set_kind(pb::ERROR_KIND_RETRYABLE);
  failing.mutable_error()->set_message("backend down");
  EXPECT_EQ(applier_.Apply(Context("web"), failing).kind, OutcomeKind::kRetry);
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "keep")).ok());
}

pb::Patch MakePatch(pb::PatchTarget target, pb::PatchType type, const std::string& body,
                    const std::string& resource_version = "") {
  pb::Patch p;
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

  pb::ReconcileResponse merge;
  *merge.add_patches() = MakePatch(pb::PATCH_TARGET_PRIMARY, pb::PATCH_TYPE_MERGE_PATCH,
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

  pb::ReconcileResponse json_patch;
  *json_patch.add_patches() =
      MakePatch(pb::PATCH_TARGET_PRIMARY, pb::PATCH_TYPE_JSON_PATCH,
                R"([{"op":"replace","path":"/spec/replicas","value":3}])", rv);
  EXPECT_EQ(applier_.Apply(context, json_patch).kind, OutcomeKind::kRequeueNow);
  json_patch.mutable_patches(0)->set_resource_version(Live("web")["metadata"]["resourceVersion"]);
  outcome = applier_.Apply(context, json_patch);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(Live("web")["spec"]["replicas"], 3);

  // A failing `test` is a conflict too.
  pb::ReconcileResponse test;
  *test.add_patches() = MakePatch(pb::PATCH_TARGET_PRIMARY, pb::PATCH_TYPE_JSON_PATCH,
                                  R"([{"op":"test","path":"/spec/replicas","value":1},
                                      {"op":"replace","path":"/spec/replicas","value":9}])");
  EXPECT_EQ(applier_.Apply(context, test).kind, OutcomeKind::kRequeueNow);
  EXPECT_EQ(Live("web")["spec"]["replicas"], 3);

  // The status subresource, by patch.
  pb::ReconcileResponse status;
  *status.add_patches() = MakePatch(pb::PATCH_TARGET_PRIMARY_STATUS, pb::PATCH_TYPE_MERGE_PATCH,
                                    R"({"status":{"phase":"Patched"}})");
  EXPECT_EQ(applier_.Apply(context, status).kind, OutcomeKind::kDone);
  EXPECT_EQ(Live("web")["status"]["phase"], "Patched");

  // An owned object that does not exist (yet): retry with backoff.
  pb::ReconcileResponse owned;
  pb::Patch* p = owned.add_patches();
  *p = MakePatch(pb::PATCH_TARGET_OWNED, pb::PATCH_TYPE_MERGE_PATCH, R"({"data":{"x":"1"}})");
  p->set_api_version("v1");
  p->set_kind("ConfigMap");
  p->set_name("missing");
  outcome = applier_.Apply(context, owned);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kNotFound);
}

TEST_F(ApplierTest, ServerRejectionIsTerminalWithEvent) {
  CreateWebApp("web");
  pb::ReconcileResponse response;
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

pb::Condition MakeCondition(const std::string& type, pb::ConditionStatus status,
                            const std::string& reason, const std::string& message = "") {
  pb::Condition c;
  c.set_type(type);
  c.set_status(status);
  c.set_reason(reason);
  c.set_message(message);
  return c;
}

TEST_F(ApplierTest, StatusAndConditionsMergeRules) {
  CreateWebApp("web");
  // Conditions set by someone else are kept.
  kube::ResourceRef status_ref = WebApps(ns_, "web");
  status_ref.subresource = "status";
  ASSERT_TRUE(client_
                  ->Patch(status_ref, kube::PatchType::kMerge,
                          R"({"status":{"conditions":[{"type":"External","status":"True",
                              "reason":"Set","lastTransitionTime":"2020-01-01T00:00:00Z"}]}})")
                  .ok());
  const std::string t0 = Rfc3339Time(clock_.Now());
  pb::ReconcileResponse response;
  response.set_status(R"({"phase":"Pending"})");
  *response.add_conditions() = MakeCondition("Ready", pb::CONDITION_STATUS_FALSE, "Waiting");
  ApplyOutcome outcome = applier_.Apply(Context("web"), response);
  ASSERT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(outcome.writes, 1u);  // one status write
  json live = Live("web");
  EXPECT_EQ(live["status"]["phase"], "Pending");
  EXPECT_EQ(live["status"]["observedGeneration"], live["metadata"]["generation"]);
  ASSERT_FALSE(Condition(live, "External").is_null());
  json ready = Condition(live, "Ready");
  ASSERT_FALSE(ready.is_null());
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["lastTransitionTime"], t0);
  EXPECT_EQ(ready["observedGeneration"], live["metadata"]["generation"]);

  // Same status, new reason, later: lastTransitionTime kept.
  clock_.Advance(absl::Minutes(5));
  pb::ReconcileResponse same;
  *same.add_conditions() = MakeCondition("Ready", pb::CONDITION_STATUS_FALSE, "StillWaiting", "m");
  ASSERT_EQ(applier_.Apply(Context("web"), same).kind, OutcomeKind::kDone);
  live = Live("web");
  EXPECT_EQ(Condition(live, "Ready")["lastTransitionTime"], t0);
  EXPECT_EQ(Condition(live, "Ready")["reason"], "StillWaiting");
  EXPECT_EQ(live["status"]["phase"], "Pending");  // a merge patch: other fields stay

  // Changed status: lastTransitionTime moves to now.
  clock_.Advance(absl::Minutes(5));
  pb::ReconcileResponse changed;
  *changed.add_conditions() = MakeCondition("Ready", pb::CONDITION_STATUS_TRUE, "Up");
  ASSERT_EQ(applier_.Apply(Context("web"), changed).kind, OutcomeKind::kDone);
  live = Live("web");
  EXPECT_EQ(Condition(live, "Ready")["lastTransitionTime"], Rfc3339Time(clock_.Now()));
  EXPECT_EQ(Condition(live, "Ready")["status"], "True");
  EXPECT_FALSE(Condition(live, "External").is_null());
}

TEST_F(ApplierTest, EventsAreRecordedAndAggregated) {
  const json primary = json::parse(CreateWebApp("web"));
  pb::ReconcileResponse response;
  pb::Event* event = response.add_events();
  event->set_type(pb::EVENT_TYPE_NORMAL);
  event->set_reason("Scaled");
  event->set_message("scaled to 2");
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  clock_.Advance(absl::Minutes(1));
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  std::vector<json> events = EventsWithReason("Scaled");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 2);
  EXPECT_EQ(events[0]["type"], "Normal");
  EXPECT_EQ(events[0]["message"], "scaled to 2");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "WebApp");
  EXPECT_EQ(events[0]["involvedObject"]["apiVersion"], "ctrlhost.dev/v1");
  EXPECT_EQ(events[0]["involvedObject"]["name"], "web");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], primary["metadata"]["uid"]);
  EXPECT_EQ(events[0]["lastTimestamp"], Rfc3339Time(clock_.Now()));
  EXPECT_NE(events[0]["firstTimestamp"], events[0]["lastTimestamp"]);

  // A different message is another event; the same one after the window is a new event.
  response.mutable_events(0)->set_message("scaled to 3");
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  EXPECT_EQ(EventsWithReason("Scaled").size(), 2u);
  clock_.Advance(absl::Minutes(11));
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  EXPECT_EQ(EventsWithReason("Scaled").size(), 3u);

  // An aggregated event deleted meanwhile is created again.
  for (const json& e : EventsWithReason("Scaled")) {
    ASSERT_TRUE(client_->Delete(Ref("", "v1", "events", ns_, e["metadata"]["name"])).ok());
  }
  ASSERT_EQ(applier_.Apply(Context("web"), response).kind, OutcomeKind::kDone);
  events = EventsWithReason("Scaled");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["count"], 1);
}

TEST_F(ApplierTest, FinalizerAddAndRelease) {
  CreateWebApp("web");
  ASSERT_TRUE(applier_.EnsureFinalizer(Context("web")).ok());
  json live = Live("web");
  EXPECT_EQ(live["metadata"]["finalizers"], json::array({"ctrlhost.dev/cleanup"}));
  const std::string rv = live["metadata"]["resourceVersion"];
  ASSERT_TRUE(applier_.EnsureFinalizer(Context("web")).ok());  // idempotent: no write
  EXPECT_EQ(Live("web")["metadata"]["resourceVersion"], rv);

  // Another finalizer already there: ours is appended.
  CreateWebApp("two", {{"finalizers", {"example.com/first"}}});
  ASSERT_TRUE(applier_.EnsureFinalizer(Context("two")).ok());
  EXPECT_EQ(Live("two")["metadata"]["finalizers"],
            json::array({"example.com/first", "ctrlhost.dev/cleanup"}));

  // Deletion waits for the finalizer; finalized releases it and the object goes.
  ASSERT_TRUE(client_->Delete(WebApps(ns_, "web")).ok());
  ReconcileContext finalizing = Context("web");
  ASSERT_FALSE(finalizing.primary->deletion_timestamp().empty());
  pb::ReconcileResponse done;
  done.set_finalized(true);
  ApplyOutcome outcome = applier_.Apply(finalizing, done);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_TRUE(outcome.finalizer_released);
  EXPECT_TRUE(kube::IsNotFound(client_->Get(WebApps(ns_, "web")).status()));

  // The finalizers changed since the request was built: conflict, requeue, nothing removed.
  ASSERT_TRUE(client_->Delete(WebApps(ns_, "two")).ok());
  ReconcileContext stale = Context("two");
  ASSERT_TRUE(client_
                  ->Patch(WebApps(ns_, "two"), kube::PatchType::kJson,
                          R"([{"op":"remove","path":"/metadata/finalizers/0"}])")
                  .ok());
  outcome = applier_.Apply(stale, done);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRequeueNow) << outcome.status;
  EXPECT_FALSE(outcome.finalizer_released);
  EXPECT_EQ(Live("two")["metadata"]["finalizers"], json::array({"ctrlhost.dev/cleanup"}));
  outcome = applier_.Apply(Context("two"), done);
  EXPECT_TRUE(outcome.finalizer_released);
  EXPECT_TRUE(kube::IsNotFound(client_->Get(WebApps(ns_, "two")).status()));
}

TEST_F(ApplierTest, PrimaryGone) {
  CreateWebApp("web");
  ReconcileContext stale = Context("web");
  ASSERT_TRUE(client_->Delete(WebApps(ns_, "web")).ok());
  pb::ReconcileResponse status;
  status.set_status(R"({"phase":"Ready"})");
  ApplyOutcome outcome = applier_.Apply(stale, status);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(applier_.EnsureFinalizer(stale).code(), absl::StatusCode::kNotFound);

  // The answer to a PRIMARY_DELETED request: events and requeue only.
  ReconcileContext gone = ContextFor(&webapp_, nullptr, ns_, "web");
  pb::ReconcileResponse forget;
  pb::Event* event = forget.add_events();
  event->set_type(pb::EVENT_TYPE_NORMAL);
  event->set_reason("Forgotten");
  outcome = applier_.Apply(gone, forget);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_EQ(EventsWithReason("Forgotten").size(), 1u);
}

TEST_F(ApplierTest, ErrorKinds) {
  CreateWebApp("web");
  // Retryable: the rest is still written, a Warning event, retry.
  pb::ReconcileResponse retryable;
  retryable.set_status(R"({"phase":"Degraded"})");
  retryable.add_desired_objects(ConfigMapJson("cfg"));
  retryable.mutable_error()->set_kind(pb::ERROR_KIND_RETRYABLE);
  retryable.mutable_error()->set_message("database unreachable");
  retryable.mutable_requeue_after()->set_seconds(30);  // ignored with an error
  ApplyOutcome outcome = applier_.Apply(Context("web"), retryable);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry);
  EXPECT_EQ(outcome.status.message(), "database unreachable");
  EXPECT_EQ(Live("web")["status"]["phase"], "Degraded");
  EXPECT_TRUE(client_->Get(ConfigMaps(ns_, "cfg")).ok());
  ASSERT_EQ(EventsWithReason("ReconcileError").size(), 1u);
  EXPECT_TRUE(Condition(Live("web"), "Reconciled").is_null());

  // Terminal: Reconciled=False (TerminalError) and a Warning event.
  pb::ReconcileResponse terminal;
  terminal.mutable_error()->set_kind(pb::ERROR_KIND_TERMINAL);
  terminal.mutable_error()->set_message("spec.image is not allowed");
  outcome = applier_.Apply(Context("web"), terminal);
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal);
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition);
  json reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["status"], "False");
  EXPECT_EQ(reconciled["reason"], "TerminalError");
  EXPECT_EQ(reconciled["message"], "spec.image is not allowed");
  EXPECT_EQ(EventsWithReason("ReconcileError").size(), 2u);

  // The next response without error sets it back to True.
  pb::ReconcileResponse fine;
  fine.mutable_requeue_after()->set_seconds(30);
  outcome = applier_.Apply(Context("web"), fine);
  EXPECT_EQ(outcome.kind, OutcomeKind::kRequeueAfter);
  EXPECT_EQ(outcome.requeue_after, absl::Seconds(30));
  reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["status"], "True");
  EXPECT_EQ(reconciled["reason"], "Succeeded");
  // And once True, a clean response writes nothing.
  outcome = applier_.Apply(Context("web"), pb::ReconcileResponse());
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone);
  EXPECT_EQ(outcome.writes, 0u);
}

TEST_F(ApplierTest, RecordTerminal) {
  CreateWebApp("web");
  applier_.RecordTerminal(Context("web"),
                          absl::InvalidArgumentError("the plugin's answers keep being malformed"));
  std::vector<json> events = EventsWithReason("ReconcileError");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  json reconciled = Condition(Live("web"), "Reconciled");
  ASSERT_FALSE(reconciled.is_null());
  EXPECT_EQ(reconciled["reason"], "TerminalError");
  EXPECT_EQ(reconciled["message"], "the plugin's answers keep being malformed");
}

TEST_F(ApplierTest, NamespacePrimaryOwnsObjectsInsideIt) {
  ControllerInfo tenant = testing::TenantController();
  const std::string ns_text = client_->Get(Ref("", "v1", "namespaces", "", ns_)).value();
  ReconcileContext context = ContextFor(&tenant, CachedObject(ns_text));
  pb::ReconcileResponse response;
  response.add_desired_objects(ConfigMapJson("quota"));
  ApplyOutcome outcome = applier_.Apply(context, response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  json cm = Parse(client_->Get(ConfigMaps(ns_, "quota")));
  EXPECT_EQ(cm["metadata"]["ownerReferences"][0]["kind"], "Namespace");
}

// Workers share one applier (and its event recorder); under TSan this checks the locking.
TEST_F(ApplierTest, ConcurrentAppliesShareOneApplier) {
  constexpr int kWorkers = 4;
  constexpr int kRounds = 5;
  for (int w = 0; w < kWorkers; ++w) CreateWebApp(absl::StrCat("app", w));
  std::vector<ReconcileContext> contexts;
  for (int w = 0; w < kWorkers; ++w) contexts.push_back(Context(absl::StrCat("app", w)));
  std::vector<std::thread> workers;
  std::vector<int> done(kWorkers, 0);
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      pb::ReconcileResponse response;
      response.add_desired_objects(ConfigMapJson(absl::StrCat("app", w, "-config")));
      pb::Event* event = response.add_events();
      event->set_type(pb::EVENT_TYPE_NORMAL);
      event->set_reason("Synced");
      event->set_message("synced");
      for (int round = 0; round < kRounds; ++round) {
        if (applier_.Apply(contexts[w], response).kind == OutcomeKind::kDone) ++done[w];
      }
    });
  }
  for (std::thread& t : workers) t.join();
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(done[w], kRounds) << w;
  std::vector<json> events = EventsWithReason("Synced");
  ASSERT_EQ(events.size(), static_cast<size_t>(kWorkers));  // one aggregated event each
  for (const json& e : events) EXPECT_EQ(e["count"], kRounds);
}

}  // namespace
}  // namespace ctrlhost::controller::apply
