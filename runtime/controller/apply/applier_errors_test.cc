// The applier against a scripted local HTTP server: how each server answer maps to an outcome,
// and that malformed server JSON is an error, never a crash.
#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "runtime/cache/store.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/apply/testing/test_controllers.h"
#include "runtime/kube/rest_client.h"
#include "runtime/kube/testing/scripted_http_server.h"

namespace ctrlhost::controller::apply {
namespace {

using testing::CachedObject;
using testing::ContextFor;

constexpr char kWebApp[] = R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
    "metadata":{"name":"web","namespace":"team","uid":"u-web","generation":1,
                "resourceVersion":"5"}})";

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return absl::StrCat(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")",
                      message, R"(","reason":")", reason, R"(","code":)", code, "}");
}

// Answers PATCH with `patch_code` (and a Status body), GET of the primary with `get_body`,
// POST of events with 201, and records the paths it saw.
class ScriptedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Patch(".*", [this](const httplib::Request& req, httplib::Response& res) {
      common::MutexLock lock(&mu_);
      seen_.push_back("PATCH " + req.path);
      res.status = patch_code_;
      std::string reason = patch_reason_;
      if (conflicts_left_ > 0) {
        --conflicts_left_;
        res.status = 409;
        reason = "Conflict";
      }
      if (res.status >= 300) {
        res.set_content(StatusBody(res.status, reason, absl::StrCat("scripted ", res.status)),
                        "application/json");
      } else {
        res.set_content(kWebApp, "application/json");
      }
    });
    server_.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      common::MutexLock lock(&mu_);
      seen_.push_back("GET " + req.path);
      res.set_content(get_body_, "application/json");
    });
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      common::MutexLock lock(&mu_);
      seen_.push_back("POST " + req.path);
      res.status = 201;
      res.set_content(req.body, "application/json");
    });
    absl::StatusOr<int> port = server_.Start();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    rest_ = MakeRest(port_);
    client_ = std::make_unique<kube::Client>(rest_.get());
    applier_ = std::make_unique<Applier>(client_.get(), ApplierOptions{.clock = &clock_});
  }
  void TearDown() override {
    // Close the client's keep-alive connections first: httplib's stop() waits for them.
    applier_.reset();
    client_.reset();
    rest_.reset();
    server_.Stop();
  }

  std::unique_ptr<kube::RestClient> MakeRest(int port) {
    kube::RestConfig config;
    config.host = absl::StrCat("http://127.0.0.1:", port);
    kube::RestClientOptions options;
    options.clock = &clock_;
    options.max_attempts = 1;  // one answer per call: no retries to script
    options.qps = 0;
    auto rest = kube::RestClient::Create(config, options);
    EXPECT_TRUE(rest.ok()) << rest.status();
    return rest.ok() ? std::move(*rest) : nullptr;
  }

  void Script(int code, const std::string& reason) {
    common::MutexLock lock(&mu_);
    patch_code_ = code;
    patch_reason_ = reason;
  }
  std::vector<std::string> Seen() {
    common::MutexLock lock(&mu_);
    return seen_;
  }

  common::FakeClock clock_;
  kube::testing::ScriptedHttpServer server_;
  int port_ = 0;
  common::Mutex mu_;
  int patch_code_ ABSL_GUARDED_BY(mu_) = 200;
  int conflicts_left_ ABSL_GUARDED_BY(mu_) = 0;  // PATCHes answered 409 before patch_code_
  std::string patch_reason_ ABSL_GUARDED_BY(mu_);
  std::string get_body_ ABSL_GUARDED_BY(mu_) = kWebApp;
  std::vector<std::string> seen_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<kube::RestClient> rest_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Applier> applier_;
  ControllerInfo webapp_ = testing::WebAppController();
  // The host's caches of the owned kinds, empty: the children do not exist yet (without
  // stores the applier would read them from the server).
  cache::Store configmaps_;
  cache::Store deployments_;
  ReconcileContext context_ = WithStores(ContextFor(&webapp_, CachedObject(kWebApp)));

  ReconcileContext WithStores(ReconcileContext context) {
    context.owned_stores = {&configmaps_, &deployments_};
    return context;
  }
};

