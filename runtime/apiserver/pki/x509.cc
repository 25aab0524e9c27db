#include "runtime/apiserver/pki/x509.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kube/validation.h"

namespace ctrlhost::apiserver::pki_internal {
namespace {

struct BioDeleter {
  void operator()(BIO* p) const { BIO_free(p); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

// An Internal status with OpenSSL's queued errors; empties the queue.
absl::Status OpenSslError(absl::string_view what) {
  std::vector<std::string> errors;
  unsigned long code;
  while ((code = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof(buf));
    errors.emplace_back(buf);
  }
  if (errors.empty()) return absl::InternalError(what);
  return absl::InternalError(absl::StrCat(what, ": ", absl::StrJoin(errors, "; ")));
}

// Never prompt on a terminal for a passphrase: our keys are unencrypted, and an encrypted one
// is a corrupt file here.
int NoPassphrase(char*, int, int, void*) { return 0; }

absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  if (ext == nullptr) return OpenSslError(absl::StrCat("cannot build extension ", value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return OpenSslError(absl::StrCat("cannot add extension ", value));
  return absl::OkStatus();
}

absl::Status AddSubjectAltNames(X509* cert, const SubjectAltNames& sans) {
  GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
  if (names == nullptr) return OpenSslError("cannot allocate subjectAltName");
  auto add = [names](int type, const std::string& value) {
    GENERAL_NAME* name = GENERAL_NAME_new();
    if (name == nullptr) return false;
    ASN1_STRING* str = type == GEN_DNS ? ASN1_IA5STRING_new() : ASN1_OCTET_STRING_new();
    if (str == nullptr || ASN1_STRING_set(str, value.data(), static_cast<int>(value.size())) != 1) {
      ASN1_STRING_free(str);
      GENERAL_NAME_free(name);
      return false;
    }
    GENERAL_NAME_set0_value(name, type, str);
    if (sk_GENERAL_NAME_push(names, name) == 0) {
      GENERAL_NAME_free(name);
      return false;
    }
    return true;
  };
  bool ok = true;
  for (const std::string& dns : sans.dns) ok = ok && add(GEN_DNS, dns);
  for (const std::string& ip : sans.ips) ok = ok && add(GEN_IPADD, ip);
  ok = ok && X509_add1_ext_i2d(cert, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT) == 1;
  GENERAL_NAMES_free(names);
  if (!ok) return OpenSslError("cannot add subjectAltName");
  return absl::OkStatus();
}

absl::Status SetRandomSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return OpenSslError("RAND_bytes failed");
  bytes[0] = (bytes[0] & 0x7f) | 0x01;  // positive and non-zero, as RFC 5280 requires
  BIGNUM* bn = BN_bin2bn(bytes, sizeof(bytes), nullptr);
  ASN1_INTEGER* serial = bn == nullptr ? nullptr : BN_to_ASN1_INTEGER(bn, nullptr);
  BN_free(bn);
  bool ok = serial != nullptr && X509_set_serialNumber(cert, serial) == 1;
  ASN1_INTEGER_free(serial);
  if (!ok) return OpenSslError("cannot set the serial number");
  return absl::OkStatus();
}

}  // namespace

absl::Status AddHost(absl::string_view host, SubjectAltNames& sans) {
  std::string h(absl::StripAsciiWhitespace(host));
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  unsigned char addr[16];
  if (inet_pton(AF_INET, h.c_str(), addr) == 1) {
    sans.ips.insert(std::string(reinterpret_cast<char*>(addr), 4));
    return absl::OkStatus();
  }
  if (inet_pton(AF_INET6, h.c_str(), addr) == 1) {
    sans.ips.insert(std::string(reinterpret_cast<char*>(addr), 16));
    return absl::OkStatus();
  }
  std::string dns = absl::AsciiStrToLower(h);
  absl::string_view base = dns;
  if (absl::StartsWith(base, "*.")) base.remove_prefix(2);
  std::vector<std::string> errs = kube::IsDns1123Subdomain(base);
  if (!errs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", kube::GoQuote(host),
                     " is neither an IP address nor a DNS name: ", absl::StrJoin(errs, "; ")));
  }
  sans.dns.insert(std::move(dns));
  return absl::OkStatus();
}

absl::StatusOr<PkeyPtr> GenerateP256Key() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (key == nullptr) return OpenSslError("cannot generate an ECDSA P-256 key");
  return key;
}

