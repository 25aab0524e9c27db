// sdk-dispatch for the Python SDK: reconciles per second and latency through the host's
// plugin::Session to a no-op plugin written with sdk/python (a child process on /usr/bin/python3,
// started the way the host starts plugins: CTRLHOST_PLUGIN_ADDRESS, a Unix socket in a private
// directory), at 1 and 64 requests in flight, as a ratio to the same no-op plugin written with
// the C++ SDK (sdk/cpp, served in this process) measured in the same run over the same kind of
// socket. Target (issue 7): >= 3,000 reconciles/s at 64 in flight.
//
//   bazel run -c opt //bench/sdk_dispatch_py:sdk_dispatch_py_bench [-- --json]
//       [-- --seconds=2] [-- --plugin=path/to/noop_plugin (the py_binary launcher)]
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
#include "bench/report.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "runtime/common/mutex.h"
#include "runtime/plugin/session.h"
#include "sdk/cpp/controller.h"
#include "sdk/cpp/plugin.h"
#include "sdk/cpp/result.h"

extern char** environ;

namespace ctrlhost::bench {
namespace {

namespace pb = ::ctrlhost::plugin::v1alpha1;
using common::Mutex;
using common::MutexLock;

// The same ~1 KiB primary as bench/dispatch.
pb::ReconcileCall MakeCall() {
  pb::ReconcileCall call;
  call.set_controller("echo");
  call.set_namespace_("team-a");
  call.set_name("app-1");
  call.set_uid("6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10");
  call.set_reason(pb::REASON_PRIMARY_CHANGED);
  std::string object =
      R"({"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"app-1",)"
      R"("namespace":"team-a","uid":"6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10",)"
      R"("resourceVersion":"12345","generation":3,"labels":{"app":"web","tier":"front"}},)"
      R"("spec":{"replicas":3,"image":"registry.example.com/web:1.4.0","env":[)";
  for (int i = 0; i < 12; ++i) {
    absl::StrAppend(&object, i ? "," : "", R"({"name":"VAR_)", i, R"(","value":"value-)", i,
                    R"(-xxxxxxxxxxxxxxxxxxxxxxxx"})");
  }
  object += "]}}";
  call.set_object(object);
  call.set_attempt(1);
  call.set_trace_id("4bf92f3577b34da6a3ce929d0e0e4736");
  return call;
}

struct Measured {
  double per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  int errors = 0;
};

// Collects latencies from any thread. Thread-safe: mu_ guards everything below it.
class Collector {
 public:
  explicit Collector(int total) : total_(total) { latencies_.reserve(total); }
  void Record(absl::Duration latency, bool ok) {
    MutexLock lock(&mu_);
    latencies_.push_back(absl::ToDoubleMicroseconds(latency));
    if (!ok) ++errors_;
    if (static_cast<int>(latencies_.size()) == total_) cv_.SignalAll();
  }
  bool TryStart() {
    MutexLock lock(&mu_);
    if (started_ >= total_) return false;
    ++started_;
    return true;
  }
  Measured Wait(absl::Time start) {
    MutexLock lock(&mu_);
    while (static_cast<int>(latencies_.size()) < total_) cv_.Wait(&mu_);
    Measured m;
    m.per_second = total_ / absl::ToDoubleSeconds(absl::Now() - start);
    std::sort(latencies_.begin(), latencies_.end());
    m.p50_us = latencies_[latencies_.size() / 2];
    m.p99_us = latencies_[latencies_.size() * 99 / 100];
    m.errors = errors_;
    return m;
  }

 private:
  const int total_;
  Mutex mu_;
  common::CondVar cv_;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> latencies_ ABSL_GUARDED_BY(mu_);
};

