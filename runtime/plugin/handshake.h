// Handshake: dial a plugin, negotiate with Describe, then require grpc.health.v1 SERVING.
//
// The host's half of the start of every plugin connection (docs/protocol.md): Describe with the
// host's protocol versions, capabilities and limits; the answer is checked completely (a
// version the host did not offer is FAILED_PRECONDITION; an empty or duplicate controller name,
// a missing primary kind, a watch without mapping, a feature whose capability is not in effect
// is INVALID_ARGUMENT, each naming the controller and field); then Health/Check for
// "ctrlhost.plugin.v1alpha1.ControllerPluginService" must answer SERVING (NOT_SERVING is asked
// again for up to kStartingGrace, since a starting server may mark itself serving just after
// its socket appears; then UNAVAILABLE, which the supervisor retries with backoff; a health
// service that fails the call, e.g. is not implemented, is FAILED_PRECONDITION). All of it within
// one deadline (DEADLINE_EXCEEDED when it passes; a plugin whose socket is not there yet is waited
// for until then).
//
// Example:
//   auto channel = MakeChannel("unix:///run/ctrlhost/plugins/webapp-1.sock",
//                              kDefaultMaxMessageBytes);
//   HandshakeOptions options;
//   options.instance_name = "webapp-1";
//   ASSIGN_OR_RETURN(HandshakeResult result, Handshake(channel, options));
//   // result.describe.controllers(), result.cancellation ...
//
// Thread-safe (no shared state); blocks the calling thread up to the deadline, so never call it
// on a gRPC callback thread.
#ifndef CTRLHOST_RUNTIME_PLUGIN_HANDSHAKE_H_
#define CTRLHOST_RUNTIME_PLUGIN_HANDSHAKE_H_

#include <cstddef>
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
#include "grpcpp/client_context.h"
#include "runtime/common/mutex.h"
#include "runtime/common/version.h"
#include "runtime/plugin/session.h"

namespace ctrlhost::plugin {

// The health service name a plugin reports SERVING for.
inline constexpr char kPluginServiceName[] = "ctrlhost.plugin.v1alpha1.ControllerPluginService";
// How long a plugin answering NOT_SERVING during the handshake is asked again before it is
// refused (bounded by the handshake's deadline).
inline constexpr absl::Duration kStartingGrace = absl::Seconds(3);

// Every capability this host implements.
std::vector<pluginpb::Capability> HostCapabilities();

// Lets another thread abort a running Handshake (e.g. the supervisor being stopped). Thread-safe.
class HandshakeCanceller {
 public:
  // Cancels the call in progress, if any, and every later one: Handshake returns CANCELLED.
  void Cancel();
  bool cancelled() const;

 private:
  friend class HandshakeCall;
  mutable common::Mutex mu_;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// What one plugin's Describe may ask of the host (docs/protocol.md, "Limits"). A Describe over
// any of them is refused (FAILED_PRECONDITION naming the limit, the value and where to raise
// it): each controller costs the host worker threads, watches and memory, and a plugin must
// not be able to take the host down by declaring too many.
struct DescribeLimits {
  int max_controllers = 100;                 // per plugin (operator file: maxControllers)
  uint32_t max_concurrent_reconciles = 256;  // per controller
  int max_kinds = 64;             // owns, watches, metadata_only_kinds, each per controller
  int max_namespaces = 256;       // per controller
  int max_strip_fields = 256;     // per controller
  int max_schedules = 64;         // per controller
  int max_background_tasks = 64;  // per controller
  size_t max_bytes = 1 << 20;     // the whole DescribeResponse, serialized
};

struct HandshakeOptions {
  // Describe and health check together must finish within this (real time).
  absl::Duration deadline = absl::Seconds(30);
  std::vector<std::string> protocol_versions = {"v1alpha1"};
  std::vector<pluginpb::Capability> capabilities = HostCapabilities();
  std::string host_version = common::kCtrlhostVersion;
  uint32_t max_message_bytes = kDefaultMaxMessageBytes;
  uint32_t max_in_flight = 256;
  std::string instance_name;                // "PLUGIN-GENERATION"
  HandshakeCanceller* canceller = nullptr;  // optional, borrowed for the call
  DescribeLimits limits;
  // Optional: called with a valid DescribeResponse before the health check; a non-OK status
  // refuses the plugin with it (the host's own limits across all plugins, e.g. controllers and
  // worker threads per host). Called on the handshaking thread.
  std::function<absl::Status(const pluginpb::DescribeResponse&)> admit;
};

struct HandshakeResult {
  pluginpb::DescribeResponse describe;
  // Features in effect: the intersection of both lists, sorted, without UNSPECIFIED/unknown.
  std::vector<pluginpb::Capability> capabilities;
  bool cancellation = false;  // CAPABILITY_CANCELLATION in effect
  // Session options derived from the negotiation (max_in_flight, max_message_bytes,
  // cancellation, instance_name); the caller adds clock and on_broken.
  SessionOptions session_options;
};

// Runs the handshake on `channel` (see the file comment).
absl::StatusOr<HandshakeResult> Handshake(const std::shared_ptr<grpc::Channel>& channel,
                                          const HandshakeOptions& options);

// The checks Handshake applies to a DescribeResponse, exposed for tests and for the manager.
// `in_effect` are the negotiated capabilities.
absl::Status ValidateDescribeResponse(const pluginpb::DescribeRequest& request,
                                      const pluginpb::DescribeResponse& response,
                                      const std::vector<pluginpb::Capability>& in_effect,
                                      const DescribeLimits& limits = DescribeLimits());

}  // namespace ctrlhost::plugin

#endif  // CTRLHOST_RUNTIME_PLUGIN_HANDSHAKE_H_
