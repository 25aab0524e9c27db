#include "runtime/plugin/session.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_callback.h"
#include "runtime/common/log_limiter.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/common/proto_time.h"

namespace ctrlhost::plugin {

// The reactor behind a Session. gRPC calls its On* methods on its callback threads; Dispatch,
// Close and the deadline thread call in from elsewhere. `mu_` guards all mutable state below it.
//
// Lifetime rules of gRPC's callback API that shape this class:
// - StartWrite/StartRead/RemoveHold may run reactions inline in the calling thread, so they are
//   never called with `mu_` held.
// - Only one write may be outstanding: later requests wait in `write_queue_`.
// - A hold (taken before StartCall) keeps OnDone from running while a thread outside the
//   reactions may still start a write. It is released once the stream is finished for us
//   (read side ended or Close) and no write is pending, so no StartWrite can follow OnDone.
class Session::Stream
    : public grpc::ClientBidiReactor<pluginpb::ReconcileRequest, pluginpb::ReconcileResponse> {
 public:
  Stream(std::shared_ptr<grpc::Channel> channel, SessionOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : common::Clock::Real()),
        stub_(pluginpb::ControllerPluginService::NewStub(std::move(channel))) {}

  ~Stream() override {
    Close();
    {
      common::MutexLock lock(&mu_);
      while (!done_) done_cv_.Wait(&mu_);
      stop_timer_ = true;
      timer_cv_.SignalAll();
    }
    if (timer_.joinable()) timer_.join();
  }

  void Start() {
    std::vector<std::string> names;
    for (pluginpb::Capability c : options_.capabilities)
      names.push_back(pluginpb::Capability_Name(c));
    context_.AddMetadata(std::string(kCapabilitiesMetadata), absl::StrJoin(names, ","));
    timer_ = std::thread([this] { TimerLoop(); });
    published_.store(true, std::memory_order_release);
    stub_->async()->Reconcile(&context_, this);
    AddHold();
    StartRead(&read_buffer_);
    StartCall();
  }

  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) {
    absl::Status error;
    bool start_write = false;
    {
      common::MutexLock lock(&mu_);
      if (!health_.ok()) {
        error = absl::UnavailableError(
            absl::StrCat("plugin ", options_.instance_name, ": ", health_.message()));
      } else if (in_flight_.size() >= options_.max_in_flight) {
        error = absl::ResourceExhaustedError(absl::StrCat("plugin ", options_.instance_name, ": ",
                                                          options_.max_in_flight,
                                                          " requests already in flight"));
      } else {
        const uint64_t id = next_id_++;
        pluginpb::ReconcileRequest request;
        request.set_request_id(id);
        *call.mutable_deadline() = common::ToProtoTimestamp(deadline);
        // The budget relative to now as well: remote plugins may have a skewed clock.
        *call.mutable_timeout() =
            common::ToProtoDuration(std::max(deadline - clock_->Now(), absl::ZeroDuration()));
        *request.mutable_reconcile() = std::move(call);
        const size_t size = request.ByteSizeLong();
        if (size > options_.max_message_bytes) {
          error = absl::ResourceExhaustedError(absl::StrCat("reconcile request of ", size,
                                                            " bytes exceeds the plugin's limit of ",
                                                            options_.max_message_bytes, " bytes"));
        } else {
          in_flight_.emplace(id, Pending{std::move(done), deadline});
          const bool earliest = deadlines_.empty() || deadline < deadlines_.top().first;
          deadlines_.emplace(deadline, id);
          if (earliest) timer_cv_.Signal();
          start_write = EnqueueWriteLocked(std::move(request));
        }
      }
    }
    if (!error.ok()) {
      done(std::move(error));
      return;
    }
    if (start_write) StartWrite(&current_write_);
  }

  absl::Status Notify(pluginpb::ReconcileRequest notice) {
    if (notice.payload_case() == pluginpb::ReconcileRequest::kReconcile ||
        notice.payload_case() == pluginpb::ReconcileRequest::PAYLOAD_NOT_SET) {
      return absl::InvalidArgumentError("Session::Notify: a notice needs a non-reconcile payload");
    }
    bool start_write = false;
    {
      common::MutexLock lock(&mu_);
      if (!health_.ok()) {
        return absl::UnavailableError(
            absl::StrCat("plugin ", options_.instance_name, ": ", health_.message()));
      }
      notice.set_request_id(next_id_++);
      start_write = EnqueueWriteLocked(std::move(notice));
    }
    if (start_write) StartWrite(&current_write_);
    return absl::OkStatus();
  }

