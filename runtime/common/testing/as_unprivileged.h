// RunUnprivileged: runs a check in a forked child that has dropped to an unprivileged user, so
// that tests of "what a user without privileges gets" (an unreadable file, a refused user
// switch) run, and can fail, when the suite runs as root, as CI does.
//
//   TEST(PkiTest, UnreadableFileIsAnError) {
//     std::string failure = testing::RunUnprivileged([&]() -> std::string {
//       if (EnsurePki(dir, {}).status().code() != absl::StatusCode::kPermissionDenied)
//         return "not refused";
//       return "";  // passed
//     });
//     EXPECT_EQ(failure, "");
//   }
//
// The check returns "" when it passes, else what went wrong. As a non-root user it runs in the
// child unchanged; as root the child first becomes uid/gid 65534 (nobody) with no supplementary
// groups. Call it while the test process has no other threads (fork). Files the check uses must
// be reachable by that user (a directory under /tmp made for it, see UnprivilegedDir).
#ifndef CTRLHOST_RUNTIME_COMMON_TESTING_AS_UNPRIVILEGED_H_
#define CTRLHOST_RUNTIME_COMMON_TESTING_AS_UNPRIVILEGED_H_

#include <grp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace ctrlhost::common::testing {

inline constexpr uid_t kUnprivilegedId = 65534;

// The uid the check runs as.
inline uid_t UnprivilegedUid() { return geteuid() == 0 ? kUnprivilegedId : geteuid(); }

// A fresh directory under /tmp owned by the user RunUnprivileged runs as (mode 0700), or ""
// when it cannot be made.
inline std::string UnprivilegedDir() {
  char pattern[] = "/tmp/unprivileged-test-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return "";
  if (geteuid() == 0 && chown(pattern, kUnprivilegedId, kUnprivilegedId) != 0) return "";
  return pattern;
}

inline std::string RunUnprivileged(const std::function<std::string()>& check) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string result;
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(kUnprivilegedId) != 0 ||
                           setuid(kUnprivilegedId) != 0)) {
      result = "cannot become uid 65534 (a user namespace that maps only root?)";
    } else if (geteuid() == 0) {
      result = "still root after setuid";
    } else {
      result = check();
    }
    if (!result.empty() && write(fds[1], result.data(), result.size()) < 0) _exit(2);
    _exit(result.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) out.append(buffer, n);
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return "waitpid failed";
  if (!WIFEXITED(status)) return "the unprivileged check crashed";
  if (WEXITSTATUS(status) != 0 && out.empty()) return "the unprivileged check failed";
  return out;
}

}  // namespace ctrlhost::common::testing

#endif  // CTRLHOST_RUNTIME_COMMON_TESTING_AS_UNPRIVILEGED_H_
