// The host's answers to the admin API (runtime/admin serves them on the admin Unix socket):
// plugins, controllers and operators from the manager's snapshots, swaps and canaries through
// Manager::SwapPlugin & co., reloads through Host::Reload, the dump. It uses the host's public
// interface only, and the host does not know it: the executable (runtime/exe, `ctrlhost run`)
// wires the two with ServeHostAdmin, and tests can do the same.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Host> host, Host::Start(options));
//   ASSIGN_OR_RETURN(std::unique_ptr<HostAdmin> admin, ServeHostAdmin(host.get(), socket_path));
//   ...
//   admin.reset();  // stops serving; before the host stops
//   host->Stop();
//
// Thread-safety: HostAdminBackend is thread-safe (stateless; the manager and host it calls are
// thread-safe). The host must outlive the backend's use (stop the admin server before the host).
#ifndef CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_
#define CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"
#include "runtime/admin/backend.h"
#include "runtime/admin/server.h"

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

// The admin API of a running host: its backend, and the server that answers on the socket.
// Destroying it stops the server (waiting for backend calls in progress) before the backend
// goes.
struct HostAdmin {
  explicit HostAdmin(Host* host) : backend(host) {}
  // The socket served, "" when none.
  std::string socket_path() const { return server != nullptr ? server->socket_path() : ""; }

  HostAdminBackend backend;
  std::unique_ptr<admin::AdminServer> server;  // declared after `backend`: destroyed first
};

// Serves `host`'s admin API on the Unix socket `socket_path` (made absolute), requiring the
// token that the server writes beside it (admin::TokenPathFor: plugins of the host's own user
// can connect() to the socket but cannot read the token file). "" serves none; a path too long
// for a Unix socket serves none either, with a warning logged: the host does its job without
// the admin API. Otherwise admin::AdminServer::Start's errors. `host` is borrowed: it must
// outlive the result.
absl::StatusOr<std::unique_ptr<HostAdmin>> ServeHostAdmin(Host* host,
                                                          const std::string& socket_path);

// The files of an admin socket at `socket_path` that no plugin may reach (the socket and its
// token file), for HostOptions::plugin_hidden_paths; none for "".
std::vector<std::string> AdminSocketFiles(const std::string& socket_path);

}  // namespace ctrlhost::manager

#endif  // CTRLHOST_RUNTIME_MANAGER_ADMIN_BACKEND_H_
