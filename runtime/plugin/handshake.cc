#include "runtime/plugin/handshake.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctrlhost/plugin/v1alpha1/plugin.grpc.pb.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace ctrlhost::plugin {
namespace {

namespace health = ::grpc::health::v1;

absl::Status FromGrpc(const grpc::Status& status, absl::string_view context) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(context, ": ", status.error_message()));
}

bool IsDnsLabel(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return name.front() != '-' && name.back() != '-';
}

absl::Status CheckKind(const pluginpb::GroupVersionKind& gvk, absl::string_view where) {
  if (gvk.version().empty() || gvk.kind().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": version and kind are required (got group=\"", gvk.group(),
                     "\" version=\"", gvk.version(), "\" kind=\"", gvk.kind(), "\")"));
  }
  return absl::OkStatus();
}

absl::Status NeedsCapability(bool used, pluginpb::Capability capability,
                             const std::vector<pluginpb::Capability>& in_effect,
                             absl::string_view where) {
  if (!used || std::find(in_effect.begin(), in_effect.end(), capability) != in_effect.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      where, " requires ", pluginpb::Capability_Name(capability), ", which is not in effect"));
}

// FAILED_PRECONDITION for a list or value past its limit: the plugin asks more than this host
// gives, which no retry changes.
absl::Status OverLimit(absl::string_view where, int64_t value, int64_t limit,
                       absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(where, ": ", value, " ", what, "; the host's limit is ", limit));
}

absl::Status CheckLimits(const pluginpb::ControllerSpec& c, const std::string& at,
                         const DescribeLimits& limits) {
  if (c.max_concurrent_reconciles() > limits.max_concurrent_reconciles) {
    return OverLimit(at + ".max_concurrent_reconciles", c.max_concurrent_reconciles(),
                     limits.max_concurrent_reconciles, "concurrent reconciles");
  }
  const struct {
    const char* field;
    int size;
    int limit;
  } lists[] = {
      {".owns", c.owns_size(), limits.max_kinds},
      {".watches", c.watches_size(), limits.max_kinds},
      {".namespaces", c.namespaces_size(), limits.max_namespaces},
      {".schedules", c.schedules_size(), limits.max_schedules},
      {".background_tasks", c.background_tasks_size(), limits.max_background_tasks},
      {".request_contents.metadata_only_kinds", c.request_contents().metadata_only_kinds_size(),
       limits.max_kinds},
      {".request_contents.strip_fields", c.request_contents().strip_fields_size(),
       limits.max_strip_fields},
  };
  for (const auto& list : lists) {
    if (list.size > list.limit) return OverLimit(at + list.field, list.size, list.limit, "entries");
  }
  return absl::OkStatus();
}

