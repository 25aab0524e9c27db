#include "runtime/plugin/supervisor.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpcpp/security/credentials.h"
#include "runtime/common/logging.h"

namespace ctrlhost::plugin {
namespace {

// Unix socket paths must fit sockaddr_un.sun_path (108 bytes with the terminating NUL).
constexpr size_t kMaxSocketPath = 107;

// Codes that mean "this plugin, as configured, will never work": no retry.
bool IsRefusal(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Creates the instance's own directory under `socket_dir`: an unguessable name (128 random
// bits), mode 0700, owned by the plugin's user. The plugin's socket and TMPDIR live there;
// neither the name nor the run directory's listing is available to other plugins.
absl::StatusOr<std::string> MakeInstanceDir(const std::string& socket_dir,
                                            const SandboxSpec& sandbox) {
  unsigned char random[16];
  if (getrandom(random, sizeof(random), 0) != static_cast<ssize_t>(sizeof(random))) {
    return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
  }
  std::string name;
  for (unsigned char byte : random) absl::StrAppend(&name, absl::Hex(byte, absl::kZeroPad2));
  const std::string dir = absl::StrCat(socket_dir, "/", name);
  if (mkdir(dir.c_str(), 0700) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("mkdir ", dir, ": ", strerror(errno)));
  }
  if (sandbox.uid.has_value()) {
    const gid_t gid = sandbox.gid.value_or(*sandbox.uid);
    if (chown(dir.c_str(), *sandbox.uid, gid) != 0) {
      const int err = errno;
      rmdir(dir.c_str());
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot give the plugin directory ", dir, " to uid ", *sandbox.uid, ": ", strerror(err)));
    }
  }
  return dir;
}

common::LogLimiterOptions HealthLogLimits(common::Clock* clock) {
  common::LogLimiterOptions options;
  options.per_second = 0.2;  // a flapping plugin: 10 flips logged, then one per 5 s
  options.burst = 10;
  options.clock = clock;
  return options;
}

}  // namespace

const char* PluginStateName(PluginState state) {
  switch (state) {
    case PluginState::kStarting:
      return "STARTING";
    case PluginState::kReady:
      return "READY";
    case PluginState::kBackoff:
      return "BACKOFF";
    case PluginState::kFailed:
      return "FAILED";
    case PluginState::kStopped:
      return "STOPPED";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<Supervisor>> Supervisor::Start(SupervisorOptions options) {
  const bool exec = !options.source.exec.command.empty();
  const bool remote = !options.source.endpoint.empty();
  if (exec == remote) {
    return absl::InvalidArgumentError(
        absl::StrCat("plugin ", options.name, ": exactly one of command and endpoint must be set"));
  }
  if (options.name.empty()) return absl::InvalidArgumentError("plugin name is empty");
  std::string instance_dir;
  std::string socket_path;
  if (exec) {
    if (absl::Status s = EnsurePrivateDir(options.socket_dir); !s.ok()) return s;
    // "<dir>/<32 hex>/" is 34 bytes past the socket directory; a long instance name gives way
    // to a short socket name before the path is refused.
    std::string name = absl::StrCat(options.name, "-", options.generation, ".sock");
    if (options.socket_dir.size() + 34 + name.size() > kMaxSocketPath) name = "plugin.sock";
    if (options.socket_dir.size() + 34 + name.size() > kMaxSocketPath) {
      return absl::InvalidArgumentError(absl::StrCat("plugin socket directory ", options.socket_dir,
                                                     " is too long for a socket path (",
                                                     kMaxSocketPath, " bytes)"));
    }
    absl::StatusOr<std::string> dir = MakeInstanceDir(options.socket_dir, options.sandbox);
    if (!dir.ok()) return dir.status();
    instance_dir = *dir;
    socket_path = absl::StrCat(instance_dir, "/", name);
  }
  std::unique_ptr<Supervisor> supervisor(
      new Supervisor(std::move(options), std::move(instance_dir), std::move(socket_path)));
  supervisor->thread_ = std::thread([s = supervisor.get()] { s->Run(); });
  return supervisor;
}

Supervisor::Supervisor(SupervisorOptions options, std::string instance_dir, std::string socket_path)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
      instance_name_(absl::StrCat(options_.name, "-", options_.generation)),
      instance_dir_(std::move(instance_dir)),
      socket_path_(std::move(socket_path)),
      health_log_(HealthLogLimits(clock_)),
      stop_grace_(options_.default_stop_grace) {
  status_.instance_name = instance_name_;
}

Supervisor::~Supervisor() { Stop(options_.default_stop_grace); }

void Supervisor::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                          controller::ReconcileCallback done) {
  std::shared_ptr<Session> session;
  PluginState state;
  {
    common::MutexLock lock(&mu_);
    state = status_.state;
    if (state == PluginState::kReady && session_ != nullptr &&
        status_.health != HealthStatus::kServing) {
      // Not serving (draining, say): the call waits for SERVING, its deadline or the end of
      // the instance (ServeReady), and is never sent meanwhile.
      held_.push_back(HeldCall{std::move(call), deadline, std::move(done)});
      status_.held = held_.size();
      cv_.SignalAll();
      return;
    }
    if (state == PluginState::kReady && session_ != nullptr) {
      session = session_;
      ++dispatches_;
    }
  }
  if (session == nullptr) {
    done(absl::UnavailableError(
        absl::StrCat("plugin ", instance_name_, " is not ready (", PluginStateName(state), ")")));
    return;
  }
  session->Dispatch(std::move(call), deadline, std::move(done));
  session.reset();
  common::MutexLock lock(&mu_);
  if (--dispatches_ == 0) cv_.SignalAll();
}

absl::Status Supervisor::SendNotice(pluginpb::ReconcileRequest notice,
                                    absl::Duration flush_timeout) {
  std::shared_ptr<Session> session;
  PluginState state;
  {
    common::MutexLock lock(&mu_);
    state = status_.state;
    if (state == PluginState::kReady && session_ != nullptr) {
      session = session_;
      ++dispatches_;
    }
  }
  if (session == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("plugin ", instance_name_, " is not ready (", PluginStateName(state), ")"));
  }
  absl::Status sent = session->Notify(std::move(notice));
  if (sent.ok() && flush_timeout > absl::ZeroDuration() &&
      !session->WaitForWrites(clock_->Now() + flush_timeout)) {
    sent = absl::DeadlineExceededError(absl::StrCat("plugin ", instance_name_,
                                                    ": notice not sent within ",
                                                    absl::FormatDuration(flush_timeout)));
  }
  session.reset();
  common::MutexLock lock(&mu_);
  if (--dispatches_ == 0) cv_.SignalAll();
  return sent;
}

void Supervisor::WaitForDispatches() {
  common::MutexLock lock(&mu_);
  while (dispatches_ > 0) cv_.Wait(&mu_);
}

void Supervisor::Stop(absl::Duration grace) {
  {
    common::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_grace_ = grace;
    }
    cv_.SignalAll();
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

PluginStatus Supervisor::status() const {
  common::MutexLock lock(&mu_);
  return status_;
}

bool Supervisor::WaitFor(const std::function<bool(const PluginStatus&)>& predicate,
                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  common::MutexLock lock(&mu_);
  while (!predicate(status_)) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) return predicate(status_);
  }
  return true;
}

