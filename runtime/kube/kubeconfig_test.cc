#include "runtime/kube/kubeconfig.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::kube {
namespace {

using ::testing::HasSubstr;

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/kc_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ::mkdir(dir_.c_str(), 0700);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    size_t slash = path.rfind('/');
    ::mkdir(path.substr(0, slash).c_str(), 0700);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    return path;
  }

  std::string dir_;
};

constexpr char kBasic[] = R"(apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority: ca.crt
    tls-server-name: api.local
- name: c2
  cluster:
    server: https://10.0.0.2:443
    insecure-skip-tls-verify: true
users:
- name: u1
  user:
    token: abc
- name: u2
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
contexts:
- name: one
  context: {cluster: c1, user: u1, namespace: team}
- name: two
  context: {cluster: c2, user: u2}
current-context: one
)";

// Found by reading the parser for hostile input: a referenced file was read whole and unbounded,
// so certificate-authority: /dev/zero never returned and a huge file filled memory.
TEST_F(KubeconfigTest, RegressionReferencedFilesMustBeSmallRegularFiles) {
  std::string config = kBasic;
  config.replace(config.find("certificate-authority: ca.crt"),
                 std::string("certificate-authority: ca.crt").size(),
                 "certificate-authority: /dev/zero");
  absl::StatusOr<RestConfig> loaded = LoadKubeconfigFile(Write("config", config));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("/dev/zero: not a regular file"));

  Write("ca.crt", std::string((4 << 20) + 1, 'x'));
  loaded = LoadKubeconfigFile(Write("config", kBasic));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr("larger than 4194304 bytes"));

  Write("ca.crt", "CA-PEM");
  EXPECT_TRUE(LoadKubeconfigFile(Write("config", kBasic)).ok());
}

TEST_F(KubeconfigTest, CurrentContextWithRelativeCaFile) {
  Write("ca.crt", "CA-PEM");
  std::string path = Write("config", kBasic);
  absl::StatusOr<RestConfig> config = LoadKubeconfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "https://127.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(config->ca_pem, "CA-PEM");
  EXPECT_EQ(config->tls_server_name, "api.local");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->default_namespace, "team");
  EXPECT_EQ(config->context, "one");
  EXPECT_EQ(*config->Token(), "abc");
}

TEST_F(KubeconfigTest, NamedContextWithInlineClientCert) {
  std::string path = Write("config", kBasic);
  absl::StatusOr<RestConfig> config = LoadKubeconfigFile(path, "two");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "https://10.0.0.2:443");
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->client_cert_pem, "CERT");
  EXPECT_EQ(config->client_key_pem, "KEY");
  EXPECT_EQ(config->default_namespace, "default");
  EXPECT_EQ(*config->Token(), "");
}

TEST_F(KubeconfigTest, ErrorsNameFileAndField) {
  std::string path = Write("config", kBasic);
  absl::StatusOr<RestConfig> config = LoadKubeconfigFile(path, "missing");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("context \"missing\" not found"));

  // The CA file named by the cluster does not exist.
  config = LoadKubeconfigFile(path, "one");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(),
              HasSubstr("clusters[\"c1\"].cluster.certificate-authority"));
  EXPECT_THAT(config.status().message(), HasSubstr(path));

  std::string bad = Write("bad", R"(clusters:
- name: c
  cluster: {server: "https://x"}
users:
- name: u
  user: {client-certificate-data: "!!!", client-key-data: S0VZ}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
)");
  config = LoadKubeconfigFile(bad);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(),
              HasSubstr("users[\"u\"].user.client-certificate-data: not valid base64"));

  std::string yaml = Write("yaml", "clusters: [\n  - {name: a\n");
  config = LoadKubeconfigFile(yaml);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr(yaml));

  std::string types = Write("types", "clusters: 3\n");
  config = LoadKubeconfigFile(types);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("clusters: must be a list"));

  std::string exec = Write("exec", R"(clusters: [{name: c, cluster: {server: "https://x"}}]
users: [{name: u, user: {exec: {command: foo}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)");
  config = LoadKubeconfigFile(exec);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(config.status().message(), HasSubstr("users[\"u\"].user.exec"));

  std::string nocurrent = Write("nocurrent", "clusters: []\n");
  config = LoadKubeconfigFile(nocurrent);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);

  config = LoadKubeconfigFile(dir_ + "/does-not-exist");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);

  std::string noscheme = Write("noscheme", R"(clusters: [{name: c, cluster: {server: "x:1"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)");
  config = LoadKubeconfigFile(noscheme);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("clusters[\"c\"].cluster.server"));
}

