// The ctrlhost release version, shared by the CLI (`ctrlhost version`) and the plugin handshake
// (DescribeRequest.host_version), so the two never disagree.
//
//   std::cout << "ctrlhost " << common::kCtrlhostVersion << "\n";
//
// Constants only: thread-safe.
#ifndef CTRLHOST_RUNTIME_COMMON_VERSION_H_
#define CTRLHOST_RUNTIME_COMMON_VERSION_H_

namespace ctrlhost::common {

// Semantic version of the host; "-dev" until the first release.
inline constexpr char kCtrlhostVersion[] = "0.1.0-dev";

}  // namespace ctrlhost::common

#endif  // CTRLHOST_RUNTIME_COMMON_VERSION_H_
