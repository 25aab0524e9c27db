#include "runtime/kube/api_status.h"

#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::kube {
namespace {

using ::testing::HasSubstr;

TEST(ApiStatusTest, NotFoundCoreGroup) {
  absl::Status s = NotFoundError("", "configmaps", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "configmaps \"x\" not found");
  EXPECT_EQ(HttpCode(s), 404);
  EXPECT_EQ(Reason(s), "NotFound");
  EXPECT_TRUE(kube::IsNotFound(s));
  EXPECT_FALSE(IsConflict(s));
  auto [code, body] = ToHttpResponse(s);
  EXPECT_EQ(code, 404);
  EXPECT_EQ(body, R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
                  R"("message":"configmaps \"x\" not found","reason":"NotFound",)"
                  R"("details":{"name":"x","kind":"configmaps"},"code":404})");
}

TEST(ApiStatusTest, NotFoundNamedGroup) {
  absl::Status s = NotFoundError("apps", "deployments", "web");
  EXPECT_EQ(s.message(), "deployments.apps \"web\" not found");
  StatusDetails d = Details(s);
  EXPECT_EQ(d.group, "apps");
  EXPECT_EQ(d.kind, "deployments");
  EXPECT_EQ(d.name, "web");
  nlohmann::json j = ToStatusJson(s);
  EXPECT_EQ(j["details"]["group"], "apps");
  EXPECT_EQ(j["code"], 404);
}

TEST(ApiStatusTest, AlreadyExistsAndConflict) {
  absl::Status exists = AlreadyExistsError("", "configmaps", "x");
  EXPECT_EQ(exists.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(exists.message(), "configmaps \"x\" already exists");
  EXPECT_EQ(HttpCode(exists), 409);
  EXPECT_TRUE(kube::IsAlreadyExists(exists));
  EXPECT_FALSE(IsConflict(exists));

  absl::Status conflict = ConflictError("apps", "deployments", "web", kObjectModified);
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(conflict.message(),
            "Operation cannot be fulfilled on deployments.apps \"web\": the object has been "
            "modified; please apply your changes to the latest version and try again");
  EXPECT_EQ(HttpCode(conflict), 409);
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_FALSE(kube::IsAlreadyExists(conflict));
}

TEST(ApiStatusTest, InvalidSingleCause) {
  absl::Status s = InvalidError(
      "", "ConfigMap", "Bad_Name",
      {FieldInvalid("metadata.name", "Bad_Name",
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                    "characters, '-' or '.'")});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a "
            "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.'");
  EXPECT_EQ(HttpCode(s), 422);
  EXPECT_TRUE(IsInvalid(s));
  StatusDetails d = Details(s);
  ASSERT_EQ(d.causes.size(), 1u);
  EXPECT_EQ(d.causes[0].reason, "FieldValueInvalid");
  EXPECT_EQ(d.causes[0].field, "metadata.name");
  EXPECT_THAT(d.causes[0].message, ::testing::StartsWith("Invalid value: \"Bad_Name\": "));
  nlohmann::json j = ToStatusJson(s);
  EXPECT_EQ(j["details"]["kind"], "ConfigMap");
  EXPECT_EQ(j["details"]["causes"][0]["reason"], "FieldValueInvalid");
}

TEST(ApiStatusTest, InvalidManyCausesAreBracketedAndDeduplicated) {
  absl::Status s =
      InvalidError("apps", "Deployment", "web",
                   {FieldRequired("spec.selector", ""), FieldRequired("spec.selector", ""),
                    FieldInvalid("spec.replicas", -1, "must be >= 0")});
  EXPECT_EQ(s.message(),
            "Deployment.apps \"web\" is invalid: [spec.selector: Required value, "
            "spec.replicas: Invalid value: -1: must be >= 0]");
  EXPECT_EQ(Details(s).causes.size(), 3u);  // causes are kept as given
}

TEST(ApiStatusTest, InvalidWithoutCauses) {
  EXPECT_EQ(InvalidError("", "Secret", "s", {}).message(), "Secret \"s\" is invalid");
}

