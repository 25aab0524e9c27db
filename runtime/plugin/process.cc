#include "runtime/plugin/process.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/utf8.h"

extern char** environ;

namespace ctrlhost::plugin {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what) {
  return absl::Status(err == ENOENT                   ? absl::StatusCode::kNotFound
                      : err == EACCES || err == EPERM ? absl::StatusCode::kPermissionDenied
                                                      : absl::StatusCode::kInternal,
                      absl::StrCat(what, ": ", strerror(err)));
}

// Plugin output is rate limited per plugin (all generations of "NAME-GEN" together), so a plugin
// that floods its output or crash-loops printing cannot flood the host's log: up to
// kOutputBurst lines at once, kOutputLinesPerSecond sustained. Dropped lines are counted and
// reported in one summary line (`plugin output dropped (rate limited) lines=N`) when dropping
// starts, then at most once per kDroppedReportInterval while it goes on (at the next line the
// plugin writes, whether let through or dropped), and at process exit: a sustained flood costs
// the sustained rate plus one line per interval, never a summary per line let through.
// Thread-safe (process-wide, guarded by its mutex).
constexpr double kOutputLinesPerSecond = 200;
constexpr double kOutputBurst = 2000;
constexpr absl::Duration kDroppedReportInterval = absl::Seconds(10);

class OutputLimiter {
 public:
  // Whether one more line of `name`'s output may be logged; logs the summary of dropped lines
  // when one is due.
  bool Allow(const std::string& name) {
    const std::string plugin = PluginOf(name);
    const absl::Time now = common::Clock::Real()->Now();
    uint64_t report = 0;
    bool allowed = false;
    {
      common::MutexLock lock(&mu_);
      Bucket& b = buckets_[plugin];
      if (b.last == absl::InfinitePast()) b.last = now;
      b.tokens = std::min(kOutputBurst,
                          b.tokens + absl::ToDoubleSeconds(now - b.last) * kOutputLinesPerSecond);
      b.last = now;
      allowed = b.tokens >= 1;
      if (allowed) {
        b.tokens -= 1;
      } else {
        ++b.dropped;
      }
      if (b.dropped > 0 && now - b.last_report >= kDroppedReportInterval) {
        report = b.dropped;
        b.dropped = 0;
        b.last_report = now;
      }
    }
    Report(plugin, report);
    return allowed;
  }

  // Logs the lines of `name` dropped since the last report (at process exit).
  void ReportDropped(const std::string& name) {
    const std::string plugin = PluginOf(name);
    uint64_t dropped = 0;
    {
      common::MutexLock lock(&mu_);
      auto it = buckets_.find(plugin);
      if (it == buckets_.end()) return;
      dropped = it->second.dropped;
      it->second.dropped = 0;
      if (dropped > 0) it->second.last_report = common::Clock::Real()->Now();
    }
    Report(plugin, dropped);
  }

 private:
  struct Bucket {
    double tokens = kOutputBurst;
    absl::Time last = absl::InfinitePast();
    uint64_t dropped = 0;                           // since the last summary
    absl::Time last_report = absl::InfinitePast();  // of the last summary
  };
  static void Report(const std::string& plugin, uint64_t dropped) {
    if (dropped == 0) return;
    common::LogWarning("plugin output dropped (rate limited)",
                       {{"plugin", plugin}, {"lines", dropped}});
  }

  // "shop-webapp-12" -> "shop-webapp".
  static std::string PluginOf(const std::string& name) {
    const size_t dash = name.rfind('-');
    if (dash == std::string::npos || dash + 1 == name.size()) return name;
    for (size_t i = dash + 1; i < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') return name;
    }
    return name.substr(0, dash);
  }

