#include "runtime/kube/api_status.h"

#include <cstdint>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ctrlhost::kube {
namespace {

// Type URL of the payload that carries the Kubernetes code, reason and details. Its value is a
// compact JSON object {"code":404,"reason":"NotFound","details":{...}}; the message is the
// absl::Status message itself.
constexpr absl::string_view kPayloadTypeUrl = "type.ctrlhost.dev/kube.Status";

// The longest piece of a non-Status response body kept in a client-side message.
constexpr size_t kMaxBodyInMessage = 512;

using OrderedJson = nlohmann::ordered_json;

std::string Qualified(absl::string_view name, absl::string_view group) {
  if (group.empty()) return std::string(name);
  return absl::StrCat(name, ".", group);
}

// Canonical code for a Kubernetes reason; nullopt when the reason is unknown or empty.
std::optional<absl::StatusCode> CodeForReason(absl::string_view reason) {
  if (reason == "NotFound") return absl::StatusCode::kNotFound;
  if (reason == "AlreadyExists") return absl::StatusCode::kAlreadyExists;
  if (reason == "Conflict") return absl::StatusCode::kAborted;
  if (reason == "Invalid" || reason == "BadRequest") return absl::StatusCode::kInvalidArgument;
  if (reason == "Gone" || reason == "Expired") return absl::StatusCode::kOutOfRange;
  if (reason == "UnsupportedMediaType" || reason == "NotAcceptable" ||
      reason == "MethodNotAllowed") {
    return absl::StatusCode::kUnimplemented;
  }
  if (reason == "RequestEntityTooLarge" || reason == "TooManyRequests") {
    return absl::StatusCode::kResourceExhausted;
  }
  if (reason == "Unauthorized") return absl::StatusCode::kUnauthenticated;
  if (reason == "Forbidden") return absl::StatusCode::kPermissionDenied;
  if (reason == "Timeout" || reason == "ServerTimeout") {
    return absl::StatusCode::kDeadlineExceeded;
  }
  if (reason == "ServiceUnavailable") return absl::StatusCode::kUnavailable;
  if (reason == "InternalError") return absl::StatusCode::kInternal;
  return std::nullopt;
}

// Canonical code for an HTTP status code, used when the reason does not decide.
absl::StatusCode CodeForHttp(int http_code) {
  switch (http_code) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
    case 406:
    case 415:
    case 501:
      return absl::StatusCode::kUnimplemented;
    case 408:
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    case 409:
      return absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 412:
      return absl::StatusCode::kFailedPrecondition;
    case 413:
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    case 502:
    case 503:
      return absl::StatusCode::kUnavailable;
    default:
      break;
  }
  if (http_code >= 500) return absl::StatusCode::kInternal;
  if (http_code >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

// The reason a server sends with a bare HTTP code (apimachinery's reasonForCode).
std::string ReasonForHttp(int http_code) {
  switch (http_code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

struct KubeInfo {
  int code = 500;
  std::string reason;
  StatusDetails details;
};

// HTTP code and reason for a status that carries no payload.
KubeInfo InfoForCanonical(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return {200, "", {}};
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return {400, "BadRequest", {}};
    case absl::StatusCode::kNotFound:
      return {404, "NotFound", {}};
    case absl::StatusCode::kAlreadyExists:
      return {409, "AlreadyExists", {}};
    case absl::StatusCode::kAborted:
      return {409, "Conflict", {}};
    case absl::StatusCode::kOutOfRange:
      return {410, "Expired", {}};
    case absl::StatusCode::kUnimplemented:
      return {405, "MethodNotAllowed", {}};
    case absl::StatusCode::kResourceExhausted:
      return {429, "TooManyRequests", {}};
    case absl::StatusCode::kUnauthenticated:
      return {401, "Unauthorized", {}};
    case absl::StatusCode::kPermissionDenied:
      return {403, "Forbidden", {}};
    case absl::StatusCode::kDeadlineExceeded:
      return {504, "Timeout", {}};
    case absl::StatusCode::kUnavailable:
      return {503, "ServiceUnavailable", {}};
    default:
      return {500, "InternalError", {}};
  }
}

OrderedJson DetailsToJson(const StatusDetails& d) {
  OrderedJson out = OrderedJson::object();
  if (!d.name.empty()) out["name"] = d.name;
  if (!d.group.empty()) out["group"] = d.group;
  if (!d.kind.empty()) out["kind"] = d.kind;
  if (!d.uid.empty()) out["uid"] = d.uid;
  if (!d.causes.empty()) {
    OrderedJson causes = OrderedJson::array();
    for (const StatusCause& c : d.causes) {
      OrderedJson cause = OrderedJson::object();
      if (!c.reason.empty()) cause["reason"] = c.reason;
      if (!c.message.empty()) cause["message"] = c.message;
      if (!c.field.empty()) cause["field"] = c.field;
      causes.push_back(std::move(cause));
    }
    out["causes"] = std::move(causes);
  }
  if (d.retry_after_seconds != 0) out["retryAfterSeconds"] = d.retry_after_seconds;
  return out;
}

bool DetailsEmpty(const StatusDetails& d) {
  return d.name.empty() && d.group.empty() && d.kind.empty() && d.uid.empty() && d.causes.empty() &&
         d.retry_after_seconds == 0;
}

std::string StringField(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// Lenient: a server's details with wrong types lose those fields rather than failing.
StatusDetails DetailsFromJson(const nlohmann::json& j) {
  StatusDetails d;
  if (!j.is_object()) return d;
  d.name = StringField(j, "name");
  d.group = StringField(j, "group");
  d.kind = StringField(j, "kind");
  d.uid = StringField(j, "uid");
  auto causes = j.find("causes");
  if (causes != j.end() && causes->is_array()) {
    for (const nlohmann::json& c : *causes) {
      if (!c.is_object()) continue;
      d.causes.push_back(
          {StringField(c, "reason"), StringField(c, "message"), StringField(c, "field")});
    }
  }
  auto retry = j.find("retryAfterSeconds");
  if (retry != j.end() && retry->is_number_integer()) {
    int64_t value = retry->get<int64_t>();
    if (value > 0 && value < INT32_MAX) d.retry_after_seconds = static_cast<int>(value);
  }
  return d;
}

std::optional<KubeInfo> PayloadInfo(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kPayloadTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(std::string(*payload), nullptr,
                                           /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  KubeInfo info;
  auto code = j.find("code");
  if (code != j.end() && code->is_number_integer()) info.code = code->get<int>();
  info.reason = StringField(j, "reason");
  auto details = j.find("details");
  if (details != j.end()) info.details = DetailsFromJson(*details);
  return info;
}

KubeInfo Info(const absl::Status& status) {
  std::optional<KubeInfo> info = PayloadInfo(status);
  if (info.has_value()) return *std::move(info);
  return InfoForCanonical(status.code());
}

// The message a Go client builds for an error response whose body is not a Status
// (client-go's NewGenericServerResponse), used when the body is empty.
std::string GenericMessage(int http_code) {
  switch (http_code) {
    case 400:
      return "the server rejected our request for an unknown reason";
    case 401:
      return "the server has asked for the client to provide credentials";
    case 403:
      return "the server does not allow access to the requested resource";
    case 404:
      return "the server could not find the requested resource";
    case 405:
      return "the server does not allow this method on the requested resource";
    case 406:
      return "the server was unable to respond with a content type that the client supports";
    case 409:
      return "the server reported a conflict";
    case 410:
      return "the server reported that the requested resource is gone";
    case 413:
      return "the server has rejected the request because the request entity is too large";
    case 415:
      return "the server does not support the media type transmitted in the request";
    case 422:
      return "the server rejected our request due to an error in our request";
    case 429:
      return "the server has received too many requests and has asked us to try again later";
    case 503:
      return "the server is currently unable to handle the request";
    case 504:
      return "the server was unable to return a response in the time allotted, but may still "
             "be processing the request";
    default:
      if (http_code >= 500) {
        return "an error on the server has prevented the request from succeeding";
      }
      return absl::StrCat("the server responded with the status code ", http_code,
                          " but did not return more information");
  }
}

}  // namespace

absl::Status ApiError(int http_code, absl::string_view reason, absl::string_view message,
                      StatusDetails details) {
  std::optional<absl::StatusCode> code = CodeForReason(reason);
  absl::StatusCode canonical = code.has_value() ? *code : CodeForHttp(http_code);
  if (canonical == absl::StatusCode::kOk) canonical = absl::StatusCode::kUnknown;
  absl::Status status(canonical, message);
  OrderedJson payload = OrderedJson::object();
  payload["code"] = http_code;
  payload["reason"] = std::string(reason);
  if (!DetailsEmpty(details)) payload["details"] = DetailsToJson(details);
  status.SetPayload(kPayloadTypeUrl, absl::Cord(payload.dump(
                                         -1, ' ', false, OrderedJson::error_handler_t::replace)));
  return status;
}

absl::Status NotFoundError(absl::string_view group, absl::string_view resource,
                           absl::string_view name) {
  StatusDetails details;
  details.name = std::string(name);
  details.group = std::string(group);
  details.kind = std::string(resource);
  return ApiError(404, "NotFound",
                  absl::StrCat(Qualified(resource, group), " ", GoQuote(name), " not found"),
                  std::move(details));
}

absl::Status AlreadyExistsError(absl::string_view group, absl::string_view resource,
                                absl::string_view name) {
  StatusDetails details;
  details.name = std::string(name);
  details.group = std::string(group);
  details.kind = std::string(resource);
  return ApiError(409, "AlreadyExists",
                  absl::StrCat(Qualified(resource, group), " ", GoQuote(name), " already exists"),
                  std::move(details));
}

absl::Status ConflictError(absl::string_view group, absl::string_view resource,
                           absl::string_view name, absl::string_view why) {
  StatusDetails details;
  details.name = std::string(name);
  details.group = std::string(group);
  details.kind = std::string(resource);
  return ApiError(409, "Conflict",
                  absl::StrCat("Operation cannot be fulfilled on ", Qualified(resource, group), " ",
                               GoQuote(name), ": ", why),
                  std::move(details));
}

absl::Status InvalidError(absl::string_view group, absl::string_view kind, absl::string_view name,
                          std::vector<StatusCause> causes) {
  // Like field.ErrorList.ToAggregate: one message per distinct error, in order, bracketed when
  // there are several.
  std::vector<std::string> messages;
  std::set<std::string> seen;
  for (const StatusCause& cause : causes) {
    std::string text =
        cause.field.empty() ? cause.message : absl::StrCat(cause.field, ": ", cause.message);
    if (seen.insert(text).second) messages.push_back(std::move(text));
  }
  std::string message = absl::StrCat(Qualified(kind, group), " ", GoQuote(name), " is invalid");
  if (messages.size() == 1) {
    absl::StrAppend(&message, ": ", messages[0]);
  } else if (messages.size() > 1) {
    absl::StrAppend(&message, ": [", absl::StrJoin(messages, ", "), "]");
  }
  StatusDetails details;
  details.name = std::string(name);
  details.group = std::string(group);
  details.kind = std::string(kind);
  details.causes = std::move(causes);
  return ApiError(422, "Invalid", message, std::move(details));
}

absl::Status BadRequestError(absl::string_view message) {
  return ApiError(400, "BadRequest", message);
}

absl::Status UnauthorizedError(absl::string_view message) {
  return ApiError(401, "Unauthorized", message.empty() ? "not authorized" : message);
}

absl::Status ForbiddenError(absl::string_view message) {
  return ApiError(403, "Forbidden", message);
}

absl::Status MethodNotAllowedError(absl::string_view message) {
  return ApiError(405, "MethodNotAllowed", message);
}

absl::Status NotAcceptableError(absl::string_view message) {
  return ApiError(406, "NotAcceptable", message);
}

absl::Status GoneError(absl::string_view message) { return ApiError(410, "Expired", message); }

absl::Status RequestEntityTooLargeError(absl::string_view message) {
  return ApiError(413, "RequestEntityTooLarge", message);
}

absl::Status UnsupportedMediaTypeError(absl::string_view message) {
  return ApiError(415, "UnsupportedMediaType", message);
}

absl::Status TooManyRequestsError(absl::string_view message, int retry_after_seconds) {
  StatusDetails details;
  details.retry_after_seconds = retry_after_seconds > 0 ? retry_after_seconds : 0;
  return ApiError(429, "TooManyRequests", message, std::move(details));
}

absl::Status InternalError(absl::string_view message) {
  // apimachinery's NewInternalError: the message is prefixed and repeated as the only cause.
  StatusDetails details;
  details.causes.push_back({"", std::string(message), ""});
  return ApiError(500, "InternalError", absl::StrCat("Internal error occurred: ", message),
                  std::move(details));
}

absl::Status ServiceUnavailableError(absl::string_view message) {
  return ApiError(503, "ServiceUnavailable", message);
}

absl::Status TimeoutError(absl::string_view message) { return ApiError(504, "Timeout", message); }

int HttpCode(const absl::Status& status) { return Info(status).code; }

std::string Reason(const absl::Status& status) { return Info(status).reason; }

StatusDetails Details(const absl::Status& status) { return Info(status).details; }

bool IsNotFound(const absl::Status& status) { return Reason(status) == "NotFound"; }

bool IsAlreadyExists(const absl::Status& status) { return Reason(status) == "AlreadyExists"; }

bool IsConflict(const absl::Status& status) { return Reason(status) == "Conflict"; }

bool IsInvalid(const absl::Status& status) { return Reason(status) == "Invalid"; }

bool IsGone(const absl::Status& status) {
  KubeInfo info = Info(status);
  return info.code == 410 || info.reason == "Expired" || info.reason == "Gone";
}

bool IsTooManyRequests(const absl::Status& status) {
  KubeInfo info = Info(status);
  return info.code == 429 || info.reason == "TooManyRequests";
}

namespace {

OrderedJson ToOrderedStatusJson(const absl::Status& status) {
  KubeInfo info = Info(status);
  OrderedJson out = OrderedJson::object();
  out["kind"] = "Status";
  out["apiVersion"] = "v1";
  out["metadata"] = OrderedJson::object();
  out["status"] = status.ok() ? "Success" : "Failure";
  if (!status.message().empty()) out["message"] = std::string(status.message());
  if (!info.reason.empty()) out["reason"] = info.reason;
  if (!DetailsEmpty(info.details)) out["details"] = DetailsToJson(info.details);
  out["code"] = info.code;
  return out;
}

}  // namespace

nlohmann::json ToStatusJson(const absl::Status& status) {
  return nlohmann::json::parse(
      ToOrderedStatusJson(status).dump(-1, ' ', false, OrderedJson::error_handler_t::replace));
}

std::pair<int, std::string> ToHttpResponse(const absl::Status& status) {
  OrderedJson body = ToOrderedStatusJson(status);
  int code = body["code"].get<int>();
  return {code, body.dump(-1, ' ', false, OrderedJson::error_handler_t::replace)};
}

absl::Status FromHttpResponse(int http_code, absl::string_view body) {
  if (http_code >= 200 && http_code < 300) return absl::OkStatus();
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_object() && StringField(j, "kind") == "Status") {
    if (StringField(j, "status") == "Success") return absl::OkStatus();
    int code = http_code;
    auto code_it = j.find("code");
    if (code_it != j.end() && code_it->is_number_integer()) {
      int64_t value = code_it->get<int64_t>();
      if (value >= 100 && value <= 599) code = static_cast<int>(value);
    }
    StatusDetails details;
    auto details_it = j.find("details");
    if (details_it != j.end()) details = DetailsFromJson(*details_it);
    return ApiError(code, StringField(j, "reason"), StringField(j, "message"), std::move(details));
  }
  std::string message(absl::StripAsciiWhitespace(body.substr(0, kMaxBodyInMessage)));
  if (message.empty()) message = GenericMessage(http_code);
  return ApiError(http_code, ReasonForHttp(http_code), message);
}

}  // namespace ctrlhost::kube
