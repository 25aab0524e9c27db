// The ctrlhost release version and the protocol versions this build speaks.
//
//   std::cout << "ctrlhost " << exe::kCtrlhostVersion << "\n";
//
// Constants only: thread-safe.
#ifndef CTRLHOST_RUNTIME_EXE_VERSION_H_
#define CTRLHOST_RUNTIME_EXE_VERSION_H_

#include "runtime/common/version.h"

namespace ctrlhost::exe {

// Semantic version of the host (defined in runtime/common, which the handshake shares).
using common::kCtrlhostVersion;

// Plugin protocol versions (proto/ctrlhost/plugin/<version>) the host can talk, newest last.
inline constexpr const char* kPluginProtocolVersions[] = {"v1alpha1"};

// Version of the host admin API (proto/ctrlhost/admin/<version>) the CLI clients use.
inline constexpr char kAdminApiVersion[] = "v1alpha1";

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_VERSION_H_