TEST(ApiStatusTest, FieldErrorBodies) {
  EXPECT_EQ(FieldRequired("a", "").message, "Required value");
  EXPECT_EQ(FieldRequired("a", "name or generateName is required").message,
            "Required value: name or generateName is required");
  EXPECT_EQ(FieldForbidden("a", "not allowed").message, "Forbidden: not allowed");
  EXPECT_EQ(FieldDuplicate("a", "x").message, "Duplicate value: \"x\"");
  EXPECT_EQ(FieldNotFound("a", "x").message, "Not found: \"x\"");
  EXPECT_EQ(FieldNotSupported("a", "Foo", {"In", "NotIn"}).message,
            "Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\"");
  EXPECT_EQ(FieldTooLong("a", 63).message, "Too long: may not be longer than 63");
  EXPECT_EQ(FieldTooMany("a", 5, 3).message, "Too many: 5: must have at most 3 items");
  EXPECT_EQ(FieldInternal("a", "boom").message, "Internal error: boom");
  EXPECT_EQ(FieldInvalid("a", true, "x").message, "Invalid value: true: x");
  EXPECT_EQ(FieldInvalid("a", nullptr, "x").message, "Invalid value: \"null\": x");
  EXPECT_EQ(FieldInvalid("a", "x", "").message, "Invalid value: \"x\"");
  EXPECT_EQ(FieldInvalid("a", "x", "").reason, "FieldValueInvalid");
  EXPECT_EQ(FieldTooLong("a", 1).reason, "FieldValueTooLong");
}