  common::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

OutputLimiter& Limiter() {
  static OutputLimiter* limiter = new OutputLimiter();
  return *limiter;
}

// Splits complete lines out of `buffer` and logs them; `flush` also logs a partial last line.
// `skipping` is set while the rest of an over-long line is being dropped.
void LogLines(const std::string& name, const char* stream, std::string* buffer, bool* skipping,
              bool flush) {
  size_t start = 0;
  for (;;) {
    const size_t newline = buffer->find('\n', start);
    if (newline == std::string::npos) break;
    if (!*skipping && Limiter().Allow(name)) {
      const size_t length = newline - start;
      if (length > kMaxLogLine) {
        common::LogInfo(
            "plugin output",
            {{"plugin", name},
             {"stream", stream},
             {"line", common::Utf8Prefix(absl::string_view(*buffer).substr(start), kMaxLogLine)},
             {"truncated", true}});
      } else {
        common::LogInfo("plugin output",
                        {{"plugin", name},
                         {"stream", stream},
                         {"line", absl::string_view(*buffer).substr(start, length)}});
      }
    }
    *skipping = false;
    start = newline + 1;
  }
  buffer->erase(0, start);
  if (buffer->size() > kMaxLogLine) {
    if (!*skipping && Limiter().Allow(name)) {
      common::LogInfo("plugin output", {{"plugin", name},
                                        {"stream", stream},
                                        {"line", common::Utf8Prefix(*buffer, kMaxLogLine)},
                                        {"truncated", true}});
    }
    *skipping = true;
    buffer->clear();
  }
  if (flush && !buffer->empty()) {
    if (!*skipping && Limiter().Allow(name)) {
      common::LogInfo("plugin output", {{"plugin", name}, {"stream", stream}, {"line", *buffer}});
    }
    buffer->clear();
  }
}

// Where a child failed before its command ran, for the error message.
enum ChildStage {
  kStageSetup = 1,
  kStageWorkingDir = 2,
  kStageExec = 3,
  kStageUser = 4,
  kStageSandbox = 5,
  kStagePriority = 6
};

const char* ChildStageName(int stage) {
  switch (stage) {
    case kStageUser:
      return "cannot switch to the plugin user (see --plugin-user) for";
    case kStageSandbox:
      return "cannot apply the Landlock sandbox for";
    case kStageWorkingDir:
      return "cannot enter the working directory for";
    case kStagePriority:
      return "cannot lower the CPU priority (SCHED_IDLE; a shadow's `cpu: normal` asks for none) "
             "of";
    case kStageExec:
      return "cannot execute";
    default:
      return "cannot set up the process for";
  }
}

// What to do about a permission refused to the plugin's user (`uid`: the user the child
// switched to, unset when it kept the host's), as the end of the message; "" when nothing
// better than the error itself can be said.
std::string PermissionHint(const std::optional<uid_t>& uid, bool dropped_root_capabilities) {
  if (uid.has_value() && *uid != 0) {
    return absl::StrCat(
        " (the plugin runs as uid ", *uid, ", not as the host's user: put the plugin where uid ",
        *uid,
        " can read and execute it, every directory on the way searchable by it, e.g. under "
        "/opt or /usr/local rather than a 0700 home directory such as /root or Bazel's output "
        "tree there; or run the host with --plugin-user host)");
  }
  if (dropped_root_capabilities) {
    return " (the plugin runs as root without capabilities, so file modes apply to it as to any "
           "user: the command needs an execute bit that applies to root, a script a read bit "
           "too, and every directory on the way must be searchable)";
  }
  return "";
}

// An exec failure is the configuration's fault (a missing or non-executable file, a script
// without an interpreter, a bad working directory): FAILED_PRECONDITION, so the supervisor
// fails the plugin with this reason instead of retrying. `uid`: the user the child switched to.
absl::Status ExecStatus(int err, absl::string_view what, absl::string_view command,
                        const std::optional<uid_t>& uid = std::nullopt,
                        bool dropped_root_capabilities = false) {
  std::string message = absl::StrCat(what, " plugin command \"", command, "\": ", strerror(err));
  if (err == EACCES || err == EPERM) {
    absl::StrAppend(&message, PermissionHint(uid, dropped_root_capabilities));
  }
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOEXEC:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case E2BIG:
    case ELIBBAD:
    case ETXTBSY:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// `command` as execve needs it: a path as given, or a name found in the host's PATH (the first
// regular file there; when only non-executable ones exist, the first of those, so that exec
// reports EACCES). "" when there is none.
std::string ResolveCommand(const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  const char* env_path = getenv("PATH");
  const std::string search = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  std::string first_found;
  size_t begin = 0;
  for (;;) {
    const size_t colon = search.find(':', begin);
    std::string dir = search.substr(begin, colon == std::string::npos ? colon : colon - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = absl::StrCat(dir, "/", command);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
      if (first_found.empty()) first_found = candidate;
    }
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  return first_found;
}

// In a forked child (async-signal-safe): switches to `uid`/`gid` (no supplementary groups) and,
// with `drop_capabilities`, gives up every capability. 0, or -1 with errno set.
int BecomePluginUser(const std::optional<uid_t>& uid, const std::optional<gid_t>& gid,
                     bool drop_capabilities) {
  if (gid.has_value()) {
    const gid_t groups[1] = {*gid};
    if (setgroups(1, groups) != 0 || setgid(*gid) != 0) return -1;
  }
  if (uid.has_value() && setuid(*uid) != 0) return -1;
  if (drop_capabilities) {
    // A plugin left as root keeps no capability (none survives exec with an empty bounding
    // set): no CAP_SYS_PTRACE into the host, no CAP_DAC_OVERRIDE around file modes.
    for (int cap = 0; cap < 64; ++cap)
      prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);  // EINVAL past the last
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &header, data) != 0) return -1;
  }
  return 0;
}

