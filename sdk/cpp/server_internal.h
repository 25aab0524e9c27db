// Internal: the gRPC server behind Plugin::Start. Not part of the SDK's API.
#ifndef CTRLHOST_SDK_CPP_SERVER_INTERNAL_H_
#define CTRLHOST_SDK_CPP_SERVER_INTERNAL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "sdk/cpp/plugin.h"

namespace ctrlhost::sdk::internal {

// Serves `plugin` (borrowed; must outlive the server) on `listen` (from ParseListenAddress),
// with TLS when `tls` is set (a client certificate required when it has a client CA).
absl::StatusOr<std::unique_ptr<PluginServer>> StartServer(Plugin* plugin, const std::string& listen,
                                                          const std::optional<ServerTls>& tls);

}  // namespace ctrlhost::sdk::internal

#endif  // CTRLHOST_SDK_CPP_SERVER_INTERNAL_H_
