// The host's answers to the admin API (runtime/admin serves them on the admin Unix socket):
// plugins, controllers and operators from the manager's snapshots, swaps and canaries through
// Manager::SwapPlugin & co., reloads through Host::Reload, the dump.
//
//   HostAdminBackend backend(host);
//   admin::AdminServer::Start({.socket_path = ..., .backend = &backend});
//
// Thread-safety: thread-safe (stateless; the manager and host it calls are thread-safe). The
// host must outlive the backend's use (stop the admin server before the host).
#ifndef CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_
#define CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_

#include "runtime/admin/backend.h"

namespace ctrlhost::manager {

class Host;

class HostAdminBackend : public admin::AdminBackend {
 public:
  explicit HostAdminBackend(Host* host) : host_(host) {}

  absl::StatusOr<admin::v1::ListOperatorsResponse> ListOperators(
      const admin::v1::ListOperatorsRequest& request) override;
  absl::StatusOr<admin::v1::ListPluginsResponse> ListPlugins(
      const admin::v1::ListPluginsRequest& request) override;
  absl::StatusOr<admin::v1::GetPluginResponse> GetPlugin(
      const admin::v1::GetPluginRequest& request) override;
  absl::StatusOr<admin::v1::ListControllersResponse> ListControllers(
      const admin::v1::ListControllersRequest& request) override;
  absl::StatusOr<admin::v1::GetControllerResponse> GetController(
      const admin::v1::GetControllerRequest& request) override;
  absl::StatusOr<admin::v1::SwapPluginResponse> SwapPlugin(
      const admin::v1::SwapPluginRequest& request) override;
  absl::StatusOr<admin::v1::ReloadConfigResponse> ReloadConfig(
      const admin::v1::ReloadConfigRequest& request) override;
  absl::StatusOr<admin::v1::DumpStateResponse> DumpState(
      const admin::v1::DumpStateRequest& request) override;

 private:
  Host* const host_;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_
