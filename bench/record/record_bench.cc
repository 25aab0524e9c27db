// Recording benchmark (issue 27): what recording reconciles costs the serving path, and how fast
// `ctrlhost replay` sends a recording back to a plugin.
//
// 1. Recording on vs off. A PluginSlot dispatches reconciles of a ~1.4 KiB WebApp to an
//    in-process no-op test plugin over TCP on 127.0.0.1 with 64 in flight (the setup of
//    bench/shadow). With a record::Recorder each completed reconcile is recorded as
//    runtime/controller/runner_worker.cc does it: the call captured before the dispatch, Record()
//    once the answer is in (here on the thread that delivers the answer, in the runner on the
//    worker that waited for it: the same work on the same cores). Rounds alternate (off, on,
//    on with the writer at normal priority, off, ...); each figure is the median over the
//    rounds, and the process's CPU time per reconcile is measured too. Target (issue 27):
//    throughput with recording >= 0.95x without.
// 2. Replay. A recording of --records calls whose recorded answers are empty (written with
//    record::FileStart + record::Frame), replayed by the real `ctrlhost replay` (a child process,
//    timed by its wall time) against bench/record's no-op C++ SDK plugin. Baseline: the same
//    plugin started by a plugin::Supervisor in this process, answering the same calls at the same
//    16 in flight, timed from the plugin's start as replay's wall time is. Target: >= 5,000
//    calls/s; every answer the same as recorded (exit code 0, "0 different").
//
//   bazel run -c opt //bench/record:record_bench -- [--calls=20000] [--rounds=9]
//       [--records=20000] [--only=recording|replay] [--json]
//
// Every file goes to a fresh directory under $TEST_TMPDIR (else $TMPDIR, else /tmp), removed at
// the end.
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/report.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/mutex.h"
#include "runtime/common/proto_time.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/controller/reconcile.h"
#include "runtime/controller/record/recorder.h"
#include "runtime/controller/record/recording.h"
#include "runtime/manager/plugin_slot.h"
#include "runtime/plugin/supervisor.h"
#include "runtime/plugin/testing/test_plugin.h"

extern char** environ;

namespace ctrlhost::bench {
namespace {

namespace fs = std::filesystem;
namespace record = controller::record;

constexpr int kServingInFlight = 64;
constexpr int kReplayInFlight = 16;  // ctrlhost replay's default --in-flight

struct Args {
  int calls = 20000;
  // A round is under a second: the median of 9 is what the machine's noise leaves steady.
  int rounds = 9;
  int records = 20000;
  std::string only;  // "", "recording" or "replay"
};

struct Run {
  double per_second = 0;
  absl::Duration p99;
  int failed = 0;
};

// The call the host would send for WebApp `i % 5000` of namespace "team": a realistic primary of
// about 1.4 KiB (metadata with labels and a finalizer, a spec with resources and env, a status
// with a condition), so that copying and serializing it costs what it costs in production.
pluginpb::ReconcileCall WebAppCall(int i) {
  const std::string name = absl::StrCat("web-", i % 5000);
  const std::string uid = absl::StrFormat("6f0d1c3e-8f7e-4d4b-9a57-%012d", i % 5000);
  std::string env;
  for (int v = 0; v < 10; ++v) {
    absl::StrAppend(&env, v ? "," : "", R"({"name":"SETTING_)", v, R"(","value":"value-)", v,
                    R"(-of-the-web-application"})");
  }
  pluginpb::ReconcileCall call;
  call.set_controller("webapp");
  call.set_namespace_("team");
  call.set_name(name);
  call.set_uid(uid);
  call.set_reason(pluginpb::REASON_PRIMARY_CHANGED);
  call.set_attempt(1);
  *call.mutable_deadline() = common::ToProtoTimestamp(absl::Now() + absl::Seconds(60));
  call.set_trace_id(absl::StrFormat("4bf92f3577b34da6a3ce929d%08x", i));
  call.set_object(absl::StrCat(
      R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp","metadata":{"name":")", name,
      R"(","namespace":"team","uid":")", uid, R"(","resourceVersion":")", 100000 + i,
      R"(","generation":3,"creationTimestamp":"2026-11-29T10:00:00Z",)",
      R"("labels":{"app":"web","tier":"front","team":"payments"},)",
      R"("annotations":{"ctrlhost.dev/owner":"payments@example.com"},)",
      R"("finalizers":["ctrlhost.dev/cleanup"]},)",
      R"("spec":{"replicas":3,"image":"registry.example.com/team/web:1.4.0","port":8080,)",
      R"("resources":{"requests":{"cpu":"250m","memory":"256Mi"},)",
      R"("limits":{"cpu":"1","memory":"512Mi"}},"env":[)", env, "]},",
      R"("status":{"observedGeneration":3,"readyReplicas":3,"conditions":[{"type":"Ready",)",
      R"("status":"True","reason":"Reconciled","lastTransitionTime":"2026-11-29T10:00:05Z",)",
      R"("observedGeneration":3}]}})"));
  return call;
}

