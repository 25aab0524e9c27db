// Kubernetes API errors carried as absl::Status.
//
// A Kubernetes error is an HTTP code plus a `metav1.Status` body (reason, message, details with
// field causes). Inside ctrlhost it travels as an absl::Status with the closest canonical code
// and the Kubernetes specifics in a payload, so the embedded API server can answer with the
// exact body and the client can turn a server's body back into the same absl::Status.
//
//   return kube::NotFoundError("apps", "deployments", "web");
//   ...
//   if (kube::IsNotFound(status)) { ... }
//   auto [code, body] = kube::ToHttpResponse(status);   // 404, {"kind":"Status",...}
//
// Canonical codes: NotFound→kNotFound, AlreadyExists→kAlreadyExists, Conflict→kAborted,
// Invalid/BadRequest→kInvalidArgument, Gone/Expired→kOutOfRange,
// UnsupportedMediaType/NotAcceptable/MethodNotAllowed→kUnimplemented,
// RequestEntityTooLarge/TooManyRequests→kResourceExhausted, Unauthorized→kUnauthenticated,
// Forbidden→kPermissionDenied, Timeout→kDeadlineExceeded, ServiceUnavailable→kUnavailable,
// InternalError→kInternal. A status without the payload maps back by canonical code.
#ifndef CTRLHOST_RUNTIME_KUBE_API_STATUS_H_
#define CTRLHOST_RUNTIME_KUBE_API_STATUS_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::kube {

// One entry of metav1.StatusDetails.causes, e.g. {"FieldValueInvalid", "must be ...",
// "metadata.name"}.
struct StatusCause {
  std::string reason;
  std::string message;
  std::string field;

  bool operator==(const StatusCause& other) const {
    return reason == other.reason && message == other.message && field == other.field;
  }
};

// Field errors, the StatusCause form of apimachinery's field.Error. The message is the error
// body without the field path, e.g. `Invalid value: "Bad_Name": a lowercase RFC 1123 ...`;
// InvalidError prefixes the field when it builds the overall message.
//   causes.push_back(kube::FieldInvalid("metadata.name", name, "must be ..."));
StatusCause FieldInvalid(absl::string_view field, const nlohmann::json& value,
                         absl::string_view detail);
StatusCause FieldRequired(absl::string_view field, absl::string_view detail);
StatusCause FieldForbidden(absl::string_view field, absl::string_view detail);
StatusCause FieldDuplicate(absl::string_view field, const nlohmann::json& value);
StatusCause FieldNotFound(absl::string_view field, const nlohmann::json& value);
StatusCause FieldNotSupported(absl::string_view field, const nlohmann::json& value,
                              const std::vector<std::string>& supported);
StatusCause FieldTooLong(absl::string_view field, size_t max_length);
StatusCause FieldTooMany(absl::string_view field, size_t actual, size_t max_items);
StatusCause FieldInternal(absl::string_view field, absl::string_view detail);

// Quotes like Go's %q (used in every Kubernetes message that names a value).
std::string GoQuote(absl::string_view text);

// metav1.StatusDetails.
struct StatusDetails {
  std::string name;
  std::string group;
  std::string kind;  // the resource (plural) or kind, as the server reports it
  std::string uid;
  std::vector<StatusCause> causes;
  int retry_after_seconds = 0;
};

// The general form: an HTTP code, a Kubernetes reason ("NotFound", "Conflict", ...; empty for
// a bare code) and a message, with optional details.
absl::Status ApiError(int http_code, absl::string_view reason, absl::string_view message,
                      StatusDetails details = {});

// Factories with the messages a real kube-apiserver uses.
// 404 `<resource>.<group> "<name>" not found` (group omitted for the core group).
absl::Status NotFoundError(absl::string_view group, absl::string_view resource,
                           absl::string_view name);
// 409 AlreadyExists `<resource>.<group> "<name>" already exists`.
absl::Status AlreadyExistsError(absl::string_view group, absl::string_view resource,
                                absl::string_view name);
// 409 Conflict `Operation cannot be fulfilled on <resource>.<group> "<name>": <why>`.
absl::Status ConflictError(absl::string_view group, absl::string_view resource,
                           absl::string_view name, absl::string_view why);
// The `why` of an optimistic-concurrency conflict.
inline constexpr absl::string_view kObjectModified =
    "the object has been modified; please apply your changes to the latest version and try "
    "again";
// 422 Invalid `<Kind>.<group> "<name>" is invalid: <field>: <message>, ...`.
absl::Status InvalidError(absl::string_view group, absl::string_view kind, absl::string_view name,
                          std::vector<StatusCause> causes);
absl::Status BadRequestError(absl::string_view message);             // 400 BadRequest
absl::Status UnauthorizedError(absl::string_view message);           // 401 Unauthorized
absl::Status ForbiddenError(absl::string_view message);              // 403 Forbidden
absl::Status MethodNotAllowedError(absl::string_view message);       // 405 MethodNotAllowed
absl::Status NotAcceptableError(absl::string_view message);          // 406 NotAcceptable
absl::Status GoneError(absl::string_view message);                   // 410 Expired
absl::Status RequestEntityTooLargeError(absl::string_view message);  // 413
absl::Status UnsupportedMediaTypeError(absl::string_view message);   // 415
absl::Status TooManyRequestsError(absl::string_view message, int retry_after_seconds);  // 429
absl::Status InternalError(absl::string_view message);            // 500 InternalError
absl::Status ServiceUnavailableError(absl::string_view message);  // 503
absl::Status TimeoutError(absl::string_view message);             // 504 Timeout

// The HTTP code and reason of a status (from the payload, else from the canonical code).
int HttpCode(const absl::Status& status);
std::string Reason(const absl::Status& status);
StatusDetails Details(const absl::Status& status);

// absl has IsNotFound / IsAlreadyExists too, and argument-dependent lookup finds them: always
// call these qualified (`kube::IsNotFound(s)`), also inside namespace ctrlhost::kube. Unlike
// absl's, they look at the Kubernetes reason, so a 409 Conflict is never "already exists".
bool IsNotFound(const absl::Status& status);
bool IsAlreadyExists(const absl::Status& status);
bool IsConflict(const absl::Status& status);  // reason Conflict (not AlreadyExists)
bool IsInvalid(const absl::Status& status);
bool IsGone(const absl::Status& status);  // 410, reason Expired or Gone
bool IsTooManyRequests(const absl::Status& status);

// The metav1.Status object for a non-OK status:
// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":...,
//  "reason":...,"details":{...},"code":...}
nlohmann::json ToStatusJson(const absl::Status& status);
// Code and serialized body to send.
std::pair<int, std::string> ToHttpResponse(const absl::Status& status);

// Client side: the absl::Status for an HTTP error response. Uses the body when it is a
// metav1.Status, else the code and the first bytes of the body as the message.
absl::Status FromHttpResponse(int http_code, absl::string_view body);

}  // namespace ctrlhost::kube

#endif  // CTRLHOST_RUNTIME_KUBE_API_STATUS_H_
