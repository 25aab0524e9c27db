// The embedded API server's PKI: a private CA, a serving certificate and a bearer token kept in
// the server's data directory, plus a kubeconfig for kubectl.
//
// First start: EnsurePki generates a self-signed CA (ECDSA P-256, 10 years, CN "ctrlhost-ca"),
// a serving certificate signed by it (ECDSA P-256, 1 year, SANs 127.0.0.1, ::1, localhost and
// the given hosts) and a bearer token (32 random bytes, hex). Later starts reuse them; only the
// serving certificate is replaced, when its SANs do not cover the hosts, it expires within 30
// days, or it was not signed by the CA. A CA is never replaced: unreadable, corrupt, mismatched
// or expired CA files are an error naming the file, and so are corrupt serving-certificate and
// token files (remove the file to have it regenerated).
//
//   ASSIGN_OR_RETURN(apiserver::Pki pki, apiserver::EnsurePki("/var/lib/ctrlhost", {"myhost"}));
//   httplib::SSLServer server(pki.server_cert_path.c_str(), pki.server_key_path.c_str());
//   RETURN_IF_ERROR(apiserver::WriteKubeconfig(dir + "/kubeconfig", url, pki.ca_cert_pem,
//                                              pki.token));
//
// Files: ca.crt ca.key server.crt server.key token, each mode 0600 in a 0700 directory
// (permissions are tightened on every start). Writes go to a temporary file that is renamed, so
// a crash never leaves a half-written file. Concurrent EnsurePki calls on one directory, from
// threads or processes, are serialized with flock(2) on the directory.
#ifndef CTRLHOST_RUNTIME_APISERVER_PKI_PKI_H_
#define CTRLHOST_RUNTIME_APISERVER_PKI_PKI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ctrlhost::apiserver {

struct PkiOptions {
  // The time certificates are issued at and checked against; injectable for tests.
  absl::Time now = absl::Now();
  absl::Duration ca_validity = absl::Hours(24 * 3650);
  absl::Duration serving_validity = absl::Hours(24 * 365);
  // A serving certificate expiring sooner than this is replaced.
  absl::Duration renew_before = absl::Hours(24 * 30);
};

struct Pki {
  std::string ca_cert_path;
  std::string ca_key_path;
  std::string server_cert_path;
  std::string server_key_path;
  std::string token_path;
  std::string ca_cert_pem;
  std::string server_cert_pem;
  std::string token;               // 64 lowercase hex characters
  bool ca_generated = false;       // this call created the CA (first start)
  bool serving_generated = false;  // this call issued a new serving certificate
  absl::Time serving_not_after;
};

// Loads or creates the PKI in `data_dir` (created with mode 0700 if missing). `hosts` are extra
// SANs: IPv4/IPv6 literals become IP SANs, anything else a DNS SAN (a DNS-1123 subdomain,
// optionally with a leading "*."; case-insensitive). Errors: InvalidArgument for a bad host,
// FailedPrecondition for corrupt or inconsistent files, PermissionDenied for unreadable ones,
// Internal for filesystem or OpenSSL failures.
absl::StatusOr<Pki> EnsurePki(const std::string& data_dir, const std::vector<std::string>& hosts,
                              const PkiOptions& options = {});

// Writes a kubeconfig at `path` (mode 0600, replacing any file there; the parent directory is
// created 0700 if missing) with one cluster, user and context named `context_name`, selected
// as current-context. `ca` is the CA certificate as PEM text, or the path of a PEM file; it is
// embedded as certificate-authority-data (base64). An empty `ca` or `token` is left out (for a
// plain-HTTP server).
absl::Status WriteKubeconfig(const std::string& path, absl::string_view server_url,
                             absl::string_view ca, absl::string_view token,
                             absl::string_view context_name = "ctrlhost");

}  // namespace ctrlhost::apiserver

#endif  // CTRLHOST_RUNTIME_APISERVER_PKI_PKI_H_
