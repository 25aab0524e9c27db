#include "runtime/plugin/testing/test_plugin.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "nlohmann/json.hpp"
#include "runtime/common/mutex.h"

namespace ctrlhost::plugin::testing {

namespace health = ::grpc::health::v1;

// grpc.health.v1 for "" and the plugin service: Check, and Watch unless `watch` is false
// (UNIMPLEMENTED, as from a server that only has Check). Answers NOT_SERVING to the first
// `not_serving_checks` checks, then SERVING (never when `serving` is false); SetServing changes
// it at run time and every Watch stream sends the new status. Called on gRPC's threads.
class TestPlugin::HealthService final : public health::Health::Service {
 public:
  HealthService(bool serving, int not_serving_checks, bool watch)
      : not_serving_checks_(not_serving_checks), watch_(watch), serving_(serving) {}

  void SetServing(bool serving) {
    common::MutexLock lock(&mu_);
    serving_ = serving;
    not_serving_checks_ = 0;
    cv_.SignalAll();
  }

  grpc::Status Check(grpc::ServerContext*, const health::HealthCheckRequest* request,
                     health::HealthCheckResponse* response) override {
    if (!Known(request->service())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    common::MutexLock lock(&mu_);
    const bool starting = not_serving_checks_ > 0;
    if (starting) --not_serving_checks_;
    const bool serving = serving_ && !starting;
    ++checks_;
    if (!serving) ++not_serving_answers_;
    response->set_status(serving ? health::HealthCheckResponse::SERVING
                                 : health::HealthCheckResponse::NOT_SERVING);
    return grpc::Status::OK;
  }

  // Check calls answered (SERVING or NOT_SERVING), and how many of them NOT_SERVING.
  int checks() const {
    common::MutexLock lock(&mu_);
    return checks_;
  }
  int not_serving_answers() const {
    common::MutexLock lock(&mu_);
    return not_serving_answers_;
  }

  grpc::Status Watch(grpc::ServerContext* context, const health::HealthCheckRequest* request,
                     grpc::ServerWriter<health::HealthCheckResponse>* writer) override {
    if (!watch_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no Watch here");
    health::HealthCheckResponse answer;
    if (!Known(request->service())) {
      answer.set_status(health::HealthCheckResponse::SERVICE_UNKNOWN);
      writer->Write(answer);
      return grpc::Status::OK;
    }
    int sent = -1;  // the last status written
    for (;;) {
      int status;
      {
        common::MutexLock lock(&mu_);
        status = serving_ ? health::HealthCheckResponse::SERVING
                          : health::HealthCheckResponse::NOT_SERVING;
        if (status == sent) {
          cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));  // then looks at IsCancelled
          if (context->IsCancelled()) return grpc::Status::CANCELLED;
          continue;
        }
      }
      answer.set_status(static_cast<health::HealthCheckResponse::ServingStatus>(status));
      if (!writer->Write(answer)) return grpc::Status::CANCELLED;
      sent = status;
    }
  }

 private:
  static bool Known(const std::string& service) {
    return service.empty() || service == "ctrlhost.plugin.v1alpha1.ControllerPluginService";
  }

  mutable common::Mutex mu_;
  common::CondVar cv_;
  int not_serving_checks_ ABSL_GUARDED_BY(mu_);
  int checks_ ABSL_GUARDED_BY(mu_) = 0;
  int not_serving_answers_ ABSL_GUARDED_BY(mu_) = 0;
  const bool watch_;
  bool serving_ ABSL_GUARDED_BY(mu_);
};

class TestPlugin::Service final : public pluginpb::ControllerPluginService::Service {
 public:
  explicit Service(TestPluginOptions options) : options_(std::move(options)) {}

