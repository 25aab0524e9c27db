#include "runtime/config/load.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ctrlhost::config {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// The error lines of a refused parse (empty when it was accepted).
std::vector<std::string> Errors(absl::string_view text, absl::string_view name = "op.yaml") {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(text, name);
  if (ops.ok()) return {};
  EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument) << ops.status();
  return absl::StrSplit(ops.status().message(), '\n');
}

constexpr char kHeader[] = R"(apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
)";

TEST(ParseOperatorsTest, FullDocument) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(R"(
apiVersion: ctrlhost.dev/v1alpha1
kind: Operator
metadata:
  name: web
  labels: {team: platform}
  annotations:
    note: "anything: goes"
spec:
  plugins:
    - name: webapp
      exec:
        command: bin/webapp
        args: ["--verbose", "--port=8080"]
        env: {LOG_LEVEL: debug, EMPTY: }
        workingDir: /tmp
      startupTimeout: 30s
      shutdownGracePeriod: 0
      requestTimeout: 1m30s
      maxInFlight: 64
      # no watchBinary: it is an unknown field now (it promised a swap on a changed binary)
    - name: remote
      endpoint:
        address: plugins.example.com:8443
        tls: {caFile: ca.crt, certFile: c.crt, keyFile: c.key, serverName: plugins}
    - name: local
      endpoint: {address: "unix:///run/p.sock"}
      startupTimeout: 250ms
      notServingTimeout: 0s
    - name: listenv
      exec:
        command: /bin/true
        env:
          - {name: A, value: "1"}
          - name: B
  controllers:
    - name: deployments
      plugin: webapp
      maxConcurrentReconciles: 4
      namespaces: [default, prod]
      labelSelector: app=web,tier!=db
      resyncPeriod: 10m
      rateLimit: {qps: 12.5, burst: 100, baseDelay: 5ms, maxDelay: 1000s}
      sharding: {enabled: true}
      status: {conditions: host}
      backgroundTasks: {enqueueQps: 2.5, enqueueBurst: 7}
    - name: services
      disabled: true
      status: {conditions: plugin}
  apiClient: {qps: 150, burst: 300}
)",
                                                                 "ops/web.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 1u);
  const OperatorSpec& op = (*ops)[0];
  EXPECT_EQ(op.name, "web");
  EXPECT_EQ(op.location.ToString(), "ops/web.yaml:2:1");
  EXPECT_THAT(op.labels, ElementsAre(Pair("team", "platform")));
  EXPECT_THAT(op.annotations, ElementsAre(Pair("note", "anything: goes")));
  ASSERT_EQ(op.plugins.size(), 4u);
  const PluginSpec& webapp = op.plugins[0];
  ASSERT_NE(webapp.exec(), nullptr);
  EXPECT_EQ(webapp.exec()->command, "bin/webapp");
  EXPECT_THAT(webapp.exec()->args, ElementsAre("--verbose", "--port=8080"));
  EXPECT_THAT(webapp.exec()->env, ElementsAre(Pair("LOG_LEVEL", "debug"), Pair("EMPTY", "")));
  EXPECT_EQ(webapp.exec()->working_dir, "/tmp");
  EXPECT_EQ(webapp.startup_timeout, absl::Seconds(30));
  EXPECT_EQ(webapp.shutdown_grace_period, absl::ZeroDuration());
  EXPECT_EQ(webapp.request_timeout, absl::Seconds(90));
  EXPECT_EQ(webapp.max_in_flight, 64);
  EXPECT_EQ(webapp.location.line, 11);
  const PluginSpec& remote = op.plugins[1];
  ASSERT_NE(remote.endpoint(), nullptr);
  EXPECT_EQ(remote.endpoint()->address, "plugins.example.com:8443");
  ASSERT_TRUE(remote.endpoint()->tls.has_value());
  EXPECT_EQ(remote.endpoint()->tls->ca_file, "ca.crt");
  EXPECT_EQ(remote.endpoint()->tls->cert_file, "c.crt");
  EXPECT_EQ(remote.endpoint()->tls->key_file, "c.key");
  EXPECT_EQ(remote.endpoint()->tls->server_name, "plugins");
  EXPECT_FALSE(remote.startup_timeout.has_value());
  EXPECT_FALSE(remote.max_in_flight.has_value());
  EXPECT_FALSE(remote.not_serving_timeout.has_value());
  EXPECT_EQ(op.plugins[2].not_serving_timeout, absl::ZeroDuration());  // 0s: never restart
  EXPECT_EQ(op.plugins[2].endpoint()->address, "unix:///run/p.sock");
  EXPECT_FALSE(op.plugins[2].endpoint()->tls.has_value());
  EXPECT_EQ(op.plugins[2].startup_timeout, absl::Milliseconds(250));
  EXPECT_THAT(op.plugins[3].exec()->env, ElementsAre(Pair("A", "1"), Pair("B", "")));
  ASSERT_EQ(op.controllers.size(), 2u);
  const ControllerSpec& d = op.controllers[0];
  EXPECT_EQ(d.name, "deployments");
  EXPECT_EQ(d.plugin, "webapp");
  EXPECT_EQ(d.max_concurrent_reconciles, 4);
  EXPECT_THAT(d.namespaces, ElementsAre("default", "prod"));
  EXPECT_EQ(d.label_selector, "app=web,tier!=db");
  EXPECT_EQ(d.resync_period, absl::Minutes(10));
  EXPECT_FALSE(d.disabled);
  ASSERT_TRUE(d.rate_limit.has_value());
  EXPECT_EQ(d.rate_limit->qps, 12.5);
  EXPECT_EQ(d.rate_limit->burst, 100);
  EXPECT_EQ(d.rate_limit->base_delay, absl::Milliseconds(5));
  EXPECT_EQ(d.rate_limit->max_delay, absl::Seconds(1000));
  EXPECT_TRUE(d.sharded);
  EXPECT_TRUE(d.host_status);
  EXPECT_EQ(d.task_enqueue_qps, 2.5);
  EXPECT_EQ(d.task_enqueue_burst, 7);
  EXPECT_FALSE(op.controllers[1].task_enqueue_qps.has_value());
  EXPECT_FALSE(op.controllers[1].task_enqueue_burst.has_value());
  EXPECT_FALSE(op.controllers[1].host_status);
  EXPECT_TRUE(op.controllers[1].disabled);
  EXPECT_TRUE(op.controllers[1].plugin.empty());
  EXPECT_FALSE(op.controllers[1].rate_limit.has_value());
  ASSERT_TRUE(op.api_client.has_value());
  EXPECT_EQ(op.api_client->qps, 150);
  EXPECT_EQ(op.api_client->burst, 300);
}

