#include "runtime/apiserver/pki/pki.h"

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/apiserver/pki/files.h"
#include "runtime/apiserver/pki/x509.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

namespace ctrlhost::apiserver {
namespace {

using pki_internal::CertificateFromPem;
using pki_internal::PkeyPtr;
using pki_internal::PrivateKeyFromPem;
using pki_internal::SubjectAltNames;
using pki_internal::X509Ptr;

constexpr char kCaCommonName[] = "ctrlhost-ca";
constexpr char kServingCommonName[] = "ctrlhost-apiserver";
constexpr size_t kTokenBytes = 32;
// Tolerates clocks of clients that run a little behind ours.
constexpr absl::Duration kBackdate = absl::Hours(1);

absl::Status Corrupt(const std::string& path, absl::string_view detail) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is corrupt or not what ctrlhost wrote (", detail,
                   "); restore it from a backup, or remove it to have it regenerated"));
}

struct KeyPair {
  X509Ptr cert;
  PkeyPtr key;
};

// Loads a certificate and its key; both files exist. Corrupt or mismatched files are errors.
absl::StatusOr<KeyPair> LoadPair(const std::string& cert_path, const std::string& cert_pem,
                                 const std::string& key_path, const std::string& key_pem) {
  absl::StatusOr<X509Ptr> cert = CertificateFromPem(cert_pem);
  if (!cert.ok()) return Corrupt(cert_path, cert.status().message());
  absl::StatusOr<PkeyPtr> key = PrivateKeyFromPem(key_pem);
  if (!key.ok()) return Corrupt(key_path, key.status().message());
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return absl::FailedPreconditionError(
        absl::StrCat(key_path, " does not hold the private key of ", cert_path));
  }
  return KeyPair{*std::move(cert), *std::move(key)};
}

// Writes the key before the certificate: a crash in between leaves a key without its
// certificate, which the next start reports instead of trusting a certificate without a key.
absl::Status WritePair(const KeyPair& pair, const std::string& cert_path,
                       const std::string& key_path, std::string& cert_pem) {
  ASSIGN_OR_RETURN(std::string key_pem, pki_internal::PrivateKeyToPem(pair.key.get()));
  ASSIGN_OR_RETURN(cert_pem, pki_internal::CertificateToPem(pair.cert.get()));
  RETURN_IF_ERROR(pki_internal::WriteFileAtomic(key_path, key_pem, 0600));
  return pki_internal::WriteFileAtomic(cert_path, cert_pem, 0600);
}

std::string Join(const std::string& dir, absl::string_view name) {
  if (!dir.empty() && dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

// Why the serving certificate must be replaced; nullopt when it is fine.
std::optional<std::string> ServingProblem(X509* cert, X509* ca, const SubjectAltNames& required,
                                          const PkiOptions& options) {
  if (!pki_internal::SignedBy(cert, ca)) return "not signed by the current CA";
  SubjectAltNames have = pki_internal::GetSubjectAltNames(cert);
  std::vector<std::string> missing;
  for (const std::string& dns : required.dns) {
    if (have.dns.count(dns) == 0) missing.push_back(dns);
  }
  for (const std::string& ip : required.ips) {
    if (have.ips.count(ip) == 0) missing.push_back(absl::BytesToHexString(ip));
  }
  if (!missing.empty()) {
    return absl::StrCat("SANs do not cover ", absl::StrJoin(missing, ", "));
  }
  if (pki_internal::NotAfter(cert) - options.renew_before < options.now) {
    return absl::StrCat("expires at ", absl::FormatTime(pki_internal::NotAfter(cert)));
  }
  return std::nullopt;
}

absl::Status LoadOrCreateCa(Pki& pki, const PkiOptions& options, KeyPair& ca) {
  ASSIGN_OR_RETURN(std::optional<std::string> cert_pem,
                   pki_internal::ReadFileIfExists(pki.ca_cert_path));
  ASSIGN_OR_RETURN(std::optional<std::string> key_pem,
                   pki_internal::ReadFileIfExists(pki.ca_key_path));
  if (cert_pem.has_value() != key_pem.has_value()) {
    const std::string& present = cert_pem.has_value() ? pki.ca_cert_path : pki.ca_key_path;
    const std::string& absent = cert_pem.has_value() ? pki.ca_key_path : pki.ca_cert_path;
    return absl::FailedPreconditionError(absl::StrCat(
        present, " exists but ", absent, " is missing; restore it, or remove ", present,
        " to create a new CA (kubeconfigs that trust the old CA then stop working)"));
  }
  if (!cert_pem.has_value()) {
    ASSIGN_OR_RETURN(ca.key, pki_internal::GenerateP256Key());
    pki_internal::CertificateSpec spec;
    spec.common_name = kCaCommonName;
    spec.is_ca = true;
    spec.not_before = options.now - kBackdate;
    spec.not_after = options.now + options.ca_validity;
    ASSIGN_OR_RETURN(ca.cert,
                     pki_internal::IssueCertificate(spec, ca.key.get(), nullptr, ca.key.get()));
    RETURN_IF_ERROR(WritePair(ca, pki.ca_cert_path, pki.ca_key_path, pki.ca_cert_pem));
    pki.ca_generated = true;
    common::LogInfo("generated the API server CA",
                    {{"path", pki.ca_cert_path}, {"notAfter", absl::FormatTime(spec.not_after)}});
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(ca, LoadPair(pki.ca_cert_path, *cert_pem, pki.ca_key_path, *key_pem));
  if (!pki_internal::IsCa(ca.cert.get())) {
    return Corrupt(pki.ca_cert_path, "the certificate is not a CA");
  }
  absl::Time not_after = pki_internal::NotAfter(ca.cert.get());
  if (not_after <= options.now) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the CA in ", pki.ca_cert_path, " expired at ", absl::FormatTime(not_after), "; remove ",
        pki.ca_cert_path, " and ", pki.ca_key_path, " to create a new one"));
  }
  pki.ca_cert_pem = *std::move(cert_pem);
  RETURN_IF_ERROR(pki_internal::EnsureMode(pki.ca_cert_path, 0600));
  return pki_internal::EnsureMode(pki.ca_key_path, 0600);
}

