// `ctrlhost plugin list` and `ctrlhost plugin swap`: clients of the running host's admin API.
//
//   $ ctrlhost plugin list
//   OPERATOR  NAME    STATE  GENERATION  VERSION  INFLIGHT  QUEUED  RESTARTS  CANARY  LAST-ERROR
//   web       webapp  READY  4           1.2.0    3/64      0       0         -       -
//   $ ctrlhost plugin swap web/webapp --command ./bin/webapp-v2 --arg --verbose --canary 10
//
// Thread-compatible.
#ifndef CTRLHOST_RUNTIME_EXE_CMD_PLUGIN_H_
#define CTRLHOST_RUNTIME_EXE_CMD_PLUGIN_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ctrlhost/admin/v1alpha1/admin.pb.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"

namespace ctrlhost::exe {

// `ctrlhost plugin ...`: dispatches to list, swap and shadow.
int RunPluginCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunPluginListCommand(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err);
int RunPluginSwapCommand(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err);
int RunPluginShadowCommand(const std::vector<std::string>& args, std::ostream& out,
                           std::ostream& err);

// The `plugin list` renderings, exposed for tests.
std::string FormatPluginTable(const adminpb::ListPluginsResponse& plugins);
absl::StatusOr<std::string> FormatPluginsJson(const adminpb::ListPluginsResponse& plugins);
absl::StatusOr<std::string> FormatPluginsYaml(const adminpb::ListPluginsResponse& plugins);
// What `plugin shadow NAME` prints: the shadow's figures per controller and last differences.
std::string FormatShadow(const adminpb::Plugin& plugin);

}  // namespace ctrlhost::exe

#endif  // CTRLHOST_RUNTIME_EXE_CMD_PLUGIN_H_