TEST(ParseOperatorsTest, MultipleDocumentsAndEmptyOnes) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(
      absl::StrCat("---\n", kHeader, "spec:\n  plugins: [{name: a, exec: {command: a}}]\n---\n",
                   "---\n", "apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n",
                   "metadata: {name: second}\nspec:\n  plugins: [{name: b, exec: {command: b}}]\n",
                   "---\n"),
      "multi.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u);
  EXPECT_EQ((*ops)[0].name, "web");
  EXPECT_EQ((*ops)[1].name, "second");
  EXPECT_EQ((*ops)[1].location.line, 10);
  EXPECT_TRUE(ParseOperators("", "empty.yaml").ok());
  EXPECT_TRUE(ParseOperators("# only a comment\n---\n", "empty.yaml")->empty());
}

TEST(ParseOperatorsTest, MaxCacheBytes) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(
      absl::StrCat(kHeader, "spec:\n  plugins:\n    - {name: a, exec: {command: a}, ",
                   "maxCacheBytes: 268435456}\n    - {name: b, exec: {command: b}}\n"),
      "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ((*ops)[0].plugins[0].max_cache_bytes, int64_t{268435456});
  EXPECT_FALSE((*ops)[0].plugins[1].max_cache_bytes.has_value());
  EXPECT_THAT(Errors(absl::StrCat(kHeader, "spec:\n  plugins:\n    - {name: a, exec: {command: ",
                                  "a}, maxCacheBytes: 0}\n")),
              ElementsAre(HasSubstr("spec.plugins[0].maxCacheBytes: must be between 1 and ")));
}

// Found by tools/fuzz (operator_file): an operator file on which yaml-cpp's LoadAll never
// returns (a flow entry where a document starts) hung the parser, allocating, and with it the
// file watcher. It is refused like any invalid YAML; so are control characters.
TEST(ParseOperatorsTest, RegressionStreamsYamlCppNeverFinishesAreRefused) {
  for (absl::string_view text : {absl::string_view(", EMPTY: }\n  workingDir: /tmp\n"),
                                 absl::string_view("\"x\",\n"), absl::string_view("---\n,\n")}) {
    std::vector<std::string> errors = Errors(text);
    ASSERT_EQ(errors.size(), 1u) << text;
    EXPECT_THAT(errors[0], HasSubstr("op.yaml")) << text;
    EXPECT_THAT(errors[0], HasSubstr("invalid YAML: line ")) << text;
  }
  EXPECT_THAT(Errors(absl::string_view("a: \0b\n", 7)),
              ElementsAre(HasSubstr("control characters are not allowed")));
}