// The user and capabilities a plugin of `spec` gets, as Spawn resolves them: gid defaults to
// uid, and switching to the host's own user is no switch.
struct PluginCredentials {
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  bool drop_capabilities = false;
};
PluginCredentials CredentialsOf(const SandboxSpec& spec) {
  PluginCredentials c;
  c.uid = spec.uid;
  c.gid = spec.gid;
  if (c.uid.has_value() && !c.gid.has_value()) c.gid = *c.uid;
  if (c.uid == geteuid() && c.gid == getegid()) {
    c.uid.reset();  // already that user: nothing to switch (and no privilege needed)
    c.gid.reset();
  }
  c.drop_capabilities = spec.drop_root_capabilities && c.uid.value_or(geteuid()) == 0;
  return c;
}

// The forked child: its own process group; SIGKILL when the host dies (PR_SET_PDEATHSIG: the
// signal comes when the thread that forked exits, so the supervisor's thread spawns and
// outlives its process); default signal dispositions, an empty mask, stdin from /dev/null,
// stdout/stderr to the pipes. Reports {stage, errno} on `report` if it cannot exec. Never
// returns.
[[noreturn]] void ExecChild(pid_t parent, const char* path, char* const* argv, char* const* envp,
                            const char* working_dir, int out_fd, int err_fd, int report,
                            const std::optional<uid_t>& uid, const std::optional<gid_t>& gid,
                            bool drop_capabilities, bool idle_cpu, const LandlockRuleset& ruleset) {
  auto fail = [report](int stage) {
    const int failure[2] = {stage, errno};
    ssize_t ignored = write(report, failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  };
  setpgid(0, 0);
  // Another user first: a credential change clears the parent-death signal.
  if (BecomePluginUser(uid, gid, drop_capabilities) != 0) fail(kStageUser);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(kStageSetup);
  // The host may have died between fork and prctl: then no signal will come.
  if (getppid() != parent) _exit(127);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0) fail(kStageSetup);
  if (dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) fail(kStageSetup);
  if (const int e = ruleset.RestrictSelf(); e != 0) {
    errno = e;
    fail(kStageSandbox);
  }
  if (working_dir != nullptr && chdir(working_dir) != 0) fail(kStageWorkingDir);
  if (idle_cpu) {
    // The whole process, and every thread it starts, runs only on CPU time no other task
    // wants. Lowering one's own priority needs no privilege.
    struct sched_param param;
    memset(&param, 0, sizeof(param));
    if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) fail(kStagePriority);
  }
  execve(path, argv, envp);
  fail(kStageExec);
  _exit(127);  // not reached
}

}  // namespace

bool IsHostSecret(absl::string_view name) {
  if (name == "KUBECONFIG" || absl::StartsWith(name, "CTRLHOST_")) return true;
  const std::string upper = absl::AsciiStrToUpper(name);
  for (absl::string_view word : {"TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"}) {
    if (absl::StrContains(upper, word)) return true;
  }
  return false;
}

