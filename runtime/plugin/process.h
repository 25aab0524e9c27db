// Process: one exec'd plugin process, with its stdout and stderr captured into the host log.
//
// Forked and exec'd in its own process group (so a terminal's Ctrl-C reaches the host, which
// stops plugins in order), stdin from /dev/null, default signal dispositions and an empty
// signal mask, with a parent-death signal (SIGKILL): a host that dies, even by kill -9, takes
// its plugins with it. The parent-death signal fires when the *thread* that called Spawn
// exits: call it from a thread that outlives the process (the supervisor's does). Signal()
// signals the whole group, so a wrapper script and the plugin it started stop together, and
// when the process exits whatever is left in its group is killed (no orphans). Exec failures
// (missing or non-executable command, bad interpreter or working directory) are reported by
// Spawn itself with a code the supervisor treats as a refusal (no retry). One thread per process
// polls its two output pipes and a pidfd: each complete line is logged at INFO as `plugin output
// plugin=NAME stream=stdout|stderr line=...` (lines longer than kMaxLogLine bytes are cut there and
// logged with truncated=true; the rest of such a line is dropped), a partial last line is flushed
// at exit, and the exit is reaped at once (no zombies) and reported through `on_exit`.
//
// Example:
//   ProcessSpec spec;
//   spec.command = "/usr/bin/my-plugin";
//   spec.env.push_back({"CTRLHOST_PLUGIN_ADDRESS", "unix:///run/x/p-1.sock"});
//   ASSIGN_OR_RETURN(auto process, Process::Spawn(spec, "webapp-1", [](int status) {...}));
//   process->Signal(SIGTERM);
//   process->WaitExited(absl::Now() + absl::Seconds(10));
//
// Thread-safe. The destructor kills (SIGKILL) a process still running and waits for it.
#ifndef CTRLHOST_RUNTIME_PLUGIN_PROCESS_H_
#define CTRLHOST_RUNTIME_PLUGIN_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/sandbox.h"

namespace ctrlhost::plugin {

inline constexpr size_t kMaxLogLine = 16 * 1024;

struct ProcessSpec {
  std::string command;  // a path, or a name looked up in PATH
  std::vector<std::string> args;
  // Added to (and overriding) the host's environment, which is passed on without the host's
  // credentials (IsHostSecret).
  std::vector<std::pair<std::string, std::string>> env;
  std::string working_dir;  // "" = the host's
  SandboxSpec sandbox;      // user, group and Landlock restriction (sandbox.h)
  // Runs the process (and every thread it starts) under SCHED_IDLE: it gets only CPU time that
  // no other task wants, so it cannot slow the host or the other plugins (a shadow's default).
  bool idle_cpu = false;
};

// Whether the host's environment variable `name` is withheld from plugins: KUBECONFIG, CTRLHOST_*
// (the host's own settings; the supervisor sets the plugin's) and names containing TOKEN,
// SECRET, PASSWORD or CREDENTIAL (any case).
bool IsHostSecret(absl::string_view name);

// Why Spawn could not execute `spec`'s command as the user `spec.sandbox` makes it run as, or
// OK, without running it (`ctrlhost run --preview`): a child process switches to that user
// (giving up capabilities where Spawn does), enters the working directory and asks for execute
// permission on the command (and read permission when it is a `#!` script, which its
// interpreter reads). Landlock is not applied. The errors are Spawn's, e.g. PERMISSION_DENIED
// "cannot execute plugin command "/root/p": Permission denied (the plugin runs as uid 200000,
// ...: put the plugin where uid 200000 can read and execute it, ...; or run the host with
// --plugin-user host)". Switching users needs the privilege Spawn needs (see CanSwitchUser).
absl::Status CheckExecutable(const ProcessSpec& spec);

// Describes a wait status ("exited with code 3", "killed by signal 9").
std::string DescribeExit(int wait_status);

class Process {
 public:
  // `on_exit(wait_status)` runs once on the process's output thread after the process was
  // reaped; it must not block and must not destroy the Process.
  static absl::StatusOr<std::unique_ptr<Process>> Spawn(const ProcessSpec& spec,
                                                        std::string log_name,
                                                        std::function<void(int)> on_exit);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `signal` to the process's group unless the process was already reaped (then a no-op).
  void Signal(int signal);
  // Waits (real time) until the process was reaped or `deadline`; returns the wait status.
  std::optional<int> WaitExited(absl::Time deadline);
  std::optional<int> exit_status() const;

 private:
  Process(pid_t pid, int pidfd, int out_fd, int err_fd, std::string log_name,
          std::function<void(int)> on_exit);
  void OutputLoop();

  // Constant after construction.
  const pid_t pid_;
  const int pidfd_;
  const int out_fd_;
  const int err_fd_;
  const std::string log_name_;
  const std::function<void(int)> on_exit_;
  std::thread thread_;

  mutable common::Mutex mu_;
  common::CondVar exited_cv_;
  std::optional<int> status_ ABSL_GUARDED_BY(mu_);  // set once reaped
};

// Creates `path` (and missing parents) with mode 0700 or checks an existing one: a directory,
// not a symlink, owned by this user, neither readable nor writable by group or others (0711
// lets plugins of other users reach their own subdirectory without listing the others).
// FAILED_PRECONDITION otherwise: plugin sockets must not be reachable by other users.
absl::Status EnsurePrivateDir(const std::string& path);

}  // namespace ctrlhost::plugin

#endif  // CTRLHOST_RUNTIME_PLUGIN_PROCESS_H_
