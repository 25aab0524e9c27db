// Sandbox: what keeps an exec'd plugin away from the host's credentials, state and other
// plugins' sockets.
//
// A plugin is a pure function of its requests: it needs no API credentials, no host state and no
// other plugin's socket. Three layers, each used where the host can:
//   - another user: the process runs under `uid`/`gid` (no supplementary groups) when the host
//     may switch users (root or CAP_SETUID/CAP_SETGID); files and sockets the host keeps 0700 or
//     0600 are then out of its reach by plain permissions.
//   - Landlock (Linux 5.13+, any user): the file system outside `hidden_paths` stays usable, the
//     hidden paths (data dir, kubeconfigs, admin socket, the other plugins' socket directories)
//     cannot be opened, listed, executed or created in, even under the host's own uid; on ABI 6+
//     kernels it cannot signal processes outside its sandbox nor reach abstract Unix sockets.
//     Landlock does not mediate connect() on a socket file (and /proc/net/unix names every bound
//     socket): only the first layer keeps a plugin from connecting to the admin socket or to
//     another plugin's socket.
//   - capabilities: a plugin left as root (the host is root, --plugin-user host) has none, so
//     it cannot ptrace the host, read its /proc/PID/environ or fds (`ctrlhost run` makes the host
//     non-dumpable), or bypass file modes.
//   - the environment: the host's KUBECONFIG, CTRLHOST_* and variables whose names say they hold
//     a secret (TOKEN, SECRET, PASSWORD, CREDENTIAL) are not passed on (process.cc).
//
// Landlock is an allow-list: "everything but these paths" is built as a rule for every entry
// beside the way from "/" down to each hidden path, read when the plugin starts. Consequences:
// the directories on that way (e.g. "/" and "/tmp" when the run directory is under /tmp) cannot
// be listed or written to directly, and entries created in them after the start are unreachable:
// plugins get TMPDIR set to their own directory instead.
//
// Example (in the parent, before fork):
//   SandboxSpec spec;
//   spec.hidden_paths = {data_dir, kubeconfig};
//   spec.allowed_paths = {own_socket_dir};
//   ASSIGN_OR_RETURN(LandlockRuleset ruleset, LandlockRuleset::Build(spec));
//   ... fork; in the child: ruleset.RestrictSelf() (async-signal-safe) ...
//
// Thread-safety: the functions are thread-safe; a LandlockRuleset is used by one thread.
#ifndef CTRLHOST_RUNTIME_PLUGIN_SANDBOX_H_
#define CTRLHOST_RUNTIME_PLUGIN_SANDBOX_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ctrlhost::plugin {

struct SandboxSpec {
  // The user and group the plugin runs as; unset: the host's (gid defaults to uid when only the
  // uid is set).
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  // Landlock: absolute paths the plugin must not reach (existing or not; symlinks in existing
  // prefixes are resolved). Empty, or `landlock` false: no Landlock restriction.
  std::vector<std::string> hidden_paths;
  // Absolute paths inside hidden ones the plugin may still use fully (its own socket directory).
  std::vector<std::string> allowed_paths;
  bool landlock = true;
  // A plugin that would run as root (uid 0) runs without any capability: it cannot read the
  // host's memory or /proc/PID/environ (the host makes itself non-dumpable), nor bypass file modes.
  bool drop_root_capabilities = true;
};

// The Landlock ABI version of the running kernel; 0 when Landlock is unavailable (kernel
// without it, or disabled at boot).
int LandlockAbi();

// A Landlock ruleset prepared in the parent, applied in the forked child. Move-only; closes its
// file descriptor.
class LandlockRuleset {
 public:
  // Builds the ruleset for `spec`; an empty ruleset (enabled() false) when `spec` asks for no
  // Landlock or the kernel has none. FAILED_PRECONDITION when a path is not absolute or there are
  // more than kMaxRules entries to allow (a directory on the way with huge numbers of entries).
  static absl::StatusOr<LandlockRuleset> Build(const SandboxSpec& spec);
  static constexpr size_t kMaxRules = 20000;

  LandlockRuleset() = default;
  LandlockRuleset(LandlockRuleset&& other) noexcept;
  LandlockRuleset& operator=(LandlockRuleset&& other) noexcept;
  LandlockRuleset(const LandlockRuleset&) = delete;
  LandlockRuleset& operator=(const LandlockRuleset&) = delete;
  ~LandlockRuleset();

  bool enabled() const { return fd_ >= 0; }
  int abi() const { return abi_; }
  size_t rules() const { return rules_; }
  // In the child only (async-signal-safe): no_new_privs, then the restriction. Returns 0 or an
  // errno value. A no-op returning 0 when !enabled().
  int RestrictSelf() const;

 private:
  int fd_ = -1;
  int abi_ = 0;
  size_t rules_ = 0;
};

// Whether the host may switch a child to `uid`: effective uid 0, or CAP_SETUID and CAP_SETGID in
// the effective set, and `uid` mapped in this user namespace (inside a sandbox that maps only
// root, e.g. Bazel's linux-sandbox, it is not).
bool CanSwitchUser(uid_t uid);

}  // namespace ctrlhost::plugin

#endif  // CTRLHOST_RUNTIME_PLUGIN_SANDBOX_H_