// One closed loop. Shared (shared_ptr) with every in-flight callback: a callback can still be
// running on a gRPC thread after the last Record() woke RunSession, so nothing it touches may
// live on RunSession's stack.
struct Loop : std::enable_shared_from_this<Loop> {
  Loop(plugin::Session* s, int total) : session(s), collector(total) {}
  void StartOne() {
    if (!collector.TryStart()) return;  // the session is only used while requests remain
    const absl::Time sent = absl::Now();
    std::shared_ptr<Loop> self = shared_from_this();
    session->Dispatch(call, sent + absl::Seconds(60),
                      [self, sent](absl::StatusOr<pb::ReconcileResponse> r) {
                        self->StartOne();
                        self->collector.Record(absl::Now() - sent, r.ok() && !r->has_error());
                      });
  }
  plugin::Session* const session;
  const pb::ReconcileCall call = MakeCall();
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

std::string FindPlugin(const std::string& flag, const char* argv0) {
  if (!flag.empty()) return flag;
  // The py_binary launcher, from this binary's runfiles (bazel run) or the output tree.
  const std::string rel = "bench/sdk_dispatch_py/noop_plugin";
  const std::string in_runfiles = absl::StrCat(argv0, ".runfiles/ctrlhost/", rel);
  if (access(in_runfiles.c_str(), X_OK) == 0) return in_runfiles;
  return absl::StrCat("bazel-bin/", rel);
}

int Main(int argc, char** argv) {
  Reporter reporter("sdk-dispatch-py", argc, argv);
  double seconds = 2;
  std::string plugin_flag;
  for (const std::string& arg : reporter.args()) {
    if (arg.rfind("--seconds=", 0) == 0) (void)absl::SimpleAtod(arg.substr(10), &seconds);
    if (arg.rfind("--plugin=", 0) == 0) plugin_flag = arg.substr(9);
  }
  const std::string launcher = FindPlugin(plugin_flag, argv[0]);
  char dir_template[] = "/tmp/sdk-dispatch-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return 1;
  const std::string cpp_socket = absl::StrCat(dir_template, "/cpp.sock");
  const std::string py_socket = absl::StrCat(dir_template, "/py.sock");
  const std::string cpp_address = absl::StrCat("unix://", cpp_socket);
  const std::string py_address = absl::StrCat("unix://", py_socket);

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

  // The Python plugin, as the host starts it.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("CTRLHOST_PLUGIN_ADDRESS=", 0) != 0) env_strings.push_back(*e);
  }
  env_strings.push_back(absl::StrCat("CTRLHOST_PLUGIN_ADDRESS=", py_address));
  env_strings.push_back("CTRLHOST_LOG_LEVEL=warning");
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string launcher_arg = launcher;
  char* child_argv[] = {launcher_arg.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, launcher.c_str(), nullptr, nullptr, child_argv, envp.data()) != 0) {
    fprintf(stderr, "cannot start %s\n", launcher.c_str());
    return 1;
  }
  int rc = 0;
  if (!WaitReady(cpp_address) || !WaitReady(py_address)) {
    fprintf(stderr, "a plugin did not become ready (python plugin: %s)\n", launcher.c_str());
    rc = 1;
  }
  for (int in_flight : {1, 64}) {
    if (rc != 0) break;
    absl::StatusOr<Measured> probe = RunSession(py_address, in_flight, in_flight == 1 ? 300 : 3000);
    if (!probe.ok()) {
      rc = 1;
      break;
    }
    const int total = std::max(1000, static_cast<int>(probe->per_second * seconds));
    absl::StatusOr<Measured> py_m = RunSession(py_address, in_flight, total);
    absl::StatusOr<Measured> cpp_m = RunSession(cpp_address, in_flight, total);
    if (!py_m.ok() || !cpp_m.ok()) {
      rc = 1;
      break;
    }
    if (py_m->errors + cpp_m->errors > 0) {
      fprintf(stderr, "errors: python %d, C++ %d\n", py_m->errors, cpp_m->errors);
      rc = 1;
    }
    const std::string at = absl::StrCat(" @", in_flight, " in flight");
    Figure rate;
    rate.metric = "python sdk reconciles/s vs C++ sdk" + at;
    rate.value = py_m->per_second;
    rate.unit = "/s";
    rate.baseline = cpp_m->per_second;
    if (in_flight == 64) {
      rate.target = ">= 3000/s";
      rate.met = py_m->per_second >= 3000;
    }
    reporter.Add(rate);
    for (const auto& [name, n, c] : {std::make_tuple("p50", py_m->p50_us, cpp_m->p50_us),
                                     std::make_tuple("p99", py_m->p99_us, cpp_m->p99_us)}) {
      Figure latency;
      latency.metric = absl::StrCat("python sdk latency ", name, " vs C++ sdk", at);
      latency.value = n;
      latency.unit = "us";
      latency.baseline = c;
      reporter.Add(latency);
    }
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  cpp_server->reset();
  unlink(cpp_socket.c_str());
  unlink(py_socket.c_str());
  rmdir(dir_template);
  const int report = reporter.Finish();
  return rc != 0 ? rc : report;
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
