#include "runtime/manager/host.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/kube/kubeconfig.h"

namespace ctrlhost::manager {

absl::StatusOr<std::unique_ptr<Host>> Host::Start(HostOptions options) {
  std::unique_ptr<Host> host(new Host());
  kube::RestConfig rest_config;
  if (options.kubeconfigs.empty()) {
    apiserver::ApiServerOptions server_options = options.apiserver;
    server_options.data_dir = options.data_dir;
    ASSIGN_OR_RETURN(host->apiserver_, apiserver::ApiServer::Start(server_options));
    host->api_url_ = host->apiserver_->url();
    ASSIGN_OR_RETURN(rest_config, kube::LoadKubeconfigFile(host->apiserver_->kubeconfig_path()));
  } else {
    ASSIGN_OR_RETURN(rest_config, kube::LoadKubeconfigFiles(options.kubeconfigs, options.context));
    host->api_url_ = rest_config.host;
  }
  ASSIGN_OR_RETURN(host->rest_, kube::RestClient::Create(std::move(rest_config), options.rest));
  host->client_ = std::make_unique<kube::Client>(host->rest_.get());
  host->discovery_ = std::make_unique<kube::Discovery>(host->rest_.get());
  if (absl::Status s = host->discovery_->Refresh(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("discovery at ", host->api_url_, ": ", s.message()));
  }

  host->metrics_ = std::make_unique<observe::MetricsRegistry>();
  observe::ObserveServerOptions observe_options;
  observe_options.bind = options.metrics_bind;
  observe_options.port = options.metrics_port;
  observe_options.metrics = host->metrics_.get();
  ASSIGN_OR_RETURN(host->observe_, observe::ObserveServer::Start(observe_options));

  ManagerOptions manager_options;
  manager_options.client = host->client_.get();
  manager_options.discovery = host->discovery_.get();
  manager_options.data_dir = options.data_dir;
  manager_options.host_version = options.host_version;
  ASSIGN_OR_RETURN(host->manager_, Manager::Create(manager_options));
  Manager* manager = host->manager_.get();
  host->provider_ = host->metrics_->AddProvider(
      [manager](observe::Figures& figures) { manager->Collect(figures); });
  host->observe_->SetReadyCheck("controllers", [manager] { return manager->Ready(); });
  host->observe_->SetDumpProvider(
      [manager]() -> absl::StatusOr<std::string> { return manager->DumpYaml(); });
  RETURN_IF_ERROR(host->manager_->Start(options.operators));
  return host;
}

Host::~Host() { Stop(); }

std::string Host::kubeconfig_path() const {
  return apiserver_ != nullptr ? apiserver_->kubeconfig_path() : "";
}

std::string Host::metrics_url() const {
  return observe_ != nullptr ? absl::StrCat(observe_->url(), "/metrics") : "";
}

void Host::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (observe_ != nullptr) observe_->Stop();
  if (metrics_ != nullptr && provider_ != 0) metrics_->RemoveProvider(provider_);
  if (manager_ != nullptr) manager_->Stop();
  manager_.reset();
  observe_.reset();
  discovery_.reset();
  client_.reset();
  rest_.reset();
  if (apiserver_ != nullptr) apiserver_->Stop();
}

}  // namespace ctrlhost::manager