absl::Status LoadOrIssueServing(Pki& pki, const PkiOptions& options, const KeyPair& ca,
                                const SubjectAltNames& required) {
  ASSIGN_OR_RETURN(std::optional<std::string> cert_pem,
                   pki_internal::ReadFileIfExists(pki.server_cert_path));
  ASSIGN_OR_RETURN(std::optional<std::string> key_pem,
                   pki_internal::ReadFileIfExists(pki.server_key_path));
  std::string reason = "missing";
  if (cert_pem.has_value() && key_pem.has_value()) {
    ASSIGN_OR_RETURN(KeyPair serving,
                     LoadPair(pki.server_cert_path, *cert_pem, pki.server_key_path, *key_pem));
    std::optional<std::string> problem =
        ServingProblem(serving.cert.get(), ca.cert.get(), required, options);
    if (!problem.has_value()) {
      pki.server_cert_pem = *std::move(cert_pem);
      pki.serving_not_after = pki_internal::NotAfter(serving.cert.get());
      RETURN_IF_ERROR(pki_internal::EnsureMode(pki.server_cert_path, 0600));
      return pki_internal::EnsureMode(pki.server_key_path, 0600);
    }
    reason = *std::move(problem);
  }
  // Keep the hosts the old certificate already covered: another address may still use them.
  SubjectAltNames sans = required;
  if (cert_pem.has_value()) {
    absl::StatusOr<X509Ptr> old = CertificateFromPem(*cert_pem);
    if (old.ok()) {
      SubjectAltNames had = pki_internal::GetSubjectAltNames(old->get());
      sans.dns.insert(had.dns.begin(), had.dns.end());
      sans.ips.insert(had.ips.begin(), had.ips.end());
    }
  }
  KeyPair serving;
  ASSIGN_OR_RETURN(serving.key, pki_internal::GenerateP256Key());
  pki_internal::CertificateSpec spec;
  spec.common_name = kServingCommonName;
  spec.not_before = options.now - kBackdate;
  spec.not_after =
      std::min(options.now + options.serving_validity, pki_internal::NotAfter(ca.cert.get()));
  spec.sans = std::move(sans);
  ASSIGN_OR_RETURN(serving.cert, pki_internal::IssueCertificate(spec, serving.key.get(),
                                                                ca.cert.get(), ca.key.get()));
  RETURN_IF_ERROR(
      WritePair(serving, pki.server_cert_path, pki.server_key_path, pki.server_cert_pem));
  pki.serving_generated = true;
  pki.serving_not_after = pki_internal::NotAfter(serving.cert.get());  // whole seconds
  common::LogInfo("issued the API server serving certificate",
                  {{"path", pki.server_cert_path},
                   {"reason", reason},
                   {"notAfter", absl::FormatTime(spec.not_after)}});
  return absl::OkStatus();
}

absl::Status LoadOrCreateToken(Pki& pki) {
  ASSIGN_OR_RETURN(std::optional<std::string> text, pki_internal::ReadFileIfExists(pki.token_path));
  if (text.has_value()) {
    std::string token(absl::StripAsciiWhitespace(*text));
    bool hex =
        token.size() == 2 * kTokenBytes && std::all_of(token.begin(), token.end(), [](char c) {
          return absl::ascii_isxdigit(static_cast<unsigned char>(c));
        });
    if (!hex) return Corrupt(pki.token_path, "expected 64 hexadecimal characters");
    pki.token = absl::AsciiStrToLower(token);
    return pki_internal::EnsureMode(pki.token_path, 0600);
  }
  unsigned char bytes[kTokenBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    ERR_clear_error();
    return absl::InternalError("RAND_bytes failed while generating the bearer token");
  }
  pki.token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  return pki_internal::WriteFileAtomic(pki.token_path, pki.token + "\n", 0600);
}

}  // namespace

absl::StatusOr<Pki> EnsurePki(const std::string& data_dir, const std::vector<std::string>& hosts,
                              const PkiOptions& options) {
  SubjectAltNames required;
  for (absl::string_view host : {"127.0.0.1", "::1", "localhost"}) {
    RETURN_IF_ERROR(pki_internal::AddHost(host, required));
  }
  for (const std::string& host : hosts) RETURN_IF_ERROR(pki_internal::AddHost(host, required));

  RETURN_IF_ERROR(pki_internal::EnsurePrivateDir(data_dir));
  ASSIGN_OR_RETURN(pki_internal::DirLock lock, pki_internal::DirLock::Acquire(data_dir));
  Pki pki;
  pki.ca_cert_path = Join(data_dir, "ca.crt");
  pki.ca_key_path = Join(data_dir, "ca.key");
  pki.server_cert_path = Join(data_dir, "server.crt");
  pki.server_key_path = Join(data_dir, "server.key");
  pki.token_path = Join(data_dir, "token");

  KeyPair ca;
  RETURN_IF_ERROR(LoadOrCreateCa(pki, options, ca));
  RETURN_IF_ERROR(LoadOrIssueServing(pki, options, ca, required));
  RETURN_IF_ERROR(LoadOrCreateToken(pki));
  return pki;
}

}  // namespace ctrlhost::apiserver
