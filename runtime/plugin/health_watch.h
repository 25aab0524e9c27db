// HealthWatcher: follows a plugin's grpc.health.v1 status after the handshake.
//
// On its own thread it calls Health/Watch for one service name and reports every status the
// plugin streams. A plugin whose server does not implement Watch (UNIMPLEMENTED) is asked with
// Health/Check every `check_interval` instead. A Watch that ends for another reason (the
// connection broke, the plugin restarted its health service) is started again after
// `check_interval`; a failing Check is asked again likewise. RPC failures are not reported as a
// health status: a dead connection is the Reconcile stream's and keepalive's business
// (session.h); only what the plugin answers counts.
//
// Example:
//   HealthWatcherOptions options;
//   options.service = kPluginServiceName;
//   options.on_status = [&](HealthStatus s) { supervisor.HealthChanged(s); };
//   auto watcher = HealthWatcher::Start(channel, options);
//   ...
//   watcher->Stop();  // cancels the call in progress and joins the thread
//
// Thread-safe. `on_status` runs on the watcher's thread, without its lock held; it must not
// block for long and must not call Stop() or destroy the watcher.
#ifndef CTRLHOST_RUNTIME_PLUGIN_HEALTH_WATCH_H_
#define CTRLHOST_RUNTIME_PLUGIN_HEALTH_WATCH_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "runtime/common/mutex.h"

namespace ctrlhost::plugin {

// grpc.health.v1's serving states as the host sees them.
enum class HealthStatus { kUnknown, kServing, kNotServing, kServiceUnknown };
const char* HealthStatusName(HealthStatus status);

struct HealthWatcherOptions {
  std::string service;  // the health service name asked for
  // Between Check calls when Watch is UNIMPLEMENTED, and before a failed call is retried.
  absl::Duration check_interval = absl::Seconds(5);
  // Deadline of one Check call.
  absl::Duration check_timeout = absl::Seconds(5);
  // Each status the plugin reports (repeats included), on the watcher's thread.
  std::function<void(HealthStatus)> on_status;
  std::string instance_name;  // for logs
};

class HealthWatcher {
 public:
  static std::unique_ptr<HealthWatcher> Start(std::shared_ptr<grpc::Channel> channel,
                                              HealthWatcherOptions options);
  // Stop().
  ~HealthWatcher();
  HealthWatcher(const HealthWatcher&) = delete;
  HealthWatcher& operator=(const HealthWatcher&) = delete;

  // Cancels the call in progress and joins the thread; no `on_status` after it returns.
  // Idempotent.
  void Stop();

  // True once Watch answered UNIMPLEMENTED and the watcher polls with Check.
  bool polling() const;

 private:
  HealthWatcher(std::shared_ptr<grpc::Channel> channel, HealthWatcherOptions options);
  void Run();
  // Waits `d` (real time) unless stopped; false when stopped.
  bool Sleep(absl::Duration d);
  // Registers `context` as the call Stop cancels; false when already stopped.
  bool Begin(grpc::ClientContext* context);
  void End();

  // Constant after construction.
  const std::shared_ptr<grpc::Channel> channel_;
  const HealthWatcherOptions options_;

  std::thread thread_;  // joined by Stop

  mutable common::Mutex mu_;
  common::CondVar cv_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool polling_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace ctrlhost::plugin

#endif  // CTRLHOST_RUNTIME_PLUGIN_HEALTH_WATCH_H_
