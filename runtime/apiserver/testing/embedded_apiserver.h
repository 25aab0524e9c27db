// The one fixture for C++ tests that need a real Kubernetes-compatible API server: the embedded
// one (runtime/apiserver) started in process, HTTPS on 127.0.0.1 port 0, data in a fresh
// directory under $TEST_TMPDIR, with a kube::RestClient and a kube::Client on it through the
// kubeconfig it writes (the same path the host takes). It lives beside the API server, not in
// runtime/kube, so that no library of a lower layer depends on the server; tests of every layer
// use it (testonly). One per test suite is the usual use:
//
//   class MyTest : public ::testing::Test {
//    protected:
//     static void SetUpTestSuite() {
//       auto api = apiserver::testing::EmbeddedApiServer::Start("my_apiserver");
//       ASSERT_TRUE(api.ok()) << api.status();
//       api_ = api->release();
//     }
//     static void TearDownTestSuite() { delete api_; }
//     inline static apiserver::testing::EmbeddedApiServer* api_ = nullptr;
//   };
//   ... api_->client().Create(ref, json) ...
//
// Storage runs with sync "normal" (no fsync per write): tests of durability start the binary
// instead (e2e/apiserver). Thread-safe as its parts are: ApiServer, kube::RestClient and
// kube::Client are.
#ifndef CTRLHOST_RUNTIME_APISERVER_TESTING_EMBEDDED_APISERVER_H_
#define CTRLHOST_RUNTIME_APISERVER_TESTING_EMBEDDED_APISERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/apiserver/server.h"
#include "runtime/kube/client.h"
#include "runtime/kube/kubeconfig.h"
#include "runtime/kube/rest_client.h"

namespace ctrlhost::apiserver::testing {

class EmbeddedApiServer {
 public:
  // Starts a server with its data in $TEST_TMPDIR/`name` (/tmp/`name` outside Bazel) and
  // connects a client with the default kube::RestClientOptions. The server's error when it
  // cannot start (a used directory of another version, no port).
  static absl::StatusOr<std::unique_ptr<EmbeddedApiServer>> Start(absl::string_view name);
  // The same with `options` (data_dir, port and sync_full are set as above), e.g. a feature
  // gate off.
  static absl::StatusOr<std::unique_ptr<EmbeddedApiServer>> Start(absl::string_view name,
                                                                  ApiServerOptions options);

  ~EmbeddedApiServer();  // closes the clients, then stops the server
  EmbeddedApiServer(const EmbeddedApiServer&) = delete;
  EmbeddedApiServer& operator=(const EmbeddedApiServer&) = delete;

  // Another transport to the same server, with its own connections, limits and counters (a
  // fake clock, a fence, qps = 0 for a clock that never moves).
  absl::StatusOr<std::unique_ptr<kube::RestClient>> NewRestClient(
      kube::RestClientOptions options = {}) const;

  ApiServer& server() { return *server_; }
  const kube::RestConfig& config() const { return config_; }
  const std::string& kubeconfig_path() const { return kubeconfig_path_; }
  kube::RestClient& rest() { return *rest_; }
  kube::Client& client() { return *client_; }

 private:
  EmbeddedApiServer() = default;

  // Constant after Start(); destroyed in reverse order (clients before the server).
  std::unique_ptr<ApiServer> server_;
  std::string kubeconfig_path_;
  kube::RestConfig config_;
  std::unique_ptr<kube::RestClient> rest_;
  std::unique_ptr<kube::Client> client_;
};

}  // namespace ctrlhost::apiserver::testing

#endif  // CTRLHOST_RUNTIME_APISERVER_TESTING_EMBEDDED_APISERVER_H_