TEST(ParseOperatorsTest, RequiredFieldNamesFileLineColumnAndPath) {
  // The example of the issue: plugin 1's exec has no command.
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
    - name: b
      exec:
        args: [x]
)"),
                     "operators/web.yaml"),
              ElementsAre("operators/web.yaml:11:9: spec.plugins[1].exec.command: required"));
}

TEST(ParseOperatorsTest, AllErrorsOfADocumentTogether) {
  EXPECT_THAT(
      Errors(R"(apiVersion: ctrlhost.dev/v1
kind: Operatr
metadata:
  name: Web_Site
spec:
  plugins:
    - name: a
      exec: {command: a}
      startupTimout: 5s
      maxInFlight: 0
      requestTimeout: soon
    - name: a
      endpoint: {address: "example.com:80"}
    - exec: {command: c}
      endpoint: {address: "unix:///x"}
    - name: d
  controllers:
    - plugin: nope
      namespaces: [Default]
      labelSelector: "a in (b"
      rateLimit: {qps: 0, burst: -1, baseDelay: 10s, maxDelay: 1s}
      disabled: "yes"
)"),
      ElementsAre("op.yaml:1:13: apiVersion: unsupported value \"ctrlhost.dev/v1\": supported: "
                  "\"ctrlhost.dev/v1alpha1\"",
                  "op.yaml:2:7: kind: unsupported value \"Operatr\": supported: \"Operator\"",
                  HasSubstr("op.yaml:4:9: metadata.name: invalid value \"Web_Site\": "),
                  "op.yaml:9:7: spec.plugins[0].startupTimout: unknown field (did you mean "
                  "\"startupTimeout\"?)",
                  "op.yaml:10:20: spec.plugins[0].maxInFlight: must be between 1 and 1048576",
                  "op.yaml:11:23: spec.plugins[0].requestTimeout: must be a duration such as "
                  "\"30s\", \"1m30s\" or \"500ms\"",
                  "op.yaml:12:7: spec.plugins[1].name: duplicate plugin name \"a\" (first on "
                  "line 7)",
                  "op.yaml:13:27: spec.plugins[1].endpoint.address: plaintext is only allowed "
                  "to unix: addresses and loopback hosts; set spec.plugins[1].endpoint.tls for "
                  "\"example.com\"",
                  "op.yaml:14:7: spec.plugins[2].name: required",
                  "op.yaml:15:17: spec.plugins[2]: exec and endpoint are mutually exclusive",
                  "op.yaml:16:7: spec.plugins[3]: exactly one of exec or endpoint is required",
                  "op.yaml:18:7: spec.controllers[0].name: required",
                  "op.yaml:18:7: spec.controllers[0].plugin: no plugin \"nope\" in "
                  "spec.plugins",
                  HasSubstr("op.yaml:19:20: spec.controllers[0].namespaces[0]: invalid value "
                            "\"Default\": "),
                  "op.yaml:20:22: spec.controllers[0].labelSelector: unable to parse "
                  "requirement \"a in (b\": found '', expected: ',' or ')'",
                  "op.yaml:21:24: spec.controllers[0].rateLimit.qps: must be positive (and "
                  "finite)",
                  "op.yaml:21:34: spec.controllers[0].rateLimit.burst: must be between 1 and "
                  "1048576",
                  "op.yaml:21:64: spec.controllers[0].rateLimit.maxDelay: must not be less "
                  "than baseDelay",
                  "op.yaml:22:17: spec.controllers[0].disabled: must be true or false, not a "
                  "string"));
}

TEST(ParseOperatorsTest, ShardingValuesAreChecked) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  controllers:
    - name: c
      sharding: {enabled: "yes", ring: x}
)")),
              ElementsAre(HasSubstr("spec.controllers[0].sharding.enabled: must be true or false"),
                          HasSubstr("spec.controllers[0].sharding.ring: unknown field")));
}

TEST(ParseOperatorsTest, StatusValuesAreChecked) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  controllers:
    - name: c
      status: {conditions: hosted, phase: host}
    - name: d
      status: {conditions: [host]}
)")),
              ElementsAre("op.yaml:11:28: spec.controllers[0].status.conditions: must be \"host\" "
                          "or \"plugin\", not \"hosted\"",
                          "op.yaml:11:36: spec.controllers[0].status.phase: unknown field",
                          "op.yaml:13:28: spec.controllers[1].status.conditions: must be a string, "
                          "not a list"));
}

