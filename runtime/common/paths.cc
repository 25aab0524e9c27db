#include "runtime/common/paths.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ctrlhost::common {

namespace fs = std::filesystem;

std::string AbsolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code error;
  fs::path absolute = fs::absolute(fs::path(path), error);
  if (error) absolute = fs::path(path);
  std::string out = absolute.lexically_normal().string();
  // "dir/" normalizes to "/cwd/dir/": the trailing slash carries no meaning for our callers.
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string AbsoluteCommand(const std::string& command) {
  if (command.find('/') == std::string::npos) return command;
  return AbsolutePath(command);
}

absl::Status CreatePrivateDirectory(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("the directory name is empty");
  const std::string absolute = AbsolutePath(path);
  // Each prefix in turn, so that every directory made here gets 0700 (create_directories would
  // give the parents the umask's mode).
  for (size_t pos = absolute.find('/', 1);; pos = absolute.find('/', pos + 1)) {
    const std::string prefix = pos == std::string::npos ? absolute : absolute.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      const int err = errno;
      const std::string why =
          absl::StrCat("cannot create the directory ", prefix, ": ", strerror(err));
      return err == EACCES || err == EPERM || err == EROFS ? absl::PermissionDeniedError(why)
                                                           : absl::FailedPreconditionError(why);
    }
    struct stat st;
    if (stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat("cannot create the directory ", absolute,
                                                        ": ", prefix,
                                                        " exists and is not a directory"));
    }
    if (pos == std::string::npos) break;
  }
  return absl::OkStatus();
}

}  // namespace ctrlhost::common