TEST(ApiStatusTest, GoQuoteEscapes) {
  EXPECT_EQ(GoQuote("plain"), "\"plain\"");
  EXPECT_EQ(GoQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(GoQuote("l1\nl2\t\x01"), "\"l1\\nl2\\t\\x01\"");
  EXPECT_EQ(GoQuote("h\xc3\xa9"), "\"h\xc3\xa9\"");
}

TEST(ApiStatusTest, SimpleFactoriesHaveCodesAndReasons) {
  struct Case {
    absl::Status status;
    absl::StatusCode canonical;
    int http;
    std::string reason;
  };
  std::vector<Case> cases = {
      {BadRequestError("m"), absl::StatusCode::kInvalidArgument, 400, "BadRequest"},
      {UnauthorizedError("m"), absl::StatusCode::kUnauthenticated, 401, "Unauthorized"},
      {ForbiddenError("m"), absl::StatusCode::kPermissionDenied, 403, "Forbidden"},
      {MethodNotAllowedError("m"), absl::StatusCode::kUnimplemented, 405, "MethodNotAllowed"},
      {NotAcceptableError("m"), absl::StatusCode::kUnimplemented, 406, "NotAcceptable"},
      {GoneError("m"), absl::StatusCode::kOutOfRange, 410, "Expired"},
      {RequestEntityTooLargeError("m"), absl::StatusCode::kResourceExhausted, 413,
       "RequestEntityTooLarge"},
      {UnsupportedMediaTypeError("m"), absl::StatusCode::kUnimplemented, 415,
       "UnsupportedMediaType"},
      {TooManyRequestsError("m", 3), absl::StatusCode::kResourceExhausted, 429, "TooManyRequests"},
      {InternalError("m"), absl::StatusCode::kInternal, 500, "InternalError"},
      {ServiceUnavailableError("m"), absl::StatusCode::kUnavailable, 503, "ServiceUnavailable"},
      {TimeoutError("m"), absl::StatusCode::kDeadlineExceeded, 504, "Timeout"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    EXPECT_EQ(c.status.code(), c.canonical);
    EXPECT_EQ(HttpCode(c.status), c.http);
    EXPECT_EQ(Reason(c.status), c.reason);
    EXPECT_EQ(ToHttpResponse(c.status).first, c.http);
  }
  EXPECT_TRUE(IsGone(GoneError("too old resource version: 1 (5)")));
  EXPECT_TRUE(IsTooManyRequests(TooManyRequestsError("slow down", 1)));
  EXPECT_EQ(Details(TooManyRequestsError("slow down", 7)).retry_after_seconds, 7);
  EXPECT_EQ(InternalError("disk full").message(), "Internal error occurred: disk full");
  EXPECT_EQ(UnauthorizedError("").message(), "not authorized");
}

TEST(ApiStatusTest, UnauthorizedBodyMatchesServer) {
  EXPECT_EQ(ToHttpResponse(UnauthorizedError("Unauthorized")).second,
            R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
            R"("message":"Unauthorized","reason":"Unauthorized","code":401})");
}

// Every factory survives server → HTTP → client unchanged, payload included.
TEST(ApiStatusTest, RoundTripEveryFactory) {
  std::vector<absl::Status> statuses = {
      NotFoundError("", "configmaps", "x"),
      NotFoundError("apps", "deployments", "web"),
      AlreadyExistsError("", "namespaces", "default"),
      ConflictError("coordination.k8s.io", "leases", "l", kObjectModified),
      InvalidError("", "ConfigMap", "Bad_Name",
                   {FieldInvalid("metadata.name", "Bad_Name", "bad"),
                    FieldRequired("metadata.namespace", "")}),
      BadRequestError("unable to parse requirement"),
      UnauthorizedError("Unauthorized"),
      ForbiddenError("forbidden"),
      MethodNotAllowedError("no"),
      NotAcceptableError("only json"),
      GoneError("too old resource version: 1 (5)"),
      RequestEntityTooLargeError("too big"),
      UnsupportedMediaTypeError("the body of the request was in an unknown format"),
      TooManyRequestsError("slow down", 2),
      InternalError("boom"),
      ServiceUnavailableError("starting"),
      TimeoutError("timed out"),
      ApiError(418, "Teapot", "short and stout"),
  };
  for (const absl::Status& s : statuses) {
    SCOPED_TRACE(s.ToString());
    auto [code, body] = ToHttpResponse(s);
    absl::Status back = FromHttpResponse(code, body);
    EXPECT_EQ(back, s);
    EXPECT_EQ(ToHttpResponse(back).second, body);
  }
}

TEST(ApiStatusTest, StatusWithoutPayloadMapsByCanonicalCode) {
  EXPECT_EQ(HttpCode(absl::NotFoundError("gone")), 404);
  EXPECT_EQ(Reason(absl::NotFoundError("gone")), "NotFound");
  EXPECT_TRUE(kube::IsNotFound(absl::NotFoundError("gone")));
  EXPECT_EQ(HttpCode(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpCode(absl::AbortedError("x")), 409);
  EXPECT_TRUE(IsConflict(absl::AbortedError("x")));
  EXPECT_EQ(HttpCode(absl::AlreadyExistsError("x")), 409);
  EXPECT_EQ(HttpCode(absl::OutOfRangeError("x")), 410);
  EXPECT_EQ(HttpCode(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpCode(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpCode(absl::PermissionDeniedError("x")), 403);
  EXPECT_EQ(HttpCode(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(HttpCode(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpCode(absl::UnimplementedError("x")), 405);
  EXPECT_EQ(HttpCode(absl::InternalError("x")), 500);
  EXPECT_EQ(HttpCode(absl::UnknownError("x")), 500);
  auto [code, body] = ToHttpResponse(absl::InternalError("db"));
  EXPECT_EQ(code, 500);
  EXPECT_EQ(body, R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
                  R"("message":"db","reason":"InternalError","code":500})");
}

TEST(ApiStatusTest, OkStatusIsSuccess) {
  nlohmann::json j = ToStatusJson(absl::OkStatus());
  EXPECT_EQ(j["status"], "Success");
  EXPECT_EQ(j["code"], 200);
  EXPECT_TRUE(FromHttpResponse(200, "{}").ok());
  EXPECT_TRUE(
      FromHttpResponse(500, R"({"kind":"Status","apiVersion":"v1","status":"Success","code":200})")
          .ok());
}

TEST(ApiStatusTest, FromRealServerBody) {
  // Verbatim from kube-apiserver.
  absl::Status s = FromHttpResponse(
      404, R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
           R"("deployments.apps \"web\" not found","reason":"NotFound","details":{"name":"web",)"
           R"("group":"apps","kind":"deployments"},"code":404})");
  EXPECT_EQ(s, NotFoundError("apps", "deployments", "web"));
}

TEST(ApiStatusTest, FromNonStatusBodies) {
  absl::Status s = FromHttpResponse(404, "404 page not found\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "404 page not found");
  EXPECT_TRUE(kube::IsNotFound(s));

  absl::Status empty = FromHttpResponse(503, "");
  EXPECT_EQ(empty.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(empty.message(), "the server is currently unable to handle the request");

  absl::Status teapot = FromHttpResponse(418, "");
  EXPECT_EQ(teapot.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(teapot.message()), HasSubstr("418"));
  EXPECT_EQ(HttpCode(teapot), 418);

  std::string huge(100000, 'x');
  EXPECT_LE(FromHttpResponse(500, huge).message().size(), 512u);

  // JSON that is not a Status, or a Status with wrong types, never throws.
  EXPECT_EQ(FromHttpResponse(409, R"({"kind":"ConfigMap"})").code(), absl::StatusCode::kAborted);
  absl::Status odd = FromHttpResponse(
      422, R"({"kind":"Status","code":"x","reason":7,"message":null,"details":[1]})");
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpCode(odd), 422);
  absl::Status bad_causes = FromHttpResponse(
      422, R"({"kind":"Status","reason":"Invalid","details":{"causes":[1,{"field":2}],)"
           R"("retryAfterSeconds":-4}})");
  EXPECT_TRUE(IsInvalid(bad_causes));
  EXPECT_EQ(Details(bad_causes).causes.size(), 1u);
  EXPECT_EQ(Details(bad_causes).retry_after_seconds, 0);
  EXPECT_EQ(FromHttpResponse(400, "{not json").message(), "{not json");
}

TEST(ApiStatusTest, ReasonWinsOverHttpCode) {
  // A 500 with reason ServerTimeout is a deadline, not an internal error.
  absl::Status s = FromHttpResponse(
      500, R"({"kind":"Status","status":"Failure","reason":"ServerTimeout","code":500})");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(HttpCode(s), 500);
}

}  // namespace
}  // namespace ctrlhost::kube