TEST(ParseOperatorsTest, BackgroundTaskLimitsAreChecked) {
  EXPECT_THAT(
      Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  controllers:
    - name: c
      backgroundTasks: {enqueueQps: 0, enqueueBurst: 0, every: 5s}
    - name: d
      backgroundTasks: {enqueueQps: fast, enqueueBurst: 2000000}
    - name: e
      backgroundTasks: 5
)")),
      ElementsAre(
          "op.yaml:11:37: spec.controllers[0].backgroundTasks.enqueueQps: must be "
          "positive (and finite): enqueues per second of the controller's tasks",
          "op.yaml:11:54: spec.controllers[0].backgroundTasks.enqueueBurst: must be between 1 "
          "and 1048576",
          "op.yaml:11:57: spec.controllers[0].backgroundTasks.every: unknown field",
          "op.yaml:13:37: spec.controllers[1].backgroundTasks.enqueueQps: must be a "
          "number, not a string",
          "op.yaml:13:57: spec.controllers[1].backgroundTasks.enqueueBurst: must be "
          "between 1 and 1048576",
          "op.yaml:15:24: spec.controllers[2].backgroundTasks: must be a mapping, "
          "not an integer"));
}

TEST(ParseOperatorsTest, ApiClientValuesAreChecked) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  apiClient: {qps: -1, burst: 0, limit: 3}
)")),
              ElementsAre(HasSubstr("spec.apiClient.qps: must be 0 (no limit) or positive"),
                          HasSubstr("spec.apiClient.burst: must be between 1 and 1048576"),
                          HasSubstr("spec.apiClient.limit: unknown field")));
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  apiClient: {qps: 0}
)")),
              ElementsAre());
}

TEST(ParseOperatorsTest, LeaderElectionBlock) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection:
    leaseDuration: 20s
    renewDeadline: 12s
    retryPeriod: 3s
    leaseName: web-leader
    leaseNamespace: ops
)"),
                                                                 "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*ops)[0].leader_election.has_value());
  const LeaderElectionSpec& le = *(*ops)[0].leader_election;
  EXPECT_EQ(le.lease_duration, absl::Seconds(20));
  EXPECT_EQ(le.renew_deadline, absl::Seconds(12));
  EXPECT_EQ(le.retry_period, absl::Seconds(3));
  EXPECT_EQ(le.lease_name, "web-leader");
  EXPECT_EQ(le.lease_namespace, "ops");
  EXPECT_EQ(le.location.ToString(), "op.yaml:10:5");
  // Fields left out stay unset (the flags' values or defaults apply).
  ops = ParseOperators(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection: {}
)"),
                       "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*ops)[0].leader_election.has_value());
  EXPECT_FALSE((*ops)[0].leader_election->lease_duration.has_value());
  EXPECT_EQ((*ops)[0].leader_election->lease_name, "");
  // Host-wide, read at start: not part of the operator's equality (no reload diff).
  OperatorSpec other = (*ops)[0];
  other.leader_election.reset();
  EXPECT_EQ(other, (*ops)[0]);
}

TEST(ParseOperatorsTest, LeaderElectionPerOperator) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection: {perOperator: true}
)"),
                                                                 "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_TRUE((*ops)[0].leader_election.has_value());
  EXPECT_TRUE((*ops)[0].leader_election->per_operator);
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection: {perOperator: "yes"}
)")),
              ElementsAre(HasSubstr(
                  "op.yaml:9:33: spec.leaderElection.perOperator: must be true or false")));
}

TEST(ParseOperatorsTest, LeaderElectionValuesAreCheckedLikeTheFlags) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection:
    leaseDuration: 10s
    renewDeadline: 10s
    retryPeriod: 0s
    leaseName: Web_Leader
    leaseNamespace: ""
    identity: me
)")),
              ElementsAre(HasSubstr("op.yaml:10:20: spec.leaderElection.leaseDuration: 10s must be "
                                    "greater than renewDeadline (10s)"),
                          HasSubstr("op.yaml:12:18: spec.leaderElection.retryPeriod: must be "
                                    "positive"),
                          HasSubstr("op.yaml:13:16: spec.leaderElection.leaseName: invalid value "
                                    "\"Web_Leader\""),
                          HasSubstr("op.yaml:14:21: spec.leaderElection.leaseNamespace: invalid "
                                    "value \"\""),
                          HasSubstr("op.yaml:15:5: spec.leaderElection.identity: unknown field")));
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection: {renewDeadline: 2s, retryPeriod: 2s}
)")),
              ElementsAre(HasSubstr("spec.leaderElection.renewDeadline: 2s must be greater than "
                                    "1.2 x retryPeriod (2s)")));
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a}
  leaderElection: 15s
)")),
              ElementsAre(HasSubstr("spec.leaderElection: ")));
}