  bool WaitForWrites(absl::Time deadline) {
    common::MutexLock lock(&mu_);
    while ((writing_ || !write_queue_.empty()) && !finished_) {
      if (clock_->WaitWithDeadline(&mu_, &writes_cv_, deadline)) break;
    }
    return !(writing_ || !write_queue_.empty()) || finished_;
  }

  void Close() {
    {
      common::MutexLock lock(&mu_);
      if (closed_ || finished_) return;
      closed_ = true;
      if (health_.ok()) health_ = absl::UnavailableError("session closed");
    }
    context_.TryCancel();
  }

  absl::Status health() const {
    common::MutexLock lock(&mu_);
    return health_;
  }

  size_t in_flight() const {
    common::MutexLock lock(&mu_);
    return in_flight_.size();
  }

  bool ended_cleanly() const {
    common::MutexLock lock(&mu_);
    return ended_cleanly_;
  }

  // --- gRPC reactions -----------------------------------------------------------------------

  void OnReadDone(bool ok) override {
    SeePublished();
    if (!ok) {
      bool release = false;
      {
        common::MutexLock lock(&mu_);
        finished_ = true;
        if (health_.ok()) health_ = absl::UnavailableError("plugin ended the Reconcile stream");
        release = ReleaseHoldLocked();
      }
      // Also ends a stream the plugin half-closed without a status, so OnDone follows.
      context_.TryCancel();
      if (release) RemoveHold();
      return;
    }
    pluginpb::ReconcileResponse response;
    controller::ReconcileCallback done;
    uint64_t id;
    {
      // gRPC runs successive read reactions on different threads and orders them itself; the
      // lock makes that order visible to ThreadSanitizer too.
      common::MutexLock lock(&mu_);
      response = std::move(read_buffer_);
      id = response.request_id();
      auto it = in_flight_.find(id);
      if (it != in_flight_.end()) {
        done = std::move(it->second.done);
        in_flight_.erase(it);
      }
    }
    // Handled before the next read is started: gRPC may run the next read's reaction on
    // another thread as soon as it is, so handling after it would reorder plugin messages and
    // could log a dropped answer after the answer that followed it on the stream.
    const bool plugin_message =
        !done && id == 0 && (response.has_task_enqueue() || response.has_task_status());
    if (plugin_message && !background_tasks_) {
      // Not in effect on this connection: refused here, so that nothing (not even a
      // TaskEnqueueRefused notice) answers it on a stream that did not negotiate it.
      uint64_t suppressed = 0;
      if (dropped_log_.Allow(&suppressed)) {
        common::LogWarning(
            "plugin message dropped: task_enqueue and task_status require "
            "CAPABILITY_BACKGROUND_TASKS, which is not in effect",
            {{"plugin", options_.instance_name}, {"suppressed", suppressed}});
      }
    } else if (plugin_message && options_.on_plugin_message) {
      options_.on_plugin_message(std::move(response));
    } else if (!done) {
      // A plugin can send these as fast as it likes: rate limited, so that a flooding plugin
      // cannot fill the host's log (one line per answer to a request never sent).
      uint64_t suppressed = 0;
      if (dropped_log_.Allow(&suppressed)) {
        common::LogWarning(
            "plugin response for an unknown or expired request dropped",
            {{"plugin", options_.instance_name}, {"request_id", id}, {"suppressed", suppressed}});
      }
    }
    StartRead(&read_buffer_);
    if (done) done(controller::DispatchResult(std::move(response), options_.capabilities));
  }

  void OnWriteDone(bool ok) override {
    SeePublished();
    bool start_write = false;
    bool release = false;
    {
      common::MutexLock lock(&mu_);
      writing_ = false;
      if (ok && !finished_ && !write_queue_.empty()) {
        current_write_ = std::move(write_queue_.front());
        write_queue_.pop_front();
        writing_ = true;
        start_write = true;
      }
      if (!start_write) {
        release = ReleaseHoldLocked();
        writes_cv_.SignalAll();
      }
    }
    if (start_write) StartWrite(&current_write_);
    if (release) RemoveHold();
  }

