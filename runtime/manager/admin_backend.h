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

#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "runtime/admin/backend.h"

namespace ctrlhost::manager {

class Host;

class HostAdminBackend : public admin::AdminBackend {
 public:
  explicit HostAdminBackend(Host* host) : host_(host) {}

  absl::StatusOr<adminpb::ListOperatorsResponse> ListOperators(
      const adminpb::ListOperatorsRequest& request) override;
  absl::StatusOr<adminpb::ListPluginsResponse> ListPlugins(
      const adminpb::ListPluginsRequest& request) override;
  absl::StatusOr<adminpb::GetPluginResponse> GetPlugin(
      const adminpb::GetPluginRequest& request) override;
  absl::StatusOr<adminpb::ListControllersResponse> ListControllers(
      const adminpb::ListControllersRequest& request) override;
  absl::StatusOr<adminpb::GetControllerResponse> GetController(
      const adminpb::GetControllerRequest& request) override;
  absl::StatusOr<adminpb::SwapPluginResponse> SwapPlugin(
      const adminpb::SwapPluginRequest& request) override;
  absl::StatusOr<adminpb::ReloadConfigResponse> ReloadConfig(
      const adminpb::ReloadConfigRequest& request) override;
  absl::StatusOr<adminpb::DumpStateResponse> DumpState(
      const adminpb::DumpStateRequest& request) override;

 private:
  Host* const host_;
};

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_
