// A controller plugin for tests and benchmarks, with behaviour chosen by options (process-wide)
// and by each request's ReconcileCall.name (per request):
//   name "hang"         never answered (until cancelled: then forgotten)
//   name "hold"         answered only after a "release" request, in reverse order of arrival
//   name "release"      answered at once, then every held request (last held first)
//   name "huge-N"       answered with a status of N bytes
//   name "desire-X"     answered with a desired ConfigMap X and a Normal event "Children" whose
//                       message lists the request's children as "name:controller-uid,..."
//   name "wrong-id"     answered with request_id + 1000000 (an id the host never sent)
//   name "budget"       answered with status {"timeout_ms": N}: the relative timeout it got
//   name "end-stream"   not answered: the handler returns OK, ending the stream cleanly (as an
//                       SDK's drain does)
//   name "fail-stream"  not answered: the handler returns INTERNAL, breaking the stream
//   anything else       answered at once with status {"seen":"<name>"} (the no-op plugin)
// Used in-process by session tests (TestPlugin::Start) and as a real process by supervisor tests
// (test_plugin_main.cc, flags in its usage text). Not a model of a good plugin: see sdk/cpp.
//
// Thread-safe: gRPC's sync server runs the handlers on its threads; `mu_` guards the state.
#ifndef CTRLHOST_RUNTIME_PLUGIN_TESTING_TEST_PLUGIN_H_
#define CTRLHOST_RUNTIME_PLUGIN_TESTING_TEST_PLUGIN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace ctrlhost::plugin::testing {

struct TestPluginOptions {
  // "ok", "bad-version", "no-controllers", "duplicate", "no-primary", "needs-capability",
  // "unavailable" (Describe fails with UNAVAILABLE), "many:N" (N controllers echo-0 ..),
  // "configmap" (one controller "hello" of v1 ConfigMaps labelled hello=true, owning
  // ConfigMaps, with CAPABILITY_SERVER_SIDE_APPLY).
  std::string describe = "ok";
  // "serving", "not-serving", "starting" (NOT_SERVING to the first 3 checks, then SERVING),
  // "check-only" (serving; Watch is UNIMPLEMENTED), "none" (Health is not served). Check and
  // Watch answer for "" and the plugin service; SetServing flips both at run time.
  std::string health = "serving";
  // Advertise CAPABILITY_CANCELLATION.
  bool cancellation = true;
  // Reconciles of names "huge-N" answer a status of N bytes, "flood-N" first send N responses
  // to request ids never sent, "wrong-id" answers with a wrong id, "hang" never answers,
  // "hold" answers after the next "release". A StartTasks notice for controller C is answered
  // by a TaskEnqueue (request_id 0) of default/from-C; other notices are ignored.
  // When > 0, the process exits abruptly (_Exit(42)) on receiving this many reconciles.
  int crash_after = 0;
  // Every reconcile is treated as "hang": never answered (a plugin that is stuck).
  bool hang_all = false;
  // When set, the no-op answer's status also carries "tag": this value (another release that
  // answers differently, for shadow comparisons).
  std::string status_tag;
  // Called with the server builder before the server starts (benchmarks add services).
  std::function<void(grpc::ServerBuilder&)> configure;
  // Listening credentials; null means insecure.
  std::shared_ptr<grpc::ServerCredentials> credentials;
};

class TestPlugin {
 public:
  // Serves on `address` ("unix:///path" or "127.0.0.1:0"). The bound TCP port is port().
  static absl::StatusOr<std::unique_ptr<TestPlugin>> Start(const std::string& address,
                                                           TestPluginOptions options);
  ~TestPlugin();

  int port() const { return port_; }
  // Changes what the health service reports (Check and every open Watch); no-op without it.
  void SetServing(bool serving);
  // grpc.health.v1 Check calls answered so far (0 without the health service), and how many of
  // them were answered NOT_SERVING.
  int health_checks() const;
  int health_not_serving_answers() const;
  grpc::Server* server() { return server_.get(); }
  // Request ids the host cancelled, in arrival order.
  std::vector<uint64_t> cancelled() const;
  // Reconciles received so far.
  int received() const;
  // The last DescribeRequest received (empty before the first).
  pluginpb::DescribeRequest last_describe() const;
  // The `ctrlhost-capabilities` metadata of the last Reconcile stream opened ("" before).
  std::string last_stream_capabilities() const;

  class Service;
  class HealthService;

 private:
  TestPlugin() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ctrlhost::plugin::testing

#endif  // CTRLHOST_RUNTIME_PLUGIN_TESTING_TEST_PLUGIN_H_
