// Supervisor: keeps one plugin instance (an exec'd process or a remote endpoint) serving, and
// dispatches reconciles to it.
//
// Life of an instance, on the supervisor's own thread:
//   STARTING  exec'd: spawn the command with CTRLHOST_PLUGIN_ADDRESS=unix://DIR/R/NAME-GEN.sock
//             (DIR host-owned; R random, 0700, the plugin's own), sandboxed (sandbox.h), wait
//             for the socket; remote: dial the endpoint (TLS/mTLS
//             optional). Then Handshake (Describe + health) within the handshake deadline.
//   READY     a Session serves Dispatch. The process exiting or the stream breaking ends it:
//             every in-flight request fails UNAVAILABLE at once (the runner requeues).
//             Meanwhile a HealthWatcher (health_watch.h) follows the plugin's grpc.health.v1
//             status for kPluginServiceName (Watch; Check every `health_check_interval` when
//             Watch is UNIMPLEMENTED). While the plugin reports anything but SERVING (NOT_SERVING
//             while it drains, say), Dispatch sends nothing: each call waits in the supervisor
//             (PluginStatus::held) until the plugin is SERVING again (then it is sent), until its
//             deadline (DEADLINE_EXCEEDED: the runner requeues the key) or until the instance
//             ends (UNAVAILABLE). Requests already sent are answered normally. Flips are logged
//             (rate limited). A plugin that stays not serving for `not_serving_restart_after` is
//             treated as a failed liveness probe: the instance is ended (SIGTERM, stop grace,
//             SIGKILL; a remote plugin's connection is closed) and restarted after the backoff.
//   BACKOFF   wait 1 s, doubling up to 60 s (reset after 2 min READY), on the injected clock;
//             then STARTING again, restarts + 1. A remote plugin that ended its stream with
//             status OK (an SDK draining on SIGTERM, e.g. in a rollout) is not a crash: logged
//             at info, redialled after the backoff, restarts unchanged.
//   FAILED    the plugin was refused (handshake FAILED_PRECONDITION / INVALID_ARGUMENT, e.g. no
//             common protocol version or a malformed Describe) or its spec is unusable (command
//             not found, bad TLS files). No retry: it needs a swap or a configuration change.
//   STOPPED   Stop(): SIGTERM, wait `grace`, SIGKILL, reap, remove the socket.
// Process output is captured into the host log (process.h).
//
// Example:
//   SupervisorOptions options;
//   options.name = "webapp";
//   options.source.command = "/opt/plugins/webapp";
//   options.socket_dir = "/run/ctrlhost/plugins";
//   options.on_state_change = [&](const PluginStatus& s) { manager.Learn(s); };
//   ASSIGN_OR_RETURN(auto supervisor, Supervisor::Start(std::move(options)));
//   runner.SetDispatcher(supervisor.get());  // UNAVAILABLE until READY
//   ...
//   supervisor->Stop(absl::Seconds(10));
//
// Hot swap (a new plugin binary or config without dropping a request) runs a second Supervisor
// with generation + 1 next to the first and moves dispatch over (manager/plugin_slot.h);
// sockets and logs carry the generation so they are never ambiguous.
//
// Thread-safe. `on_state_change` runs on the supervisor's thread, without locks held; it must
// not block for long and must not call Stop() or destroy the supervisor.
#ifndef CTRLHOST_RUNTIME_PLUGIN_SUPERVISOR_H_
#define CTRLHOST_RUNTIME_PLUGIN_SUPERVISOR_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "runtime/common/clock.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/reconcile.h"
#include "runtime/plugin/handshake.h"
#include "runtime/plugin/health_watch.h"
#include "runtime/plugin/process.h"
#include "runtime/plugin/sandbox.h"
#include "runtime/plugin/session.h"

namespace ctrlhost::plugin {

// admin.proto's PluginState without DRAINING (that belongs to hot swap).
enum class PluginState { kStarting, kReady, kBackoff, kFailed, kStopped };
const char* PluginStateName(PluginState state);

struct TlsOptions {
  bool enabled = false;
  std::string ca_file;    // PEM roots; "" = system roots
  std::string cert_file;  // PEM client certificate chain (mTLS), with key_file
  std::string key_file;
  std::string server_name;  // overrides the name checked in the server certificate
};

// Where the plugin comes from: `command` (exec'd) or `endpoint` (remote), exactly one.
struct PluginSource {
  ProcessSpec exec;      // exec.command non-empty: exec'd plugin
  std::string endpoint;  // "host:port": remote plugin
  TlsOptions tls;        // remote only
};

struct SupervisorOptions {
  std::string name;  // the plugin's name in the operator
  PluginSource source;
  // Exec'd only: created/checked (EnsurePrivateDir); each instance gets its own directory in it,
  // named at random, 0700, owned by sandbox.uid, holding its socket and its TMPDIR.
  std::string socket_dir;
  // Exec'd only: the user the plugin runs as and what it must not reach; socket_dir is always
  // hidden from the plugin (except its own directory).
  SandboxSpec sandbox;
  uint64_t generation = 1;     // names the instance "NAME-GEN" and its socket
  HandshakeOptions handshake;  // instance_name is filled in
  absl::Duration initial_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(60);
  absl::Duration healthy_reset = absl::Minutes(2);  // READY this long resets the backoff
  absl::Duration default_stop_grace = absl::Seconds(10);
  // Health after the handshake (see READY above). Checks are real time; the restart period
  // is on the clock. Zero `not_serving_restart_after`: never restart for it (wait forever).
  absl::Duration health_check_interval = absl::Seconds(5);
  absl::Duration not_serving_restart_after = absl::Seconds(60);
  common::Clock* clock = nullptr;  // backoff, stop grace, health periods; null = Clock::Real()
  std::function<void(const struct PluginStatus&)> on_state_change;
  // Plugin-to-host messages of the READY instance's stream (background tasks): see
  // SessionOptions::on_plugin_message. Runs on gRPC's threads; must not block.
  std::function<void(pluginpb::ReconcileResponse)> on_plugin_message;
};

// A snapshot of the supervisor's observable state.
struct PluginStatus {
  std::string instance_name;  // "NAME-GEN"
  PluginState state = PluginState::kStarting;
  pid_t pid = 0;  // 0 when no process runs (or remote)
  uint64_t restarts = 0;
  absl::Status last_error;  // why the last instance failed; OK if none did
  std::shared_ptr<const pluginpb::DescribeResponse> describe;  // of the current/last READY instance
  std::vector<pluginpb::Capability> capabilities;              // in effect for it
  // What the READY instance's health service reports (SERVING from the handshake on);
  // kUnknown when no instance is READY. Since when, on the supervisor's clock.
  HealthStatus health = HealthStatus::kUnknown;
  absl::Time health_since = absl::InfinitePast();
  // Dispatch calls waiting because the instance is not serving.
  size_t held = 0;
};

class Supervisor : public controller::Dispatcher {
 public:
  // Validates the options and starts the supervisor thread; returns at once (state STARTING).
  static absl::StatusOr<std::unique_ptr<Supervisor>> Start(SupervisorOptions options);
  // Stop(default_stop_grace) unless stopped already.
  ~Supervisor() override;
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Forwards to the READY instance's session; UNAVAILABLE at once when no instance is READY.
  // While the READY instance is not serving, the call waits (see READY above).
  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override;