pluginpb::ReconcileResponse ApplyChild() {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}})");
  response.set_status(R"({"phase":"Ready"})");
  return response;
}

TEST_F(ScriptedServerTest, ServerAnswersMapToOutcomes) {
  struct Case {
    int code;
    std::string reason;
    OutcomeKind kind;
    absl::StatusCode status;
    bool recorded;
  };
  const std::vector<Case> cases = {
      // Refusals that persist are recorded on the object (event + condition) even when they
      // are retried (a 403 or a kube 500 was silent before); the server's "come back
      // later" answers and conflicts are retried quietly.
      {500, "InternalError", OutcomeKind::kRetry, absl::StatusCode::kInternal, true},
      {503, "ServiceUnavailable", OutcomeKind::kRetry, absl::StatusCode::kUnavailable, false},
      {429, "TooManyRequests", OutcomeKind::kRetry, absl::StatusCode::kResourceExhausted, false},
      {403, "Forbidden", OutcomeKind::kRetry, absl::StatusCode::kPermissionDenied, true},
      {404, "NotFound", OutcomeKind::kRetry, absl::StatusCode::kNotFound, false},  // a child
      {409, "Conflict", OutcomeKind::kRequeueNow, absl::StatusCode::kAborted, false},
      {422, "Invalid", OutcomeKind::kTerminal, absl::StatusCode::kInvalidArgument, true},
      {400, "BadRequest", OutcomeKind::kTerminal, absl::StatusCode::kInvalidArgument, true},
  };
  for (const Case& c : cases) {
    Script(c.code, c.reason);
    {
      common::MutexLock lock(&mu_);
      seen_.clear();
    }
    ApplyOutcome outcome = applier_->Apply(context_, ApplyChild());
    EXPECT_EQ(outcome.kind, c.kind) << c.code << " " << outcome.status;
    EXPECT_EQ(outcome.status.code(), c.status) << c.code << " " << outcome.status;
    EXPECT_TRUE(absl::StrContains(outcome.status.message(), "applying configmaps team/c"))
        << outcome.status;
    const std::vector<std::string> seen = Seen();
    ASSERT_FALSE(seen.empty());
    EXPECT_TRUE(absl::StartsWith(seen[0], "PATCH /api/v1/namespaces/team/configmaps/c")) << seen[0];
    if (c.recorded) {
      // The server's refusal is recorded: an event and an attempt at the condition (written
      // against the cached primary: no GET first).
      EXPECT_EQ(seen.size(), 3u) << c.code;
      EXPECT_EQ(seen[1], "POST /api/v1/namespaces/team/events");
      EXPECT_EQ(outcome.writes, 1u);  // the event
    } else {
      EXPECT_EQ(seen.size(), 1u) << "later writes must be skipped";
      EXPECT_EQ(outcome.writes, 0u);
    }
  }
}

// Regression (attack run, item 5): the API server's 413 (a write over its request or object
// limit) was retried for ever, quietly: no event, no condition. The same write can only fail
// again: terminal, recorded like a 400 or 422.
TEST_F(ScriptedServerTest, RegressionEntityTooLargeIsTerminalAndRecorded) {
  Script(413, "RequestEntityTooLarge");
  ApplyOutcome outcome = applier_->Apply(context_, ApplyChild());
  EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal) << outcome.status;
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kInvalidArgument) << outcome.status;
  const std::vector<std::string> seen = Seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1], "POST /api/v1/namespaces/team/events");
}

TEST_F(ScriptedServerTest, PrimaryNotFoundIsDone) {
  Script(404, "NotFound");
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(R"({"apiVersion":"ctrlhost.dev/v1","kind":"WebApp",
      "metadata":{"name":"web"},"spec":{}})");
  ApplyOutcome outcome = applier_->Apply(context_, response);
  EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << outcome.status;
  EXPECT_TRUE(outcome.status.ok());
}

