// WriteKubeconfig, declared in pki.h.
#include <sys/stat.h>

#include <cerrno>
#include <exception>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/apiserver/pki/files.h"
#include "runtime/apiserver/pki/pki.h"
#include "runtime/apiserver/pki/x509.h"
#include "runtime/common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::apiserver {
namespace {

// The CA PEM from `ca`, which is PEM text or a file path; "" stays "".
absl::StatusOr<std::string> CaPem(absl::string_view ca) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(ca);
  if (trimmed.empty()) return std::string();
  std::string pem;
  if (absl::StartsWith(trimmed, "-----BEGIN")) {
    pem = std::string(ca);
  } else {
    std::string path(ca);
    ASSIGN_OR_RETURN(std::optional<std::string> text, pki_internal::ReadFileIfExists(path));
    if (!text.has_value()) {
      return absl::NotFoundError(absl::StrCat("CA certificate file ", path, " does not exist"));
    }
    pem = *std::move(text);
  }
  absl::StatusOr<pki_internal::X509Ptr> cert = pki_internal::CertificateFromPem(pem);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CA for the kubeconfig is not a PEM certificate: ", cert.status().message()));
  }
  return pem;
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "";
  return path.substr(0, slash);
}

}  // namespace

absl::Status WriteKubeconfig(const std::string& path, absl::string_view server_url,
                             absl::string_view ca, absl::string_view token,
                             absl::string_view context_name) {
  if (path.empty()) return absl::InvalidArgumentError("the kubeconfig path must not be empty");
  if (server_url.empty()) return absl::InvalidArgumentError("the server URL must not be empty");
  if (context_name.empty()) {
    return absl::InvalidArgumentError("the kubeconfig context name must not be empty");
  }
  ASSIGN_OR_RETURN(std::string ca_pem, CaPem(ca));
  const std::string name(context_name);
  std::string text;
  try {
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "apiVersion" << YAML::Value << "v1";
    out << YAML::Key << "kind" << YAML::Value << "Config";
    out << YAML::Key << "clusters" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << name;
    out << YAML::Key << "cluster" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "server" << YAML::Value << std::string(server_url);
    if (!ca_pem.empty()) {
      out << YAML::Key << "certificate-authority-data" << YAML::Value << absl::Base64Escape(ca_pem);
    }
    out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
    out << YAML::Key << "users" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << name;
    out << YAML::Key << "user" << YAML::Value << YAML::BeginMap;
    if (!token.empty()) out << YAML::Key << "token" << YAML::Value << std::string(token);
    out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
    out << YAML::Key << "contexts" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << name;
    out << YAML::Key << "context" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "cluster" << YAML::Value << name;
    out << YAML::Key << "user" << YAML::Value << name;
    out << YAML::EndMap << YAML::EndMap << YAML::EndSeq;
    out << YAML::Key << "current-context" << YAML::Value << name;
    out << YAML::Key << "preferences" << YAML::Value << YAML::BeginMap << YAML::EndMap;
    out << YAML::EndMap;
    if (!out.good()) {
      return absl::InternalError(absl::StrCat("cannot emit the kubeconfig: ", out.GetLastError()));
    }
    text = std::string(out.c_str()) + "\n";
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot emit the kubeconfig: ", e.what()));
  }
  std::string parent = ParentDir(path);
  struct stat st;
  if (!parent.empty() && ::stat(parent.c_str(), &st) != 0 && errno == ENOENT) {
    RETURN_IF_ERROR(pki_internal::EnsurePrivateDir(parent));
  }
  return pki_internal::WriteFileAtomic(path, text, 0600);
}

}  // namespace ctrlhost::apiserver