// The header the host writes for bench/record's "webapp" controller.
pluginpb::RecordingHeader Header() {
  pluginpb::RecordingHeader header;
  header.set_format(record::kFormat);
  header.set_operator_("bench");
  header.set_plugin("noop_plugin");
  *header.mutable_controller() = record::ToRecorded(controller::apply::testing::WebAppController());
  *header.mutable_created() = common::ToProtoTimestamp(absl::Now());
  header.set_host_version("record-bench");
  return header;
}

// Keeps `in_flight` calls outstanding until `calls` were answered; with a recorder, records each
// reconcile as the runner does. Thread-safe.
class Driver {
 public:
  Run Go(controller::Dispatcher* dispatcher, int in_flight, int calls, record::Recorder* recorder) {
    Stopwatch watch;
    for (int sent = 0; sent < calls; ++sent) {
      {
        common::MutexLock lock(&mu_);
        while (in_flight_ >= in_flight) cv_.Wait(&mu_);
        ++in_flight_;
      }
      const absl::Time start = absl::Now();
      pluginpb::ReconcileCall call = WebAppCall(sent);
      // As runner_worker.cc: the call is captured before the dispatch, recorded after the answer.
      std::shared_ptr<std::string> captured;
      if (recorder != nullptr) captured = std::make_shared<std::string>(recorder->Capture(call));
      dispatcher->Dispatch(std::move(call), start + absl::Seconds(60),
                           [this, start, captured, recorder](controller::DispatchResult r) {
                             const absl::Duration took = absl::Now() - start;
                             const bool failed = !r.response.ok() || r.response->has_error();
                             if (recorder != nullptr) {
                               recorder->Record(std::move(*captured), std::move(r), outcome_, took);
                             }
                             common::MutexLock lock(&mu_);
                             latencies_.push_back(took);
                             if (failed) ++failed_;
                             --in_flight_;
                             cv_.SignalAll();
                           });
    }
    common::MutexLock lock(&mu_);
    while (in_flight_ > 0) cv_.Wait(&mu_);
    Run run;
    run.per_second = calls / watch.Seconds();
    run.p99 = Percentile(latencies_, 0.99);
    run.failed = failed_;
    latencies_.clear();
    failed_ = 0;
    return run;
  }

 private:
  // A no-op answer applied: nothing written, the status write left out.
  const controller::ApplyOutcome outcome_ = [] {
    controller::ApplyOutcome o;
    o.skipped = 1;
    return o;
  }();
  common::Mutex mu_;
  common::CondVar cv_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Duration> latencies_ ABSL_GUARDED_BY(mu_);
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A fresh directory for this run's files, removed with everything in it when destroyed.
class TempRoot {
 public:
  static std::unique_ptr<TempRoot> Create() {
    const char* base = std::getenv("TEST_TMPDIR");
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    if (base == nullptr || *base == '\0') base = "/tmp";
    std::string path = absl::StrCat(base, "/record-bench-XXXXXX");
    if (mkdtemp(path.data()) == nullptr) return nullptr;
    return std::unique_ptr<TempRoot>(new TempRoot(path));
  }
  ~TempRoot() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;
  const fs::path& path() const { return path_; }

