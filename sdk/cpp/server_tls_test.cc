#include "sdk/cpp/server_tls.h"

#include <stdlib.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ctrlhost::sdk {
namespace {

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(LoadServerTlsTest, NothingSetIsPlaintext) {
  absl::StatusOr<std::optional<ServerTls>> tls = LoadServerTls("", "", "");
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE(tls->has_value());
}

TEST(LoadServerTlsTest, ReadsTheThreeFiles) {
  const std::string cert = WriteFile("cert.pem", kPem);
  const std::string key = WriteFile("key.pem", "-----BEGIN PRIVATE KEY-----\nx\n");
  const std::string ca = WriteFile("ca.pem", kPem);
  absl::StatusOr<std::optional<ServerTls>> tls = LoadServerTls(cert, key, ca);
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_TRUE(tls->has_value());
  EXPECT_EQ((*tls)->cert_chain_pem, kPem);
  EXPECT_EQ((*tls)->client_ca_pem, kPem);
  EXPECT_NE((*tls)->private_key_pem.find("PRIVATE KEY"), std::string::npos);
}

TEST(LoadServerTlsTest, CertificateAndKeyGoTogether) {
  const std::string cert = WriteFile("cert.pem", kPem);
  absl::StatusOr<std::optional<ServerTls>> tls = LoadServerTls(cert, "", "");
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tls.status().message(),
            "CTRLHOST_PLUGIN_TLS_CERT_FILE and CTRLHOST_PLUGIN_TLS_KEY_FILE must be set together "
            "(only CTRLHOST_PLUGIN_TLS_CERT_FILE is set)");
}

TEST(LoadServerTlsTest, ClientCaNeedsACertificate) {
  absl::StatusOr<std::optional<ServerTls>> tls = LoadServerTls("", "", WriteFile("ca.pem", kPem));
  EXPECT_EQ(tls.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tls.status().message().find("CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE needs"),
            std::string::npos);
}

TEST(LoadServerTlsTest, MissingAndNonPemFilesNameTheVariable) {
  const std::string cert = WriteFile("cert.pem", kPem);
  absl::StatusOr<std::optional<ServerTls>> missing = LoadServerTls(cert, "/nonexistent/k", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "CTRLHOST_PLUGIN_TLS_KEY_FILE=/nonexistent/k: cannot read: No such file or directory");
  absl::StatusOr<std::optional<ServerTls>> garbage =
      LoadServerTls(cert, WriteFile("key.txt", "not a key"), "");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("not a PEM file"), std::string::npos);
}

TEST(PlaintextTest, OnlyUnixAndLoopback) {
  for (const char* ok :
       {"unix:/tmp/x.sock", "127.0.0.1:0", "127.1.2.3:80", "localhost:9443", "[::1]:9443"}) {
    EXPECT_TRUE(IsLoopbackOrUnix(ok)) << ok;
    EXPECT_TRUE(CheckPlaintextAllowed(ok).ok()) << ok;
  }
  for (const char* refused :
       {"0.0.0.0:9443", "[::]:9443", "10.0.0.1:9443", "plugin.ctrlhost.svc:9443", "128.0.0.1:1"}) {
    EXPECT_FALSE(IsLoopbackOrUnix(refused)) << refused;
    absl::Status s = CheckPlaintextAllowed(refused);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_NE(s.message().find("refusing to serve plaintext on"), std::string::npos);
    EXPECT_NE(s.message().find("CTRLHOST_PLUGIN_TLS_CERT_FILE"), std::string::npos);
  }
}

}  // namespace
}  // namespace ctrlhost::sdk
