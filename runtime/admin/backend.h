// AdminBackend: what the host admin API (ctrlhost.admin.v1alpha1.AdminService) asks of the host.
//
// The admin server (server.h) owns the transport: the Unix socket, request validation, status
// mapping and threading. The backend owns the answers: the manager implements this interface over
// its operators, plugins and controllers. One method per RPC, taking the request message and
// returning the response message or an absl::Status whose code becomes the gRPC code unchanged
// (NOT_FOUND for an unknown operator / plugin / controller, FAILED_PRECONDITION, ABORTED,
// UNAVAILABLE while starting or stopping; see admin.proto for the error model).
//
//   class ManagerAdmin : public admin::AdminBackend {
//    public:
//     absl::StatusOr<adminpb::GetPluginResponse> GetPlugin(const adminpb::GetPluginRequest& r)
//     override {
//       ... snapshot the plugin, or return absl::NotFoundError("plugin web/webapp not found");
//     }
//     ...
//   };
//
// Guarantees the server gives the backend:
// - Every request has passed the validation in validate.h: required names are non-empty, a
//   SwapPluginRequest has exactly one action, a replace / canary source has exactly one of exec
//   (command set) or endpoint (address set), a canary percent is 1..99, ready_timeout is a valid
//   Duration >= 0. The backend still checks whatever depends on state (unknown names, generation
//   preconditions, a canary already running).
// - Calls run on the server's worker threads, never on gRPC's: a slow call (SwapPlugin waits up to
//   ready_timeout + drain, ReloadConfig may swap plugins) ties up one worker only. At most
//   AdminServerOptions::max_concurrent_swaps SwapPlugin / ReloadConfig calls run at once, and at
//   most AdminServerOptions::query_threads of the others.
// - No call is made after AdminServer::Stop() has returned.
//
// Thread-safety: implementations must be thread-safe; the server calls them concurrently from
// several worker threads.
#ifndef CTRLHOST_RUNTIME_ADMIN_BACKEND_H_
#define CTRLHOST_RUNTIME_ADMIN_BACKEND_H_

#include "absl/status/statusor.h"
#include "ctrlhost/admin/v1alpha1/admin.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"

namespace ctrlhost::admin {

// The host's side of AdminService. Thread-safe implementations only (see the file comment).
class AdminBackend {
 public:
  virtual ~AdminBackend() = default;

  virtual absl::StatusOr<adminpb::ListOperatorsResponse> ListOperators(
      const adminpb::ListOperatorsRequest& request) = 0;
  virtual absl::StatusOr<adminpb::ListPluginsResponse> ListPlugins(
      const adminpb::ListPluginsRequest& request) = 0;
  virtual absl::StatusOr<adminpb::GetPluginResponse> GetPlugin(
      const adminpb::GetPluginRequest& request) = 0;
  virtual absl::StatusOr<adminpb::ListControllersResponse> ListControllers(
      const adminpb::ListControllersRequest& request) = 0;
  virtual absl::StatusOr<adminpb::GetControllerResponse> GetController(
      const adminpb::GetControllerRequest& request) = 0;
  // May block until the new instance is ready or failed (up to ready_timeout plus the drain).
  // An attempt that was made and failed is an OK result carrying SwapPluginResponse.failed.
  virtual absl::StatusOr<adminpb::SwapPluginResponse> SwapPlugin(
      const adminpb::SwapPluginRequest& request) = 0;
  // May block while changed plugins are swapped.
  virtual absl::StatusOr<adminpb::ReloadConfigResponse> ReloadConfig(
      const adminpb::ReloadConfigRequest& request) = 0;
  virtual absl::StatusOr<adminpb::DumpStateResponse> DumpState(
      const adminpb::DumpStateRequest& request) = 0;
};

}  // namespace ctrlhost::admin

#endif  // CTRLHOST_RUNTIME_ADMIN_BACKEND_H_
