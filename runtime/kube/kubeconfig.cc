#include "runtime/kube/kubeconfig.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/yaml_json.h"

namespace ctrlhost::kube {
namespace {

using nlohmann::json;

absl::Status ErrnoStatus(int err, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::UnavailableError(message);
}

// Kubeconfigs, certificates, keys and tokens are small: anything larger is a mistake (or a
// path such as /dev/zero, which would never end).
constexpr off_t kMaxFileBytes = 4 << 20;

// Reads a regular file (symbolic links followed, as the service-account mount uses them) of at
// most kMaxFileBytes.
absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat(what, " ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat(what, " ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": not a regular file"));
  }
  std::string out;
  char buffer[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, absl::StrCat(what, " ", path));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > static_cast<size_t>(kMaxFileBytes)) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", path, ": larger than ", kMaxFileBytes, " bytes"));
    }
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return absl::StrCat(dir, "/", path);
}

// One named entry (cluster, user or context) and the file that defined it.
struct Entry {
  json body;  // the "cluster" / "user" / "context" object
  std::string file;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::vector<std::string> files;  // the files read, for error messages
};

absl::Status FieldError(const std::string& file, absl::string_view field,
                        absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", file, ": ", field, ": ", problem));
}

// Adds the entries of list `key` ("clusters") whose bodies are under `inner` ("cluster").
absl::Status MergeList(const json& doc, const std::string& file, const char* key, const char* inner,
                       std::map<std::string, Entry>* out) {
  auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return FieldError(file, key, "must be a list");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    std::string where = absl::StrCat(key, "[", i, "]");
    if (!item.is_object()) return FieldError(file, where, "must be a mapping");
    auto name = item.find("name");
    if (name == item.end() || !name->is_string() || name->get<std::string>().empty()) {
      return FieldError(file, absl::StrCat(where, ".name"), "required string");
    }
    auto body = item.find(inner);
    json value = json::object();
    if (body != item.end() && !body->is_null()) {
      if (!body->is_object()) {
        return FieldError(file, absl::StrCat(where, ".", inner), "must be a mapping");
      }
      value = *body;
    }
    // kubectl: the first file that defines a name wins.
    out->emplace(name->get<std::string>(), Entry{std::move(value), file});
  }
  return absl::OkStatus();
}

absl::Status MergeFile(const std::string& path, Merged* merged) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "kubeconfig"));
  absl::StatusOr<json> doc = common::YamlToJson(text);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kubeconfig ", path, ": ", doc.status().message()));
  }
  merged->files.push_back(path);
  if (doc->is_null()) return absl::OkStatus();  // an empty file contributes nothing
  if (!doc->is_object()) return FieldError(path, "(top level)", "must be a mapping");
  RETURN_IF_ERROR(MergeList(*doc, path, "clusters", "cluster", &merged->clusters));
  RETURN_IF_ERROR(MergeList(*doc, path, "users", "user", &merged->users));
  RETURN_IF_ERROR(MergeList(*doc, path, "contexts", "context", &merged->contexts));
  auto current = doc->find("current-context");
  if (current != doc->end() && !current->is_null()) {
    if (!current->is_string()) return FieldError(path, "current-context", "must be a string");
    if (merged->current_context.empty()) merged->current_context = current->get<std::string>();
  }
  return absl::OkStatus();
}

// Reads string field `key` of `entry`; "" when absent.
absl::StatusOr<std::string> StringField(const Entry& entry, absl::string_view where,
                                        const char* key) {
  auto it = entry.body.find(key);
  if (it == entry.body.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return FieldError(entry.file, absl::StrCat(where, ".", key), "must be a string");
  }
  return it->get<std::string>();
}

// The PEM from `<key>-data` (base64) or from the file `<key>` (relative to the kubeconfig).
absl::StatusOr<std::string> PemField(const Entry& entry, absl::string_view where,
                                     const std::string& key) {
  ASSIGN_OR_RETURN(std::string data, StringField(entry, where, (key + "-data").c_str()));
  if (!data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return FieldError(entry.file, absl::StrCat(where, ".", key, "-data"), "not valid base64");
    }
    return decoded;
  }
  ASSIGN_OR_RETURN(std::string file, StringField(entry, where, key.c_str()));
  if (file.empty()) return std::string();
  std::string path = Resolve(DirName(entry.file), file);
  absl::StatusOr<std::string> pem = ReadFile(path, "file");
  if (!pem.ok()) {
    return absl::Status(pem.status().code(), absl::StrCat("kubeconfig ", entry.file, ": ", where,
                                                          ".", key, ": ", pem.status().message()));
  }
  return pem;
}