absl::Status ValidateController(const pluginpb::ControllerSpec& c, int index,
                                const std::vector<pluginpb::Capability>& in_effect,
                                const DescribeLimits& limits) {
  const std::string at = absl::StrCat("controllers[", index, "] (\"", c.name(), "\")");
  if (absl::Status s = CheckLimits(c, at, limits); !s.ok()) return s;
  if (!IsDnsLabel(c.name())) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".name: must be a lowercase RFC 1123 label ([a-z0-9-], at most 63 characters)"));
  }
  if (!c.has_primary()) return absl::InvalidArgumentError(absl::StrCat(at, ".primary: missing"));
  if (absl::Status s = CheckKind(c.primary(), absl::StrCat(at, ".primary")); !s.ok()) return s;
  for (int i = 0; i < c.owns_size(); ++i) {
    const std::string where = absl::StrCat(at, ".owns[", i, "]");
    if (absl::Status s = CheckKind(c.owns(i).kind(), where + ".kind"); !s.ok()) return s;
    if (absl::Status s =
            NeedsCapability(c.owns(i).delete_absent(), pluginpb::CAPABILITY_SERVER_SIDE_APPLY,
                            in_effect, where + ".delete_absent");
        !s.ok()) {
      return s;
    }
  }
  for (int i = 0; i < c.watches_size(); ++i) {
    const std::string where = absl::StrCat(at, ".watches[", i, "]");
    if (absl::Status s = CheckKind(c.watches(i).kind(), where + ".kind"); !s.ok()) return s;
    if (c.watches(i).mapping_case() == pluginpb::WatchedKind::MAPPING_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".mapping: missing"));
    }
  }
  if (!c.finalizer().empty() && c.finalizer().find('/') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        at, ".finalizer: \"", c.finalizer(), "\" must be qualified, e.g. example.com/cleanup"));
  }
  if (c.has_resync_period() && (c.resync_period().seconds() < 0 || c.resync_period().nanos() < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(at, ".resync_period: negative"));
  }
  const pluginpb::RequestContents& rc = c.request_contents();
  if (absl::Status s = NeedsCapability(rc.children(), pluginpb::CAPABILITY_CHILDREN, in_effect,
                                       at + ".request_contents.children");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = NeedsCapability(rc.related_objects(), pluginpb::CAPABILITY_RELATED_OBJECTS,
                                       in_effect, at + ".request_contents.related_objects");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          NeedsCapability(rc.metadata_only_kinds_size() > 0, pluginpb::CAPABILITY_METADATA_ONLY,
                          in_effect, at + ".request_contents.metadata_only_kinds");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          NeedsCapability(c.background_tasks_size() > 0, pluginpb::CAPABILITY_BACKGROUND_TASKS,
                          in_effect, at + ".background_tasks");
      !s.ok()) {
    return s;
  }
  for (int i = 0; i < c.background_tasks_size(); ++i) {
    const std::string& task = c.background_tasks(i).name();
    const std::string where = absl::StrCat(at, ".background_tasks[", i, "].name");
    if (!IsDnsLabel(task)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", task,
                       "\" must be a lowercase RFC 1123 label ([a-z0-9-], at most 63 "
                       "characters)"));
    }
    for (int j = 0; j < i; ++j) {
      if (c.background_tasks(j).name() == task) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"", task, "\" is declared twice"));
      }
    }
  }
  return NeedsCapability(c.schedules_size() > 0, pluginpb::CAPABILITY_SCHEDULES, in_effect,
                         at + ".schedules");
}

// How long the probe for a connection error may wait (it answers at once when the channel fails).
constexpr absl::Duration kConnectionErrorProbe = absl::Seconds(1);

std::chrono::system_clock::time_point GrpcDeadline(absl::Time deadline) {
  return absl::ToChronoTime(deadline);
}

// Why the channel cannot connect, when that is the reason a call timed out: a waiting call
// (wait_for_ready) ends with DEADLINE_EXCEEDED and no word of the cause, e.g. a TLS handshake the
// plugin or the host refused (no client certificate, an unknown CA). A fail-fast health check
// on a channel in TRANSIENT_FAILURE answers at once with gRPC's last connection error. "" when
// the channel is not failing (the plugin is there but slow) or within the probe's bounded wait.
std::string ConnectionError(const std::shared_ptr<grpc::Channel>& channel) {
  if (channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_TRANSIENT_FAILURE) return "";
  auto stub = health::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(GrpcDeadline(absl::Now() + kConnectionErrorProbe));
  health::HealthCheckRequest check;
  health::HealthCheckResponse answer;
  grpc::Status status = stub->Check(&context, check, &answer);
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return "";
  return status.error_message();
}

}  // namespace

// Registers a call's context with the canceller for the duration of the call.
class HandshakeCall {
 public:
  HandshakeCall(HandshakeCanceller* canceller, grpc::ClientContext* context)
      : canceller_(canceller) {
    if (canceller_ == nullptr) return;
    common::MutexLock lock(&canceller_->mu_);
    canceller_->current_ = context;
    if (canceller_->cancelled_) context->TryCancel();
  }
  ~HandshakeCall() {
    if (canceller_ == nullptr) return;
    common::MutexLock lock(&canceller_->mu_);
    canceller_->current_ = nullptr;
  }

