#include "bench/dispatch/loops.h"

#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/session.h"

namespace ctrlhost::bench {
namespace {

using common::Mutex;
using common::MutexLock;

pluginpb::ReconcileResponse NoOpResponse(const pluginpb::ReconcileRequest& request) {
  pluginpb::ReconcileResponse response;
  response.set_request_id(request.request_id());
  response.set_status(absl::StrCat(R"({"seen":")", request.reconcile().name(), R"("})"));
  return response;
}

// One closed loop over a Session. Shared with every in-flight callback (shared_ptr), which
// starts the next request only when Collector::RecordAndClaim says one remains: then an answer
// is still outstanding, so RunSession has not returned and the session is alive.
struct SessionLoop : std::enable_shared_from_this<SessionLoop> {
  SessionLoop(plugin::Session* s, int total) : session(s), collector(total) {}
  void Send() {
    const absl::Time sent = absl::Now();
    std::shared_ptr<SessionLoop> self = shared_from_this();
    session->Dispatch(call, sent + absl::Seconds(60), [self, sent](controller::DispatchResult r) {
      if (self->collector.RecordAndClaim(absl::Now() - sent, r.response.ok())) {
        self->Send();
      }
    });
  }
  plugin::Session* const session;
  const pluginpb::ReconcileCall call = MakeCall();
  Collector collector;
};

// The unary loop: one ClientUnaryReactor per call, owning itself and a reference to the loop, so
// the stub and the collector live as long as a call may use them.
struct UnaryLoop : std::enable_shared_from_this<UnaryLoop> {
  UnaryLoop(const std::string& address, int total)
      : stub(plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes)), collector(total) {
    *request.mutable_reconcile() = MakeCall();
  }
  // gRPC hands the reactor to its threads through uninstrumented code: `published_` shows
  // ThreadSanitizer the construction happen before OnDone.
  class Call : public grpc::ClientUnaryReactor {
   public:
    Call(std::shared_ptr<UnaryLoop> loop, uint64_t id) : loop_(std::move(loop)) {
      request_ = loop_->request;
      request_.set_request_id(id);
      sent_ = absl::Now();
      loop_->stub.PrepareUnaryCall(&context_, kUnaryMethod, grpc::StubOptions(), &request_,
                                   &response_, this);
      published_.store(true, std::memory_order_release);
      StartCall();
    }
    void OnDone(const grpc::Status& status) override {
      (void)published_.load(std::memory_order_acquire);
      const absl::Duration latency = absl::Now() - sent_;
      const bool ok = status.ok();
      std::shared_ptr<UnaryLoop> loop = std::move(loop_);
      delete this;
      if (loop->collector.RecordAndClaim(latency, ok)) loop->Send();
    }

   private:
    std::shared_ptr<UnaryLoop> loop_;
    grpc::ClientContext context_;
    pluginpb::ReconcileRequest request_;
    pluginpb::ReconcileResponse response_;
    absl::Time sent_;
    std::atomic<bool> published_{false};
  };
  void Send() { new Call(shared_from_this(), next_id.fetch_add(1)); }

  grpc::TemplatedGenericStub<pluginpb::ReconcileRequest, pluginpb::ReconcileResponse> stub;
  pluginpb::ReconcileRequest request;  // constant once built
  std::atomic<uint64_t> next_id{1};
  Collector collector;
};

}  // namespace

grpc::ServerGenericBidiReactor* UnaryService::CreateReactor(
    grpc::GenericCallbackServerContext* ctx) {
  if (ctx->method() != kUnaryMethod) return grpc::CallbackGenericService::CreateReactor(ctx);
  // gRPC hands the reactor between its threads through uninstrumented code: `published_`
  // (release after the constructor's and OnReadDone's writes, acquire in each reaction) shows
  // ThreadSanitizer what happened before, as plugin::Session's stream does.
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() {
      published_.store(true, std::memory_order_release);
      StartRead(&in_);
    }
    void OnReadDone(bool ok) override {
      (void)published_.load(std::memory_order_acquire);
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      pluginpb::ReconcileRequest request;
      grpc::ProtoBufferReader reader(&in_);
      if (!request.ParseFromZeroCopyStream(&reader)) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad request"));
        return;
      }
      bool own = false;
      grpc::GenericSerialize<grpc::ProtoBufferWriter, pluginpb::ReconcileResponse>(
          NoOpResponse(request), &out_, &own);
      published_.store(true, std::memory_order_release);  // out_ is ready for OnDone
      StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override {
      (void)published_.load(std::memory_order_acquire);
      delete this;
    }

   private:
    grpc::ByteBuffer in_;
    grpc::ByteBuffer out_;
    std::atomic<bool> published_{false};
  };
  return new Reactor();
}

absl::StatusOr<Measured> RunSession(const std::string& address, int in_flight, int total) {
  plugin::SessionOptions options;
  options.max_in_flight = static_cast<uint32_t>(in_flight);
  options.instance_name = "bench-1";
  absl::StatusOr<std::unique_ptr<plugin::Session>> session =
      plugin::Session::Open(plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes), options);
  if (!session.ok()) return session.status();
  auto loop = std::make_shared<SessionLoop>(session->get(), total);
  const absl::Time start = absl::Now();
  for (int i = 0; i < in_flight && loop->collector.TryStart(); ++i) loop->Send();
  return loop->collector.Wait(start);
}

absl::StatusOr<Measured> RunRaw(const std::string& address, int in_flight, int total) {
  auto stub = pluginpb::ControllerPluginService::NewStub(
      plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes));
  grpc::ClientContext context;
  auto stream = stub->Reconcile(&context);
  pluginpb::ReconcileRequest request;
  *request.mutable_reconcile() = MakeCall();
  std::vector<absl::Time> sent(total + 1);
  Mutex mu;
  common::CondVar cv;
  int credits = in_flight;  // guarded by mu
  std::thread writer([&] {
    for (int i = 1; i <= total; ++i) {
      {
        MutexLock lock(&mu);
        while (credits == 0) cv.Wait(&mu);
        --credits;
        sent[i] = absl::Now();
      }
      request.set_request_id(static_cast<uint64_t>(i));
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
  });
  Collector collector(total);
  const absl::Time start = absl::Now();
  pluginpb::ReconcileResponse response;
  int received = 0;
  for (; received < total && stream->Read(&response); ++received) {
    absl::Time when;
    {
      MutexLock lock(&mu);
      const uint64_t id = response.request_id();
      when = id >= 1 && id <= static_cast<uint64_t>(total) ? sent[id] : absl::Now();
      ++credits;
      cv.Signal();
    }
    collector.Record(absl::Now() - when);
  }
  if (received < total) {
    context.TryCancel();
    {
      MutexLock lock(&mu);
      credits = total;  // let the writer run out
      cv.SignalAll();
    }
    writer.join();
    stream->Finish();
    return absl::UnavailableError(
        absl::StrCat("raw stream ended after ", received, " of ", total, " answers"));
  }
  writer.join();
  Measured result = collector.Wait(start);
  stream->Finish();
  return result;
}

absl::StatusOr<Measured> RunUnary(const std::string& address, int in_flight, int total) {
  auto loop = std::make_shared<UnaryLoop>(address, total);
  const absl::Time start = absl::Now();
  for (int i = 0; i < in_flight && loop->collector.TryStart(); ++i) loop->Send();
  return loop->collector.Wait(start);
}

}  // namespace ctrlhost::bench