  void OnDone(const grpc::Status& status) override {
    SeePublished();
    absl::flat_hash_map<uint64_t, Pending> failed;
    absl::Status why;
    bool report = false;
    bool clean = false;
    {
      common::MutexLock lock(&mu_);
      finished_ = true;
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED && !closed_) {
        why = absl::ResourceExhaustedError(absl::StrCat(
            "plugin ", options_.instance_name, " sent a message over the limit of ",
            options_.max_message_bytes, " bytes; stream broken: ", status.error_message()));
      } else if (closed_) {
        why = absl::UnavailableError(
            absl::StrCat("plugin ", options_.instance_name, ": session closed"));
      } else if (status.ok()) {
        // The plugin returned from its handler: a drain (SIGTERM), not a failure.
        ended_cleanly_ = true;
        why = absl::UnavailableError(
            absl::StrCat("plugin ", options_.instance_name, " ended the Reconcile stream cleanly"));
      } else {
        why = absl::UnavailableError(absl::StrCat(
            "plugin ", options_.instance_name, ": Reconcile stream broken: ",
            status.error_message(), " (gRPC code ", static_cast<int>(status.error_code()), ")"));
      }
      health_ = why;
      report = !closed_;
      clean = ended_cleanly_;
      failed.swap(in_flight_);
      write_queue_.clear();
    }
    // The owner hears first, so that a retry the runner makes from a `done` below finds the
    // instance already marked not ready.
    if (report) {
      if (clean) {
        common::LogInfo("plugin ended its Reconcile stream",
                        {{"plugin", options_.instance_name}, {"in_flight", failed.size()}});
      } else {
        common::LogWarning(
            "plugin Reconcile stream broken",
            {{"plugin", options_.instance_name}, {"in_flight", failed.size()}, {"status", why}});
      }
      if (options_.on_broken) options_.on_broken(why);
    }
    for (auto& [id, pending] : failed) pending.done(why);
    common::MutexLock lock(&mu_);
    done_ = true;
    done_cv_.SignalAll();
    timer_cv_.SignalAll();
    writes_cv_.SignalAll();
  }

 private:
  struct Pending {
    controller::ReconcileCallback done;
    absl::Time deadline;
  };
  using DeadlineEntry = std::pair<absl::Time, uint64_t>;

  // gRPC hands the reactor to its threads through uninstrumented code; this acquire pairs with
  // the release in Start() so that ThreadSanitizer sees the construction happen before.
  void SeePublished() { (void)published_.load(std::memory_order_acquire); }

  // Queues `request`; returns true when the caller must StartWrite(&current_write_) (after
  // releasing mu_).
  bool EnqueueWriteLocked(pluginpb::ReconcileRequest request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_) {
      write_queue_.push_back(std::move(request));
      return false;
    }
    current_write_ = std::move(request);
    writing_ = true;
    return true;
  }

  // True (once) when the hold may go: the stream is over for us and no write is pending.
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (hold_released_ || writing_ || !(finished_ || closed_)) return false;
    hold_released_ = true;
    return true;
  }

  // Expires requests whose deadline passed. One thread per session, sleeping until the earliest
  // deadline (entries of answered requests are skipped lazily).
  void TimerLoop() {
    common::MutexLock lock(&mu_);
    while (!stop_timer_) {
      // Drop heap entries of requests that are no longer outstanding.
      while (!deadlines_.empty()) {
        auto it = in_flight_.find(deadlines_.top().second);
        if (it != in_flight_.end() && it->second.deadline == deadlines_.top().first) break;
        deadlines_.pop();
      }
      if (deadlines_.empty()) {
        timer_cv_.Wait(&mu_);
        continue;
      }
      const absl::Time next = deadlines_.top().first;
      if (clock_->Now() < next) {
        clock_->WaitWithDeadline(&mu_, &timer_cv_, next);
        continue;
      }
      std::vector<std::pair<uint64_t, controller::ReconcileCallback>> expired;
      const absl::Time now = clock_->Now();
      while (!deadlines_.empty() && deadlines_.top().first <= now) {
        const uint64_t id = deadlines_.top().second;
        deadlines_.pop();
        auto it = in_flight_.find(id);
        if (it == in_flight_.end()) continue;
        expired.emplace_back(id, std::move(it->second.done));
        in_flight_.erase(it);
      }
      bool start_write = false;
      if (options_.cancellation && health_.ok()) {
        for (const auto& entry : expired) {
          pluginpb::ReconcileRequest cancel;
          cancel.set_request_id(entry.first);
          cancel.mutable_cancel()->set_reason("deadline exceeded");
          start_write = EnqueueWriteLocked(std::move(cancel)) || start_write;
        }
      }
      mu_.Unlock();
      if (start_write) StartWrite(&current_write_);
      for (auto& [id, done] : expired) {
        done(absl::DeadlineExceededError(absl::StrCat("plugin ", options_.instance_name,
                                                      " did not answer request ", id,
                                                      " by its deadline")));
      }
      mu_.Lock();
    }
  }

  // Constant after construction.
  const SessionOptions options_;
  common::Clock* const clock_;
  // CAPABILITY_BACKGROUND_TASKS is in effect: plugin messages (task_enqueue, task_status) are
  // accepted.
  const bool background_tasks_ =
      std::find(options_.capabilities.begin(), options_.capabilities.end(),
                pluginpb::CAPABILITY_BACKGROUND_TASKS) != options_.capabilities.end();
  std::unique_ptr<pluginpb::ControllerPluginService::Stub> stub_;
  grpc::ClientContext context_;
  std::thread timer_;
  std::atomic<bool> published_{false};
  // "response dropped" warnings: 1/s after a burst of 10. Thread-safe itself.
  common::LogLimiter dropped_log_{{.per_second = 1, .burst = 10, .clock = clock_}};

  // Filled by gRPC between StartRead and OnReadDone; read by OnReadDone under mu_.
  pluginpb::ReconcileResponse read_buffer_;

  mutable common::Mutex mu_;
  common::CondVar done_cv_;    // signalled when done_ turns true
  common::CondVar timer_cv_;   // wakes the deadline thread
  common::CondVar writes_cv_;  // signalled when the write queue empties or the stream ends
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Pending> in_flight_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<DeadlineEntry, std::vector<DeadlineEntry>, std::greater<DeadlineEntry>>
      deadlines_ ABSL_GUARDED_BY(mu_);
  // current_write_ is owned by gRPC while writing_ is true.
  pluginpb::ReconcileRequest current_write_;
  std::deque<pluginpb::ReconcileRequest> write_queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status health_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;         // Close() called
  bool finished_ ABSL_GUARDED_BY(mu_) = false;       // read side ended or OnDone ran
  bool ended_cleanly_ ABSL_GUARDED_BY(mu_) = false;  // OnDone saw status OK (not closed_)
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;  // RemoveHold decided
  bool done_ ABSL_GUARDED_BY(mu_) = false;           // OnDone returned its last callback
  bool stop_timer_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<Session>> Session::Open(std::shared_ptr<grpc::Channel> channel,
                                                       SessionOptions options) {
  if (channel == nullptr) return absl::InvalidArgumentError("Session::Open: null channel");
  if (options.max_in_flight == 0) {
    return absl::InvalidArgumentError("Session::Open: max_in_flight must be positive");
  }
  auto stream = std::make_unique<Stream>(std::move(channel), std::move(options));
  stream->Start();
  return std::unique_ptr<Session>(new Session(std::move(stream)));
}

