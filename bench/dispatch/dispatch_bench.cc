// Dispatch benchmark: reconciles per second and latency through plugin::Session to the C++
// no-op test plugin over a Unix socket, at 1 and 64 requests in flight, against two baselines
// measured in the same run over the same socket and server:
//   raw    a bare gRPC bidi stream (sync client, a writer and a reader thread) sending the same
//          ReconcileRequest bytes and reading the same responses: the practical limit;
//   unary  one unary gRPC call per reconcile (callback API), the Crossplane-functions pattern.
// The plugin runs in this process (gRPC sync server for the stream, callback generic service for
// the unary method), so all three share the machine's cores the same way.
//
//   bazel run -c opt //bench/dispatch:dispatch_bench [-- --json] [-- --seconds=2]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/dispatch/harness.h"
#include "bench/report.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/session.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::bench {
namespace {

namespace pb = ::ctrlhost::plugin::v1alpha1;
using common::Mutex;
using common::MutexLock;

constexpr char kUnaryMethod[] = "/ctrlhost.bench.UnaryReconcile/Reconcile";

// A ~1 KiB primary like the ones operators reconcile.
pb::ReconcileResponse NoOpResponse(const pb::ReconcileRequest& request) {
  pb::ReconcileResponse response;
  response.set_request_id(request.request_id());
  response.set_status(absl::StrCat(R"({"seen":")", request.reconcile().name(), R"("})"));
  return response;
}

// The unary baseline's server side: parse, answer like the plugin, finish.
class UnaryService : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() != kUnaryMethod) return grpc::CallbackGenericService::CreateReactor(ctx);
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&in_); }
      void OnReadDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
          return;
        }
        pb::ReconcileRequest request;
        grpc::ProtoBufferReader reader(&in_);
        if (!request.ParseFromZeroCopyStream(&reader)) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad request"));
          return;
        }
        bool own = false;
        grpc::GenericSerialize<grpc::ProtoBufferWriter, pb::ReconcileResponse>(
            NoOpResponse(request), &out_, &own);
        StartWriteAndFinish(&out_, grpc::WriteOptions(), grpc::Status::OK);
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer in_;
      grpc::ByteBuffer out_;
    };
    return new Reactor();
  }
};

using Result = Measured;

Result RunSession(const std::string& address, int in_flight, int total) {
  plugin::SessionOptions options;
  options.max_in_flight = static_cast<uint32_t>(in_flight);
  options.instance_name = "bench-1";
  auto session =
      plugin::Session::Open(plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes), options);
  if (!session.ok()) {
    fprintf(stderr, "session: %s\n", session.status().ToString().c_str());
    std::exit(1);
  }
  const pb::ReconcileCall call = MakeCall();
  Collector collector(total);
  std::atomic<int> errors{0};
  std::function<void()> start_one = [&] {
    if (!collector.TryStart()) return;
    const absl::Time sent = absl::Now();
    (*session)->Dispatch(call, sent + absl::Seconds(60),
                         [&, sent](absl::StatusOr<pb::ReconcileResponse> r) {
                           if (!r.ok()) errors.fetch_add(1);
                           collector.Record(absl::Now() - sent);
                           start_one();
                         });
  };
  const absl::Time start = absl::Now();
  for (int i = 0; i < in_flight; ++i) start_one();
  Result result = collector.Wait(start);
  if (errors.load() > 0) fprintf(stderr, "session: %d errors\n", errors.load());
  return result;
}

Result RunRaw(const std::string& address, int in_flight, int total) {
  auto stub = pb::ControllerPluginService::NewStub(
      plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes));
  grpc::ClientContext context;
  auto stream = stub->Reconcile(&context);
  pb::ReconcileRequest request;
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
      stream->Write(request);
    }
    stream->WritesDone();
  });
  Collector collector(total);
  const absl::Time start = absl::Now();
  pb::ReconcileResponse response;
  for (int received = 0; received < total && stream->Read(&response); ++received) {
    absl::Time when;
    {
      MutexLock lock(&mu);
      when = sent[response.request_id()];
      ++credits;
      cv.Signal();
    }
    collector.Record(absl::Now() - when);
  }
  writer.join();
  Result result = collector.Wait(start);
  stream->Finish();
  return result;
}

