#include "runtime/admin/validate.h"

#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ctrlhost/admin/v1alpha1/adminpb.h"

namespace ctrlhost::admin {
namespace {

// The range google.protobuf.Duration allows (about 10,000 years).
constexpr int64_t kMaxDurationSeconds = 315576000000;
constexpr int32_t kNanosPerSecond = 1000000000;

absl::Status Required(absl::string_view field) {
  return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
}

// execve() takes NUL-terminated strings: a NUL inside one would silently cut it short.
absl::Status NoNul(absl::string_view field, absl::string_view value) {
  if (value.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must not contain a NUL byte"));
  }
  return absl::OkStatus();
}

absl::Status ValidateExec(absl::string_view path, const adminpb::ExecSource& exec) {
  const std::string command = absl::StrCat(path, ".command");
  if (exec.command().empty()) return Required(command);
  if (absl::Status s = NoNul(command, exec.command()); !s.ok()) return s;
  for (int i = 0; i < exec.args_size(); ++i) {
    if (absl::Status s = NoNul(absl::StrCat(path, ".args[", i, "]"), exec.args(i)); !s.ok()) {
      return s;
    }
  }
  for (const auto& [key, value] : exec.env()) {
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ".env has an empty variable name"));
    }
    if (key.find('=') != std::string::npos || key.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ".env variable name \"",
                                                     absl::CEscape(key),
                                                     "\" must not contain '=' or a NUL byte"));
    }
    if (absl::Status s = NoNul(absl::StrCat(path, ".env[\"", key, "\"]"), value); !s.ok()) return s;
  }
  return NoNul(absl::StrCat(path, ".working_dir"), exec.working_dir());
}

absl::Status ValidateEndpoint(absl::string_view path, const adminpb::EndpointSource& endpoint) {
  if (endpoint.address().empty()) return Required(absl::StrCat(path, ".address"));
  if (endpoint.has_tls() &&
      endpoint.tls().cert_file().empty() != endpoint.tls().key_file().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".tls.cert_file and ", path,
                                                   ".tls.key_file go together: set both "
                                                   "for mutual TLS, or neither"));
  }
  return absl::OkStatus();
}

absl::Status ValidateSource(absl::string_view path, bool present,
                            const adminpb::PluginSource& source) {
  switch (present ? source.kind_case() : adminpb::PluginSource::KIND_NOT_SET) {
    case adminpb::PluginSource::kExec:
      return ValidateExec(absl::StrCat(path, ".exec"), source.exec());
    case adminpb::PluginSource::kEndpoint:
      return ValidateEndpoint(absl::StrCat(path, ".endpoint"), source.endpoint());
    case adminpb::PluginSource::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(path, " needs exactly one of exec or endpoint"));
}

absl::Status ValidateReadyTimeout(const adminpb::SwapPluginRequest& request) {
  if (!request.has_ready_timeout()) return absl::OkStatus();
  const int64_t seconds = request.ready_timeout().seconds();
  const int32_t nanos = request.ready_timeout().nanos();
  if (seconds > kMaxDurationSeconds || seconds < -kMaxDurationSeconds ||
      nanos <= -kNanosPerSecond || nanos >= kNanosPerSecond || (seconds > 0 && nanos < 0) ||
      (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwapPluginRequest.ready_timeout is not a valid Duration (seconds ", seconds,
                     ", nanos ", nanos, ")"));
  }
  if (seconds < 0 || nanos < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwapPluginRequest.ready_timeout must not be negative, got ",
                     absl::FormatDuration(absl::Seconds(seconds) + absl::Nanoseconds(nanos))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGetPluginRequest(const adminpb::GetPluginRequest& request) {
  if (request.operator_().empty()) return Required("GetPluginRequest.operator");
  if (request.plugin().empty()) return Required("GetPluginRequest.plugin");
  return absl::OkStatus();
}

absl::Status ValidateGetControllerRequest(const adminpb::GetControllerRequest& request) {
  if (request.operator_().empty()) return Required("GetControllerRequest.operator");
  if (request.plugin().empty()) return Required("GetControllerRequest.plugin");
  if (request.controller().empty()) return Required("GetControllerRequest.controller");
  return absl::OkStatus();
}

absl::Status ValidateSwapPluginRequest(const adminpb::SwapPluginRequest& request) {
  if (request.operator_().empty()) return Required("SwapPluginRequest.operator");
  if (request.plugin().empty()) return Required("SwapPluginRequest.plugin");
  if (absl::Status s = ValidateReadyTimeout(request); !s.ok()) return s;
  switch (request.action_case()) {
    case adminpb::SwapPluginRequest::kReplace:
      return ValidateSource("SwapPluginRequest.replace", true, request.replace());
    case adminpb::SwapPluginRequest::kStartCanary: {
      const adminpb::StartCanary& canary = request.start_canary();
      if (absl::Status s = ValidateSource("SwapPluginRequest.start_canary.source",
                                          canary.has_source(), canary.source());
          !s.ok()) {
        return s;
      }
      if (canary.percent() < 1 || canary.percent() > 99) {
        return absl::InvalidArgumentError(
            absl::StrCat("SwapPluginRequest.start_canary.percent must be between 1 and 99, got ",
                         canary.percent()));
      }
      return absl::OkStatus();
    }
    case adminpb::SwapPluginRequest::kStartShadow: {
      const adminpb::StartShadow& shadow = request.start_shadow();
      if (absl::Status s = ValidateSource("SwapPluginRequest.start_shadow.source",
                                          shadow.has_source(), shadow.source());
          !s.ok()) {
        return s;
      }
      if (shadow.percent() > 100) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SwapPluginRequest.start_shadow.percent must be between 1 and 100 (0: 100), got ",
            shadow.percent()));
      }
      if (shadow.max_in_flight() > 4096) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SwapPluginRequest.start_shadow.max_in_flight must be at most 4096 (0: 64), got ",
            shadow.max_in_flight()));
      }
      return absl::OkStatus();
    }
    case adminpb::SwapPluginRequest::kPromoteShadow: {
      const double min = request.promote_shadow().min_agreement();
      if (!(min >= 0 && min <= 1)) {  // NaN too
        return absl::InvalidArgumentError(absl::StrCat(
            "SwapPluginRequest.promote_shadow.min_agreement must be between 0 and 1, got ", min));
      }
      return absl::OkStatus();
    }
    case adminpb::SwapPluginRequest::kPromoteCanary:
    case adminpb::SwapPluginRequest::kAbortCanary:
    case adminpb::SwapPluginRequest::kStopShadow:
      return absl::OkStatus();
    case adminpb::SwapPluginRequest::ACTION_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "SwapPluginRequest.action is required: one of replace, start_canary, promote_canary, "
      "abort_canary, start_shadow, stop_shadow or promote_shadow");
}

}  // namespace ctrlhost::admin
