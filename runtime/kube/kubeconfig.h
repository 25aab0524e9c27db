// Client configuration: where the API server is and how to authenticate to it.
//
// Two sources, like client-go's clientcmd and rest.InClusterConfig:
//   - kubeconfig files: an explicit path (`--kubeconfig`), or `$KUBECONFIG` as a ':'-separated
//     list merged the way kubectl merges it (per map entry the first file that names it wins;
//     current-context comes from the first file that sets it; missing files in the list are
//     skipped), else ~/.kube/config;
//   - in-cluster: KUBERNETES_SERVICE_HOST/PORT plus the service-account token, CA and namespace
//     under /var/run/secrets/kubernetes.io/serviceaccount (root directory injectable for tests).
//
//   ASSIGN_OR_RETURN(kube::RestConfig config, kube::LoadKubeconfigFile(path));
//   ASSIGN_OR_RETURN(std::string token, config.Token());   // re-reads a rotated token file
//
// Relative file paths inside a kubeconfig are resolved against the directory of the file that
// defines them. Errors name the file and the field (`kubeconfig /x/config: users["u"].user.
// client-key-data: not valid base64`). Unsupported authentication (exec plugins, auth-provider)
// is refused with kUnimplemented rather than silently ignored.
#ifndef CTRLHOST_RUNTIME_KUBE_KUBECONFIG_H_
#define CTRLHOST_RUNTIME_KUBE_KUBECONFIG_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::kube {

// A bearer token kept in a file that may be rotated (kubelet swaps the projected
// service-account token; `tokenFile:` in a kubeconfig). Token() stats the file on every call
// and re-reads it when its inode, size or modification time changed; when a re-read fails after
// an earlier success, the last good token is returned (like client-go's cached token source).
// Reload() re-reads it whatever stat says: RestClient calls it after a 401 (client-go resets
// its token source on a 401 too), for a file rewritten in place that stat cannot tell apart.
// Thread-safe: all state is guarded by mu_.
class TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  // The current token with surrounding whitespace trimmed. kNotFound / kPermissionDenied when
  // the file was never readable, kInvalidArgument when it is empty.
  absl::StatusOr<std::string> Token();
  // Re-reads the file now; true when that gave a different token than the one held.
  bool Reload();
  const std::string& path() const { return path_; }

 private:
  absl::StatusOr<std::string> Read(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;  // constant after construction

  common::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  ino_t inode_ ABSL_GUARDED_BY(mu_) = 0;
  off_t size_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
};

// Everything the transport needs to reach and authenticate to one API server. A value type;
// copies share the TokenFile.
struct RestConfig {
  std::string host;    // "https://10.0.0.1:443"; no trailing slash
  std::string ca_pem;  // PEM bundle to trust; empty: the system roots
  bool insecure_skip_tls_verify = false;
  // Name to verify the server certificate against, when it differs from the host. Parsed and
  // kept; the httplib transport can only verify against the host name (see README).
  std::string tls_server_name;
  std::string client_cert_pem;  // both or neither
  std::string client_key_pem;
  std::string bearer_token;               // static token; ignored when token_file is set
  std::shared_ptr<TokenFile> token_file;  // re-read on rotation
  std::string default_namespace = "default";
  std::string context;  // the kubeconfig context used; empty in-cluster

  // The bearer token to send ("" for none).
  absl::StatusOr<std::string> Token() const;
  // After a 401: re-reads the token file; true when the token changed (worth one more try).
  bool ReloadToken() const { return token_file != nullptr && token_file->Reload(); }
};

// Loads one kubeconfig file and selects `context` (empty: its current-context).
absl::StatusOr<RestConfig> LoadKubeconfigFile(const std::string& path,
                                              absl::string_view context = "");

// Merges several kubeconfig files in order (kubectl's $KUBECONFIG rules) and selects `context`.
// Files that do not exist are skipped; kNotFound when none exists.
absl::StatusOr<RestConfig> LoadKubeconfigFiles(const std::vector<std::string>& paths,
                                               absl::string_view context = "");

// Splits a $KUBECONFIG value on ':' dropping empty entries and later duplicates.
std::vector<std::string> SplitKubeconfigPaths(absl::string_view value);

// Where the in-cluster configuration comes from. Unset fields are read from the environment.
struct InClusterEnv {
  std::string root_dir = "/";  // prefix of /var/run/secrets/kubernetes.io/serviceaccount
  std::optional<std::string> service_host;  // KUBERNETES_SERVICE_HOST
  std::optional<std::string> service_port;  // KUBERNETES_SERVICE_PORT
};

// The in-cluster configuration. kFailedPrecondition when not running in a cluster (the
// variables are unset); the token is re-read when it rotates.
absl::StatusOr<RestConfig> InClusterConfig(const InClusterEnv& env = {});

// kubectl's order: `explicit_path` when set, else $KUBECONFIG when set, else in-cluster when
// KUBERNETES_SERVICE_HOST is set, else $HOME/.kube/config.
absl::StatusOr<RestConfig> LoadDefaultConfig(const std::string& explicit_path,
                                             absl::string_view context = "");

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_KUBECONFIG_H_