TEST(ParseOperatorsTest, WrongTypesSayWhatWasFound) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec:
        command: [a]
        args: [--port, 8080]
        env: {PORT: 8080}
      maxInFlight: true
    - name: b
      exec: /bin/b
  controllers: {name: x}
)")),
              ElementsAre("op.yaml:9:18: spec.plugins[0].exec.command: must be a string, not a "
                          "list",
                          "op.yaml:10:24: spec.plugins[0].exec.args[1]: must be a string, not "
                          "an integer (quote it: \"8080\")",
                          "op.yaml:11:21: spec.plugins[0].exec.env.PORT: must be a string, not "
                          "an integer (quote it: \"8080\")",
                          "op.yaml:12:20: spec.plugins[0].maxInFlight: must be an integer, not "
                          "a boolean",
                          "op.yaml:14:13: spec.plugins[1].exec: must be a mapping, not a string",
                          "op.yaml:15:16: spec.controllers: must be a list, not a mapping"));
}

TEST(ParseOperatorsTest, MissingTopLevelFields) {
  EXPECT_THAT(Errors("apiVersion: ctrlhost.dev/v1alpha1\nkind: Operator\n"),
              ElementsAre("op.yaml:1:1: metadata: required", "op.yaml:1:1: spec: required"));
  EXPECT_THAT(Errors("kind: Operator\nmetadata: {}\nspec: {plugins: []}\n"),
              ElementsAre("op.yaml:1:1: apiVersion: required (\"ctrlhost.dev/v1alpha1\")",
                          "op.yaml:2:11: metadata.name: required",
                          "op.yaml:3:7: spec.plugins: required: at least one plugin"));
  EXPECT_THAT(Errors("- just\n- a list\n"),
              ElementsAre("op.yaml:1:1: must be a mapping, not a list"));
  EXPECT_THAT(Errors(absl::StrCat(kHeader,
                                  "spec: {plugins: [{name: a, exec: {command: a}}], "
                                  "plugin: x}\nspec: {}\n")),
              ElementsAre("op.yaml:5:50: spec.plugin: unknown field (did you mean \"plugins\"?)",
                          "op.yaml:6:1: spec: duplicate field (first on line 5)"));
}

TEST(ParseOperatorsTest, UnknownFieldWithoutCloseMatchHasNoSuggestion) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader,
                                  "spec:\n  plugins: [{name: a, exec: {command: a}}]\n"
                                  "  somethingElse: 1\n")),
              ElementsAre("op.yaml:7:3: spec.somethingElse: unknown field"));
}

TEST(ParseOperatorsTest, InvalidYamlNamesThePosition) {
  std::vector<std::string> errors = Errors("a: [1, 2\nb: c\n", "bad.yaml");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("bad.yaml:"));
  EXPECT_THAT(errors[0], HasSubstr(": invalid YAML: "));
  errors = Errors("a: b\n  c: d\n", "bad.yaml");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("bad.yaml:2:"));
}

TEST(ParseOperatorsTest, HostileInputBecomesErrors) {
  // Deep nesting, a binary blob, huge numbers, aliases: errors, never a crash.
  EXPECT_FALSE(ParseOperators(std::string(100000, '['), "deep.yaml").ok());
  EXPECT_FALSE(ParseOperators(std::string("\0\xff\xfe{{", 5), "bin.yaml").ok());
  EXPECT_THAT(Errors(absl::StrCat(kHeader,
                                  "spec:\n  plugins:\n    - name: a\n      exec: "
                                  "{command: a}\n      maxInFlight: "
                                  "99999999999999999999999\n")),
              ElementsAre(HasSubstr(
                  "spec.plugins[0].maxInFlight: out of range: must be between 1 and 1048576")));
  EXPECT_TRUE(ParseOperators(absl::StrCat(kHeader,
                                          "spec:\n  plugins:\n    - &p {name: a, exec: "
                                          "{command: a}}\n  controllers: []\n"),
                             "alias.yaml")
                  .ok());
}