absl::Status CheckExecutable(const ProcessSpec& spec) {
  if (spec.command.empty()) return absl::InvalidArgumentError("plugin command is empty");
  const std::string path = ResolveCommand(spec.command);
  if (path.empty()) {
    return absl::NotFoundError(
        absl::StrCat("cannot start plugin command \"", spec.command, "\": not found in PATH"));
  }
  // A script is read by its interpreter, as the plugin's user: it needs read permission too.
  // Whether it is one is read here, as the host (the plugin's user may not be able to tell).
  bool script = false;
  if (const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    char magic[2] = {0, 0};
    script = read(fd, magic, 2) == 2 && magic[0] == '#' && magic[1] == '!';
    close(fd);
  }
  const PluginCredentials credentials = CredentialsOf(spec.sandbox);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  const char* const working_dir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  const pid_t pid = fork();
  if (pid == 0) {
    // Async-signal-safe calls only (the host may have threads): the same steps as ExecChild up
    // to execve, which access(2) and open(2) stand in for (real ids = effective ids here).
    auto fail = [&report](int stage, int err) {
      const int failure[2] = {stage, err};
      ssize_t ignored = write(report[1], failure, sizeof(failure));
      (void)ignored;
      _exit(1);
    };
    if (BecomePluginUser(credentials.uid, credentials.gid, credentials.drop_capabilities) != 0) {
      fail(kStageUser, errno);
    }
    if (working_dir != nullptr && chdir(working_dir) != 0) fail(kStageWorkingDir, errno);
    struct stat st;
    if (stat(path.c_str(), &st) != 0) fail(kStageExec, errno);
    if (!S_ISREG(st.st_mode)) fail(kStageExec, EACCES);  // what execve says of a directory
    if (access(path.c_str(), X_OK) != 0) fail(kStageExec, errno);
    if (script && access(path.c_str(), R_OK) != 0) fail(kStageExec, errno);
    _exit(0);
  }
  close(report[1]);
  if (pid < 0) {
    const int e = errno;
    close(report[0]);
    return ErrnoStatus(e, "fork");
  }
  int failure[2] = {0, 0};
  ssize_t got;
  while ((got = read(report[0], failure, sizeof(failure))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (got <= 0) return absl::OkStatus();
  const bool files = failure[0] == kStageExec || failure[0] == kStageWorkingDir;
  return ExecStatus(failure[1], ChildStageName(failure[0]), spec.command,
                    files ? credentials.uid : std::nullopt, files && credentials.drop_capabilities);
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return absl::StrCat("wait status ", wait_status);
}

absl::StatusOr<std::unique_ptr<Process>> Process::Spawn(const ProcessSpec& spec,
                                                        std::string log_name,
                                                        std::function<void(int)> on_exit) {
  if (spec.command.empty()) return absl::InvalidArgumentError("plugin command is empty");
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]);
    close(out[1]);
    return ErrnoStatus(e, "pipe");
  }
  auto close_all = [&] {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
  };

  // Environment: the host's without its credentials, overridden by the spec's.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, eq - *e);
    if (IsHostSecret(name)) continue;
    env[std::move(name)] = eq + 1;
  }
  for (const auto& [key, value] : spec.env) env[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings = {spec.command};
  arg_strings.insert(arg_strings.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (std::string& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  const std::string path = ResolveCommand(spec.command);
  if (path.empty()) {
    close_all();
    return absl::NotFoundError(
        absl::StrCat("cannot start plugin command \"", spec.command, "\": not found in PATH"));
  }
  int report[2];  // the child's exec failure, if any: {stage, errno}; EOF means exec succeeded
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    return ErrnoStatus(e, "pipe");
  }
  // The sandbox is prepared here: the child of a multi-threaded process may only apply it.
  const PluginCredentials credentials = CredentialsOf(spec.sandbox);
  SandboxSpec sandbox = spec.sandbox;
  sandbox.uid = credentials.uid;
  sandbox.gid = credentials.gid;
  absl::StatusOr<LandlockRuleset> ruleset = LandlockRuleset::Build(sandbox);
  if (!ruleset.ok()) {
    close(report[0]);
    close(report[1]);
    close_all();
    return ruleset.status();
  }
  const bool drop_capabilities = credentials.drop_capabilities;
  const pid_t parent = getpid();
  const char* const working_dir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  const pid_t pid = fork();
  if (pid == 0) {
    // The child of a multi-threaded process: async-signal-safe calls only, no allocation.
    ExecChild(parent, path.c_str(), argv.data(), envp.data(), working_dir, out[1], err[1],
              report[1], sandbox.uid, sandbox.gid, drop_capabilities, spec.idle_cpu, *ruleset);
  }
  close(report[1]);
  if (pid < 0) {
    const int e = errno;
    close(report[0]);
    close_all();
    return ErrnoStatus(e, "fork");
  }
  setpgid(pid, pid);  // also in the child: whichever runs first, the group exists before use
  int failure[2] = {0, 0};
  ssize_t got;
  while ((got = read(report[0], failure, sizeof(failure))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (got > 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close_all();
    // The hint about the plugin's user concerns the files it could not reach, not the switch.
    const bool files = failure[0] == kStageExec || failure[0] == kStageWorkingDir;
    return ExecStatus(failure[1], ChildStageName(failure[0]), spec.command,
                      files ? credentials.uid : std::nullopt,
                      files && credentials.drop_capabilities);
  }
  close(out[1]);
  close(err[1]);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int e = errno;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    return ErrnoStatus(e, "pidfd_open");
  }
  std::unique_ptr<Process> process(
      new Process(pid, pidfd, out[0], err[0], std::move(log_name), std::move(on_exit)));
  process->thread_ = std::thread([p = process.get()] { p->OutputLoop(); });
  return process;
}

Process::Process(pid_t pid, int pidfd, int out_fd, int err_fd, std::string log_name,
                 std::function<void(int)> on_exit)
    : pid_(pid),
      pidfd_(pidfd),
      out_fd_(out_fd),
      err_fd_(err_fd),
      log_name_(std::move(log_name)),
      on_exit_(std::move(on_exit)) {}

Process::~Process() {
  Signal(SIGKILL);
  if (thread_.joinable()) thread_.join();
  close(pidfd_);
  close(out_fd_);
  close(err_fd_);
}

void Process::Signal(int signal) {
  common::MutexLock lock(&mu_);
  // The whole process group: a wrapper (a shell script, a language launcher) and the plugin it
  // started stop together. Reaping happens under mu_, so until then the pid, and with it the
  // group id, cannot have been reused.
  if (!status_.has_value()) kill(-pid_, signal);
}

std::optional<int> Process::WaitExited(absl::Time deadline) {
  common::MutexLock lock(&mu_);
  while (!status_.has_value()) {
    if (exited_cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return status_;
}

std::optional<int> Process::exit_status() const {
  common::MutexLock lock(&mu_);
  return status_;
}

void Process::OutputLoop() {
  std::string buffers[2];
  bool skipping[2] = {false, false};
  const char* names[2] = {"stdout", "stderr"};
  bool open[2] = {true, true};
  char chunk[8192];
  auto drain = [&](int i, int fd, bool nonblocking) {
    for (;;) {
      const ssize_t n = read(fd, chunk, sizeof(chunk));
      if (n > 0) {
        buffers[i].append(chunk, static_cast<size_t>(n));
        LogLines(log_name_, names[i], &buffers[i], &skipping[i], false);
        if (!nonblocking) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) open[i] = false;  // EOF
      return;                       // EOF, EAGAIN or error
    }
  };
  for (;;) {
    pollfd fds[3] = {{open[0] ? out_fd_ : -1, POLLIN, 0},
                     {open[1] ? err_fd_ : -1, POLLIN, 0},
                     {pidfd_, POLLIN, 0}};
    const int n = poll(fds, 3, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        drain(i, fds[i].fd, false);
      }
    }
    if (fds[2].revents & POLLIN) break;  // the process exited
  }
  // Whatever the plugin left in its process group goes with it (the exited leader, not yet
  // reaped, still holds the group id): no orphan keeps running, or keeps the pipes open.
  kill(-pid_, SIGKILL);
  // Read what is left without blocking (a grandchild may keep the pipes open), then flush.
  for (int i = 0; i < 2; ++i) {
    const int fd = i == 0 ? out_fd_ : err_fd_;
    if (!open[i]) continue;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    drain(i, fd, true);
  }
  for (int i = 0; i < 2; ++i) LogLines(log_name_, names[i], &buffers[i], &skipping[i], true);
  Limiter().ReportDropped(log_name_);
  int status = 0;
  {
    common::MutexLock lock(&mu_);
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = status;
    exited_cv_.SignalAll();
  }
  if (on_exit_) on_exit_(status);
}

absl::Status EnsurePrivateDir(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("plugin socket directory must be absolute: \"", path, "\""));
  }
  // Create missing parents (mode 0700 for the ones we create).
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    const std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, absl::StrCat("mkdir ", prefix));
    }
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("stat ", path));
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin socket directory ", path, " is not a directory (or is a symlink)"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin socket directory ", path, " is owned by uid ", st.st_uid,
                     ", not by this process (uid ", geteuid(), ")"));
  }
  if ((st.st_mode & 066) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("plugin socket directory %s is readable or writable by group or others "
                        "(mode %04o); it must be 0700 (or 0711 for plugins of other users)",
                        path, st.st_mode & 0777));
  }
  return absl::OkStatus();
}

}  // namespace ctrlhost::plugin