  grpc::Status Describe(grpc::ServerContext*, const pluginpb::DescribeRequest* request,
                        pluginpb::DescribeResponse* response) override {
    {
      common::MutexLock lock(&mu_);
      last_describe_ = *request;
    }
    if (options_.describe == "unavailable") {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not today");
    }
    response->set_protocol_version(options_.describe == "bad-version" ? "v9" : "v1alpha1");
    response->set_plugin_name("test-plugin");
    response->set_plugin_version("0.0.1");
    if (options_.cancellation) response->add_capabilities(pluginpb::CAPABILITY_CANCELLATION);
    response->add_capabilities(pluginpb::CAPABILITY_CHILDREN);
    if (options_.describe == "no-controllers") return grpc::Status::OK;
    if (options_.describe == "configmap") {
      // The hello example's shape: ConfigMaps labelled hello=true, owning ConfigMaps.
      response->add_capabilities(pluginpb::CAPABILITY_SERVER_SIDE_APPLY);
      pluginpb::ControllerSpec* c = response->add_controllers();
      c->set_name("hello");
      c->mutable_primary()->set_version("v1");
      c->mutable_primary()->set_kind("ConfigMap");
      c->set_label_selector("hello=true");
      pluginpb::OwnedKind* owned = c->add_owns();
      owned->mutable_kind()->set_version("v1");
      owned->mutable_kind()->set_kind("ConfigMap");
      c->mutable_request_contents()->set_children(true);
      return grpc::Status::OK;
    }
    if (absl::StartsWith(options_.describe, "many:")) {
      // "many:N": N controllers echo-0 .. echo-(N-1) of one kind (the limits' tests).
      int n = 0;
      if (!absl::SimpleAtoi(options_.describe.substr(5), &n)) n = 0;
      for (int i = 0; i < n; ++i) {
        pluginpb::ControllerSpec* c = response->add_controllers();
        c->set_name(absl::StrCat("echo-", i));
        c->mutable_primary()->set_group("example.com");
        c->mutable_primary()->set_version("v1");
        c->mutable_primary()->set_kind("Echo");
      }
      return grpc::Status::OK;
    }
    // "renamed": a later release that dropped "other" and added "third"; "distinct": names no
    // other mode uses.
    const bool distinct = options_.describe == "distinct";
    for (const char* name :
         {distinct ? "alpha" : "echo", distinct                         ? "beta"
                                       : options_.describe == "renamed" ? "third"
                                                                        : "other"}) {
      pluginpb::ControllerSpec* c = response->add_controllers();
      c->set_name(options_.describe == "duplicate" ? "echo" : name);
      if (options_.describe != "no-primary") {
        c->mutable_primary()->set_group("example.com");
        c->mutable_primary()->set_version("v1");
        c->mutable_primary()->set_kind("Echo");
      }
      c->mutable_request_contents()->set_children(true);
      if (options_.describe == "needs-capability") {
        c->mutable_request_contents()->set_related_objects(true);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Reconcile(grpc::ServerContext* context,
                         grpc::ServerReaderWriter<pluginpb::ReconcileResponse,
                                                  pluginpb::ReconcileRequest>* stream) override {
    {
      auto found = context->client_metadata().find("ctrlhost-capabilities");
      common::MutexLock lock(&mu_);
      last_stream_capabilities_ = found == context->client_metadata().end()
                                      ? std::string()
                                      : std::string(found->second.data(), found->second.size());
    }
    common::Mutex write_mu;  // one writer at a time on this stream
    std::vector<pluginpb::ReconcileRequest> held;
    pluginpb::ReconcileRequest request;
    auto answer = [&](const pluginpb::ReconcileRequest& r) {
      pluginpb::ReconcileResponse response;
      const std::string& name = r.reconcile().name();
      response.set_request_id(r.request_id());
      uint64_t size = 0;
      if (absl::StartsWith(name, "flood-") && absl::SimpleAtoi(name.substr(6), &size)) {
        // `size` answers to requests that were never sent, then the real one.
        common::MutexLock lock(&write_mu);
        for (uint64_t i = 0; i < size; ++i) {
          pluginpb::ReconcileResponse garbage;
          garbage.set_request_id(r.request_id() + 1000000 + i);
          stream->Write(garbage);
        }
      }
      if (absl::StartsWith(name, "huge-") && absl::SimpleAtoi(name.substr(5), &size)) {
        response.set_status(std::string(size, 'x'));
      } else if (absl::StartsWith(name, "desire-")) {
        // Desires the ConfigMap named by the rest of the name; an event lists the children the
        // request carried as "name:uid of its controller" (none: "name:").
        response.add_desired_objects(
            absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")",
                         name.substr(7), R"("},"data":{"from":")", name, R"("}})"));
        std::vector<std::string> children;
        for (const pluginpb::RawObject& child : r.reconcile().children()) {
          const auto object = nlohmann::json::parse(child.object(), nullptr, false);
          std::string entry = object.is_object() ? object["metadata"].value("name", "") : "";
          absl::StrAppend(&entry, ":");
          if (object.is_object() && object["metadata"].contains("ownerReferences")) {
            for (const auto& ref : object["metadata"]["ownerReferences"]) {
              if (ref.is_object() && ref.value("controller", false)) {
                absl::StrAppend(&entry, ref.value("uid", ""));
              }
            }
          }
          children.push_back(std::move(entry));
        }
        pluginpb::Event* event = response.add_events();
        event->set_type(pluginpb::EVENT_TYPE_NORMAL);
        event->set_reason("Children");
        event->set_message(absl::StrJoin(children, ","));
      } else {
        if (name == "wrong-id") response.set_request_id(r.request_id() + 1000000);
        response.set_status(
            options_.status_tag.empty()
                ? absl::StrCat(R"({"seen":")", name, R"("})")
                : absl::StrCat(R"({"seen":")", name, R"(","tag":")", options_.status_tag, R"("})"));
        if (name == "budget") {  // answers the relative timeout it was given
          const auto& t = r.reconcile().timeout();
          response.set_status(
              absl::StrCat(R"({"timeout_ms":)", t.seconds() * 1000 + t.nanos() / 1000000, "}"));
        }
      }
      common::MutexLock lock(&write_mu);
      stream->Write(response);
    };
    while (stream->Read(&request)) {
      if (request.has_cancel()) {
        common::MutexLock lock(&mu_);
        cancelled_.push_back(request.request_id());
        continue;
      }
      if (request.has_start_tasks()) {
        // Background tasks: "enqueue" the key from-CONTROLLER at once (request_id 0).
        pluginpb::ReconcileResponse enqueue;
        enqueue.mutable_task_enqueue()->set_controller(request.start_tasks().controller());
        enqueue.mutable_task_enqueue()->set_task("echo");
        enqueue.mutable_task_enqueue()->set_namespace_("default");
        enqueue.mutable_task_enqueue()->set_name("from-" + request.start_tasks().controller());
        common::MutexLock lock(&write_mu);
        stream->Write(enqueue);
        continue;
      }
      if (request.payload_case() != pluginpb::ReconcileRequest::kReconcile)
        continue;  // other notices
      int received;
      {
        common::MutexLock lock(&mu_);
        received = ++received_;
      }
      if (options_.crash_after > 0 && received >= options_.crash_after) std::_Exit(42);
      const std::string& name = request.reconcile().name();
      if (name == "hang" || options_.hang_all) continue;
      if (name == "end-stream") return grpc::Status::OK;
      if (name == "fail-stream") return grpc::Status(grpc::StatusCode::INTERNAL, "fail-stream");
      if (name == "hold") {
        held.push_back(request);
        continue;
      }
      answer(request);
      if (name == "release") {
        for (auto it = held.rbegin(); it != held.rend(); ++it) answer(*it);
        held.clear();
      }
    }
    return grpc::Status::OK;
  }

  std::vector<uint64_t> cancelled() const {
    common::MutexLock lock(&mu_);
    return cancelled_;
  }
  int received() const {
    common::MutexLock lock(&mu_);
    return received_;
  }
  std::string last_stream_capabilities() const {
    common::MutexLock lock(&mu_);
    return last_stream_capabilities_;
  }
  pluginpb::DescribeRequest last_describe() const {
    common::MutexLock lock(&mu_);
    return last_describe_;
  }

 private:
  const TestPluginOptions options_;
  mutable common::Mutex mu_;
  std::vector<uint64_t> cancelled_ ABSL_GUARDED_BY(mu_);
  int received_ ABSL_GUARDED_BY(mu_) = 0;
  pluginpb::DescribeRequest last_describe_ ABSL_GUARDED_BY(mu_);
  std::string last_stream_capabilities_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<TestPlugin>> TestPlugin::Start(const std::string& address,
                                                              TestPluginOptions options) {
  std::unique_ptr<TestPlugin> plugin(new TestPlugin());
  const std::string health_mode = options.health;
  const auto configure = options.configure;
  const auto credentials =
      options.credentials != nullptr ? options.credentials : grpc::InsecureServerCredentials();
  plugin->service_ = std::make_unique<Service>(std::move(options));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, credentials, &plugin->port_);
  builder.SetMaxReceiveMessageSize(128 << 20);
  builder.SetMaxSendMessageSize(128 << 20);
  builder.RegisterService(plugin->service_.get());
  if (health_mode != "none") {
    plugin->health_ = std::make_unique<HealthService>(health_mode != "not-serving",
                                                      health_mode == "starting" ? 3 : 0,
                                                      health_mode != "check-only");
    builder.RegisterService(plugin->health_.get());
  }
  if (configure) configure(builder);
  plugin->server_ = builder.BuildAndStart();
  if (plugin->server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("test plugin: cannot listen on ", address));
  }
  return plugin;
}

TestPlugin::~TestPlugin() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }
}

void TestPlugin::SetServing(bool serving) {
  if (health_ != nullptr) health_->SetServing(serving);
}

int TestPlugin::health_checks() const { return health_ != nullptr ? health_->checks() : 0; }

int TestPlugin::health_not_serving_answers() const {
  return health_ != nullptr ? health_->not_serving_answers() : 0;
}

std::vector<uint64_t> TestPlugin::cancelled() const { return service_->cancelled(); }
int TestPlugin::received() const { return service_->received(); }
pluginpb::DescribeRequest TestPlugin::last_describe() const { return service_->last_describe(); }
std::string TestPlugin::last_stream_capabilities() const {
  return service_->last_stream_capabilities();
}

}  // namespace ctrlhost::plugin::testing
