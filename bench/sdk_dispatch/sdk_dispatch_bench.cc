// sdk-dispatch (issue 7): reconciles per second and latency through the host's plugin::Session
// to the same no-op plugin written with each SDK, as ratios to the C++ SDK in the same run. The
// Python (sdk/python, /usr/bin/python3), Node (sdk/node, /usr/bin/node) and Go (sdk/go, built by
// sdk/go/build.sh) plugins run as child processes started the way the host starts plugins
// (CTRLHOST_PLUGIN_ADDRESS, a Unix socket in a private directory); the C++ SDK baseline is served
// in this process over the same kind of socket. At 1 and 64 requests in flight. Targets at 64 in
// flight: Python >= 3,000/s, Node >= 10,000/s, Go >= 20,000/s.
//
//   tools/bench sdk-dispatch            (from the repository root)
//   bazel-bin/bench/sdk_dispatch/sdk_dispatch_bench [--json] [--seconds=2] [--only=python|node|go]
//       [--go-compare=PATH]
// --go-compare=PATH also measures another build of the Go no-op plugin (PATH, e.g. built from an
// earlier commit) in the same run, as "go-compare", right before the Go SDK of this tree.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/dispatch/harness.h"
#include "bench/report.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/session.h"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/plugin.h"
#include "sdk/cpp/result.h"

extern char** environ;

namespace ctrlhost::bench {
namespace {

using common::Mutex;
using common::MutexLock;

// One closed loop. Shared (shared_ptr) with every in-flight callback: a callback can still be
// running on a gRPC thread after the last Record() woke RunSession, so nothing it touches may
// live on RunSession's stack.
struct Loop : std::enable_shared_from_this<Loop> {
  Loop(plugin::Session* s, int total) : session(s), collector(total) {}
  void StartOne() {
    if (!collector.TryStart()) return;  // the session is only used while requests remain
    const absl::Time sent = absl::Now();
    std::shared_ptr<Loop> self = shared_from_this();
    session->Dispatch(call, sent + absl::Seconds(60), [self, sent](controller::DispatchResult r) {
      self->StartOne();
      self->collector.Record(absl::Now() - sent, r.response.ok() && !r.response->has_error());
    });
  }
  plugin::Session* const session;
  const pluginpb::ReconcileCall call = MakeCall();
  Collector collector;
};

absl::StatusOr<Measured> RunSession(const std::string& address, int in_flight, int total) {
  plugin::SessionOptions options;
  options.max_in_flight = static_cast<uint32_t>(in_flight);
  options.instance_name = "bench-1";
  auto session =
      plugin::Session::Open(plugin::MakeChannel(address, plugin::kDefaultMaxMessageBytes), options);
  if (!session.ok()) return session.status();
  auto loop = std::make_shared<Loop>(session->get(), total);
  const absl::Time start = absl::Now();
  for (int i = 0; i < in_flight; ++i) loop->StartOne();
  return loop->collector.Wait(start);
}

// Waits until the plugin at `address` answers one reconcile (bounded: 30 s).
bool WaitReady(const std::string& address) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    absl::StatusOr<Measured> m = RunSession(address, 1, 1);
    if (m.ok() && m->errors == 0) return true;
    absl::SleepFor(absl::Milliseconds(100));  // polling a child process's startup, bounded
  }
  return false;
}

struct Sdk {
  std::string name;               // "python", "node", "go"
  std::vector<std::string> argv;  // how to start its no-op plugin
  double target = 0;              // reconciles/s at 64 in flight
};

// The no-op plugins, from this binary's runfiles or from the repository root.
std::string Find(const char* argv0, const std::string& rel) {
  const std::string in_runfiles = absl::StrCat(argv0, ".runfiles/ctrlhost/", rel);
  if (access(in_runfiles.c_str(), R_OK) == 0) return in_runfiles;
  if (access(rel.c_str(), R_OK) == 0) return rel;
  return absl::StrCat("bazel-bin/", rel);
}

// Starts `argv` with CTRLHOST_PLUGIN_ADDRESS=address; 0 on failure.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& address) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("CTRLHOST_PLUGIN_ADDRESS=", 0) != 0) env_strings.push_back(*e);
  }
  env_strings.push_back(absl::StrCat("CTRLHOST_PLUGIN_ADDRESS=", address));
  env_strings.push_back("CTRLHOST_LOG_LEVEL=warning");
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> child_argv;
  for (std::string& a : args) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0].c_str(), nullptr, nullptr, child_argv.data(), envp.data()) != 0) {
    return 0;
  }
  return pid;
}

