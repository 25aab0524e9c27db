#include "runtime/exe/cmd_version.h"

#include <optional>

#include "absl/strings/str_join.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "runtime/exe/command.h"
#include "runtime/exe/flags.h"
#include "runtime/exe/version.h"

namespace ctrlhost::exe {

int RunVersionCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FlagSet flags("ctrlhost version",
                "Prints the ctrlhost version, the plugin protocol versions it speaks and the "
                "versions of the gRPC and protobuf libraries it was built with.");
  std::string output = "text";
  flags.AddEnum("output", &output, {"text", "json"}, "Output format").Short('o');
  CommonFlags common;
  AddCommonFlags(flags, &common);
  if (std::optional<int> exit = ParseCommandLine(flags, common, args, out, err)) return *exit;

  const std::vector<std::string> protocols(std::begin(kPluginProtocolVersions),
                                           std::end(kPluginProtocolVersions));
  const std::string grpc_version = grpc::Version();
  const std::string protobuf_version =
      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION);
  if (output == "json") {
    nlohmann::json doc = {{"ctrlhost", kCtrlhostVersion},
                          {"pluginProtocols", protocols},
                          {"adminApi", kAdminApiVersion},
                          {"grpc", grpc_version},
                          {"protobuf", protobuf_version}};
    out << doc.dump() << "\n";
    return kExitOk;
  }
  out << "ctrlhost " << kCtrlhostVersion << "\n"
      << "plugin protocols: " << absl::StrJoin(protocols, ", ") << "\n"
      << "admin API: " << kAdminApiVersion << "\n"
      << "gRPC: " << grpc_version << "\n"
      << "protobuf: " << protobuf_version << "\n";
  return kExitOk;
}

}  // namespace ctrlhost::exe
