// Session: one bidi `Reconcile` stream to one plugin instance, multiplexed by request_id.
//
// A Session is the host half of ControllerPluginService.Reconcile (see
// proto/ctrlhost/plugin/v1alpha1/plugin.proto). It is a controller::Dispatcher: the runner
// hands it ReconcileCalls, the session assigns request ids, writes them on the stream and calls
// each caller's `done` exactly once with the matching response or an error:
//   - RESOURCE_EXHAUSTED at once when `max_in_flight` requests are outstanding;
//   - DEADLINE_EXCEEDED when no response came by the call's deadline (and a CancelNotice is sent
//     to the plugin when CAPABILITY_CANCELLATION is in effect); a later response is dropped;
//   - UNAVAILABLE at once for every outstanding request when the stream breaks (plugin crashed,
//     connection lost, session closed), and for every Dispatch after that; the runner requeues;
//   - RESOURCE_EXHAUSTED for every outstanding request when the plugin sent a message larger
//     than `max_message_bytes` (gRPC ends the whole stream in that case, so the session is
//     broken too; it cannot tell which request the oversized answer was for).
// Each response is handed on with the capabilities in effect on this connection
// (controller::DispatchResult::capabilities), against which the applier checks it.
// Responses with an unknown, expired or already answered request_id are dropped and logged,
// rate limited (10 lines, then 1 per second, each with the count of lines suppressed before it),
// and so are plugin messages (task_enqueue, task_status) when CAPABILITY_BACKGROUND_TASKS is
// not in effect.
//
// Example:
//   ASSIGN_OR_RETURN(HandshakeResult hs, Handshake(channel, handshake_options));
//   SessionOptions options;
//   options.max_in_flight = 64;
//   options.cancellation = hs.cancellation;
//   options.on_broken = [](const absl::Status& s) { /* wake the supervisor; must not block */ };
//   ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Open(channel, options));
//   session->Dispatch(std::move(call), clock->Now() + absl::Seconds(30), done);
//
// Threading: thread-safe. `done` and `on_broken` run on gRPC's callback threads, on the
// session's deadline thread, or inline in Dispatch (immediate errors); they must not block and
// must not run reconcile logic (hand the result to a worker). They are never called with the
// session's lock held, so they may call Dispatch again.
#ifndef CTRLHOST_RUNTIME_PLUGIN_SESSION_H_
#define CTRLHOST_RUNTIME_PLUGIN_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ctrlhost/plugin/v1alpha1/plugin.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "runtime/common/clock.h"
#include "runtime/controller/reconcile.h"

namespace ctrlhost::plugin {

// The protocol's documented message limit (64 MiB): requests carry whole objects and children.
inline constexpr uint32_t kDefaultMaxMessageBytes = 64u << 20;
// The Reconcile stream's metadata key carrying the capabilities in effect (SessionOptions).
inline constexpr char kCapabilitiesMetadata[] = "ctrlhost-capabilities";

struct SessionOptions {
  // Most requests outstanding on the stream (sent and neither answered nor expired). Further
  // Dispatch calls fail with RESOURCE_EXHAUSTED at once.
  uint32_t max_in_flight = 256;
  // The negotiated message limit. The channel must have been created with at least this
  // receive limit (MakeChannel does it); a larger response fails RESOURCE_EXHAUSTED.
  uint32_t max_message_bytes = kDefaultMaxMessageBytes;
  // CAPABILITY_CANCELLATION is in effect: send a CancelNotice when a request expires.
  bool cancellation = false;
  // The capabilities negotiated on this connection, sent as the stream's metadata
  // `ctrlhost-capabilities` (names, comma-separated), so that a plugin serving several hosts
  // (an HA pair on different versions) knows which set applies to which stream.
  std::vector<pluginpb::Capability> capabilities;
  // For logs: "PLUGIN-GENERATION".
  std::string instance_name;
  // Time source for deadlines. Borrowed; must outlive the session. Null: Clock::Real().
  common::Clock* clock = nullptr;
  // Called once when the stream breaks or ends (not when Close() ends it), with why. Must not
  // block and must not destroy the session.
  std::function<void(const absl::Status&)> on_broken;
  // Called for each plugin-to-host message that answers no request (request_id 0 carrying
  // task_enqueue or task_status: background tasks), on gRPC's callback thread, in stream order,
  // when CAPABILITY_BACKGROUND_TASKS is in `capabilities`. Must not block. Null, or the
  // capability not in effect: such messages are dropped (and logged) like unknown responses.
  std::function<void(pluginpb::ReconcileResponse)> on_plugin_message;
};

// See the file comment. Thread-safe.
class Session : public controller::Dispatcher {
 public:
  // Opens the Reconcile stream on `channel` (the handshake must have succeeded on it). Never
  // blocks on the network: a stream that cannot be established breaks (UNAVAILABLE) later.
  static absl::StatusOr<std::unique_ptr<Session>> Open(std::shared_ptr<grpc::Channel> channel,
                                                       SessionOptions options);

  // Fails outstanding requests with UNAVAILABLE, cancels the stream and waits for gRPC to
  // finish with it (bounded: cancellation completes every pending operation).
  ~Session() override;

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // controller::Dispatcher. `call.controller` must be set; `deadline` is on the options' clock.
  void Dispatch(pluginpb::ReconcileCall call, absl::Time deadline,
                controller::ReconcileCallback done) override;

  // Sends a notice that is not answered (StartTasks, StopTasks, TaskEnqueueRefused): the
  // session gives `notice` a fresh request_id and queues it behind earlier writes. UNAVAILABLE
  // once the stream is broken or closed; InvalidArgument for a reconcile payload. Never blocks.
  absl::Status Notify(pluginpb::ReconcileRequest notice);
  // Waits (on the options' clock) until every queued write, notices included, went out or the
  // stream ended; false when `deadline` came first. For a notice that must leave before the
  // session is closed (StopTasks before a drain).
  bool WaitForWrites(absl::Time deadline);

  // Ends the stream: every outstanding request fails UNAVAILABLE, later Dispatches too.
  // `on_broken` is not called. Idempotent; does not wait (the destructor does).
  void Close();

  // OK while the stream is usable; otherwise why it broke.
  absl::Status health() const;
  bool broken() const { return !health().ok(); }

  // Requests outstanding now.
  size_t in_flight() const;

  // True once the plugin ended the Reconcile stream with status OK (an SDK's drain on SIGTERM
  // does), as opposed to a broken stream; health() is then UNAVAILABLE too.
  bool ended_cleanly() const;

 private:
  class Stream;
  explicit Session(std::unique_ptr<Stream> stream);

  std::unique_ptr<Stream> stream_;
};

// HTTP/2 keepalive on the host's plugin channels (docs/protocol.md, "Liveness"): a ping every
// kKeepaliveTime, also without calls; an unanswered ping closes the connection after
// kKeepaliveTimeout. Plugins must accept pings at least every kKeepaliveTime (the SDKs accept
// one per second).
inline constexpr absl::Duration kKeepaliveTime = absl::Seconds(10);
inline constexpr absl::Duration kKeepaliveTimeout = absl::Seconds(5);

// A channel to a plugin address ("unix:///path" or "host:port") with the message limits raised
// to `max_message_bytes` both ways, quick reconnects (a starting plugin's socket appears late)
// and keepalive pings (kKeepaliveTime). `credentials` null means insecure (Unix sockets, tests).
std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& address, uint32_t max_message_bytes,
    std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
    const std::string& ssl_target_name_override = "");

}  // namespace ctrlhost::plugin

#endif  // CTRLHOST_RUNTIME_PLUGIN_SESSION_H_
