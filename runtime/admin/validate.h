// Validation of AdminService requests, done by the admin server before the backend sees them.
//
// Each function returns OK or INVALID_ARGUMENT with a message that names the offending field by
// its path in the request, e.g.
//   SwapPluginRequest.start_canary.percent must be between 1 and 99, got 100
//   GetControllerRequest.controller is required
// Only what can be checked without the host's state is checked here: required names, the shape
// of a swap (one action; a source with exactly one of exec / endpoint; a non-empty command or
// address; no NUL bytes or '=' where execve cannot carry them; TLS cert and key together), the
// canary percentage and a non-negative, well-formed ready_timeout. Unknown names, generation
// preconditions and whether a canary runs are the backend's to judge.
//
//   if (absl::Status s = ValidateSwapPluginRequest(request); !s.ok()) return s;
//
// Thread-safety: pure functions, thread-safe.
#ifndef CTRLHOST_RUNTIME_ADMIN_VALIDATE_H_
#define CTRLHOST_RUNTIME_ADMIN_VALIDATE_H_

#include "absl/status/status.h"
#include "ctrlhost/admin/v1alpha1/admin.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"

namespace ctrlhost::admin {

absl::Status ValidateGetPluginRequest(const adminpb::GetPluginRequest& request);
absl::Status ValidateGetControllerRequest(const adminpb::GetControllerRequest& request);
absl::Status ValidateSwapPluginRequest(const adminpb::SwapPluginRequest& request);
// ListOperators, ListPlugins, ListControllers (filters may be empty), ReloadConfig and DumpState
// have nothing to validate.

}  // namespace ctrlhost::admin

#endif  // CTRLHOST_RUNTIME_ADMIN_VALIDATE_H_