 private:
  explicit TempRoot(fs::path path) : path_(std::move(path)) {}
  const fs::path path_;
};

// --- Part 1: recording on vs off ---------------------------------------------------------------

// The serving side: a no-op test plugin over TCP behind a PluginSlot, READY. The slot is
// declared last so that it is destroyed before the plugin it dispatches to.
struct Serving {
  std::unique_ptr<plugin::testing::TestPlugin> plugin;
  std::unique_ptr<manager::PluginSlot> slot;
};

absl::StatusOr<Serving> StartServing() {
  Serving serving;
  absl::StatusOr<std::unique_ptr<plugin::testing::TestPlugin>> test_plugin =
      plugin::testing::TestPlugin::Start("127.0.0.1:0", {});
  if (!test_plugin.ok()) return test_plugin.status();
  serving.plugin = *std::move(test_plugin);
  const int port = serving.plugin->port();
  absl::StatusOr<std::unique_ptr<manager::PluginSlot>> slot = manager::PluginSlot::Start(
      [port](uint64_t) {
        plugin::SupervisorOptions options;
        options.name = "web";
        options.source.endpoint = absl::StrCat("127.0.0.1:", port);
        options.handshake.deadline = absl::Seconds(30);
        return options;
      },
      nullptr, nullptr);
  if (!slot.ok()) return slot.status();
  serving.slot = *std::move(slot);
  for (int i = 0; i < 3000 && serving.slot->status().state != plugin::PluginState::kReady; ++i) {
    usleep(10000);
  }
  if (serving.slot->status().state != plugin::PluginState::kReady) {
    return absl::UnavailableError("the serving plugin did not become ready");
  }
  return serving;
}

struct RecordingRounds {
  std::vector<double> rate_off, rate_on, p99_off, p99_on, flush_ms;
  // The process's CPU time per reconcile (every thread: driver, gRPC, the in-process plugin,
  // and with recording the recorder's writer until its Flush).
  std::vector<double> cpu_off, cpu_on;
  // Recording with the writer at normal priority (spec.record.cpu: normal), for comparison.
  std::vector<double> rate_normal, cpu_normal;
  uint64_t recorded = 0, dropped = 0, bytes = 0;
  int failed = 0;
};

// One round with a recorder of its own in `dir`, removed afterwards. `idle_cpu`: the default
// recorder (counted as "on"); else its writer at normal priority (counted apart).
absl::Status RoundWithRecorder(Driver& driver, manager::PluginSlot* slot, int calls,
                               const fs::path& dir, bool idle_cpu, RecordingRounds& rounds) {
  absl::StatusOr<std::unique_ptr<record::Recorder>> recorder =
      record::Recorder::Start({.dir = dir.string(), .idle_cpu = idle_cpu}, Header());
  if (!recorder.ok()) return recorder.status();
  CpuStopwatch cpu;
  const Run on = driver.Go(slot, kServingInFlight, calls, recorder->get());
  (idle_cpu ? rounds.rate_on : rounds.rate_normal).push_back(on.per_second);
  if (idle_cpu) rounds.p99_on.push_back(absl::ToDoubleMilliseconds(on.p99));
  rounds.failed += on.failed;
  // The serving path never waits for the disk: what the writer still holds when the last answer
  // is in is written after the timed window (reported apart).
  Stopwatch flush;
  (*recorder)->Flush();
  if (idle_cpu) rounds.flush_ms.push_back(absl::ToDoubleMilliseconds(flush.Elapsed()));
  (idle_cpu ? rounds.cpu_on : rounds.cpu_normal)
      .push_back(absl::ToDoubleMicroseconds(cpu.Elapsed()) / calls);
  const record::Recorder::Figures figures = (*recorder)->figures();
  rounds.recorded += figures.recorded;
  rounds.dropped += figures.dropped;
  rounds.bytes += figures.bytes_written;
  recorder->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return absl::OkStatus();
}

void ReportRecording(const Args& args, const RecordingRounds& rounds, Reporter& reporter) {
  Figure rate;
  rate.metric = "serving reconciles/s at 64 in flight, recording on";
  rate.value = Median(rounds.rate_on);
  rate.unit = "/s";
  rate.baseline = Median(rounds.rate_off);
  rate.target = ">= 0.95x";
  rate.met = rate.value >= 0.95 * *rate.baseline;
  reporter.Add(rate);
  Figure p99;
  p99.metric = "serving latency p99 at 64 in flight, recording on";
  p99.value = Median(rounds.p99_on);
  p99.unit = "ms";
  p99.baseline = Median(rounds.p99_off);
  reporter.Add(p99);
  // What the ratio depends on: recording adds a fixed cost per reconcile, and this pipeline's
  // reconciles cost next to nothing (no cache, no applier, no API server).
  Figure added;
  added.metric = "serving time added per reconcile by recording (1/on - 1/off)";
  added.value = 1e6 / rate.value - 1e6 / *rate.baseline;
  added.unit = "us";
  reporter.Add(added);
  // The same cost as CPU time, which the machine's other load moves far less than a rate.
  Figure cpu;
  cpu.metric = "process CPU per reconcile, recording on (incl. the writer)";
  cpu.value = Median(rounds.cpu_on);
  cpu.unit = "us";
  cpu.baseline = Median(rounds.cpu_off);
  reporter.Add(cpu);
  // What the idle writer buys: the same recorder with its writer competing for CPU.
  Figure normal;
  normal.metric = "serving reconciles/s, recording on with cpu: normal";
  normal.value = Median(rounds.rate_normal);
  normal.unit = "/s";
  normal.baseline = *rate.baseline;
  reporter.Add(normal);
  Figure normal_cpu;
  normal_cpu.metric = "process CPU per reconcile, recording on with cpu: normal";
  normal_cpu.value = Median(rounds.cpu_normal);
  normal_cpu.unit = "us";
  normal_cpu.baseline = *cpu.baseline;
  reporter.Add(normal_cpu);
  // Both kinds of recording rounds.
  const uint64_t reconciles = static_cast<uint64_t>(args.calls) * args.rounds * 2;
  Figure written;
  written.metric = "records written, of the reconciles recorded";
  written.value = static_cast<double>(rounds.recorded);
  written.unit = "records";
  written.baseline = static_cast<double>(reconciles);
  written.target = "all";
  written.met = rounds.recorded == reconciles;
  reporter.Add(written);
  Figure dropped;
  dropped.metric = "records dropped";
  dropped.value = static_cast<double>(rounds.dropped);
  dropped.unit = "records";
  dropped.target = "== 0";
  dropped.met = rounds.dropped == 0;
  reporter.Add(dropped);
  Figure size;
  size.metric =
      absl::StrCat("bytes per record (call object ", WebAppCall(0).object().size(), " B)");
  size.value = rounds.recorded > 0 ? static_cast<double>(rounds.bytes) / rounds.recorded : 0;
  size.unit = "B";
  reporter.Add(size);
  Figure flush;
  flush.metric = "writer backlog at a round's end (time to Flush)";
  flush.value = Median(rounds.flush_ms);
  flush.unit = "ms";
  reporter.Add(flush);
  Figure errors;
  errors.metric = "serving calls that failed";
  errors.value = rounds.failed;
  errors.unit = "calls";
  errors.target = "== 0";
  errors.met = rounds.failed == 0;
  reporter.Add(errors);
}

absl::Status MeasureRecording(const Args& args, const fs::path& root, Reporter& reporter) {
  absl::StatusOr<Serving> serving = StartServing();
  if (!serving.ok()) return serving.status();
  manager::PluginSlot* slot = serving->slot.get();
  Driver driver;
  driver.Go(slot, kServingInFlight, args.calls / 4, nullptr);  // warm up
  RecordingRounds rounds;
  for (int r = 0; r < args.rounds; ++r) {
    CpuStopwatch cpu;
    const Run off = driver.Go(slot, kServingInFlight, args.calls, nullptr);
    rounds.cpu_off.push_back(absl::ToDoubleMicroseconds(cpu.Elapsed()) / args.calls);
    rounds.rate_off.push_back(off.per_second);
    rounds.p99_off.push_back(absl::ToDoubleMilliseconds(off.p99));
    rounds.failed += off.failed;
    for (const bool idle_cpu : {true, false}) {
      absl::Status on = RoundWithRecorder(driver, slot, args.calls,
                                          root / absl::StrCat("round-", r, idle_cpu ? "-idle" : ""),
                                          idle_cpu, rounds);
      if (!on.ok()) return on;
    }
  }
  slot->Stop();
  ReportRecording(args, rounds, reporter);
  return absl::OkStatus();
}

// --- Part 2: replay ------------------------------------------------------------------------------

// `records` calls of "webapp" whose recorded answers are empty, in one file of `dir`.
absl::Status WriteRecording(const fs::path& dir, int records) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir.string()));
  const fs::path path = dir / record::FileName(1);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << record::FileStart(Header());
  const absl::Time now = absl::Now();
  for (int i = 0; i < records; ++i) {
    pluginpb::ReconcileRecord r;
    r.set_sequence(i + 1);
    *r.mutable_time() = common::ToProtoTimestamp(now);
    *r.mutable_took() = common::ToProtoDuration(absl::Milliseconds(1));
    *r.mutable_call() = WebAppCall(i);
    r.mutable_response();  // the no-op plugin's answer: empty
    r.mutable_action()->set_result(pluginpb::HOST_ACTION_RESULT_UNCHANGED);
    r.mutable_action()->set_skipped(1);
    file << record::Frame(r);
  }
  file.flush();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

