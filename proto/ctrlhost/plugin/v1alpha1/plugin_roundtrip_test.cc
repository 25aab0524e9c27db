// Proves that the generated C++ code for ctrlhost.plugin.v1alpha1 works over real gRPC: a plugin
// server on a Unix socket in a temporary directory, a host-side client that calls Describe and
// then multiplexes several reconciles over one Reconcile stream, answered in reverse order and
// matched by request_id. Every field is checked after the trip, including raw JSON bytes,
// Durations, Timestamps, enums and a message larger than gRPC's 4 MiB default.

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::plugin::v1alpha1 {
namespace {

namespace common = ::ctrlhost::common;

constexpr int kMaxMessageBytes = 64 << 20;  // The limit the protocol documents.
constexpr int kBigObjectBytes = 5 << 20;    // Above gRPC's 4 MiB default.

// A temporary directory for the socket, removed with its contents. Unix socket paths are limited
// to 107 bytes, and Bazel's TEST_TMPDIR can be longer than that leaves room for, so fall back to
// /tmp when it is.
class SocketDir {
 public:
  SocketDir() {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TEST_TMPDIR"); t != nullptr && std::string(t).size() < 70) {
      base = t;
    }
    std::string tmpl = base + "/rt-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~SocketDir() {
    if (dir_.empty()) return;
    unlink(socket_path().c_str());
    rmdir(dir_.c_str());
  }
  bool ok() const { return !dir_.empty(); }
  std::string socket_path() const { return dir_ + "/plugin.sock"; }

 private:
  std::string dir_;
};

google::protobuf::Duration MakeDuration(int64_t seconds, int32_t nanos) {
  google::protobuf::Duration d;
  d.set_seconds(seconds);
  d.set_nanos(nanos);
  return d;
}

std::string ObjectJson(uint64_t id) {
  return absl::StrCat(R"({"apiVersion":"example.com/v1","kind":"WebApp","metadata":)",
                      R"({"name":"app-)", id, R"(","namespace":"team-a"},"spec":{"replicas":)", id,
                      R"(,"note":"caf\u00e9 \u2603"}})");
}

// The request the host would send for request_id `id`; every field set.
ReconcileRequest MakeReconcile(uint64_t id) {
  ReconcileRequest req;
  req.set_request_id(id);
  ReconcileCall* call = req.mutable_reconcile();
  call->set_controller("webapp");
  call->set_namespace_("team-a");
  call->set_name(absl::StrCat("app-", id));
  call->set_uid(absl::StrCat("uid-", id));
  call->set_reason(id % 2 == 0 ? REASON_CHILD_CHANGED : REASON_PLUGIN_STARTED);
  call->set_object(ObjectJson(id));
  RawObject* child = call->add_children();
  child->set_api_version("apps/v1");
  child->set_kind("Deployment");
  child->set_object(absl::StrCat(R"({"kind":"Deployment","metadata":{"name":"c)", id, R"("}})"));
  RawObject* related = call->add_related_objects();
  related->set_api_version("v1");
  related->set_kind("ConfigMap");
  related->set_object(std::string("{\"data\":{\"bin\":\"\\u0000\"}}\0tail", 30));
  call->set_finalizing(id == 3);
  call->set_attempt(static_cast<uint32_t>(id + 1));
  call->mutable_deadline()->set_seconds(1700000000 + static_cast<int64_t>(id));
  call->mutable_deadline()->set_nanos(123456789);
  call->set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  return req;
}

// The answer the fake plugin gives to a reconcile; every outcome set, derived from the id so
// the client can check it.
ReconcileResponse MakeResponse(uint64_t id, const ReconcileCall& call) {
  ReconcileResponse resp;
  resp.set_request_id(id);
  resp.add_desired_objects(absl::StrCat(R"({"apiVersion":"apps/v1","kind":"Deployment",)",
                                        R"("metadata":{"name":")", call.name(), R"("}})"));
  Patch* patch = resp.add_patches();
  patch->set_target(PATCH_TARGET_OWNED);
  patch->set_api_version("v1");
  patch->set_kind("ConfigMap");
  patch->set_name(absl::StrCat("cm-", id));
  patch->set_type(PATCH_TYPE_JSON_PATCH);
  patch->set_patch(R"([{"op":"test","path":"/data/a","value":"1"},{"op":"remove","path":"/x"}])");
  patch->set_resource_version(absl::StrCat(1000 + id));
  Patch* merge = resp.add_patches();
  merge->set_target(PATCH_TARGET_PRIMARY);
  merge->set_type(PATCH_TYPE_MERGE_PATCH);
  merge->set_patch(R"({"metadata":{"labels":{"seen":"yes"}}})");
  resp.set_status(absl::StrCat(R"({"observedReplicas":)", id, "}"));
  Condition* cond = resp.add_conditions();
  cond->set_type("Ready");
  cond->set_status(CONDITION_STATUS_FALSE);
  cond->set_reason("Progressing");
  cond->set_message(absl::StrCat("waiting for ", call.name()));
  Event* event = resp.add_events();
  event->set_type(EVENT_TYPE_WARNING);
  event->set_reason("Scaled");
  event->set_message("scaled to 3");
  *resp.mutable_requeue_after() = MakeDuration(static_cast<int64_t>(id) * 60, 500000000);
  resp.mutable_error()->set_message(absl::StrCat("retry ", id));
  resp.mutable_error()->set_kind(id % 2 == 0 ? ERROR_KIND_TERMINAL : ERROR_KIND_RETRYABLE);
  resp.set_finalized(call.finalizing());
  return resp;
}

// A plugin that records what it received and answers all reconciles of a stream in reverse
// order once the host half-closes. Thread-safe: gRPC's sync server calls these methods on its
// own threads, and `mu_` guards the recorded requests.
class FakePlugin final : public ControllerPluginService::Service {
 public:
  grpc::Status Describe(grpc::ServerContext*, const DescribeRequest* request,
                        DescribeResponse* response) override {
    {
      common::MutexLock lock(&mu_);
      describe_request_ = *request;
    }
    response->set_protocol_version("v1alpha1");
    response->set_plugin_name("webapp-operator");
    response->set_plugin_version("1.4.0");
    response->add_capabilities(CAPABILITY_CHILDREN);
    response->add_capabilities(CAPABILITY_SERVER_SIDE_APPLY);
    ControllerSpec* spec = response->add_controllers();
    spec->set_name("webapp");
    spec->mutable_primary()->set_group("example.com");
    spec->mutable_primary()->set_version("v1");
    spec->mutable_primary()->set_kind("WebApp");
    OwnedKind* owned = spec->add_owns();
    owned->mutable_kind()->set_group("apps");
    owned->mutable_kind()->set_version("v1");
    owned->mutable_kind()->set_kind("Deployment");
    owned->set_delete_absent(true);
    WatchedKind* by_field = spec->add_watches();
    by_field->mutable_kind()->set_version("v1");
    by_field->mutable_kind()->set_kind("ConfigMap");
    by_field->mutable_field_path()->set_primary_field_path("spec.volumes[].configMap.name");
    by_field->set_include_in_requests(true);
    WatchedKind* by_label = spec->add_watches();
    by_label->mutable_kind()->set_version("v1");
    by_label->mutable_kind()->set_kind("Secret");
    by_label->mutable_label()->set_name_label("example.com/webapp");
    spec->add_namespaces("team-a");
    spec->set_label_selector("tier in (front,back)");
    spec->set_finalizer("example.com/cleanup");
    spec->set_max_concurrent_reconciles(4);
    *spec->mutable_resync_period() = MakeDuration(600, 0);
    spec->add_schedules()->set_cron("0 3 * * *");
    spec->mutable_predicates()->set_ignore_child_status_changes(true);
    spec->mutable_request_contents()->set_children(true);
    spec->mutable_request_contents()->add_strip_fields("metadata.managedFields");
    return grpc::Status::OK;
  }

  grpc::Status Reconcile(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<ReconcileResponse, ReconcileRequest>* stream) override {
    std::vector<ReconcileRequest> received;
    ReconcileRequest req;
    while (stream->Read(&req)) received.push_back(req);
    for (auto it = received.rbegin(); it != received.rend(); ++it) {
      if (it->payload_case() != ReconcileRequest::kReconcile) continue;  // Cancels: no answer.
      if (!stream->Write(MakeResponse(it->request_id(), it->reconcile()))) break;
    }
    common::MutexLock lock(&mu_);
    stream_requests_ = std::move(received);
    return grpc::Status::OK;
  }

  DescribeRequest describe_request() {
    common::MutexLock lock(&mu_);
    return describe_request_;
  }
  std::vector<ReconcileRequest> stream_requests() {
    common::MutexLock lock(&mu_);
    return stream_requests_;
  }

 private:
  common::Mutex mu_;
  DescribeRequest describe_request_ ABSL_GUARDED_BY(mu_);
  std::vector<ReconcileRequest> stream_requests_ ABSL_GUARDED_BY(mu_);
};

class PluginRoundTripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    const std::string address = "unix:" + dir_.socket_path();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    builder.RegisterService(&plugin_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot listen on " << address;

    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    stub_ = ControllerPluginService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    }
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }

  SocketDir dir_;
  FakePlugin plugin_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ControllerPluginService::Stub> stub_;
};