void Supervisor::SetState(PluginState state, absl::Status error, bool restart) {
  PluginStatus snapshot;
  {
    common::MutexLock lock(&mu_);
    if (status_.state == state && error.ok() && !restart) return;
    status_.state = state;
    if (restart) ++status_.restarts;
    if (!error.ok()) status_.last_error = std::move(error);
    snapshot = status_;
    cv_.SignalAll();
  }
  common::LogInfo("plugin state", {{"plugin", instance_name_},
                                   {"state", PluginStateName(state)},
                                   {"pid", snapshot.pid},
                                   {"restarts", snapshot.restarts},
                                   {"last_error", snapshot.last_error}});
  if (options_.on_state_change) options_.on_state_change(snapshot);
}

void Supervisor::Notify() {
  common::MutexLock lock(&mu_);
  instance_ended_ = true;
  cv_.SignalAll();
}

void Supervisor::HealthReported(HealthStatus health) {
  common::MutexLock lock(&mu_);
  if (status_.state != PluginState::kReady || status_.health == health) return;
  status_.health = health;
  status_.health_since = clock_->Now();
  cv_.SignalAll();
}

void Supervisor::FailHeld(const absl::Status& why) {
  std::vector<HeldCall> held;
  {
    common::MutexLock lock(&mu_);
    held.swap(held_);
    status_.held = 0;
  }
  for (HeldCall& h : held) h.done(why);
}