absl::StatusOr<RestConfig> Select(const Merged& merged, absl::string_view wanted) {
  const std::string files = absl::StrJoin(merged.files, ":");
  std::string name(wanted.empty() ? merged.current_context : std::string(wanted));
  if (name.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("kubeconfig ", files, ": no context given and current-context is not set"));
  }
  auto ctx = merged.contexts.find(name);
  if (ctx == merged.contexts.end()) {
    return absl::NotFoundError(
        absl::StrCat("kubeconfig ", files, ": context \"", name, "\" not found"));
  }
  const std::string ctx_where = absl::StrCat("contexts[\"", name, "\"].context");
  RestConfig config;
  config.context = name;
  ASSIGN_OR_RETURN(std::string cluster_name, StringField(ctx->second, ctx_where, "cluster"));
  ASSIGN_OR_RETURN(std::string user_name, StringField(ctx->second, ctx_where, "user"));
  ASSIGN_OR_RETURN(std::string ns, StringField(ctx->second, ctx_where, "namespace"));
  if (!ns.empty()) config.default_namespace = ns;

  auto cluster = merged.clusters.find(cluster_name);
  if (cluster_name.empty() || cluster == merged.clusters.end()) {
    return absl::NotFoundError(absl::StrCat("kubeconfig ", ctx->second.file, ": ", ctx_where,
                                            ".cluster: cluster \"", cluster_name, "\" not found"));
  }
  const Entry& c = cluster->second;
  const std::string c_where = absl::StrCat("clusters[\"", cluster_name, "\"].cluster");
  ASSIGN_OR_RETURN(config.host, StringField(c, c_where, "server"));
  if (config.host.empty()) return FieldError(c.file, c_where + ".server", "required");
  if (!absl::StartsWith(config.host, "https://") && !absl::StartsWith(config.host, "http://")) {
    return FieldError(c.file, c_where + ".server",
                      absl::StrCat("\"", config.host, "\" must start with https:// or http://"));
  }
  while (absl::EndsWith(config.host, "/")) config.host.pop_back();
  ASSIGN_OR_RETURN(config.ca_pem, PemField(c, c_where, "certificate-authority"));
  ASSIGN_OR_RETURN(config.tls_server_name, StringField(c, c_where, "tls-server-name"));
  auto insecure = c.body.find("insecure-skip-tls-verify");
  if (insecure != c.body.end() && !insecure->is_null()) {
    if (!insecure->is_boolean()) {
      return FieldError(c.file, c_where + ".insecure-skip-tls-verify", "must be a boolean");
    }
    config.insecure_skip_tls_verify = insecure->get<bool>();
  }

  if (user_name.empty()) return config;  // anonymous
  auto user = merged.users.find(user_name);
  if (user == merged.users.end()) {
    return absl::NotFoundError(absl::StrCat("kubeconfig ", ctx->second.file, ": ", ctx_where,
                                            ".user: user \"", user_name, "\" not found"));
  }
  const Entry& u = user->second;
  const std::string u_where = absl::StrCat("users[\"", user_name, "\"].user");
  for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
    auto it = u.body.find(unsupported);
    if (it != u.body.end() && !it->is_null()) {
      return absl::UnimplementedError(absl::StrCat("kubeconfig ", u.file, ": ", u_where, ".",
                                                   unsupported, ": not supported by ctrlhost"));
    }
  }
  ASSIGN_OR_RETURN(config.client_cert_pem, PemField(u, u_where, "client-certificate"));
  ASSIGN_OR_RETURN(config.client_key_pem, PemField(u, u_where, "client-key"));
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return FieldError(u.file, u_where, "client-certificate and client-key must be given together");
  }
  ASSIGN_OR_RETURN(config.bearer_token, StringField(u, u_where, "token"));
  ASSIGN_OR_RETURN(std::string token_file, StringField(u, u_where, "tokenFile"));
  if (!token_file.empty() && config.bearer_token.empty()) {
    config.token_file = std::make_shared<TokenFile>(Resolve(DirName(u.file), token_file));
    absl::StatusOr<std::string> token = config.token_file->Token();
    if (!token.ok()) {
      return absl::Status(token.status().code(),
                          absl::StrCat("kubeconfig ", u.file, ": ", u_where,
                                       ".tokenFile: ", token.status().message()));
    }
  }
  return config;
}

std::string GetEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

}  // namespace

absl::StatusOr<std::string> TokenFile::Token() {
  common::MutexLock lock(&mu_);
  return Read(/*force=*/false);
}