TEST_F(PluginRoundTripTest, DescribeNegotiatesBothWays) {
  DescribeRequest req;
  req.add_protocol_versions("v1alpha1");
  req.add_capabilities(CAPABILITY_CANCELLATION);
  req.add_capabilities(CAPABILITY_CHILDREN);
  req.add_capabilities(CAPABILITY_SCHEDULES);
  req.set_host_version("0.1.0");
  req.set_max_message_bytes(kMaxMessageBytes);
  req.set_max_in_flight(64);
  req.set_instance_name("webapp-3");
  DescribeResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status status = stub_->Describe(&ctx, req, &resp);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const DescribeRequest seen = plugin_.describe_request();
  ASSERT_EQ(seen.protocol_versions_size(), 1);
  EXPECT_EQ(seen.protocol_versions(0), "v1alpha1");
  ASSERT_EQ(seen.capabilities_size(), 3);
  EXPECT_EQ(seen.capabilities(0), CAPABILITY_CANCELLATION);
  EXPECT_EQ(seen.capabilities(2), CAPABILITY_SCHEDULES);
  EXPECT_EQ(seen.host_version(), "0.1.0");
  EXPECT_EQ(seen.max_message_bytes(), static_cast<uint32_t>(kMaxMessageBytes));
  EXPECT_EQ(seen.max_in_flight(), 64u);
  EXPECT_EQ(seen.instance_name(), "webapp-3");

  EXPECT_EQ(resp.protocol_version(), "v1alpha1");
  EXPECT_EQ(resp.plugin_name(), "webapp-operator");
  EXPECT_EQ(resp.plugin_version(), "1.4.0");
  ASSERT_EQ(resp.capabilities_size(), 2);
  EXPECT_EQ(resp.capabilities(1), CAPABILITY_SERVER_SIDE_APPLY);
  ASSERT_EQ(resp.controllers_size(), 1);
  const ControllerSpec& spec = resp.controllers(0);
  EXPECT_EQ(spec.name(), "webapp");
  EXPECT_EQ(spec.primary().group(), "example.com");
  EXPECT_EQ(spec.primary().kind(), "WebApp");
  ASSERT_EQ(spec.owns_size(), 1);
  EXPECT_EQ(spec.owns(0).kind().group(), "apps");
  EXPECT_TRUE(spec.owns(0).delete_absent());
  EXPECT_FALSE(spec.owns(0).cluster_scoped());
  ASSERT_EQ(spec.watches_size(), 2);
  EXPECT_EQ(spec.watches(0).mapping_case(), WatchedKind::kFieldPath);
  EXPECT_EQ(spec.watches(0).field_path().primary_field_path(), "spec.volumes[].configMap.name");
  EXPECT_TRUE(spec.watches(0).include_in_requests());
  EXPECT_EQ(spec.watches(0).kind().group(), "");  // The core group.
  EXPECT_EQ(spec.watches(1).mapping_case(), WatchedKind::kLabel);
  EXPECT_EQ(spec.watches(1).label().source_case(), LabelMapping::kNameLabel);
  EXPECT_EQ(spec.watches(1).label().name_label(), "example.com/webapp");
  ASSERT_EQ(spec.namespaces_size(), 1);
  EXPECT_EQ(spec.label_selector(), "tier in (front,back)");
  EXPECT_EQ(spec.finalizer(), "example.com/cleanup");
  EXPECT_EQ(spec.max_concurrent_reconciles(), 4u);
  EXPECT_TRUE(spec.has_resync_period());
  EXPECT_EQ(spec.resync_period().seconds(), 600);
  ASSERT_EQ(spec.schedules_size(), 1);
  EXPECT_EQ(spec.schedules(0).cron(), "0 3 * * *");
  EXPECT_EQ(spec.schedules(0).time_zone(), "");
  EXPECT_FALSE(spec.predicates().primary_status_changes());
  EXPECT_TRUE(spec.predicates().ignore_child_status_changes());
  EXPECT_TRUE(spec.request_contents().children());
  EXPECT_FALSE(spec.request_contents().related_objects());
  ASSERT_EQ(spec.request_contents().strip_fields_size(), 1);
}