struct Baseline {
  double seconds = 0;    // from the plugin's start to the last answer
  double loop_rate = 0;  // the dispatch loop alone, calls/s
};

// The plugin started by a Supervisor in this process (as replay starts it: exec'd, a private
// socket directory) answering the same calls at replay's in-flight.
absl::StatusOr<Baseline> DispatchBaseline(const std::string& plugin_path,
                                          const fs::path& socket_dir, int records) {
  Stopwatch watch;
  plugin::SupervisorOptions options;
  options.name = "noop_plugin";
  options.source.exec.command = plugin_path;
  options.socket_dir = socket_dir.string();
  options.handshake.deadline = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<plugin::Supervisor>> supervisor =
      plugin::Supervisor::Start(std::move(options));
  if (!supervisor.ok()) return supervisor.status();
  (*supervisor)
      ->WaitFor(
          [](const plugin::PluginStatus& s) { return s.state != plugin::PluginState::kStarting; },
          absl::Seconds(40));
  const plugin::PluginStatus status = (*supervisor)->status();
  if (status.state != plugin::PluginState::kReady) {
    (*supervisor)->Stop(absl::Seconds(10));
    return absl::UnavailableError(
        absl::StrCat("the no-op plugin did not become ready: ", status.last_error.message()));
  }
  Driver driver;
  const Run run = driver.Go(supervisor->get(), kReplayInFlight, records, nullptr);
  Baseline baseline{watch.Seconds(), run.per_second};
  (*supervisor)->Stop(absl::Seconds(10));
  if (run.failed > 0) {
    return absl::InternalError(absl::StrCat(run.failed, " baseline calls failed"));
  }
  return baseline;
}

