// `ctrlhost rbac -f operator.yaml`: prints the least-privilege RBAC (ClusterRole/Roles and
// their bindings to the host's ServiceAccount) that the host needs to run the operators in the
// file. Each plugin is started (exec'd) or dialled (remote) once to read its Describe answer,
// then stopped; the rules follow from those declarations and the file's controller overrides
// (runtime/exe/rbac.h says how).
//
//   $ ctrlhost rbac -f deploy/base/operator.yaml --namespace ctrlhost > rbac.yaml
//
// Thread-compatible.
#ifndef CTRLHOST_RUNTIME_EXE_CMD_RBAC_H_
#define CTRLHOST_RUNTIME_EXE_CMD_RBAC_H_

#include <ostream>
#include <string>
#include <vector>

namespace ctrlhost::exe {

int RunRbacCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_RBAC_H_
