#include "runtime/apiserver/pki/pki.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/common/testing/as_unprivileged.h"
#include "yaml-cpp/yaml.h"

namespace ctrlhost::apiserver {
namespace {

using ::testing::HasSubstr;

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using Cert = std::unique_ptr<X509, X509Free>;

Cert ParseCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return Cert(cert);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

int Mode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 07777;
}

class PkiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string base = tmp != nullptr ? tmp : "/tmp";
    dir_ = absl::StrCat(base, "/pki-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/data");
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

TEST_F(PkiTest, FirstStartGeneratesEverything) {
  absl::StatusOr<Pki> pki = EnsurePki(dir_, {"10.1.2.3", "MyHost.Example.com", "fd00::5"});
  ASSERT_TRUE(pki.ok()) << pki.status();
  EXPECT_TRUE(pki->ca_generated);
  EXPECT_TRUE(pki->serving_generated);
  EXPECT_EQ(pki->server_cert_path, Path("server.crt"));
  EXPECT_EQ(pki->server_key_path, Path("server.key"));
  EXPECT_EQ(pki->ca_cert_pem, ReadFile(Path("ca.crt")));
  ASSERT_EQ(pki->token.size(), 64u);
  EXPECT_EQ(pki->token.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(ReadFile(Path("token")), pki->token + "\n");

  EXPECT_EQ(Mode(dir_), 0700);
  for (const char* f : {"ca.crt", "ca.key", "server.crt", "server.key", "token"}) {
    EXPECT_EQ(Mode(Path(f)), 0600) << f;
  }

  Cert ca = ParseCert(ReadFile(Path("ca.crt")));
  Cert server = ParseCert(ReadFile(Path("server.crt")));
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(server, nullptr);

  // The CA: self-signed, a CA, CN ctrlhost-ca, ECDSA P-256, about 10 years.
  EXPECT_EQ(X509_verify(ca.get(), X509_get0_pubkey(ca.get())), 1);
  EXPECT_GE(X509_check_ca(ca.get()), 1);
  char cn[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(ca.get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "ctrlhost-ca");
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  EXPECT_EQ(EVP_PKEY_get_base_id(ca_key), EVP_PKEY_EC);
  char group[32] = {};
  size_t group_len = 0;
  EVP_PKEY_get_group_name(ca_key, group, sizeof(group), &group_len);
  EXPECT_STREQ(group, "prime256v1");
  int days = 0, secs = 0;
  ASSERT_EQ(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(ca.get())), 1);
  EXPECT_GT(days, 3640);
  EXPECT_LE(days, 3650);

  // The serving certificate chains to the CA and has the SANs.
  EXPECT_EQ(X509_verify(server.get(), X509_get0_pubkey(ca.get())), 1);
  EXPECT_EQ(X509_check_issued(ca.get(), server.get()), X509_V_OK);
  EXPECT_EQ(X509_check_ca(server.get()), 0);
  for (const char* ip : {"127.0.0.1", "::1", "10.1.2.3", "fd00::5"}) {
    EXPECT_EQ(X509_check_ip_asc(server.get(), ip, 0), 1) << ip;
  }
  EXPECT_EQ(X509_check_ip_asc(server.get(), "10.9.9.9", 0), 0);
  for (const char* host : {"localhost", "myhost.example.com"}) {
    EXPECT_EQ(X509_check_host(server.get(), host, 0, 0, nullptr), 1) << host;
  }
  EXPECT_EQ(X509_check_host(server.get(), "other.example.com", 0, 0, nullptr), 0);
  ASSERT_EQ(ASN1_TIME_diff(&days, &secs, nullptr, X509_get0_notAfter(server.get())), 1);
  EXPECT_GT(days, 360);
  EXPECT_LE(days, 365);

  // A full TLS-server chain verification, as a client would do it.
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, server.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  EXPECT_EQ(X509_verify_cert(ctx), 1)
      << X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
}

TEST_F(PkiTest, SecondStartReusesEverything) {
  absl::StatusOr<Pki> first = EnsurePki(dir_, {"example.com"});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Pki> second = EnsurePki(dir_, {"example.com"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->ca_generated);
  EXPECT_FALSE(second->serving_generated);
  EXPECT_EQ(second->ca_cert_pem, first->ca_cert_pem);
  EXPECT_EQ(second->server_cert_pem, first->server_cert_pem);
  EXPECT_EQ(second->token, first->token);
  EXPECT_EQ(second->serving_not_after, first->serving_not_after);
}

TEST_F(PkiTest, NewHostReissuesServingCertWithSameCa) {
  absl::StatusOr<Pki> first = EnsurePki(dir_, {"a.example.com"});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Pki> second = EnsurePki(dir_, {"b.example.com", "192.168.7.7"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->ca_generated);
  EXPECT_TRUE(second->serving_generated);
  EXPECT_EQ(second->ca_cert_pem, first->ca_cert_pem);
  EXPECT_EQ(second->token, first->token);
  Cert server = ParseCert(second->server_cert_pem);
  Cert ca = ParseCert(second->ca_cert_pem);
  EXPECT_EQ(X509_verify(server.get(), X509_get0_pubkey(ca.get())), 1);
  EXPECT_EQ(X509_check_host(server.get(), "b.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(server.get(), "a.example.com", 0, 0, nullptr), 1);  // kept
  EXPECT_EQ(X509_check_ip_asc(server.get(), "192.168.7.7", 0), 1);
  // A subset of the covered hosts needs nothing new.
  absl::StatusOr<Pki> third = EnsurePki(dir_, {"a.example.com"});
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->serving_generated);
}

TEST_F(PkiTest, ExpiringServingCertIsRenewed) {
  PkiOptions past;
  past.now = absl::Now() - absl::Hours(24 * 340);
  absl::StatusOr<Pki> first = EnsurePki(dir_, {}, past);
  ASSERT_TRUE(first.ok()) << first.status();
  // Still 25 days left, but that is inside the 30-day window.
  absl::StatusOr<Pki> second = EnsurePki(dir_, {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->serving_generated);
  EXPECT_FALSE(second->ca_generated);
  EXPECT_EQ(second->ca_cert_pem, first->ca_cert_pem);
  EXPECT_GT(second->serving_not_after, absl::Now() + absl::Hours(24 * 360));

  // 40 days left: outside the window, kept.
  PkiOptions later;
  later.now = absl::Now() + absl::Hours(24 * 325);
  absl::StatusOr<Pki> third = EnsurePki(dir_, {}, later);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->serving_generated);
}

TEST_F(PkiTest, ExpiredCaIsRefused) {
  PkiOptions old;
  old.now = absl::Now() - absl::Hours(24 * 3660);
  ASSERT_TRUE(EnsurePki(dir_, {}, old).ok());
  absl::StatusOr<Pki> pki = EnsurePki(dir_, {});
  EXPECT_EQ(pki.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pki.status().message()), HasSubstr("expired"));
}

TEST_F(PkiTest, CorruptFilesAreRefusedNotReplaced) {
  ASSERT_TRUE(EnsurePki(dir_, {}).ok());
  const std::string ca_pem = ReadFile(Path("ca.crt"));
  struct Case {
    std::string file;
    std::string content;
    std::string message;
  };
  std::vector<Case> cases = {
      {"ca.crt", "garbage", "ca.crt is corrupt"},
      {"ca.key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
       "ca.key is corrupt"},
      {"server.crt", "", "server.crt is corrupt"},
      {"server.key", "nope", "server.key is corrupt"},
      {"token", "short", "token is corrupt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string original = ReadFile(Path(c.file));
    WriteFile(Path(c.file), c.content);
    absl::StatusOr<Pki> pki = EnsurePki(dir_, {});
    EXPECT_EQ(pki.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(pki.status().message()), HasSubstr(c.message));
    EXPECT_EQ(ReadFile(Path(c.file)), c.content);  // left alone
    WriteFile(Path(c.file), original);
  }
  absl::StatusOr<Pki> restored = EnsurePki(dir_, {});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->ca_cert_pem, ca_pem);
}

TEST_F(PkiTest, MismatchedOrHalfMissingCaIsRefused) {
  ASSERT_TRUE(EnsurePki(dir_, {}).ok());
  // server.key in place of ca.key: a valid key, but not the CA's.
  const std::string ca_key = ReadFile(Path("ca.key"));
  WriteFile(Path("ca.key"), ReadFile(Path("server.key")));
  absl::StatusOr<Pki> pki = EnsurePki(dir_, {});
  EXPECT_EQ(pki.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pki.status().message()), HasSubstr("does not hold the private key"));

  ASSERT_EQ(::unlink(Path("ca.key").c_str()), 0);
  pki = EnsurePki(dir_, {});
  EXPECT_EQ(pki.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pki.status().message()), HasSubstr("ca.key is missing"));
  EXPECT_FALSE(ReadFile(Path("ca.crt")).empty());
}

TEST_F(PkiTest, ServingCertFromAnotherCaIsReplaced) {
  ASSERT_TRUE(EnsurePki(dir_, {}).ok());
  const std::string other = dir_ + "-other";
  ASSERT_TRUE(EnsurePki(other, {}).ok());
  WriteFile(Path("server.crt"), ReadFile(other + "/server.crt"));
  WriteFile(Path("server.key"), ReadFile(other + "/server.key"));
  absl::StatusOr<Pki> pki = EnsurePki(dir_, {});
  ASSERT_TRUE(pki.ok()) << pki.status();
  EXPECT_TRUE(pki->serving_generated);
  Cert server = ParseCert(pki->server_cert_pem);
  Cert ca = ParseCert(pki->ca_cert_pem);
  EXPECT_EQ(X509_verify(server.get(), X509_get0_pubkey(ca.get())), 1);
}

TEST_F(PkiTest, LooseModesAreTightened) {
  ASSERT_TRUE(EnsurePki(dir_, {}).ok());
  ASSERT_EQ(::chmod(Path("token").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(Path("ca.key").c_str(), 0640), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_TRUE(EnsurePki(dir_, {}).ok());
  EXPECT_EQ(Mode(Path("token")), 0600);
  EXPECT_EQ(Mode(Path("ca.key")), 0600);
  EXPECT_EQ(Mode(dir_), 0700);
}

// Root reads any file: the check runs as an unprivileged user (as root, uid 65534 in a child),
// so that it runs, and can fail, in CI too.
TEST_F(PkiTest, UnreadableFileIsAnError) {
  const std::string dir = common::testing::UnprivilegedDir();
  ASSERT_FALSE(dir.empty());
  const std::string failure = common::testing::RunUnprivileged([&]() -> std::string {
    if (!EnsurePki(dir, {}).ok()) return "the first EnsurePki failed";
    if (::chmod((dir + "/ca.key").c_str(), 0) != 0) return "chmod failed";
    absl::StatusOr<Pki> pki = EnsurePki(dir, {});
    if (pki.status().code() != absl::StatusCode::kPermissionDenied) {
      return "not PERMISSION_DENIED: " + pki.status().ToString();
    }
    if (std::string(pki.status().message()).find("ca.key") == std::string::npos) {
      return "the message does not name ca.key: " + pki.status().ToString();
    }
    return "";
  });
  EXPECT_EQ(failure, "");
  std::filesystem::remove_all(dir);
}

TEST_F(PkiTest, BadHostsAndDirectories) {
  for (const char* host : {"", "bad host", "under_score.com", "-x.com", "1.2.3.4.5/6"}) {
    absl::StatusOr<Pki> pki = EnsurePki(dir_, {host});
    EXPECT_EQ(pki.status().code(), absl::StatusCode::kInvalidArgument) << host;
  }
  EXPECT_TRUE(EnsurePki(dir_, {"*.apps.example.com", "[::2]", " 10.0.0.1 "}).ok());
  WriteFile(dir_ + "/file", "x");
  EXPECT_EQ(EnsurePki(dir_ + "/file", {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EnsurePki("", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PkiTest, ConcurrentFirstStartsAgreeOnOneCa) {
  std::vector<std::string> pems(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < pems.size(); ++i) {
    threads.emplace_back([this, i, &pems] {
      absl::StatusOr<Pki> pki = EnsurePki(dir_, {});
      if (pki.ok()) pems[i] = pki->ca_cert_pem;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& pem : pems) {
    EXPECT_FALSE(pem.empty());
    EXPECT_EQ(pem, pems[0]);
  }
}

TEST_F(PkiTest, KubeconfigHasWhatKubectlNeeds) {
  absl::StatusOr<Pki> pki = EnsurePki(dir_, {});
  ASSERT_TRUE(pki.ok()) << pki.status();
  const std::string path = dir_ + "/sub/kubeconfig";
  ASSERT_TRUE(WriteKubeconfig(path, "https://127.0.0.1:6443", pki->ca_cert_pem, pki->token).ok());
  EXPECT_EQ(Mode(path), 0600);
  EXPECT_EQ(Mode(dir_ + "/sub"), 0700);
  YAML::Node config = YAML::LoadFile(path);
  EXPECT_EQ(config["apiVersion"].as<std::string>(), "v1");
  EXPECT_EQ(config["kind"].as<std::string>(), "Config");
  EXPECT_EQ(config["current-context"].as<std::string>(), "ctrlhost");
  ASSERT_EQ(config["clusters"].size(), 1u);
  YAML::Node cluster = config["clusters"][0];
  EXPECT_EQ(cluster["name"].as<std::string>(), "ctrlhost");
  EXPECT_EQ(cluster["cluster"]["server"].as<std::string>(), "https://127.0.0.1:6443");
  std::string ca;
  ASSERT_TRUE(absl::Base64Unescape(
      cluster["cluster"]["certificate-authority-data"].as<std::string>(), &ca));
  EXPECT_EQ(ca, pki->ca_cert_pem);
  ASSERT_EQ(config["users"].size(), 1u);
  EXPECT_EQ(config["users"][0]["name"].as<std::string>(), "ctrlhost");
  EXPECT_EQ(config["users"][0]["user"]["token"].as<std::string>(), pki->token);
  ASSERT_EQ(config["contexts"].size(), 1u);
  YAML::Node context = config["contexts"][0];
  EXPECT_EQ(context["name"].as<std::string>(), "ctrlhost");
  EXPECT_EQ(context["context"]["cluster"].as<std::string>(), "ctrlhost");
  EXPECT_EQ(context["context"]["user"].as<std::string>(), "ctrlhost");

  // The CA may also be given as a file path, and the file is replaced on rewrite.
  ASSERT_TRUE(WriteKubeconfig(path, "https://[::1]:1234", pki->ca_cert_path, "t", "dev").ok());
  config = YAML::LoadFile(path);
  EXPECT_EQ(config["current-context"].as<std::string>(), "dev");
  EXPECT_EQ(config["clusters"][0]["cluster"]["server"].as<std::string>(), "https://[::1]:1234");
  ASSERT_TRUE(absl::Base64Unescape(
      config["clusters"][0]["cluster"]["certificate-authority-data"].as<std::string>(), &ca));
  EXPECT_EQ(ca, pki->ca_cert_pem);
}

TEST_F(PkiTest, KubeconfigForPlainHttpAndErrors) {
  const std::string path = Path("kubeconfig");
  ASSERT_TRUE(WriteKubeconfig(path, "http://127.0.0.1:8080", "", "", "ctrlhost").ok());
  YAML::Node config = YAML::LoadFile(path);
  EXPECT_FALSE(config["clusters"][0]["cluster"]["certificate-authority-data"]);
  EXPECT_TRUE(config["users"][0]["user"].IsMap());
  EXPECT_FALSE(config["users"][0]["user"]["token"]);

  EXPECT_EQ(WriteKubeconfig(path, "https://x", "-----BEGIN CERTIFICATE-----\nzz\n", "t").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteKubeconfig(path, "https://x", dir_ + "/missing.crt", "t").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(WriteKubeconfig("", "https://x", "", "t").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteKubeconfig(path, "", "", "t").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ctrlhost::apiserver