struct ReplayRun {
  int exit_code = -1;
  double seconds = 0;
  std::string output;  // stdout and stderr
};

// Runs `argv` to its end with stdout and stderr in `output_path`, timing it.
absl::StatusOr<ReplayRun> RunChild(const std::vector<std::string>& argv,
                                   const fs::path& output_path) {
  std::vector<std::string> args = argv;
  std::vector<char*> child_argv;
  for (std::string& a : args) child_argv.push_back(a.data());
  child_argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  ReplayRun run;
  Stopwatch watch;
  pid_t pid = 0;
  const int spawned =
      posix_spawn(&pid, args[0].c_str(), &actions, nullptr, child_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return absl::InternalError(absl::StrCat("cannot start ", args[0]));
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  run.seconds = watch.Seconds();
  run.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
  std::ifstream in(output_path);
  std::stringstream text;
  text << in.rdbuf();
  run.output = text.str();
  return run;
}

// The summary line of replay's output ("replayed N calls of controller ..."), "" when none.
std::string SummaryLine(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, "replayed ")) return std::string(line);
  }
  return "";
}

struct Binaries {
  std::string ctrlhost, plugin;
};

void ReportReplay(const Args& args, const Baseline& baseline, const ReplayRun& replay,
                  bool all_same, Reporter& reporter) {
  Figure rate;
  rate.metric = "ctrlhost replay calls/s (wall time, incl. its start and the plugin's)";
  rate.value = args.records / replay.seconds;
  rate.unit = "/s";
  rate.baseline = args.records / baseline.seconds;
  rate.target = ">= 5000/s";
  rate.met = rate.value >= 5000;
  reporter.Add(rate);
  Figure loop;
  loop.metric = "in-process dispatch loop alone, same plugin, 16 in flight";
  loop.value = baseline.loop_rate;
  loop.unit = "/s";
  reporter.Add(loop);
  Figure same;
  same.metric = "replayed answers the same as recorded (exit code 0, 0 different)";
  same.value = all_same ? args.records : 0;
  same.unit = "calls";
  same.baseline = args.records;
  same.target = "all";
  same.met = all_same;
  reporter.Add(same);
}