absl::StatusOr<X509Ptr> IssueCertificate(const CertificateSpec& spec, EVP_PKEY* subject_key,
                                         X509* issuer, EVP_PKEY* issuer_key) {
  X509Ptr cert(X509_new());
  if (cert == nullptr) return OpenSslError("X509_new failed");
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1) return OpenSslError("set version");
  if (absl::Status s = SetRandomSerial(cert.get()); !s.ok()) return s;
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()), absl::ToTimeT(spec.not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), absl::ToTimeT(spec.not_after)) == nullptr) {
    return OpenSslError("cannot set the validity period");
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(spec.common_name.c_str()),
                                 -1, -1, 0) != 1) {
    return OpenSslError("cannot set the subject");
  }
  X509_NAME* issuer_name = issuer == nullptr ? subject : X509_get_subject_name(issuer);
  if (X509_set_issuer_name(cert.get(), issuer_name) != 1 ||
      X509_set_pubkey(cert.get(), subject_key) != 1) {
    return OpenSslError("cannot set the issuer or public key");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer == nullptr ? cert.get() : issuer, cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, const char*>> extensions;
  if (spec.is_ca) {
    extensions = {{NID_basic_constraints, "critical,CA:TRUE"},
                  {NID_key_usage, "critical,digitalSignature,keyCertSign,cRLSign"},
                  {NID_subject_key_identifier, "hash"}};
  } else {
    extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                  {NID_key_usage, "critical,digitalSignature"},
                  {NID_ext_key_usage, "serverAuth"},
                  {NID_subject_key_identifier, "hash"},
                  {NID_authority_key_identifier, "keyid:always"}};
  }
  for (const auto& [nid, value] : extensions) {
    if (absl::Status s = AddExtension(cert.get(), &ctx, nid, value); !s.ok()) return s;
  }
  if (!spec.sans.dns.empty() || !spec.sans.ips.empty()) {
    if (absl::Status s = AddSubjectAltNames(cert.get(), spec.sans); !s.ok()) return s;
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) <= 0) {
    return OpenSslError("cannot sign the certificate");
  }
  return cert;
}

absl::StatusOr<std::string> CertificateToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpenSslError("cannot encode the certificate");
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<std::string> PrivateKeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("cannot encode the private key");
  }
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

absl::StatusOr<X509Ptr> CertificateFromPem(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(bio == nullptr ? nullptr
                              : PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  if (cert == nullptr) {
    absl::Status s = OpenSslError("not a PEM certificate");
    return absl::InvalidArgumentError(s.message());
  }
  return cert;
}

absl::StatusOr<PkeyPtr> PrivateKeyFromPem(absl::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(bio == nullptr ? nullptr
                             : PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    absl::Status s = OpenSslError("not an unencrypted PEM private key");
    return absl::InvalidArgumentError(s.message());
  }
  return key;
}

absl::Time NotAfter(X509* cert) {
  struct tm tm = {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) {
    ERR_clear_error();
    return absl::InfinitePast();
  }
  return absl::FromTimeT(timegm(&tm));
}

SubjectAltNames GetSubjectAltNames(X509* cert) {
  SubjectAltNames out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      out.dns.insert(absl::AsciiStrToLower(
          absl::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                            static_cast<size_t>(ASN1_STRING_length(s)))));
    } else if (name->type == GEN_IPADD) {
      const ASN1_STRING* s = name->d.iPAddress;
      out.ips.insert(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                 static_cast<size_t>(ASN1_STRING_length(s))));
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

bool SignedBy(X509* cert, X509* ca) {
  bool ok =
      X509_check_issued(ca, cert) == X509_V_OK && X509_verify(cert, X509_get0_pubkey(ca)) == 1;
  ERR_clear_error();
  return ok;
}

bool IsCa(X509* cert) { return X509_check_ca(cert) >= 1; }

}  // namespace ctrlhost::apiserver::pki_internal
