// The "chaos" plugin of the host e2e tests: a Chaos object's spec.mode picks how the plugin
// misbehaves for it, so one plugin process exercises every failure path of issue 5:
//   ok          desire a ConfigMap "<name>" with spec.data, status {phase: Done}
//   forbidden   desire a Secret (a kind the controller does not own): the host must refuse the
//               whole response (terminal error, Warning event, nothing written)
//   crash       the first time this object is seen the process aborts (the host restarts it,
//               the key is retried); afterwards behaves as "ok"
//   hang        the first attempt does not answer until the host cancels it (its request
//               deadline expired; the key is retried), then logs "cancelled"; later attempts
//               behave as "ok"
//   rejected    desire a ConfigMap the API server refuses (data values must be strings): a
//               server rejection is a terminal error, never a crash
//   terminal    answer a terminal error
//   terminal-reason  a terminal error with reason SpecRejected (the host-computed status uses it)
//   quota       a retryable error with reason QuotaExceeded and retry_after 1 h (issue 19)
//   huge        an answer of about 2 x $CHAOS_MAX_MESSAGE_BYTES bytes (the plugin's message
//               limit when set): the SDK must answer this request alone with the terminal
//               error ResponseTooLarge while the stream serves the other keys (issue 19)
//   steal       desire the ConfigMap spec.target (another Chaos's child, or an object with no
//               controller): the host must refuse to take it over (issue 13, item 8)
//   patch-other an OWNED merge patch of the ConfigMap spec.target that strips its owner
//               references and changes its data: refused, nothing written
//   patch-data  an OWNED merge patch of the data of ConfigMap spec.target: refused when
//               spec.target is not this object's child
//   slow        sleep spec.sleepMs (default 10) and answer nothing: a busy worker, for the
//               scheduling tests (which key is reconciled when)
// With $CHAOS_CHANGE_DATA_KEY and $CHAOS_CHANGE_DATA_VALUE set, "ok" writes that value into that
// data key of the ConfigMaps that have it: a release that acts differently on some keys.
// With $CHAOS_CRASH_EVERY=N the process aborts at its N-th reconcile (a release that crashes, for
// the shadow tests: the host restarts it with backoff).
// Every reconcile appends "<ns>/<name> <attempt> <start|end|crash|cancelled> <$CHAOS_VERSION>
// <pid>" to $CHAOS_DIR/log so tests can check that no key was reconciled twice at once, and which
// instance served it. With $CHAOS_LOG_DELETED set, a reconcile of a primary that no longer
// exists appends "<ns>/<name> <attempt> deleted ..." (the sharding tests check that no existing
// object is ever reported deleted). The controller is named $CHAOS_CONTROLLER (default "chaos"), so
// that two operators of one host can each run one (controller names are unique across a host).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sdk/cpp/sdk.h"

namespace sdk = ctrlhost::sdk;

