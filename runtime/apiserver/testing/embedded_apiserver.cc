#include "runtime/apiserver/testing/embedded_apiserver.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ctrlhost::apiserver::testing {

absl::StatusOr<std::unique_ptr<EmbeddedApiServer>> EmbeddedApiServer::Start(
    absl::string_view name) {
  return Start(name, ApiServerOptions());
}

absl::StatusOr<std::unique_ptr<EmbeddedApiServer>> EmbeddedApiServer::Start(
    absl::string_view name, ApiServerOptions options) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  options.data_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  options.port = 0;
  options.sync_full = false;
  std::unique_ptr<EmbeddedApiServer> api(new EmbeddedApiServer());
  absl::StatusOr<std::unique_ptr<ApiServer>> server = ApiServer::Start(options);
  if (!server.ok()) return server.status();
  api->server_ = *std::move(server);
  api->kubeconfig_path_ = api->server_->kubeconfig_path();
  absl::StatusOr<kube::RestConfig> config = kube::LoadKubeconfigFile(api->kubeconfig_path_);
  if (!config.ok()) return config.status();
  api->config_ = *std::move(config);
  absl::StatusOr<std::unique_ptr<kube::RestClient>> rest = api->NewRestClient();
  if (!rest.ok()) return rest.status();
  api->rest_ = *std::move(rest);
  api->client_ = std::make_unique<kube::Client>(api->rest_.get());
  return api;
}

EmbeddedApiServer::~EmbeddedApiServer() {
  client_.reset();
  rest_.reset();
  server_.reset();
}

absl::StatusOr<std::unique_ptr<kube::RestClient>> EmbeddedApiServer::NewRestClient(
    kube::RestClientOptions options) const {
  return kube::RestClient::Create(config_, std::move(options));
}

}  // namespace ctrlhost::apiserver::testing