absl::Status MeasureReplay(const Args& args, const Binaries& bin, const fs::path& root,
                           Reporter& reporter) {
  const fs::path recording = root / "recording" / "webapp";
  if (absl::Status s = WriteRecording(recording, args.records); !s.ok()) return s;
  // The baseline first: it also brings the plugin's binary into the page cache.
  absl::StatusOr<Baseline> baseline = DispatchBaseline(bin.plugin, root / "sockets", args.records);
  if (!baseline.ok()) return baseline.status();
  absl::StatusOr<ReplayRun> replay =
      RunChild({bin.ctrlhost, "replay", "--recording", recording.string(), "--command", bin.plugin,
                absl::StrCat("--in-flight=", kReplayInFlight)},
               root / "replay.out");
  if (!replay.ok()) return replay.status();
  const std::string summary = SummaryLine(replay->output);
  const bool all_same =
      replay->exit_code == 0 &&
      absl::StartsWith(summary, absl::StrCat("replayed ", args.records,
                                             " calls of controller "
                                             "webapp ")) &&
      absl::StrContains(summary, absl::StrCat(": ", args.records, " same, 0 different, 0 failed"));
  std::fprintf(stderr, "record_bench: ctrlhost replay exited %d: %s\n", replay->exit_code,
               summary.empty() ? "(no summary line)" : summary.c_str());
  if (!all_same) {
    const std::string& out = replay->output;
    std::fprintf(stderr, "record_bench: replay output (tail):\n%s\n",
                 out.substr(out.size() > 4000 ? out.size() - 4000 : 0).c_str());
  }
  ReportReplay(args, *baseline, *replay, all_same, reporter);
  return absl::OkStatus();
}

// Parses the arguments the reporter left; false (after a message) on a bad one.
bool ParseArgs(const std::vector<std::string>& argv, Args& args) {
  for (const std::string& arg : argv) {
    absl::string_view a = arg;
    int* number = nullptr;
    int least = 1;
    if (absl::ConsumePrefix(&a, "--calls=")) {
      number = &args.calls;
      least = 100;
    } else if (absl::ConsumePrefix(&a, "--rounds=")) {
      number = &args.rounds;
    } else if (absl::ConsumePrefix(&a, "--records=")) {
      number = &args.records;
      least = 100;
    } else if (absl::ConsumePrefix(&a, "--only=") && (a == "recording" || a == "replay")) {
      args.only = std::string(a);
      continue;
    } else {
      std::fprintf(stderr,
                   "record_bench: unknown argument %s (flags: --calls=N --rounds=N --records=N "
                   "--only=recording|replay --json)\n",
                   arg.c_str());
      return false;
    }
    if (!absl::SimpleAtoi(a, number) || *number < least) {
      std::fprintf(stderr, "record_bench: %s wants a number >= %d\n", arg.c_str(), least);
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Reporter reporter("record", argc, argv);
  Args args;
  if (!ParseArgs(reporter.args(), args)) return 2;
  std::unique_ptr<TempRoot> root = TempRoot::Create();
  if (root == nullptr) {
    std::fprintf(stderr, "record_bench: cannot create a temporary directory\n");
    return 1;
  }
  if (args.only != "replay") {
    if (absl::Status s = MeasureRecording(args, root->path() / "on", reporter); !s.ok()) {
      std::fprintf(stderr, "record_bench: recording: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  if (args.only != "recording") {
    const std::optional<std::string> ctrlhost = FindBuiltBinary(argv[0], "runtime/exe/ctrlhost");
    const std::optional<std::string> plugin = FindBuiltBinary(argv[0], "bench/record/noop_plugin");
    if (!ctrlhost.has_value() || !plugin.has_value()) {
      std::fprintf(stderr, "record_bench: %s not found (build //bench/record:record_bench)\n",
                   ctrlhost.has_value() ? "bench/record/noop_plugin" : "runtime/exe/ctrlhost");
      return 1;
    }
    if (absl::Status s = MeasureReplay(args, {*ctrlhost, *plugin}, root->path(), reporter);
        !s.ok()) {
      std::fprintf(stderr, "record_bench: replay: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  return reporter.Finish();
}

}  // namespace
}  // namespace ctrlhost::bench

int main(int argc, char** argv) { return ctrlhost::bench::Main(argc, argv); }