// Measures `sdk` against the C++ baseline at 1 and 64 in flight. False on a failure.
bool MeasureSdk(const Sdk& sdk, const std::string& dir, const std::string& cpp_address,
                double seconds, Reporter& reporter) {
  const std::string socket = absl::StrCat(dir, "/", sdk.name, ".sock");
  const std::string address = absl::StrCat("unix://", socket);
  const pid_t pid = Spawn(sdk.argv, address);
  if (pid == 0) {
    fprintf(stderr, "cannot start the %s plugin (%s)\n", sdk.name.c_str(), sdk.argv[0].c_str());
    return false;
  }
  bool ok = WaitReady(address);
  if (!ok) fprintf(stderr, "the %s plugin did not become ready\n", sdk.name.c_str());
  for (int in_flight : {1, 64}) {
    if (!ok) break;
    absl::StatusOr<Measured> probe = RunSession(address, in_flight, in_flight == 1 ? 300 : 3000);
    if (!probe.ok()) {
      ok = false;
      break;
    }
    const int total = std::max(1000, static_cast<int>(probe->per_second * seconds));
    absl::StatusOr<Measured> m = RunSession(address, in_flight, total);
    absl::StatusOr<Measured> cpp = RunSession(cpp_address, in_flight, total);
    if (!m.ok() || !cpp.ok()) {
      ok = false;
      break;
    }
    if (m->errors + cpp->errors > 0) {
      fprintf(stderr, "errors: %s %d, C++ %d\n", sdk.name.c_str(), m->errors, cpp->errors);
      ok = false;
    }
    const std::string at = absl::StrCat(" @", in_flight, " in flight");
    Figure rate;
    rate.metric = absl::StrCat(sdk.name, " sdk reconciles/s vs C++ sdk", at);
    rate.value = m->per_second;
    rate.unit = "/s";
    rate.baseline = cpp->per_second;
    if (in_flight == 64) {
      rate.target = absl::StrCat(">= ", sdk.target, "/s");
      rate.met = m->per_second >= sdk.target;
    }
    reporter.Add(rate);
    for (const auto& [name, n, c] : {std::make_tuple("p50", m->p50_us, cpp->p50_us),
                                     std::make_tuple("p99", m->p99_us, cpp->p99_us)}) {
      Figure latency;
      latency.metric = absl::StrCat(sdk.name, " sdk latency ", name, " vs C++ sdk", at);
      latency.value = n;
      latency.unit = "us";
      latency.baseline = c;
      reporter.Add(latency);
    }
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(socket.c_str());
  return ok;
}

int Main(int argc, char** argv) {
  Reporter reporter("sdk-dispatch", argc, argv);
  double seconds = 2;
  std::string only;
  std::string go_compare;
  for (const std::string& arg : reporter.args()) {
    if (arg.rfind("--seconds=", 0) == 0) (void)absl::SimpleAtod(arg.substr(10), &seconds);
    if (arg.rfind("--only=", 0) == 0) only = arg.substr(7);
    if (arg.rfind("--go-compare=", 0) == 0) go_compare = arg.substr(13);
  }
  if (!go_compare.empty() && access(go_compare.c_str(), X_OK) != 0) {
    fprintf(stderr, "--go-compare=%s: not an executable file\n", go_compare.c_str());
    return 2;
  }
  char dir_template[] = "/tmp/sdk-dispatch-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string cpp_socket = absl::StrCat(dir_template, "/cpp.sock");
  const std::string cpp_address = absl::StrCat("unix://", cpp_socket);

  // The C++ SDK baseline, in this process.
  sdk::Plugin cpp_plugin("noop-cpp", "0.1.0");
  cpp_plugin.Add(sdk::ControllerBuilder("echo")
                     .For("example.com", "v1", "WebApp")
                     .Reconcile([](const sdk::Request& req) {
                       sdk::Result result;
                       result.Status()["seen"] = req.name();
                       return result;
                     }));
  auto cpp_server = cpp_plugin.Start(cpp_address);
  if (!cpp_server.ok()) {
    fprintf(stderr, "C++ plugin: %s\n", cpp_server.status().ToString().c_str());
    return 1;
  }
  int rc = WaitReady(cpp_address) ? 0 : 1;
  std::vector<Sdk> sdks = {
      {"python", {Find(argv[0], "bench/sdk_dispatch/noop_plugin")}, 3000},
      {"node", {"/usr/bin/node", Find(argv[0], "bench/sdk_dispatch/noop_plugin.js")}, 10000},
  };
  if (!go_compare.empty()) sdks.push_back({"go-compare", {go_compare}, 20000});
  sdks.push_back({"go", {Find(argv[0], "bench/sdk_dispatch/noop-go")}, 20000});
  for (const Sdk& sdk : sdks) {
    if (rc != 0) break;
    if (!only.empty() && only != sdk.name && !(only == "go" && sdk.name == "go-compare")) continue;
    if (!MeasureSdk(sdk, dir_template, cpp_address, seconds, reporter)) rc = 1;
  }
  cpp_server->reset();
  unlink(cpp_socket.c_str());
  rmdir(dir_template);
  const int report = reporter.Finish();
  return rc != 0 ? rc : report;
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
