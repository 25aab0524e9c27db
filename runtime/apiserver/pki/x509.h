// Thin RAII and EVP-based helpers over OpenSSL 3 for the PKI. Internal to
// //runtime/apiserver/pki. All functions are thread-safe (OpenSSL 3 needs no locking setup);
// failures return statuses carrying OpenSSL's error text and clear its error queue.
#ifndef CTRLHOST_RUNTIME_APISERVER_PKI_X509_H_
#define CTRLHOST_RUNTIME_APISERVER_PKI_X509_H_

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ctrlhost::apiserver::pki_internal {

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Deleter {
  void operator()(X509* p) const { X509_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;

// Subject alternative names: DNS names lowercased, IPs as 4- or 16-byte binary strings.
struct SubjectAltNames {
  std::set<std::string> dns;
  std::set<std::string> ips;
};

// Adds `host` to `sans`: an IPv4/IPv6 literal as an IP, else a DNS name (a DNS-1123 subdomain,
// optionally "*." first). InvalidArgument otherwise.
absl::Status AddHost(absl::string_view host, SubjectAltNames& sans);

struct CertificateSpec {
  std::string common_name;
  bool is_ca = false;
  absl::Time not_before;
  absl::Time not_after;
  SubjectAltNames sans;  // serving certificates only
};

absl::StatusOr<PkeyPtr> GenerateP256Key();
// Signs with SHA-256 by `issuer_key`; `issuer` null means self-signed.
absl::StatusOr<X509Ptr> IssueCertificate(const CertificateSpec& spec, EVP_PKEY* subject_key,
                                         X509* issuer, EVP_PKEY* issuer_key);

absl::StatusOr<std::string> CertificateToPem(X509* cert);
absl::StatusOr<std::string> PrivateKeyToPem(EVP_PKEY* key);  // PKCS#8, unencrypted
// InvalidArgument when `pem` holds no parsable certificate / private key.
absl::StatusOr<X509Ptr> CertificateFromPem(absl::string_view pem);
absl::StatusOr<PkeyPtr> PrivateKeyFromPem(absl::string_view pem);

absl::Time NotAfter(X509* cert);
SubjectAltNames GetSubjectAltNames(X509* cert);
// Whether `cert`'s issuer is `ca`'s subject and `ca`'s key verifies its signature.
bool SignedBy(X509* cert, X509* ca);
bool IsCa(X509* cert);

}  // namespace ctrlhost::apiserver::pki_internal

#endif  // CTRLHOST_RUNTIME_APISERVER_PKI_X509_H_
