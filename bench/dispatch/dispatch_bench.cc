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
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/dispatch/harness.h"
#include "bench/dispatch/loops.h"
#include "bench/report.h"
#include "grpcpp/grpcpp.h"
#include "runtime/plugin/session.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace ctrlhost::bench {
namespace {

// The benchmark's runs; a failed run ends it (the figures would be meaningless).
Measured MustRun(const char* what, absl::StatusOr<Measured> measured) {
  if (!measured.ok()) {
    fprintf(stderr, "%s: %s\n", what, measured.status().ToString().c_str());
    std::exit(1);
  }
  if (measured->errors > 0) fprintf(stderr, "%s: %d errors\n", what, measured->errors);
  return *measured;
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
    const Measured probe =
        MustRun("session", RunSession(address, in_flight, in_flight == 1 ? 500 : 5000));
    const int total = std::max(1000, static_cast<int>(probe.per_second * seconds));
    const Measured session = MustRun("session", RunSession(address, in_flight, total));
    const Measured raw = MustRun("raw", RunRaw(address, in_flight, total));
    const Measured unary = MustRun("unary", RunUnary(address, in_flight, total));
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