Result RunUnary(const std::string& address, int in_flight, int total) {
  grpc::TemplatedGenericStub<pb::ReconcileRequest, pb::ReconcileResponse> stub(
      plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes));
  pb::ReconcileRequest request;
  *request.mutable_reconcile() = MakeCall();
  Collector collector(total);
  std::atomic<uint64_t> next_id{1};
  std::atomic<int> errors{0};
  struct Call {
    grpc::ClientContext context;
    pb::ReconcileRequest request;
    pb::ReconcileResponse response;
    absl::Time sent;
  };
  std::function<void()> start_one = [&] {
    if (!collector.TryStart()) return;
    auto* call = new Call();
    call->request = request;
    call->request.set_request_id(next_id.fetch_add(1));
    call->sent = absl::Now();
    stub.UnaryCall(&call->context, kUnaryMethod, grpc::StubOptions(), &call->request,
                   &call->response, [&, call](grpc::Status status) {
                     if (!status.ok()) errors.fetch_add(1);
                     collector.Record(absl::Now() - call->sent);
                     delete call;
                     start_one();
                   });
  };
  const absl::Time start = absl::Now();
  for (int i = 0; i < in_flight; ++i) start_one();
  Result result = collector.Wait(start);
  if (errors.load() > 0) fprintf(stderr, "unary: %d errors\n", errors.load());
  return result;
}

int Main(int argc, char** argv) {
  Reporter reporter("dispatch", argc, argv);
  double seconds = 2;
  for (const std::string& arg : reporter.args()) {
    if (arg.rfind("--seconds=", 0) == 0) (void)absl::SimpleAtod(arg.substr(10), &seconds);
  }
  char dir_template[] = "/tmp/dispatch-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string socket = absl::StrCat(dir_template, "/plugin.sock");
  const std::string address = absl::StrCat("unix://", socket);
  UnaryService unary_service;
  plugin::testing::TestPluginOptions options;
  options.configure = [&](grpc::ServerBuilder& builder) {
    builder.RegisterCallbackGenericService(&unary_service);
  };
  auto server = plugin::testing::TestPlugin::Start(address, options);
  if (!server.ok()) {
    fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }

  for (int in_flight : {1, 64}) {
    // Calibrate the request count to about `seconds` per mode with a short session run.
    const Result probe = RunSession(address, in_flight, in_flight == 1 ? 500 : 5000);
    const int total = std::max(1000, static_cast<int>(probe.per_second * seconds));
    const Result session = RunSession(address, in_flight, total);
    const Result raw = RunRaw(address, in_flight, total);
    const Result unary = RunUnary(address, in_flight, total);
    const std::string at = absl::StrCat(" @", in_flight, " in flight");

    Figure vs_raw;
    vs_raw.metric = "session reconciles/s vs raw bidi" + at;
    vs_raw.value = session.per_second;
    vs_raw.unit = "/s";
    vs_raw.baseline = raw.per_second;
    if (in_flight == 64) {
      vs_raw.target = ">= 50000/s and >= 0.5x";
      vs_raw.met = session.per_second >= 50000 && session.per_second >= 0.5 * raw.per_second;
    }
    reporter.Add(vs_raw);

    Figure vs_unary;
    vs_unary.metric = "session reconciles/s vs unary per call" + at;
    vs_unary.value = session.per_second;
    vs_unary.unit = "/s";
    vs_unary.baseline = unary.per_second;
    if (in_flight == 64) {
      vs_unary.target = ">= 2x";
      vs_unary.met = session.per_second >= 2 * unary.per_second;
    }
    reporter.Add(vs_unary);

    for (const auto& [name, s, r] : {std::make_tuple("p50", session.p50_us, raw.p50_us),
                                     std::make_tuple("p99", session.p99_us, raw.p99_us)}) {
      Figure latency;
      latency.metric = absl::StrCat("session latency ", name, " vs raw bidi", at);
      latency.value = s;
      latency.unit = "us";
      latency.baseline = r;
      reporter.Add(latency);
    }
    Figure unary_latency;
    unary_latency.metric = "unary latency p50/p99" + at;
    unary_latency.value = unary.p50_us;
    unary_latency.unit = absl::StrCat("us (p99 ", static_cast<int>(unary.p99_us), " us)");
    reporter.Add(unary_latency);
  }
  server->reset();
  unlink(socket.c_str());
  rmdir(dir_template);
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
