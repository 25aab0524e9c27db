#include "runtime/plugin/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ctrlhost::plugin {
namespace {

// The kernel's Landlock ABI (include/uapi/linux/landlock.h), spelled out so that older headers
// build: the structures only grow, and a larger one with zeroed tail is accepted by older kernels.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};
constexpr int kRulePathBeneath = 1;
constexpr uint32_t kCreateRulesetVersion = 1u << 0;

constexpr uint64_t kExecute = 1ull << 0;
constexpr uint64_t kWriteFile = 1ull << 1;
constexpr uint64_t kReadFile = 1ull << 2;
constexpr uint64_t kMakeSym = 1ull << 12;
constexpr uint64_t kRefer = 1ull << 13;                   // ABI 2
constexpr uint64_t kTruncate = 1ull << 14;                // ABI 3
constexpr uint64_t kIoctlDev = 1ull << 15;                // ABI 5
constexpr uint64_t kScopeAbstractUnixSocket = 1ull << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ull << 1;              // ABI 6

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

// Every file-system right the kernel's ABI knows, so that none stays unrestricted.
uint64_t HandledAccess(int abi) {
  uint64_t access = (kMakeSym << 1) - 1;  // ABI 1: EXECUTE .. MAKE_SYM
  if (abi >= 2) access |= kRefer;
  if (abi >= 3) access |= kTruncate;
  if (abi >= 5) access |= kIoctlDev;
  return access;
}

// Rights that apply to a file that is not a directory (the kernel refuses others on such rules).
constexpr uint64_t kFileAccess = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;

// `path` (absolute) with the symlinks of its longest existing prefix resolved.
std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) != nullptr) return resolved;
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  const std::string parent = Canonical(path.substr(0, slash));
  return absl::StrCat(parent == "/" ? "" : parent, path.substr(slash));
}

// "/a/b/c" -> {"/", "/a", "/a/b"}.
std::vector<std::string> Ancestors(const std::string& path) {
  std::vector<std::string> out = {"/"};
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    out.push_back(path.substr(0, pos));
  }
  return out;
}

}  // namespace

int LandlockAbi() {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

bool CanSwitchUser(uid_t uid) {
  // The uid must exist in this user namespace (a sandbox's "root" often maps only itself).
  bool mapped = false;
  {
    std::ifstream map("/proc/self/uid_map");
    uint64_t inside = 0, outside = 0, count = 0;
    while (map >> inside >> outside >> count) {
      if (uid >= inside && uid - inside < count) mapped = true;
    }
  }
  if (!mapped) return false;
  if (geteuid() == 0) return true;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "CapEff:")) continue;
    uint64_t caps = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(rest), &caps)) return false;
    constexpr uint64_t kSetGid = 1ull << 6, kSetUid = 1ull << 7;
    return (caps & kSetGid) != 0 && (caps & kSetUid) != 0;
  }
  return false;
}

absl::StatusOr<LandlockRuleset> LandlockRuleset::Build(const SandboxSpec& spec) {
  LandlockRuleset ruleset;
  if (!spec.landlock || spec.hidden_paths.empty()) return ruleset;
  const int abi = LandlockAbi();
  if (abi == 0) return ruleset;
  std::set<std::string> hidden;
  for (const std::string& path : spec.hidden_paths) {
    if (path.empty() || path[0] != '/' || path == "/") {
      return absl::FailedPreconditionError(
          absl::StrCat("sandbox: hidden path \"", path, "\" must be absolute and not \"/\""));
    }
    hidden.insert(Canonical(path));
  }
  // A hidden path inside another one is hidden with it: drop it, so that a hidden directory is
  // never taken for a directory "on the way" to a path below it, whose other entries would then
  // be allowed (the data dir holding the admin socket was readable that way).
  for (auto it = hidden.begin(); it != hidden.end();) {
    const std::vector<std::string> ancestors = Ancestors(*it);
    const bool covered = std::any_of(ancestors.begin(), ancestors.end(), [&](const std::string& a) {
      return a != *it && hidden.count(a) != 0;
    });
    it = covered ? hidden.erase(it) : std::next(it);
  }
  std::set<std::string> on_the_way;  // proper ancestors of hidden paths, none of them hidden
  for (const std::string& path : hidden) {
    for (std::string& a : Ancestors(path)) on_the_way.insert(std::move(a));
  }
  std::vector<std::string> allowed;  // entries beside the way, then the exceptions
  for (const std::string& dir : on_the_way) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;  // nothing beside the way is reachable through it anyway
    while (const dirent* entry = readdir(d)) {
      const absl::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      std::string child = absl::StrCat(dir == "/" ? "" : dir, "/", name);
      if (hidden.count(child) != 0 || on_the_way.count(child) != 0) continue;
      allowed.push_back(std::move(child));
      if (allowed.size() > kMaxRules) break;
    }
    closedir(d);
    if (allowed.size() > kMaxRules) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sandbox: more than ", kMaxRules, " entries beside the hidden paths (in ", dir, ")"));
    }
  }
  for (const std::string& path : spec.allowed_paths) {
    if (path.empty() || path[0] != '/') {
      return absl::FailedPreconditionError(
          absl::StrCat("sandbox: allowed path \"", path, "\" must be absolute"));
    }
    allowed.push_back(path);
  }

  const uint64_t handled = HandledAccess(abi);
  RulesetAttr attr;
  memset(&attr, 0, sizeof(attr));
  attr.handled_access_fs = handled;
  if (abi >= 6) attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
  const long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("landlock_create_ruleset: ", strerror(errno)));
  }
  ruleset.fd_ = static_cast<int>(fd);
  ruleset.abi_ = abi;
  for (const std::string& path : allowed) {
    // Symlinks need no rule (what they point to decides) and must not get one: a rule on the
    // followed link would open what it points to, possibly a hidden path.
    const int path_fd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (path_fd < 0) continue;  // vanished since the listing, or a dangling name
    struct stat st;
    if (fstat(path_fd, &st) != 0 || S_ISLNK(st.st_mode)) {
      close(path_fd);
      continue;
    }
    PathBeneathAttr rule;
    rule.allowed_access = S_ISDIR(st.st_mode) ? handled : handled & kFileAccess;
    rule.parent_fd = path_fd;
    const long added = syscall(SYS_landlock_add_rule, ruleset.fd_, kRulePathBeneath, &rule, 0);
    const int err = errno;
    close(path_fd);
    if (added != 0) {
      return absl::InternalError(absl::StrCat("landlock_add_rule for ", path, ": ", strerror(err)));
    }
    ++ruleset.rules_;
  }
  return ruleset;
}

LandlockRuleset::LandlockRuleset(LandlockRuleset&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), abi_(other.abi_), rules_(other.rules_) {}

LandlockRuleset& LandlockRuleset::operator=(LandlockRuleset&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    abi_ = other.abi_;
    rules_ = other.rules_;
  }
  return *this;
}

LandlockRuleset::~LandlockRuleset() {
  if (fd_ >= 0) close(fd_);
}

int LandlockRuleset::RestrictSelf() const {
  if (fd_ < 0) return 0;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (syscall(SYS_landlock_restrict_self, fd_, 0) != 0) return errno;
  return 0;
}

}  // namespace ctrlhost::plugin