absl::Status Supervisor::ServeReady() {
  HealthStatus acted = HealthStatus::kServing;  // what the handshake found
  for (;;) {
    std::vector<HeldCall> release;
    std::vector<HeldCall> expired;
    std::shared_ptr<Session> session;
    bool flipped = false;
    HealthStatus health;
    absl::Duration not_serving_for;
    absl::Status restart;
    {
      common::MutexLock lock(&mu_);
      if (instance_ended_ || stopping_) return absl::OkStatus();
      const absl::Time now = clock_->Now();
      health = status_.health;
      not_serving_for = now - status_.health_since;
      flipped = health != acted;
      acted = health;
      if (health == HealthStatus::kServing) {
        if (!held_.empty() && session_ != nullptr) {
          release.swap(held_);
          session = session_;
          ++dispatches_;
        }
      } else {
        std::vector<HeldCall> waiting;
        for (HeldCall& h : held_) {
          (h.deadline <= now ? expired : waiting).push_back(std::move(h));
        }
        held_.swap(waiting);
        if (options_.not_serving_restart_after > absl::ZeroDuration() &&
            not_serving_for >= options_.not_serving_restart_after) {
          restart = absl::UnavailableError(absl::StrCat(
              "plugin reported ", HealthStatusName(health), " for ",
              absl::FormatDuration(not_serving_for),
              " (not serving longer than the restart period ",
              absl::FormatDuration(options_.not_serving_restart_after), "); restarting it"));
        }
      }
      status_.held = held_.size();
      if (!flipped && release.empty() && expired.empty() && restart.ok()) {
        // Nothing to do: wait for a change, the first held deadline or the restart period.
        absl::Time wake = absl::InfiniteFuture();
        for (const HeldCall& h : held_) wake = std::min(wake, h.deadline);
        if (health != HealthStatus::kServing &&
            options_.not_serving_restart_after > absl::ZeroDuration()) {
          wake = std::min(wake, status_.health_since + options_.not_serving_restart_after);
        }
        if (wake == absl::InfiniteFuture()) {
          cv_.Wait(&mu_);
        } else {
          clock_->WaitWithDeadline(&mu_, &cv_, wake);
        }
        continue;
      }
    }
    if (flipped) {
      uint64_t suppressed = 0;
      if (health_log_.Allow(&suppressed)) {
        if (health == HealthStatus::kServing) {
          common::LogInfo("plugin serving again: dispatch resumes", {{"plugin", instance_name_},
                                                                     {"released", release.size()},
                                                                     {"suppressed", suppressed}});
        } else {
          common::LogWarning("plugin not serving: new requests wait until it serves again",
                             {{"plugin", instance_name_},
                              {"health", HealthStatusName(health)},
                              {"restart_after", options_.not_serving_restart_after},
                              {"suppressed", suppressed}});
        }
      }
      if (options_.on_state_change) options_.on_state_change(status());
    }
    for (HeldCall& h : release) session->Dispatch(std::move(h.call), h.deadline, std::move(h.done));
    if (session != nullptr) {
      session.reset();
      common::MutexLock lock(&mu_);
      if (--dispatches_ == 0) cv_.SignalAll();
    }
    for (HeldCall& h : expired) {
      h.done(absl::DeadlineExceededError(
          absl::StrCat("plugin ", instance_name_, " reported ", HealthStatusName(health),
                       " until the request's deadline; it was not sent")));
    }
    if (!restart.ok()) {
      common::LogError("plugin not serving for too long; restarting it",
                       {{"plugin", instance_name_}, {"status", restart}});
      return restart;
    }
  }
}