TEST_F(KubeconfigTest, MergeFirstFileWinsAndMissingFilesSkipped) {
  std::string a = Write("a", R"(clusters:
- name: shared
  cluster: {server: "https://first:1"}
contexts:
- name: ctx
  context: {cluster: shared, user: ua}
)");
  std::string b = Write("b", R"(clusters:
- name: shared
  cluster: {server: "https://second:2"}
users:
- name: ua
  user: {token: from-b}
contexts:
- name: ctx
  context: {cluster: other}
current-context: ctx
)");
  std::string c = Write("c", "current-context: ignored\n");
  std::vector<std::string> paths =
      SplitKubeconfigPaths(absl::StrCat(a, "::", dir_, "/missing:", b, ":", c, ":", a));
  ASSERT_EQ(paths.size(), 4u);  // empty and duplicate entries dropped
  absl::StatusOr<RestConfig> config = LoadKubeconfigFiles(paths);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->context, "ctx");           // from b, the first that sets it
  EXPECT_EQ(config->host, "https://first:1");  // cluster "shared" from a
  EXPECT_EQ(*config->Token(), "from-b");       // user only in b

  EXPECT_EQ(LoadKubeconfigFiles({dir_ + "/nope"}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(KubeconfigTest, TokenFileIsReReadWhenItChanges) {
  std::string token = Write("sub/token", "first\n");
  std::string path = Write("sub/config", R"(clusters: [{name: c, cluster: {server: "https://x:1"}}]
users: [{name: u, user: {tokenFile: token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)");
  absl::StatusOr<RestConfig> config = LoadKubeconfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config->Token(), "first");
  // Rotation the way kubelet does it: a new file renamed over the old one.
  std::string next = Write("sub/token.new", "second-token");
  ASSERT_EQ(::rename(next.c_str(), token.c_str()), 0);
  EXPECT_EQ(*config->Token(), "second-token");
  // A vanished file keeps the last good token.
  ASSERT_EQ(::unlink(token.c_str()), 0);
  EXPECT_EQ(*config->Token(), "second-token");

  std::string missing =
      Write("sub/config2", R"(clusters: [{name: c, cluster: {server: "https://x:1"}}]
users: [{name: u, user: {tokenFile: /nonexistent/token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)");
  config = LoadKubeconfigFile(missing);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("users[\"u\"].user.tokenFile"));
}

TEST_F(KubeconfigTest, DefaultConfigPrefersExplicitPathThenKubeconfigEnv) {
  std::string a = Write("a", R"(clusters: [{name: c, cluster: {server: "https://a:1"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)");
  std::string b = Write("b", R"(clusters: [{name: c, cluster: {server: "https://b:1"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)");
  ASSERT_EQ(::setenv("KUBECONFIG", absl::StrCat(b, ":", a).c_str(), 1), 0);
  absl::StatusOr<RestConfig> config = LoadDefaultConfig(a);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "https://a:1");
  config = LoadDefaultConfig("");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "https://b:1");
  ::unsetenv("KUBECONFIG");
}

TEST_F(KubeconfigTest, InClusterConfig) {
  InClusterEnv env;
  env.root_dir = dir_ + "/root";
  env.service_host = "";
  env.service_port = "";
  EXPECT_EQ(InClusterConfig(env).status().code(), absl::StatusCode::kFailedPrecondition);

  env.service_host = "10.96.0.1";
  env.service_port = "443";
  EXPECT_EQ(InClusterConfig(env).status().code(), absl::StatusCode::kNotFound);  // no token

  const std::string sa = "root/var/run/secrets/kubernetes.io/serviceaccount";
  ::mkdir((dir_ + "/root").c_str(), 0700);
  ::mkdir((dir_ + "/root/var").c_str(), 0700);
  ::mkdir((dir_ + "/root/var/run").c_str(), 0700);
  ::mkdir((dir_ + "/root/var/run/secrets").c_str(), 0700);
  ::mkdir((dir_ + "/root/var/run/secrets/kubernetes.io").c_str(), 0700);
  std::string token = Write(sa + "/token", "sa-token-1");
  Write(sa + "/ca.crt", "SA-CA");
  Write(sa + "/namespace", "prod\n");
  absl::StatusOr<RestConfig> config = InClusterConfig(env);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "https://10.96.0.1:443");
  EXPECT_EQ(config->ca_pem, "SA-CA");
  EXPECT_EQ(config->default_namespace, "prod");
  EXPECT_EQ(*config->Token(), "sa-token-1");
  std::string next = Write(sa + "/token.tmp", "sa-token-2-longer");
  ASSERT_EQ(::rename(next.c_str(), token.c_str()), 0);
  EXPECT_EQ(*config->Token(), "sa-token-2-longer");

  env.service_host = "fd00::1";
  config = InClusterConfig(env);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->host, "https://[fd00::1]:443");
}

}  // namespace
}  // namespace ctrlhost::kube