// Regression (attack run, item 4): a 100,000-deep YAML file said "invalid YAML: bad file"
// (yaml-cpp's own recursion guard). The message names the limit, whatever the nesting style,
// and nothing crashes.
TEST(ParseOperatorsTest, RegressionDeepNestingNamesTheDepthLimit) {
  std::string mapping;
  for (int i = 0; i < 100000; ++i) mapping += "a: {";
  mapping += "a: 1";
  mapping += std::string(100000, '}');
  const std::string open_mapping = [] {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += "{a: ";
    return text;
  }();
  for (const std::string& text :
       {std::string(100000, '['), absl::StrCat(std::string(100000, '['), std::string(100000, ']')),
        mapping, open_mapping, absl::StrCat("spec: ", std::string(250, '['))}) {
    std::vector<std::string> errors = Errors(text, "deep.yaml");
    ASSERT_EQ(errors.size(), 1u) << text.substr(0, 40);
    EXPECT_THAT(errors[0], HasSubstr("deep.yaml:")) << text.substr(0, 40);
    EXPECT_THAT(errors[0], HasSubstr("invalid YAML: ")) << text.substr(0, 40);
    EXPECT_THAT(errors[0], HasSubstr("nesting deeper than 200 levels")) << text.substr(0, 40);
    EXPECT_THAT(errors[0], Not(HasSubstr("bad file")));
  }
  // Shallow nesting is not an error of its own (the document is only not an Operator).
  EXPECT_THAT(Errors(absl::StrCat("spec: ", std::string(150, '['), std::string(150, ']'))),
              Not(Contains(HasSubstr("nesting deeper"))));
}

// Regression (attack run, item 4): a source name with invalid UTF-8 or control characters was
// echoed as raw bytes (a newline in it even forged a line of the error list).
TEST(ParseOperatorsTest, RegressionSourceNameIsEscapedInMessages) {
  std::vector<std::string> errors = Errors("kind: [\n", "bad\xff\xfe\nfake.yaml");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("bad\\xff\\xfe\\nfake.yaml:"));
  // The document's own keys and values in messages, too.
  errors = Errors(absl::StrCat(kHeader, "spec:\n  \"x\\nop.yaml:1:1: forged\\e[2J\": 1\n"));
  EXPECT_THAT(errors, Contains(HasSubstr("spec.x\\nop.yaml:1:1: forged\\x1b[2J: unknown field")));
  EXPECT_THAT(errors, Not(Contains(StartsWith("op.yaml:1:1: forged"))));
}

// Every one-character deletion and a few insertions at every position of a valid document:
// the parser returns (an error or specs), never crashes (run under ASan in CI).
TEST(ParseOperatorsTest, MutatedDocumentsNeverCrash) {
  const std::string valid = absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec: {command: a, args: [x], env: [{name: A, value: "1"}]}
      startupTimeout: 1m
    - name: b
      endpoint: {address: "h:1", tls: {certFile: c, keyFile: k}}
  controllers:
    - {name: c, plugin: a, namespaces: [x], rateLimit: {qps: 1, burst: 2}}
)");
  ASSERT_TRUE(ParseOperators(valid, "v.yaml").ok());
  int refused = 0;
  for (size_t i = 0; i < valid.size(); ++i) {
    std::string deleted = valid;
    deleted.erase(i, 1);
    if (!ParseOperators(deleted, "m.yaml").ok()) ++refused;
    for (const char* insert : {"[", "{", ":", "- ", "&a ", "*a", "\t", "\"", "'", "!!map "}) {
      std::string inserted = valid;
      inserted.insert(i, insert);
      if (!ParseOperators(inserted, "m.yaml").ok()) ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(ParseOperatorsTest, EndpointAddresses) {
  auto errors_for = [](absl::string_view address, bool tls) {
    return Errors(absl::StrCat(kHeader, "spec:\n  plugins:\n    - name: a\n      endpoint:\n",
                               "        address: \"", address, "\"\n",
                               tls ? "        tls: {}\n" : ""));
  };
  EXPECT_THAT(errors_for("127.0.0.1:9000", false), ElementsAre());
  EXPECT_THAT(errors_for("localhost:9000", false), ElementsAre());
  EXPECT_THAT(errors_for("[::1]:9000", false), ElementsAre());
  EXPECT_THAT(errors_for("dns:///plugins.svc:443", true), ElementsAre());
  EXPECT_THAT(errors_for("unix:/run/a.sock", false), ElementsAre());
  EXPECT_THAT(errors_for("unix://relative.sock", false),
              ElementsAre(HasSubstr("needs an absolute path")));
  EXPECT_THAT(errors_for("example.com", true), ElementsAre(HasSubstr("expected host:port")));
  EXPECT_THAT(errors_for("example.com:0", true), ElementsAre(HasSubstr("expected host:port")));
  EXPECT_THAT(errors_for("::1:80", true), ElementsAre(HasSubstr("expected host:port")));
  EXPECT_THAT(errors_for("", false), ElementsAre("op.yaml:9:9: spec.plugins[0].endpoint.address: "
                                                 "required"));
  EXPECT_THAT(Errors(absl::StrCat(kHeader, "spec:\n  plugins:\n    - name: a\n      endpoint:\n",
                                  "        address: h:1\n        tls: {certFile: c}\n"
                                  "      watchBinary: true\n")),
              ElementsAre("op.yaml:10:14: spec.plugins[0].endpoint.tls.keyFile: required: "
                          "certFile and keyFile go together",
                          HasSubstr("op.yaml:11:7: spec.plugins[0].watchBinary: unknown field")));
}

TEST(ParseOperatorsTest, EnvProblems) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins:
    - name: a
      exec:
        command: a
        env:
          - {name: A, value: x}
          - {name: A, value: y}
          - {value: z}
          - {name: "B=C"}
          - {name: D, valu: 1}
)")),
              ElementsAre("op.yaml:12:20: spec.plugins[0].exec.env[1].name: duplicate variable "
                          "\"A\" (first on line 11)",
                          "op.yaml:13:13: spec.plugins[0].exec.env[2].name: required",
                          "op.yaml:14:20: spec.plugins[0].exec.env[3].name: invalid environment "
                          "variable name \"B=C\"",
                          "op.yaml:15:23: spec.plugins[0].exec.env[4].valu: unknown field (did "
                          "you mean \"value\"?)"));
}

