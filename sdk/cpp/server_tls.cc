#include "sdk/cpp/server_tls.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ctrlhost::sdk {
namespace {

// The PEM text of `path`, named in errors by the variable that set it.
absl::StatusOr<std::string> ReadPem(const char* variable, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message =
        absl::StrCat(variable, "=", path, ": cannot read: ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(message);
    if (error == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  std::ostringstream text;
  text << in.rdbuf();
  std::string pem = text.str();
  if (!absl::StrContains(pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(variable, "=", path, ": not a PEM file (no -----BEGIN line)"));
  }
  return pem;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

absl::StatusOr<std::optional<ServerTls>> LoadServerTls(const std::string& cert_file,
                                                       const std::string& key_file,
                                                       const std::string& client_ca_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kTlsCertFileEnv, " and ", kTlsKeyFileEnv, " must be set together (only ",
                     cert_file.empty() ? kTlsKeyFileEnv : kTlsCertFileEnv, " is set)"));
  }
  if (cert_file.empty()) {
    if (!client_ca_file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(kTlsClientCaFileEnv, " needs ",
                                                     kTlsCertFileEnv, " and ", kTlsKeyFileEnv,
                                                     " (client certificates are a TLS feature)"));
    }
    return std::optional<ServerTls>();
  }
  ServerTls tls;
  absl::StatusOr<std::string> cert = ReadPem(kTlsCertFileEnv, cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(kTlsKeyFileEnv, key_file);
  if (!key.ok()) return key.status();
  tls.cert_chain_pem = *std::move(cert);
  tls.private_key_pem = *std::move(key);
  if (!client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(kTlsClientCaFileEnv, client_ca_file);
    if (!ca.ok()) return ca.status();
    tls.client_ca_pem = *std::move(ca);
  }
  return std::optional<ServerTls>(std::move(tls));
}

absl::StatusOr<std::optional<ServerTls>> ServerTlsFromEnvironment() {
  return LoadServerTls(Env(kTlsCertFileEnv), Env(kTlsKeyFileEnv), Env(kTlsClientCaFileEnv));
}

bool IsLoopbackOrUnix(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:")) return true;
  const size_t colon = listen.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? listen : listen.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::Status CheckPlaintextAllowed(absl::string_view listen) {
  if (IsLoopbackOrUnix(listen)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to serve plaintext on ", listen,
                   ": a TCP address other than localhost, 127.* or ::1 needs TLS: set ",
                   kTlsCertFileEnv, " and ", kTlsKeyFileEnv, " (and ", kTlsClientCaFileEnv,
                   " to require the host's client certificate)"));
}

}  // namespace ctrlhost::sdk