namespace {

std::string Dir() {
  const char* dir = std::getenv("CHAOS_DIR");
  return dir != nullptr ? dir : "/tmp";
}

void Log(const sdk::Request& req, const char* what) {
  // O_APPEND writes of one short line are atomic between threads and processes.
  const char* version = std::getenv("CHAOS_VERSION");
  const std::string line =
      absl::StrCat(req.namespace_(), "/", req.name(), " ", req.attempt(), " ", what, " ",
                   version != nullptr ? version : "-", " ", ::getpid(), "\n");
  int fd = ::open((Dir() + "/log").c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0) return;
  (void)!::write(fd, line.data(), line.size());
  ::close(fd);
}

// True the first time `marker` is claimed (a file created with O_EXCL): survives restarts.
bool FirstTime(const std::string& marker) {
  int fd = ::open((Dir() + "/" + marker).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

int MaxMessageBytes() {
  const char* limit = std::getenv("CHAOS_MAX_MESSAGE_BYTES");
  int bytes = 0;
  if (limit == nullptr || !absl::SimpleAtoi(limit, &bytes) || bytes <= 0) {
    return sdk::kDefaultMaxMessageBytes;
  }
  return bytes;
}

sdk::Result Ok(const sdk::Request& req) {
  sdk::Result result;
  nlohmann::json& cm = result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()));
  cm["metadata"]["labels"] = {{"chaos", "child"}};
  cm["data"] = req.spec().value("data", nlohmann::json::object());
  // Another release, for the shadow tests: it writes $CHAOS_CHANGE_DATA_VALUE into the data key
  // $CHAOS_CHANGE_DATA_KEY of the ConfigMaps that have that key (and only of those).
  const char* change_key = std::getenv("CHAOS_CHANGE_DATA_KEY");
  const char* change_value = std::getenv("CHAOS_CHANGE_DATA_VALUE");
  if (change_key != nullptr && change_value != nullptr && cm["data"].is_object() &&
      cm["data"].contains(change_key)) {
    cm["data"][change_key] = change_value;
  }
  result.Status()["phase"] = "Done";
  result.Status()["generation"] = req.generation();
  return result;
}

void MaybeCrash(const sdk::Request& req) {
  static std::atomic<int64_t> reconciles{0};
  static const int64_t every = [] {
    int64_t n = 0;
    const char* text = std::getenv("CHAOS_CRASH_EVERY");
    return text != nullptr && absl::SimpleAtoi(text, &n) && n > 0 ? n : int64_t{0};
  }();
  if (every > 0 && ++reconciles % every == 0) {
    Log(req, "crash");
    std::abort();
  }
}

sdk::Result Reconcile(const sdk::Request& req) {
  if (!req.exists() && std::getenv("CHAOS_LOG_DELETED") != nullptr) Log(req, "deleted");
  if (!req.exists() || req.deleting()) return sdk::Result();
  Log(req, "start");
  MaybeCrash(req);
  const std::string mode = req.spec().value("mode", "ok");
  const std::string id = absl::StrCat(req.namespace_(), "_", req.name(), "_", req.uid());
  sdk::Result result;
  if (mode == "forbidden") {
    nlohmann::json& secret = result.Desire(sdk::NewObject("v1", "Secret", req.name()));
    secret["stringData"] = {{"stolen", "yes"}};
    result.Status()["phase"] = "ShouldNeverBeWritten";
  } else if (mode == "crash" && FirstTime("crashed_" + id)) {
    Log(req, "crash");
    std::abort();
  } else if (mode == "hang" && FirstTime("hung_" + id)) {
    // Longer than the operator's requestTimeout: the host gives up, cancels and retries.
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (!req.cancelled() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
    Log(req, req.cancelled() ? "cancelled" : "end");
    return Ok(req);
  } else if (mode == "rejected") {
    nlohmann::json& cm = result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()));
    cm["data"] = {{"count", 5}};
  } else if (mode == "steal") {
    nlohmann::json& cm =
        result.Desire(sdk::NewObject("v1", "ConfigMap", req.spec().value("target", "")));
    cm["data"] = {{"stolen", "yes"}};
    result.Status()["phase"] = "ShouldNeverBeWritten";
  } else if (mode == "patch-other") {
    result.PatchOwned(
        "v1", "ConfigMap", req.spec().value("target", ""), sdk::PatchType::kMergePatch,
        {{"metadata", {{"ownerReferences", nullptr}}}, {"data", {{"stolen", "yes"}}}});
    result.Status()["phase"] = "ShouldNeverBeWritten";
  } else if (mode == "patch-data") {
    result.PatchOwned("v1", "ConfigMap", req.spec().value("target", ""),
                      sdk::PatchType::kMergePatch, {{"data", {{"stolen", "yes"}}}});
    result.Status()["phase"] = "ShouldNeverBeWritten";
  } else if (mode == "terminal") {
    result = sdk::Result::TerminalError("spec.mode asks for a terminal error");
  } else if (mode == "terminal-reason") {
    result = sdk::Result::TerminalError("spec.mode rejects the spec", "SpecRejected");
  } else if (mode == "quota") {
    result = sdk::Result::RetryableError("spec.mode says the quota is used up", "QuotaExceeded",
                                         absl::Hours(1));
  } else if (mode == "slow") {
    absl::SleepFor(absl::Milliseconds(req.spec().value("sleepMs", 10)));
  } else if (mode == "huge") {
    result = Ok(req);
    result.Status()["padding"] = std::string(2 * static_cast<size_t>(MaxMessageBytes()), 'x');
  } else {
    result = Ok(req);
  }
  Log(req, "end");
  return result;
}

}  // namespace

int main() {
  // Tests and benchmarks read the record log: a plugin that cannot write it must say so, not
  // serve without records (a sandboxed plugin cannot create entries in a directory on the way
  // to a path the sandbox hides, such as the host's kubeconfig). Only when a test asked for
  // records (CHAOS_DIR); without it the records are best effort in /tmp.
  const std::string log = Dir() + "/log";
  const int fd = std::getenv("CHAOS_DIR") == nullptr
                     ? 0
                     : ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0) {
    std::fprintf(stderr, "chaos: cannot open the record log %s: %s\n", log.c_str(),
                 std::strerror(errno));
    return 1;
  }
  if (fd > 0) ::close(fd);
  sdk::PluginOptions options;
  options.max_message_bytes = MaxMessageBytes();
  sdk::Plugin plugin("chaos", "1.0.0", options);
  const char* controller = std::getenv("CHAOS_CONTROLLER");
  plugin.Add(
      sdk::ControllerBuilder(controller != nullptr && *controller != '\0' ? controller : "chaos")
          .For("e2e.ctrlhost.dev", "v1", "Chaos")
          .Owns("", "v1", "ConfigMap")
          .MaxConcurrent(8)
          .Reconcile(Reconcile));
  return plugin.Run();
}