TEST(ParseOperatorsTest, DuplicateControllerOverrides) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins: [{name: a, exec: {command: a}}]
  controllers:
    - {name: x}
    - {name: x, plugin: a}
    - {name: x}
)")),
              ElementsAre("op.yaml:10:7: spec.controllers[2]: duplicate overrides for "
                          "controller \"x\" (first on line 8)"));
}

TEST(ParseOperatorsTest, Routes) {
  absl::StatusOr<std::vector<OperatorSpec>> ops = ParseOperators(absl::StrCat(kHeader, R"(spec:
  plugins: [{name: v1, exec: {command: a}}, {name: v2, exec: {command: b}}]
  routes:
    - controller: web
      to:
        - {plugin: v2, labelSelector: "version=v2"}
        - {name: legacy, plugin: v1, labelSelector: "version!=v2"}
    - controller: only
      to: [{plugin: v1}]
)"),
                                                                 "op.yaml");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ((*ops)[0].routes.size(), 2u);
  const RouteSpec& web = (*ops)[0].routes[0];
  EXPECT_EQ(web.controller, "web");
  ASSERT_EQ(web.to.size(), 2u);
  EXPECT_EQ(web.to[0].name, "v2");  // defaults to the plugin
  EXPECT_EQ(web.to[0].plugin, "v2");
  EXPECT_EQ(web.to[0].label_selector, "version=v2");
  EXPECT_EQ(web.to[1].name, "legacy");
  EXPECT_EQ(web.to[1].location.line, 11);
  // A single route without a selector is allowed: the controller runs on that plugin.
  EXPECT_EQ((*ops)[0].routes[1].to[0].label_selector, "");
  EXPECT_EQ((*ops)[0].FindRoute("only"), &(*ops)[0].routes[1]);
  EXPECT_EQ((*ops)[0].FindRoute("none"), nullptr);
}