TEST_F(ScriptedServerTest, MalformedServerJsonIsAnErrorNotACrash) {
  webapp_.owns[0].delete_absent = false;  // no list: the GET of the primary is what is tested
  // The status write reads the live primary only after a conflict on the cached one.
  pluginpb::ReconcileResponse response;
  response.set_status(R"({"phase":"Ready"})");
  pluginpb::Condition* condition = response.add_conditions();
  condition->set_type("Ready");
  condition->set_status(pluginpb::CONDITION_STATUS_TRUE);
  condition->set_reason("Up");
  for (const std::string body : {"[1,2", "7", "\"text\"", "null"}) {
    {
      common::MutexLock lock(&mu_);
      get_body_ = body;
      conflicts_left_ = 1;
    }
    ApplyOutcome outcome = applier_->Apply(context_, response);
    EXPECT_EQ(outcome.kind, OutcomeKind::kRetry) << body;
    EXPECT_EQ(outcome.status.code(), absl::StatusCode::kDataLoss) << body << outcome.status;
  }
  // Odd but parseable shapes are read defensively and the write goes ahead.
  for (const std::string body :
       {R"({"metadata":5,"status":7})", R"({"metadata":{"resourceVersion":7},
          "status":{"conditions":[5,{"type":7},{"type":"Ready","status":false}]}})"}) {
    {
      common::MutexLock lock(&mu_);
      get_body_ = body;
      conflicts_left_ = 1;
    }
    ApplyOutcome outcome = applier_->Apply(context_, response);
    EXPECT_EQ(outcome.kind, OutcomeKind::kDone) << body << outcome.status;
  }
  // Finalizers and pruning read the server's JSON the same way.
  webapp_.owns[0].delete_absent = true;
  {
    common::MutexLock lock(&mu_);
    get_body_ = R"({"metadata":{"resourceVersion":"1","finalizers":"not-a-list"},
                    "items":[{"metadata":[]},{"metadata":{"ownerReferences":[1,{"uid":2}]}}]})";
  }
  EXPECT_TRUE(applier_->EnsureFinalizer(context_).ok());
  ApplyOutcome pruned = applier_->Apply(context_, pluginpb::ReconcileResponse());
  EXPECT_EQ(pruned.kind, OutcomeKind::kDone) << pruned.status;
}

TEST_F(ScriptedServerTest, UnreachableServerIsRetry) {
  std::unique_ptr<kube::RestClient> rest = MakeRest(1);  // nothing listens on port 1
  kube::Client client(rest.get());
  Applier applier(&client, ApplierOptions{.clock = &clock_});
  ApplyOutcome outcome = applier.Apply(context_, ApplyChild());
  EXPECT_EQ(outcome.kind, OutcomeKind::kRetry) << outcome.status;
  EXPECT_FALSE(outcome.status.ok());
  EXPECT_EQ(applier.EnsureFinalizer(context_).status().code(), outcome.status.code());
}

// Regression: an OWNED patch named with 12,000 "€" makes an error message
// over the condition's 32 KiB; cutting it mid-character made nlohmann's dump() throw and the
// host abort. The message is cut on a character boundary and the condition is written.
TEST_F(ScriptedServerTest, RegressionOwnedPatchWithLongMultibyteNameIsTerminalNotACrash) {
  Script(422, "Invalid");
  std::string euros;
  for (int i = 0; i < 12000; ++i) euros += "\xE2\x82\xAC";
  // The message's ASCII prefix decides where a byte cut falls: one of three shifts splits a "€".
  for (const std::string shift : {"", "a", "ab"}) {
    {
      common::MutexLock lock(&mu_);
      seen_.clear();
    }
    pluginpb::ReconcileResponse response;
    pluginpb::Patch* patch = response.add_patches();
    patch->set_target(pluginpb::PATCH_TARGET_OWNED);
    patch->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
    patch->set_patch(R"({"data":{"x":"1"}})");
    patch->set_api_version("v1");
    patch->set_kind("ConfigMap");
    patch->set_name(shift + euros);
    ApplyOutcome outcome = applier_->Apply(context_, response);
    EXPECT_EQ(outcome.kind, OutcomeKind::kTerminal) << shift;
    const std::vector<std::string> seen = Seen();
    ASSERT_EQ(seen.size(), 2u) << shift;  // the event and the Reconciled condition
    EXPECT_EQ(seen[0], "POST /api/v1/namespaces/team/events");
    EXPECT_EQ(seen[1], "PATCH /apis/ctrlhost.dev/v1/namespaces/team/webapps/web/status");
  }
}
}  // namespace
}  // namespace ctrlhost::controller::apply