 private:
  HandshakeCanceller* const canceller_;
};

void HandshakeCanceller::Cancel() {
  common::MutexLock lock(&mu_);
  cancelled_ = true;
  if (current_ != nullptr) current_->TryCancel();
}

bool HandshakeCanceller::cancelled() const {
  common::MutexLock lock(&mu_);
  return cancelled_;
}

std::vector<pluginpb::Capability> HostCapabilities() {
  return {pluginpb::CAPABILITY_CANCELLATION,      pluginpb::CAPABILITY_METADATA_ONLY,
          pluginpb::CAPABILITY_CHILDREN,          pluginpb::CAPABILITY_RELATED_OBJECTS,
          pluginpb::CAPABILITY_SERVER_SIDE_APPLY, pluginpb::CAPABILITY_CONDITIONS,
          pluginpb::CAPABILITY_SCHEDULES,         pluginpb::CAPABILITY_BACKGROUND_TASKS};
}

absl::Status ValidateDescribeResponse(const pluginpb::DescribeRequest& request,
                                      const pluginpb::DescribeResponse& response,
                                      const std::vector<pluginpb::Capability>& in_effect,
                                      const DescribeLimits& limits) {
  const auto& offered = request.protocol_versions();
  if (std::find(offered.begin(), offered.end(), response.protocol_version()) == offered.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin chose protocol version \"", response.protocol_version(),
                     "\"; the host offered [", absl::StrJoin(offered, ", "), "]"));
  }
  if (response.controllers_size() == 0) {
    return absl::InvalidArgumentError("DescribeResponse.controllers: at least one is required");
  }
  if (response.controllers_size() > limits.max_controllers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DescribeResponse.controllers: ", response.controllers_size(),
        " controllers; the host's limit is ", limits.max_controllers,
        " per plugin (raise it with spec.plugins[].maxControllers in the operator file)"));
  }
  if (const size_t bytes = response.ByteSizeLong(); bytes > limits.max_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DescribeResponse: ", bytes, " bytes; the host's limit is ", limits.max_bytes, " bytes"));
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < response.controllers_size(); ++i) {
    const pluginpb::ControllerSpec& c = response.controllers(i);
    if (absl::Status s = ValidateController(c, i, in_effect, limits); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("DescribeResponse.", s.message()));
    }
    if (!names.insert(c.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("DescribeResponse.controllers[", i,
                                                     "].name: duplicate name \"", c.name(), "\""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<HandshakeResult> Handshake(const std::shared_ptr<grpc::Channel>& channel,
                                          const HandshakeOptions& options) {
  // gRPC deadlines are wall-clock; the handshake talks to a real process, so it uses real time.
  const absl::Time deadline = absl::Now() + options.deadline;
  const std::string who = absl::StrCat("plugin ", options.instance_name);

  pluginpb::DescribeRequest request;
  for (const std::string& v : options.protocol_versions) request.add_protocol_versions(v);
  for (pluginpb::Capability c : options.capabilities) request.add_capabilities(c);
  request.set_host_version(options.host_version);
  request.set_max_message_bytes(options.max_message_bytes);
  request.set_max_in_flight(options.max_in_flight);
  request.set_instance_name(options.instance_name);

  HandshakeResult result;
  {
    auto stub = pluginpb::ControllerPluginService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(deadline));
    context.set_wait_for_ready(true);  // the socket of a starting plugin may not exist yet
    HandshakeCall registered(options.canceller, &context);
    grpc::Status status = stub->Describe(&context, request, &result.describe);
    if (options.canceller != nullptr && options.canceller->cancelled()) {
      return absl::CancelledError(absl::StrCat(who, ": handshake cancelled"));
    }
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        const std::string connection = ConnectionError(channel);
        return absl::DeadlineExceededError(absl::StrCat(
            who, " did not answer Describe within ", absl::FormatDuration(options.deadline),
            connection.empty() ? "" : ": cannot connect: ", connection));
      }
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        // gRPC's answer for a service the server does not have: the plugin speaks another
        // protocol package (docs/protocol.md §10). The host tries every package it speaks,
        // newest first; this one speaks only v1alpha1, so there is nothing older to try.
        return absl::FailedPreconditionError(absl::StrCat(
            who, " does not serve ", kPluginServiceName, " (", status.error_message(),
            "): it speaks none of the protocol packages this host speaks (tried "
            "ctrlhost.plugin.v1alpha1); run it under a host that speaks its package, or "
            "rebuild it with an SDK for v1alpha1"));
      }
      return FromGrpc(status, absl::StrCat(who, ": Describe failed"));
    }
  }

  for (int value : result.describe.capabilities()) {
    if (value == pluginpb::CAPABILITY_UNSPECIFIED || !pluginpb::Capability_IsValid(value)) continue;
    const auto c = static_cast<pluginpb::Capability>(value);
    if (std::find(options.capabilities.begin(), options.capabilities.end(), c) ==
        options.capabilities.end()) {
      continue;
    }
    if (std::find(result.capabilities.begin(), result.capabilities.end(), c) ==
        result.capabilities.end()) {
      result.capabilities.push_back(c);
    }
  }
  std::sort(result.capabilities.begin(), result.capabilities.end());
  if (absl::Status s =
          ValidateDescribeResponse(request, result.describe, result.capabilities, options.limits);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
  }
  if (options.admit) {
    if (absl::Status s = options.admit(result.describe); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
    }
  }
  result.cancellation = std::find(result.capabilities.begin(), result.capabilities.end(),
                                  pluginpb::CAPABILITY_CANCELLATION) != result.capabilities.end();

  // A plugin may answer NOT_SERVING for a moment after its socket appears (a server that
  // marks itself serving only once started): asked again every 100 ms for kStartingGrace
  // (within the deadline) before it counts as refused.
  const absl::Time starting_until = std::min(deadline, absl::Now() + kStartingGrace);
  for (;;) {
    auto stub = health::Health::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(GrpcDeadline(deadline));
    health::HealthCheckRequest check;
    check.set_service(kPluginServiceName);
    health::HealthCheckResponse answer;
    HandshakeCall registered(options.canceller, &context);
    grpc::Status status = stub->Check(&context, check, &answer);
    if (options.canceller != nullptr && options.canceller->cancelled()) {
      return absl::CancelledError(absl::StrCat(who, ": handshake cancelled"));
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::DeadlineExceededError(absl::StrCat(
          who, " did not answer the health check within ", absl::FormatDuration(options.deadline)));
    }
    if (!status.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          who, ": grpc.health.v1.Health/Check for ", kPluginServiceName, " failed: ",
          status.error_message(), " (gRPC code ", static_cast<int>(status.error_code()), ")"));
    }
    if (answer.status() == health::HealthCheckResponse::SERVING) break;
    if (absl::Now() + absl::Milliseconds(100) >= starting_until) {
      // Not a refusal: a plugin that is not serving now (a remote one still draining, say)
      // may serve later; the supervisor retries with backoff.
      return absl::UnavailableError(
          absl::StrCat(who, ": health check answered ",
                       health::HealthCheckResponse::ServingStatus_Name(answer.status()),
                       ", not SERVING (for ", absl::FormatDuration(kStartingGrace), ")"));
    }
    if (options.canceller != nullptr && options.canceller->cancelled()) {
      return absl::CancelledError(absl::StrCat(who, ": handshake cancelled"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }

  result.session_options.max_in_flight = options.max_in_flight;
  result.session_options.max_message_bytes = options.max_message_bytes;
  result.session_options.cancellation = result.cancellation;
  result.session_options.capabilities = result.capabilities;
  result.session_options.instance_name = options.instance_name;
  return result;
}

}  // namespace ctrlhost::plugin