TEST_F(PluginRoundTripTest, ReconcileStreamMatchesResponsesByRequestId) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  std::unique_ptr<grpc::ClientReaderWriter<ReconcileRequest, ReconcileResponse>> stream =
      stub_->Reconcile(&ctx);
  const std::vector<uint64_t> ids = {1, 2, 3};
  for (uint64_t id : ids) ASSERT_TRUE(stream->Write(MakeReconcile(id)));
  ReconcileRequest cancel;
  cancel.set_request_id(7);
  cancel.mutable_cancel()->set_reason("deadline exceeded");
  ASSERT_TRUE(stream->Write(cancel));
  ASSERT_TRUE(stream->WritesDone());

  std::vector<uint64_t> order;
  std::map<uint64_t, ReconcileResponse> by_id;
  ReconcileResponse resp;
  while (order.size() < 10 && stream->Read(&resp)) {
    order.push_back(resp.request_id());
    by_id[resp.request_id()] = resp;
  }
  grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(order, (std::vector<uint64_t>{3, 2, 1}));  // Answered in reverse order.

  for (uint64_t id : ids) {
    SCOPED_TRACE(id);
    ASSERT_EQ(by_id.count(id), 1u);
    const ReconcileResponse& got = by_id[id];
    ReconcileResponse want = MakeResponse(id, MakeReconcile(id).reconcile());
    EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString());
    ASSERT_EQ(got.desired_objects_size(), 1);
    EXPECT_EQ(got.desired_objects(0), want.desired_objects(0));
    ASSERT_EQ(got.patches_size(), 2);
    EXPECT_EQ(got.patches(0).target(), PATCH_TARGET_OWNED);
    EXPECT_EQ(got.patches(0).type(), PATCH_TYPE_JSON_PATCH);
    EXPECT_EQ(got.patches(0).patch(), want.patches(0).patch());
    EXPECT_EQ(got.patches(0).resource_version(), absl::StrCat(1000 + id));
    EXPECT_EQ(got.patches(1).target(), PATCH_TARGET_PRIMARY);
    EXPECT_EQ(got.patches(1).type(), PATCH_TYPE_MERGE_PATCH);
    EXPECT_EQ(got.patches(1).name(), "");
    EXPECT_EQ(got.status(), absl::StrCat(R"({"observedReplicas":)", id, "}"));
    ASSERT_EQ(got.conditions_size(), 1);
    EXPECT_EQ(got.conditions(0).status(), CONDITION_STATUS_FALSE);
    EXPECT_EQ(got.conditions(0).message(), absl::StrCat("waiting for app-", id));
    ASSERT_EQ(got.events_size(), 1);
    EXPECT_EQ(got.events(0).type(), EVENT_TYPE_WARNING);
    ASSERT_TRUE(got.has_requeue_after());
    EXPECT_EQ(got.requeue_after().seconds(), static_cast<int64_t>(id) * 60);
    EXPECT_EQ(got.requeue_after().nanos(), 500000000);
    EXPECT_EQ(got.error().kind(), id % 2 == 0 ? ERROR_KIND_TERMINAL : ERROR_KIND_RETRYABLE);
    EXPECT_EQ(got.finalized(), id == 3);
  }

  // What the plugin received survived as well: the cancel notice and every request field.
  const std::vector<ReconcileRequest> seen = plugin_.stream_requests();
  ASSERT_EQ(seen.size(), 4u);
  for (size_t i = 0; i < ids.size(); ++i) {
    SCOPED_TRACE(ids[i]);
    const ReconcileRequest want = MakeReconcile(ids[i]);
    ASSERT_EQ(seen[i].payload_case(), ReconcileRequest::kReconcile);
    EXPECT_EQ(seen[i].SerializeAsString(), want.SerializeAsString());
    const ReconcileCall& call = seen[i].reconcile();
    EXPECT_EQ(call.object(), ObjectJson(ids[i]));  // Raw JSON bytes, UTF-8 escapes intact.
    ASSERT_EQ(call.related_objects_size(), 1);
    EXPECT_EQ(call.related_objects(0).object().size(), 30u);  // Embedded NUL kept.
    EXPECT_EQ(call.deadline().nanos(), 123456789);
    EXPECT_EQ(call.reason(), want.reconcile().reason());
  }
  EXPECT_EQ(seen[3].request_id(), 7u);
  ASSERT_EQ(seen[3].payload_case(), ReconcileRequest::kCancel);
  EXPECT_EQ(seen[3].cancel().reason(), "deadline exceeded");
}