Session::Session(std::unique_ptr<Stream> stream) : stream_(std::move(stream)) {}

Session::~Session() = default;

void Session::Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                       controller::ReconcileCallback done) {
  stream_->Dispatch(std::move(call), deadline, std::move(done));
}

absl::Status Session::Notify(pluginpb::ReconcileRequest notice) {
  return stream_->Notify(std::move(notice));
}

bool Session::WaitForWrites(absl::Time deadline) { return stream_->WaitForWrites(deadline); }

void Session::Close() { stream_->Close(); }

absl::Status Session::health() const { return stream_->health(); }

size_t Session::in_flight() const { return stream_->in_flight(); }

bool Session::ended_cleanly() const { return stream_->ended_cleanly(); }

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, uint32_t max_message_bytes,
                                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                                           const std::string& ssl_target_name_override) {
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(std::min<uint32_t>(max_message_bytes, 0x7fffffff));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  // A starting plugin's socket appears late; the default 1 s first backoff would dominate.
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS stays at gRPC's default on purpose: gRPC takes it as the
  // minimum time a connection attempt gets (connect plus the server's HTTP/2 SETTINGS; 20 s by
  // default). Set to 50 ms it was 100 ms (gRPC's floor), and on a loaded machine a plugin that
  // answered SETTINGS later failed its calls with "connection attempt timed out before receiving
  // SETTINGS frame" (bench/dispatch:loops_test).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // HTTP/2 keepalive (docs/protocol.md, "Liveness"): a ping every kKeepaliveTime, also on an idle
  // connection, and a connection whose ping is unanswered for kKeepaliveTimeout is closed, so a
  // remote plugin behind a blackholing network fails its stream within ~15 s instead of only
  // through request deadlines. The SDK servers accept pings down to one per second.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTime)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTimeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (!ssl_target_name_override.empty()) {
    args.SetSslTargetNameOverride(ssl_target_name_override);
  }
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(address, credentials, args);
}

}  // namespace ctrlhost::plugin
