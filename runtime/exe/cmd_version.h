// `ctrlhost version`: the host version, the protocol versions it speaks and the versions of the
// gRPC and protobuf libraries it was built with.
//
//   $ ctrlhost version
//   ctrlhost 0.1.0-dev
//   plugin protocols: v1alpha1
//   ...
//
// Thread-compatible.
#ifndef CTRLHOST_RUNTIME_EXE_CMD_VERSION_H_
#define CTRLHOST_RUNTIME_EXE_CMD_VERSION_H_

#include <ostream>
#include <string>
#include <vector>

namespace ctrlhost::exe {

int RunVersionCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_VERSION_H_