TEST(ParseOperatorsTest, RouteErrors) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins: [{name: v1, exec: {command: a}}, {name: v2, exec: {command: b}}]
  routes:
    - controller: web
      to:
        - {plugin: v2, labelSelector: "version = v2"}
        - {plugin: v1, labelSelector: "version==v2"}
        - {plugin: v3, labelSelector: "version in (v3"}
        - {name: v2, plugin: v1, labelSelector: "a=b"}
    - to: []
    - controller: web
      to: [{plugin: v1, labelSelectr: x}]
)")),
              ElementsAre("op.yaml:11:39: spec.routes[0].to[1].labelSelector: the same selector as "
                          "route \"v2\" (spec.routes[0].to[0], line 10): every object it matches "
                          "would match both",
                          "op.yaml:12:20: spec.routes[0].to[2].plugin: no plugin \"v3\" in "
                          "spec.plugins",
                          ::testing::StartsWith(
                              "op.yaml:12:39: spec.routes[0].to[2].labelSelector: unable to parse"),
                          "op.yaml:13:18: spec.routes[0].to[3].name: duplicate route name \"v2\" "
                          "(first on line 10); routes to the same plugin need a name each",
                          "op.yaml:14:7: spec.routes[1].controller: required",
                          "op.yaml:14:7: spec.routes[1].to: required: at least one route",
                          "op.yaml:15:7: spec.routes[2].controller: duplicate routes for "
                          "controller \"web\" (first on line 8)",
                          "op.yaml:16:25: spec.routes[2].to[0].labelSelectr: unknown field (did "
                          "you mean \"labelSelector\"?)"));
}

TEST(ParseOperatorsTest, RegressionCatchAllRouteBesideAnotherIsAnOverlap) {
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins: [{name: v1, exec: {command: a}}, {name: v2, exec: {command: b}}]
  routes:
    - controller: web
      to:
        - {plugin: v2, labelSelector: "version=v2"}
        - {plugin: v1}
)")),
              ElementsAre("op.yaml:11:11: spec.routes[0].to[1]: route \"v1\" has no "
                          "labelSelector, so it matches every object and overlaps the other routes "
                          "of controller \"web\"; give every route a selector (e.g. "
                          "\"version=v2\" and \"version!=v2\")"));
  EXPECT_THAT(Errors(absl::StrCat(kHeader, R"(spec:
  plugins: [{name: v1, exec: {command: a}}, {name: v2, exec: {command: b}}]
  routes:
    - controller: web
      to:
        - {plugin: v2, labelSelector: ""}
        - {plugin: v1}
)")),
              ElementsAre("op.yaml:11:11: spec.routes[0].to[1]: a second route without "
                          "labelSelector (the first is route \"v2\", line 10): both match every "
                          "object"));
}

TEST(ParseOperatorsTest, DuplicateOperatorNamesInOneText) {
  const std::string doc =
      absl::StrCat(kHeader, "spec:\n  plugins: [{name: a, exec: {command: a}}]\n");
  EXPECT_THAT(Errors(absl::StrCat(doc, "---\n", doc)),
              ElementsAre("op.yaml:8:1: metadata.name: operator \"web\" is already defined at "
                          "op.yaml:1:1"));
}

TEST(ParseOperatorsTest, ErrorListIsBounded) {
  std::string text = absl::StrCat(kHeader, "spec:\n  plugins:\n");
  for (int i = 0; i < 200; ++i) absl::StrAppend(&text, "    - {name: p", i, "}\n");
  std::vector<std::string> errors = Errors(text);
  EXPECT_EQ(errors.size(), 51u);
  EXPECT_EQ(errors.back(), "op.yaml: too many errors; stopped listing them");
}

// Regression: "must be an integer, not an integer" for a too large one.
TEST(ParseOperatorsTest, RegressionIntegerPast64BitsIsOutOfRange) {
  const auto in_flight = [](absl::string_view value) {
    return Errors(absl::StrCat(kHeader,
                               "spec:\n  plugins:\n    - name: a\n      exec: {command: a}\n"
                               "      maxInFlight: ",
                               value, "\n"));
  };
  EXPECT_THAT(in_flight("99999999999999999999"),
              ElementsAre(HasSubstr("maxInFlight: out of range: must be between 1 and 1048576")));
  EXPECT_THAT(in_flight("0x10"), ElementsAre());
  EXPECT_THAT(in_flight("0o10"), ElementsAre());
  EXPECT_THAT(in_flight("0xFFFFFFFFFFFFFFFFFF"), ElementsAre(HasSubstr("out of range")));
  EXPECT_THAT(in_flight("2000000"), ElementsAre(HasSubstr("must be between 1 and 1048576")));
  EXPECT_THAT(in_flight("ten"), ElementsAre(HasSubstr("must be an integer, not a string")));
}

TEST(KnownFieldPathsTest, ListsNestedFields) {
  std::vector<std::string> paths = KnownFieldPaths();
  EXPECT_THAT(paths, ::testing::Contains("spec.plugins[].exec.env[].name"));
  EXPECT_THAT(paths, ::testing::Contains("spec.controllers[].rateLimit.maxDelay"));
  EXPECT_THAT(paths, ::testing::Contains("apiVersion"));
}

}  // namespace
}  // namespace ctrlhost::config
