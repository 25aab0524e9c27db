// The one fixture for C++ tests that need a real Kubernetes-compatible API server: the embedded
// one (runtime/apiserver) started in process, HTTPS on 127.0.0.1 port 0, data in a fresh
// directory under $TEST_TMPDIR, with a RestClient and a Client on it through the kubeconfig it
// writes (the same path the host takes). One per test suite is the usual use:
//
//   class MyTest : public ::testing::Test {
//    protected:
//     static void SetUpTestSuite() {
//       auto api = kube::testing::EmbeddedApiServer::Start("my_apiserver");
//       ASSERT_TRUE(api.ok()) << api.status();
//       api_ = api->release();
//     }
//     static void TearDownTestSuite() { delete api_; }
//     inline static kube::testing::EmbeddedApiServer* api_ = nullptr;
//   };
//   ... api_->client().Create(ref, json) ...
//
// Storage runs with sync "normal" (no fsync per write): tests of durability start the binary
// instead (e2e/apiserver). Thread-safe as its parts are: ApiServer, RestClient and Client are.
#ifndef CTRLHOST_RUNTIME_KUBE_TESTING_EMBEDDED_APISERVER_H_
#define CTRLHOST_RUNTIME_KUBE_TESTING_EMBEDDED_APISERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/apiserver/server.h"
#include "runtime/kube/client.h"
#include "runtime/kube/kubeconfig.h"
#include "runtime/kube/rest_client.h"

namespace ctrlhost::kube::testing {

class EmbeddedApiServer {
 public:
  // Starts a server with its data in $TEST_TMPDIR/`name` (/tmp/`name` outside Bazel) and
  // connects a client with the default RestClientOptions. The server's error when it cannot
  // start (a used directory of another version, no port).
  static absl::StatusOr<std::unique_ptr<EmbeddedApiServer>> Start(absl::string_view name);

  ~EmbeddedApiServer();  // closes the clients, then stops the server
  EmbeddedApiServer(const EmbeddedApiServer&) = delete;
  EmbeddedApiServer& operator=(const EmbeddedApiServer&) = delete;

  // Another transport to the same server, with its own connections, limits and counters (a
  // fake clock, a fence, qps = 0 for a clock that never moves).
  absl::StatusOr<std::unique_ptr<RestClient>> NewRestClient(RestClientOptions options = {}) const;

  apiserver::ApiServer& server() { return *server_; }
  const RestConfig& config() const { return config_; }
  const std::string& kubeconfig_path() const { return kubeconfig_path_; }
  RestClient& rest() { return *rest_; }
  Client& client() { return *client_; }

 private:
  EmbeddedApiServer() = default;

  // Constant after Start(); destroyed in reverse order (clients before the server).
  std::unique_ptr<apiserver::ApiServer> server_;
  std::string kubeconfig_path_;
  RestConfig config_;
  std::unique_ptr<RestClient> rest_;
  std::unique_ptr<Client> client_;
};

}  // namespace ctrlhost::kube::testing

#endif  // CTRLHOST_RUNTIME_KUBE_TESTING_EMBEDDED_APISERVER_H_