  // Sends a notice (StartTasks, StopTasks, TaskEnqueueRefused) on the READY instance's stream
  // (Session::Notify); UNAVAILABLE at once when no instance is READY. With a positive
  // `flush_timeout` it then waits (bounded, on the clock) until the notice went out; otherwise
  // it never blocks.
  absl::Status SendNotice(pluginpb::ReconcileRequest notice,
                          absl::Duration flush_timeout = absl::ZeroDuration());

  // Fails in-flight work (UNAVAILABLE), then SIGTERM, `grace` on the clock, SIGKILL; reaps and
  // removes the socket. Blocks until done. Idempotent.
  void Stop(absl::Duration grace);
  void Stop() { Stop(options_.default_stop_grace); }

  PluginStatus status() const;
  // Waits (real time, bounded) until `predicate(status())` holds; false on timeout.
  bool WaitFor(const std::function<bool(const PluginStatus&)>& predicate, absl::Duration timeout);

  const std::string& socket_path() const { return socket_path_; }

 private:
  Supervisor(SupervisorOptions options, std::string instance_dir, std::string socket_path);
  void Run();
  // One instance from start to end; returns why it ended.
  absl::Status RunInstance(absl::Time* ready_since);
  // RunInstance's first step for a spawned plugin: starts the process (as process_) and waits
  // until it listens on socket_path_; stops it again and says why when it does not by
  // `deadline` (or exits, or Stop is called).
  absl::Status SpawnAndAwaitSocket(absl::Time deadline);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Dial();
  bool WaitSocket(absl::Time deadline);
  void StopProcess(absl::Duration grace);
  // Blocks until no Dispatch call holds a session copy (dispatches_ == 0).
  void WaitForDispatches() ABSL_LOCKS_EXCLUDED(mu_);
  // Publishes a state change (and one more restart) under one lock, then tells the listener.
  void SetState(PluginState state, absl::Status error = absl::OkStatus(), bool restart = false);
  void Notify();
  // The watcher's report for the READY instance.
  void HealthReported(HealthStatus health);
  // Runs the READY instance until it ends, the supervisor stops, or it has not been serving
  // for too long (then returns why); releases and expires held calls as health changes.
  absl::Status ServeReady();
  // Fails every held call with `why` (UNAVAILABLE: the instance ended).
  void FailHeld(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

  struct HeldCall {
    pluginpb::ReconcileCall call;
    absl::Time deadline;
    controller::ReconcileCallback done;
  };

  // Constant after construction.
  const SupervisorOptions options_;
  common::Clock* const clock_;
  const std::string instance_name_;
  const std::string instance_dir_;  // "" for remote plugins
  const std::string socket_path_;   // "" for remote plugins

  std::thread thread_;                // joined by Stop
  std::unique_ptr<Process> process_;  // only touched by the supervisor thread and Stop after it
  HandshakeCanceller canceller_;      // Stop aborts a handshake in progress
  common::LogLimiter health_log_;     // health flips: a flapping plugin cannot flood the log

  mutable common::Mutex mu_;
  common::CondVar cv_;  // status changes, instance events, stop
  PluginStatus status_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Session> session_ ABSL_GUARDED_BY(mu_);  // READY instance's session
  // Calls waiting while the READY instance is not serving, in arrival order.
  std::vector<HeldCall> held_ ABSL_GUARDED_BY(mu_);
  // Dispatch calls that took a copy of session_ and have not returned yet; a retired session
  // is released only once this is back to 0 (WaitForDispatches; session_ is reset first, so
  // no new call can take it).
  int dispatches_ ABSL_GUARDED_BY(mu_) = 0;
  bool instance_ended_ ABSL_GUARDED_BY(mu_) = false;        // process exit or stream break
  bool remote_ended_cleanly_ ABSL_GUARDED_BY(mu_) = false;  // the last remote instance drained
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration stop_grace_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ctrlhost::plugin

#endif  // CTRLHOST_RUNTIME_PLUGIN_SUPERVISOR_H_
