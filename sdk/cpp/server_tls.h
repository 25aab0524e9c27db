// TLS for a plugin served over TCP: what the host's `endpoint.tls` dials (docs/operator-spec.md).
//
// Configured by environment variables, read by Plugin::Run():
//   CTRLHOST_PLUGIN_TLS_CERT_FILE       PEM certificate chain the plugin presents   } both or
//   CTRLHOST_PLUGIN_TLS_KEY_FILE        PEM private key of that certificate         } neither
//   CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE  PEM CA bundle: when set, every client (the host) must
//                                       present a certificate signed by it (mutual TLS)
// Without a certificate the plugin serves plaintext, which is allowed only on Unix sockets and
// loopback hosts (localhost, 127.*, ::1): a plugin listening on any other TCP address refuses to
// start rather than expose an unauthenticated reconcile endpoint.
//
//   absl::StatusOr<std::optional<ServerTls>> tls = ServerTlsFromEnvironment();
//   if (tls.ok()) server = plugin.Start("0.0.0.0:9443", *tls);
//
// Thread-compatible: plain functions and a value type.
#ifndef CTRLHOST_SDK_CPP_SERVER_TLS_H_
#define CTRLHOST_SDK_CPP_SERVER_TLS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ctrlhost::sdk {

inline constexpr char kTlsCertFileEnv[] = "CTRLHOST_PLUGIN_TLS_CERT_FILE";
inline constexpr char kTlsKeyFileEnv[] = "CTRLHOST_PLUGIN_TLS_KEY_FILE";
inline constexpr char kTlsClientCaFileEnv[] = "CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE";

// The server side of TLS, as PEM text (read once, at start).
struct ServerTls {
  std::string cert_chain_pem;
  std::string private_key_pem;
  std::string client_ca_pem;  // empty: no client certificate is asked for
};

// Reads the files named. Empty cert_file and key_file (and client_ca_file): nullopt, plaintext.
// InvalidArgument when only one of cert/key is set, or a client CA without a certificate;
// NotFound / PermissionDenied / InvalidArgument (not PEM) naming the variable and the file.
absl::StatusOr<std::optional<ServerTls>> LoadServerTls(const std::string& cert_file,
                                                       const std::string& key_file,
                                                       const std::string& client_ca_file);

// LoadServerTls with the three environment variables above.
absl::StatusOr<std::optional<ServerTls>> ServerTlsFromEnvironment();

// True for "unix:..." and for "host:port" whose host is localhost, 127.* or ::1.
bool IsLoopbackOrUnix(absl::string_view listen);

// OK when plaintext may be served on `listen` (IsLoopbackOrUnix), else FailedPrecondition
// saying which variables to set.
absl::Status CheckPlaintextAllowed(absl::string_view listen);

}  // namespace ctrlhost::sdk

#endif  // CTRLHOST_SDK_CPP_SERVER_TLS_H_
