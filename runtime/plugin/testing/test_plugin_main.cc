// The test plugin as a process, for supervisor tests and the dispatch benchmark.
//
//   test_plugin [--describe=MODE] [--health=MODE] [--no-cancellation] [--crash-after=N]
//               [--exit-at-start=CODE] [--ignore-sigterm] [--stdout=TEXT] [--stderr=TEXT]
//               [--stdout-bytes=N] [--print-env=NAME] [--print-cwd]
// Serves on $CTRLHOST_PLUGIN_ADDRESS (or --address=ADDR; for TCP the bound port is printed as
// "port=N" on stdout). Modes are those of TestPluginOptions. --stdout/--stderr print TEXT (with
// "\n" as line breaks, the last line without a newline) at start; --stdout-bytes prints one line
// of N 'y's; --print-env prints "env NAME=VALUE", --print-cwd "cwd=DIR". SIGTERM shuts down (unless
// --ignore-sigterm, which prints "ignoring SIGTERM"). SIGUSR1 makes the health service report
// NOT_SERVING (as a draining plugin does), SIGUSR2 SERVING again.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "runtime/plugin/testing/test_plugin.h"

namespace {

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  ctrlhost::plugin::testing::TestPluginOptions options;
  std::string address;
  if (const char* env = std::getenv("CTRLHOST_PLUGIN_ADDRESS")) address = env;
  bool ignore_sigterm = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::string prefix = std::string(flag) + "=";
      return absl::StartsWith(arg, prefix) ? argv[i] + prefix.size() : nullptr;
    };
    int n = 0;
    if (const char* v = value("--describe")) {
      options.describe = v;
    } else if (const char* v = value("--health")) {
      options.health = v;
    } else if (arg == "--no-cancellation") {
      options.cancellation = false;
    } else if (const char* v = value("--crash-after"); v && absl::SimpleAtoi(v, &n)) {
      options.crash_after = n;
    } else if (const char* v = value("--exit-at-start"); v && absl::SimpleAtoi(v, &n)) {
      return n;
    } else if (arg == "--ignore-sigterm") {
      ignore_sigterm = true;
    } else if (const char* v = value("--stdout")) {
      WriteAll(1, absl::StrReplaceAll(v, {{"\\n", "\n"}}));
    } else if (const char* v = value("--stderr")) {
      WriteAll(2, absl::StrReplaceAll(v, {{"\\n", "\n"}}));
    } else if (const char* v = value("--stdout-bytes"); v && absl::SimpleAtoi(v, &n)) {
      WriteAll(1, std::string(static_cast<size_t>(n), 'y') + "\n");
    } else if (const char* v = value("--print-env")) {
      const char* env = std::getenv(v);
      WriteAll(1, std::string("env ") + v + "=" + (env ? env : "(unset)") + "\n");
    } else if (arg == "--print-cwd") {
      char cwd[4096];
      WriteAll(1, std::string("cwd=") + (getcwd(cwd, sizeof(cwd)) ? cwd : "?") + "\n");
    } else if (const char* v = value("--address")) {
      address = v;
    } else {
      WriteAll(2, "test_plugin: unknown flag " + arg + "\n");
      return 2;
    }
  }
  if (address.empty()) {
    WriteAll(2, "test_plugin: CTRLHOST_PLUGIN_ADDRESS is not set\n");
    return 2;
  }
  // Signals are taken synchronously by this thread; block them before gRPC starts threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto plugin = ctrlhost::plugin::testing::TestPlugin::Start(address, options);
  if (!plugin.ok()) {
    WriteAll(2, std::string(plugin.status().message()) + "\n");
    return 1;
  }
  if (absl::StartsWith(address, "127.0.0.1:")) {
    WriteAll(1, "port=" + std::to_string((*plugin)->port()) + "\n");
  }
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      (*plugin)->SetServing(sig == SIGUSR2);
      continue;
    }
    if (sig == SIGTERM && ignore_sigterm) {
      WriteAll(1, "ignoring SIGTERM\n");
      continue;
    }
    break;
  }
  plugin->reset();
  return 0;
}
