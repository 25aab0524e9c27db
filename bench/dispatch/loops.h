// The closed loops the dispatch benchmark compares, each sending MakeCall() `total` times with
// `in_flight` requests outstanding, against a plugin at `address` (the test plugin plus
// UnaryService, see dispatch_bench.cc):
//   RunSession  plugin::Session, the host's dispatcher;
//   RunRaw      a bare gRPC bidi stream (sync client, a writer and a reader thread);
//   RunUnary    one unary gRPC call per reconcile (callback API) to UnaryService.
// Each returns once every answer arrived and no callback of the run can touch its state any
// more: the state callbacks use is shared with them (a callback may still be running on a gRPC
// thread after the last answer woke the caller; issue 13, item 7).
//
// Thread-safe: loops may run concurrently; each owns its state.
#ifndef CTRLHOST_BENCH_DISPATCH_LOOPS_H_
#define CTRLHOST_BENCH_DISPATCH_LOOPS_H_

#include <string>

#include "absl/status/statusor.h"
#include "bench/dispatch/harness.h"
#include "grpcpp/generic/async_generic_service.h"

namespace ctrlhost::bench {

// The unary baseline's method, served by UnaryService.
inline constexpr char kUnaryMethod[] = "/ctrlhost.bench.UnaryReconcile/Reconcile";

// Answers kUnaryMethod like the test plugin answers a reconcile: parse, answer, finish.
// Register it on the plugin's server (TestPluginOptions::configure).
class UnaryService : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override;
};

absl::StatusOr<Measured> RunSession(const std::string& address, int in_flight, int total);
absl::StatusOr<Measured> RunRaw(const std::string& address, int in_flight, int total);
absl::StatusOr<Measured> RunUnary(const std::string& address, int in_flight, int total);

}  // namespace ctrlhost::bench

#endif  // CTRLHOST_BENCH_DISPATCH_LOOPS_H_