bool TokenFile::Reload() {
  common::MutexLock lock(&mu_);
  const std::string before = token_;
  absl::StatusOr<std::string> token = Read(/*force=*/true);
  return token.ok() && *token != before;
}

absl::StatusOr<std::string> TokenFile::Read(bool force) {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    absl::Status error = ErrnoStatus(errno, absl::StrCat("token file ", path_));
    if (loaded_) {
      common::LogWarning("token file unreadable; using the last token read",
                         {{"path", path_}, {"error", error.ToString()}});
      return token_;
    }
    return error;
  }
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                           static_cast<int64_t>(st.st_mtim.tv_nsec);
  if (!force && loaded_ && st.st_ino == inode_ && st.st_size == size_ && mtime_ns == mtime_ns_) {
    return token_;
  }
  absl::StatusOr<std::string> text = ReadFile(path_, "token file");
  std::string token = text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : std::string();
  if (!text.ok() || token.empty()) {
    absl::Status error =
        text.ok() ? absl::InvalidArgumentError(absl::StrCat("token file ", path_, " is empty"))
                  : text.status();
    if (loaded_) {
      common::LogWarning("token file unreadable; using the last token read",
                         {{"path", path_}, {"error", error.ToString()}});
      return token_;
    }
    return error;
  }
  token_ = std::move(token);
  loaded_ = true;
  inode_ = st.st_ino;
  size_ = st.st_size;
  mtime_ns_ = mtime_ns;
  return token_;
}

absl::StatusOr<std::string> RestConfig::Token() const {
  if (token_file != nullptr) return token_file->Token();
  return bearer_token;
}

std::vector<std::string> SplitKubeconfigPaths(absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ':', absl::SkipEmpty())) {
    std::string path(part);
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  }
  return out;
}

absl::StatusOr<RestConfig> LoadKubeconfigFile(const std::string& path, absl::string_view context) {
  Merged merged;
  RETURN_IF_ERROR(MergeFile(path, &merged));
  return Select(merged, context);
}

absl::StatusOr<RestConfig> LoadKubeconfigFiles(const std::vector<std::string>& paths,
                                               absl::string_view context) {
  Merged merged;
  for (const std::string& path : paths) {
    if (!FileExists(path)) continue;  // kubectl skips missing $KUBECONFIG entries
    RETURN_IF_ERROR(MergeFile(path, &merged));
  }
  if (merged.files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no kubeconfig file exists among: ", absl::StrJoin(paths, ":")));
  }
  return Select(merged, context);
}

absl::StatusOr<RestConfig> InClusterConfig(const InClusterEnv& env) {
  const std::string host = env.service_host ? *env.service_host : GetEnv("KUBERNETES_SERVICE_HOST");
  const std::string port = env.service_port ? *env.service_port : GetEnv("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  std::string root = env.root_dir;
  while (absl::EndsWith(root, "/")) root.pop_back();
  const std::string dir = root + "/var/run/secrets/kubernetes.io/serviceaccount";
  RestConfig config;
  // An IPv6 address needs brackets in a URL.
  config.host = host.find(':') != std::string::npos ? absl::StrCat("https://[", host, "]:", port)
                                                    : absl::StrCat("https://", host, ":", port);
  config.token_file = std::make_shared<TokenFile>(dir + "/token");
  RETURN_IF_ERROR(config.token_file->Token().status());
  ASSIGN_OR_RETURN(config.ca_pem, ReadFile(dir + "/ca.crt", "service-account CA"));
  absl::StatusOr<std::string> ns = ReadFile(dir + "/namespace", "namespace");
  if (ns.ok() && !absl::StripAsciiWhitespace(*ns).empty()) {
    config.default_namespace = std::string(absl::StripAsciiWhitespace(*ns));
  }
  return config;
}

absl::StatusOr<RestConfig> LoadDefaultConfig(const std::string& explicit_path,
                                             absl::string_view context) {
  if (!explicit_path.empty()) return LoadKubeconfigFile(explicit_path, context);
  const std::string env = GetEnv("KUBECONFIG");
  if (!env.empty()) return LoadKubeconfigFiles(SplitKubeconfigPaths(env), context);
  if (!GetEnv("KUBERNETES_SERVICE_HOST").empty()) return InClusterConfig();
  const std::string home = GetEnv("HOME");
  if (home.empty()) return absl::NotFoundError("no kubeconfig: $HOME is not set");
  return LoadKubeconfigFile(home + "/.kube/config", context);
}

}  // namespace ctrlhost::kube