void Supervisor::Run() {
  absl::Duration backoff = options_.initial_backoff;
  bool first = true;
  for (;;) {
    SetState(PluginState::kStarting, absl::OkStatus(), /*restart=*/!first);
    first = false;
    std::optional<absl::Time> ready_since;
    absl::Time ready_time;
    const absl::Status why = RunInstance(&ready_time);
    bool clean_end = false;
    {
      common::MutexLock lock(&mu_);
      if (status_.state == PluginState::kReady) ready_since = ready_time;
      clean_end = remote_ended_cleanly_;
      if (stopping_) break;
    }
    if (IsRefusal(why)) {
      common::LogError("plugin refused; not restarting",
                       {{"plugin", instance_name_}, {"status", why}});
      SetState(PluginState::kFailed, why);
      common::MutexLock lock(&mu_);
      while (!stopping_) cv_.Wait(&mu_);
      break;
    }
    if (ready_since.has_value() && clock_->Now() - *ready_since >= options_.healthy_reset) {
      backoff = options_.initial_backoff;
    }
    if (clean_end) {
      // A remote plugin that drained (SIGTERM in a rollout) did not crash: redial, uncounted
      // (after the usual backoff, which bounds a plugin that keeps ending its stream).
      first = true;
      common::LogInfo("remote plugin ended its stream cleanly; redialling",
                      {{"plugin", instance_name_}, {"backoff", backoff}});
    } else {
      common::LogWarning("plugin instance ended; restarting after backoff",
                         {{"plugin", instance_name_}, {"status", why}, {"backoff", backoff}});
    }
    // The deadline is taken before the state is published, so that whoever sees BACKOFF and
    // moves the clock moves it past this deadline.
    const absl::Time until = clock_->Now() + backoff;
    SetState(PluginState::kBackoff, why);
    {
      common::MutexLock lock(&mu_);
      while (!stopping_ && !clock_->WaitWithDeadline(&mu_, &cv_, until)) {
      }
      if (stopping_) break;
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  absl::Duration grace;
  std::shared_ptr<Session> session;
  {
    common::MutexLock lock(&mu_);
    grace = stop_grace_;
    session = std::move(session_);
  }
  FailHeld(absl::UnavailableError(absl::StrCat("plugin ", instance_name_, " is stopping")));
  if (session != nullptr) {
    session->Close();     // in-flight requests fail UNAVAILABLE now, not after the grace period
    WaitForDispatches();  // a Dispatch may still hold a copy of the session
    session.reset();
  }
  StopProcess(grace);
  if (!socket_path_.empty()) unlink(socket_path_.c_str());
  if (!instance_dir_.empty()) {
    std::error_code ignored;  // what the plugin left in its TMPDIR goes too (links not followed)
    std::filesystem::remove_all(instance_dir_, ignored);
  }
  {
    common::MutexLock lock(&mu_);
    status_.pid = 0;
  }
  SetState(PluginState::kStopped);
}

absl::Status Supervisor::SpawnAndAwaitSocket(absl::Time deadline) {
  unlink(socket_path_.c_str());  // a stale socket of a previous instance
  ProcessSpec spec = options_.source.exec;
  spec.env.emplace_back("CTRLHOST_PLUGIN_ADDRESS", absl::StrCat("unix://", socket_path_));
  spec.env.emplace_back("TMPDIR", instance_dir_);
  // The other instances' directories, and what the host hid, are out of reach (sandbox.h).
  spec.sandbox = options_.sandbox;
  spec.sandbox.hidden_paths.push_back(options_.socket_dir);
  spec.sandbox.allowed_paths.push_back(instance_dir_);
  auto process = Process::Spawn(spec, instance_name_, [this](int) { Notify(); });
  if (!process.ok()) return process.status();
  process_ = std::move(*process);
  {
    common::MutexLock lock(&mu_);
    status_.pid = process_->pid();
  }
  if (!WaitSocket(deadline)) {
    absl::Status why;
    if (auto exit = process_->exit_status(); exit.has_value()) {
      why = absl::UnavailableError(
          absl::StrCat("plugin exited before listening: ", DescribeExit(*exit)));
    } else {
      common::MutexLock lock(&mu_);
      why = stopping_ ? absl::CancelledError("stopping")
                      : absl::DeadlineExceededError(
                            absl::StrCat("plugin did not listen on ", socket_path_, " within ",
                                         absl::FormatDuration(options_.handshake.deadline)));
    }
    StopProcess(absl::ZeroDuration());
    return why;
  }
  return absl::OkStatus();
}

absl::Status Supervisor::RunInstance(absl::Time* ready_since) {
  {
    common::MutexLock lock(&mu_);
    instance_ended_ = false;
    remote_ended_cleanly_ = false;
  }
  const absl::Time deadline = absl::Now() + options_.handshake.deadline;
  if (!socket_path_.empty()) {
    if (absl::Status s = SpawnAndAwaitSocket(deadline); !s.ok()) return s;
  }
  auto channel = Dial();
  if (!channel.ok()) return channel.status();
  HandshakeOptions handshake = options_.handshake;
  handshake.instance_name = instance_name_;
  handshake.canceller = &canceller_;
  handshake.deadline = std::max(deadline - absl::Now(), absl::Milliseconds(1));
  auto result = Handshake(*channel, handshake);
  if (!result.ok()) {
    absl::Status why = result.status();
    if (process_ != nullptr) {
      if (auto exit = process_->exit_status(); exit.has_value()) {
        why = absl::UnavailableError(
            absl::StrCat("plugin exited during the handshake: ", DescribeExit(*exit)));
      }
      StopProcess(absl::ZeroDuration());
    }
    return why;
  }
  SessionOptions session_options = result->session_options;
  session_options.clock = clock_;
  session_options.on_broken = [this](const absl::Status&) { Notify(); };
  session_options.on_plugin_message = options_.on_plugin_message;
  auto opened = Session::Open(*channel, session_options);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<Session> session = std::move(*opened);
  {
    common::MutexLock lock(&mu_);
    session_ = session;
    status_.describe = std::make_shared<const pluginpb::DescribeResponse>(result->describe);
    status_.capabilities = result->capabilities;
    status_.health = HealthStatus::kServing;  // the handshake's check
    status_.health_since = clock_->Now();
  }
  *ready_since = clock_->Now();
  SetState(PluginState::kReady);

  HealthWatcherOptions watch;
  watch.service = kPluginServiceName;
  watch.check_interval = options_.health_check_interval;
  watch.instance_name = instance_name_;
  watch.on_status = [this](HealthStatus health) { HealthReported(health); };
  std::unique_ptr<HealthWatcher> watcher = HealthWatcher::Start(*channel, std::move(watch));
  const absl::Status unhealthy = ServeReady();
  watcher->Stop();  // not under mu_: its callback takes it
  watcher.reset();

  absl::Status why;
  {
    common::MutexLock lock(&mu_);
    status_.health = HealthStatus::kUnknown;
    status_.health_since = clock_->Now();
    if (stopping_) return absl::OkStatus();  // Run stops the session and the process
    session_.reset();
  }
  FailHeld(absl::UnavailableError(absl::StrCat("plugin instance ", instance_name_, " ended")));
  if (!unhealthy.ok()) {
    session->Close();
    WaitForDispatches();
    session.reset();
    StopProcess(options_.default_stop_grace);  // SIGTERM first: it may still be draining
    return unhealthy;
  }
  if (process_ != nullptr) {
    // A crash usually shows as a broken stream first; give the exit a moment to be reaped so
    // that the error says how the process ended.
    process_->WaitExited(absl::Now() + absl::Milliseconds(500));
  }
  if (process_ != nullptr && process_->exit_status().has_value()) {
    why = absl::UnavailableError(
        absl::StrCat("plugin process ", DescribeExit(*process_->exit_status())));
  } else {
    why = session->health();
    if (why.ok()) why = absl::UnavailableError("plugin instance ended");
    if (process_ == nullptr && session->ended_cleanly()) {
      common::MutexLock lock(&mu_);
      remote_ended_cleanly_ = true;
    }
  }
  session->Close();     // fails what is still in flight (UNAVAILABLE)
  WaitForDispatches();  // a Dispatch may still hold a copy of the session
  session.reset();
  StopProcess(absl::ZeroDuration());
  return absl::UnavailableError(why.message());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Supervisor::Dial() {
  const uint32_t limit = options_.handshake.max_message_bytes;
  if (!socket_path_.empty()) return MakeChannel(absl::StrCat("unix://", socket_path_), limit);
  const TlsOptions& tls = options_.source.tls;
  if (!tls.enabled) return MakeChannel(options_.source.endpoint, limit);
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    auto ca = ReadFile(tls.ca_file, "CA");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("TLS client certificate and key must be set together");
  }
  if (!tls.cert_file.empty()) {
    auto cert = ReadFile(tls.cert_file, "client certificate");
    if (!cert.ok()) return cert.status();
    auto key = ReadFile(tls.key_file, "client key");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  return MakeChannel(options_.source.endpoint, limit, grpc::SslCredentials(ssl), tls.server_name);
}

bool Supervisor::WaitSocket(absl::Time deadline) {
  // Polled (real time): the plugin creates the socket, we cannot be told when.
  common::MutexLock lock(&mu_);
  for (;;) {
    struct stat st;
    if (stat(socket_path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) return true;
    if (stopping_ || instance_ended_ || absl::Now() >= deadline) return false;
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(10));
  }
}

void Supervisor::StopProcess(absl::Duration grace) {
  if (process_ == nullptr) return;
  if (!process_->exit_status().has_value() && grace > absl::ZeroDuration()) {
    process_->Signal(SIGTERM);
    const absl::Time until = clock_->Now() + grace;
    common::MutexLock lock(&mu_);
    while (!process_->exit_status().has_value()) {
      if (clock_->WaitWithDeadline(&mu_, &cv_, until)) break;
    }
  }
  if (!process_->exit_status().has_value()) {
    common::LogWarning("plugin killed", {{"plugin", instance_name_}, {"pid", process_->pid()}});
    process_->Signal(SIGKILL);
  }
  process_->WaitExited(absl::Now() + absl::Seconds(30));
  process_.reset();
}

}  // namespace ctrlhost::plugin