TEST_F(PluginRoundTripTest, MessageAboveGrpcDefaultLimitPasses) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = stub_->Reconcile(&ctx);
  ReconcileRequest req = MakeReconcile(42);
  std::string big = "{\"pad\":\"" + std::string(kBigObjectBytes, 'x') + "\"}";
  req.mutable_reconcile()->set_object(big);
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->WritesDone());
  ReconcileResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.request_id(), 42u);
  EXPECT_FALSE(stream->Read(&resp));
  ASSERT_TRUE(stream->Finish().ok());
  const std::vector<ReconcileRequest> seen = plugin_.stream_requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].reconcile().object(), big);
}

// Unset enums read as their _UNSPECIFIED zero value, which receivers reject; unset messages read
// as defaults; a value unknown to this version survives a round trip as its number.
TEST(PluginMessagesTest, UnsetFieldsReadAsZero) {
  ReconcileResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(ReconcileResponse().SerializeAsString()));
  EXPECT_EQ(parsed.error().kind(), ERROR_KIND_UNSPECIFIED);
  EXPECT_FALSE(parsed.has_error());
  EXPECT_FALSE(parsed.has_requeue_after());
  EXPECT_EQ(Patch().target(), PATCH_TARGET_UNSPECIFIED);
  EXPECT_EQ(Patch().type(), PATCH_TYPE_UNSPECIFIED);
  EXPECT_EQ(Condition().status(), CONDITION_STATUS_UNSPECIFIED);
  EXPECT_EQ(Event().type(), EVENT_TYPE_UNSPECIFIED);
  EXPECT_EQ(ReconcileCall().reason(), REASON_UNSPECIFIED);
  EXPECT_EQ(ReconcileRequest().payload_case(), ReconcileRequest::PAYLOAD_NOT_SET);
  EXPECT_EQ(WatchedKind().mapping_case(), WatchedKind::MAPPING_NOT_SET);
  EXPECT_EQ(static_cast<int>(CAPABILITY_UNSPECIFIED), 0);

  Event future;
  future.set_type(static_cast<EventType>(42));  // A value from a later version.
  Event back;
  ASSERT_TRUE(back.ParseFromString(future.SerializeAsString()));
  EXPECT_EQ(static_cast<int>(back.type()), 42);
  EXPECT_FALSE(EventType_IsValid(back.type()));
}

}  // namespace
}  // namespace ctrlhost::plugin::v1alpha1
