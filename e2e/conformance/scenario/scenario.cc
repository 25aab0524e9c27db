// The conformance "scenario" controller on the C++ SDK (scenario.py and scenario.js are the same
// controller on the Python and Node SDKs). A Scenario's spec.outcome picks the answer:
//   ok         desire ConfigMap <name> with spec.data, status {phase: Done}
//   requeue    status {phase: Waiting}, requeue after 30 s
//   retryable  a retryable error
//   retry-after  a retryable error with reason QuotaExceeded and retry_after 45 s (each SDK's
//              idiomatic way: C++ the Result factory, Go WithReason/RetryAfter on the returned
//              error, Python raise ReconcileError, Node throw RetryableError)
//   terminal   a terminal error (and a Warning event)
//   forbidden  desire a Secret: a kind the controller does not own (the host must refuse it)
//   chain      a DependentChain of ConfigMaps <name>-a, -b, -c whose steps share a PassContext:
//              each sets the flag seen-<dependent>; a sets updateAllowed = spec.allowUpdates;
//              the dependent named by spec.cancelPass cancels the pass, the one named by
//              spec.cancelResource cancels itself, c cancels itself when it exists and updates
//              are not allowed, the one named by spec.failStep fails (a terminal error);
//              status {phase: Done, cancelled, flags, allReady, failedAt}
//   callbacks  a DependentChain of ConfigMaps <name>-a, -b, -c (c unwanted) with stage callbacks
//              on ConfigMap: "label" (pre-*: labels.stage = the stage), "record" (status.log
//              gets "<stage>:<object name>"), "guard" (a terminal error at spec.failAt)
//   status     desire ConfigMap <name> {version: spec.version (default 1.0.0)}; the standard
//              operator status (SetOperatorStatus) with that target version, children ready
//              once the ConfigMap child carries it, spec.failure as a persistent failure
//   route      resource sets: "v1" (label version absent or v1), "v2" (version=v2, context
//              {replicas: 2, set: v2}), "canary" (track=canary); the chosen set desires
//              ConfigMap <name> {set: <set>} and sets status {phase: Done, set, context}; an
//              object no set handles gets status {skipped: <count>}, one several handle the
//              router's AmbiguousRoute answer
//   builders   status {phase: Done, configHash: ConfigHash(spec.config), built: [every resource
//              builder's output for this object]} (reported, not desired: the scenario owns
//              ConfigMaps only)
//   task       desire ConfigMap <name> {token: the object's token in $SCENARIO_TASK_FILE, "" when
//              none}, status {phase: Done, token}. With $SCENARIO_TASK_FILE set the controller
//              declares the background task "poke": its first run in a process fails with
//              "scenario task fails on its first run" (the SDK restarts it), later runs poll the
//              file every 200 ms (lines "namespace/name token") and enqueue the object of each
//              line that appears or changes
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sdk/cpp/sdk.h"

namespace sdk = ctrlhost::sdk;

bool SpecIs(const sdk::Request& req, const char* field, const nlohmann::json& value) {
  auto it = req.spec().find(field);
  return it != req.spec().end() && *it == value;
}

sdk::Result Chain(const sdk::Request& req) {
  sdk::DependentChain chain;
  for (std::string dep : {"a", "b", "c"}) {
    sdk::Dependent d{dep, "v1", "ConfigMap",
                     [dep](const sdk::Request& r) -> absl::StatusOr<nlohmann::json> {
                       nlohmann::json cm = sdk::NewObject("v1", "ConfigMap", r.name() + "-" + dep);
                       cm["data"] = {{"v", "new"}};
                       return cm;
                     }};
    d.on_pass = [dep](const sdk::Request& r, const nlohmann::json&, const nlohmann::json* current,
                      sdk::PassContext* ctx) {
      ctx->SetFlag("seen-" + dep);
      if (dep == "a")
        ctx->SetFlag(sdk::PassContext::kUpdateAllowed, SpecIs(r, "allowUpdates", true));
      if (SpecIs(r, "failStep", dep)) return absl::InvalidArgumentError("spec.failStep");
      if (SpecIs(r, "cancelPass", dep)) ctx->CancelPass("spec.cancelPass");
      if (SpecIs(r, "cancelResource", dep)) ctx->CancelResource("spec.cancelResource");
      if (dep == "c" && current != nullptr && !ctx->Flag(sdk::PassContext::kUpdateAllowed)) {
        ctx->CancelResource("updates not allowed");
      }
      return absl::OkStatus();
    };
    chain.Add(std::move(d));
  }
  return chain.Build([](const sdk::Request&, const sdk::ChainState& state, sdk::Result* result) {
    nlohmann::json& status = result->Status();
    status["phase"] = "Done";
    status["cancelled"] = state.cancelled;
    status["flags"] = state.flags;
    status["allReady"] = state.all_ready();
    status["failedAt"] = state.failed_at;
  })(req);
}

sdk::Result Builders(const sdk::Request& req) {
  const std::string& name = req.name();
  const nlohmann::json labels = sdk::CommonLabels("scenario", name);
  const nlohmann::json selector = sdk::SelectorLabels("scenario", name);
  absl::StatusOr<std::string> hash =
      sdk::ConfigHash(req.spec().value("config", nlohmann::json::object()));
  if (!hash.ok()) return sdk::Result::FromStatus(hash.status());
  const nlohmann::json rules =
      nlohmann::json::array({sdk::PolicyRule({""}, {"configmaps"}, {"get", "list"}),
                             sdk::PolicyRule({"apps"}, {"deployments"}, {"watch"})});
  const nlohmann::json subjects =
      nlohmann::json::array({sdk::ServiceAccountSubject(name, req.namespace_())});
  nlohmann::json built = nlohmann::json::array();
  built.push_back(sdk::BuildDeployment(
      {.name = name,
       .labels = labels,
       .selector = selector,
       .replicas = 2,
       .containers = nlohmann::json::array({{{"name", "main"}, {"image", "busybox"}}}),
       .pod_annotations = {{sdk::kConfigHashAnnotation, *hash}},
       .pod_spec = {{"serviceAccountName", name}}}));
  built.push_back(sdk::BuildService(
      {.name = name,
       .labels = labels,
       .selector = selector,
       .ports = {{.name = "http", .port = 80, .target_port = "http"},
                 {.name = "dns", .port = 53, .target_port = 53, .protocol = "UDP"}},
       .type = "ClusterIP"}));
  built.push_back(sdk::BuildConfigMap(
      {.name = name + "-config", .labels = labels, .owner_reference = sdk::OwnerReference(req)},
      {{"a", "b"}}));
  built.push_back(
      sdk::BuildSecret({.name = name + "-secret", .labels = labels}, {{"token", "t"}}, "Opaque"));
  built.push_back(sdk::BuildServiceAccount({.name = name, .labels = labels}));
  built.push_back(sdk::BuildRole({.name = name, .labels = labels}, rules));
  built.push_back(sdk::BuildRoleBinding({.name = name, .labels = labels}, name, subjects));
  built.push_back(sdk::BuildClusterRole({.name = name + "-cluster", .labels = labels}, rules));
  built.push_back(sdk::BuildClusterRoleBinding({.name = name + "-cluster", .labels = labels},
                                               name + "-cluster", subjects));
  sdk::Result result;
  result.Status() = {{"phase", "Done"}, {"configHash", *hash}, {"built", built}};
  return result;
}

sdk::Result Callbacks(const sdk::Request& req) {
  auto log = std::make_shared<std::vector<std::string>>();
  sdk::StageCallbacks callbacks;
  for (sdk::Stage stage :
       {sdk::Stage::kPreCreate, sdk::Stage::kPostCreate, sdk::Stage::kPreUpdate,
        sdk::Stage::kPostUpdate, sdk::Stage::kPreDelete, sdk::Stage::kPostDelete}) {
    callbacks.On(
        "v1", "ConfigMap", stage, "label",
        [](const sdk::Request&, sdk::Stage stage, nlohmann::json* desired, const nlohmann::json*) {
          if (desired != nullptr) {
            (*desired)["metadata"]["labels"]["stage"] = std::string(sdk::StageName(stage));
          }
          return absl::OkStatus();
        });
    callbacks.On("v1", "ConfigMap", stage, "record",
                 [log](const sdk::Request&, sdk::Stage stage, nlohmann::json* desired,
                       const nlohmann::json* current) {
                   const nlohmann::json& obj = desired != nullptr ? *desired : *current;
                   log->push_back(absl::StrCat(sdk::StageName(stage), ":",
                                               obj["metadata"]["name"].get<std::string>()));
                   return absl::OkStatus();
                 });
    callbacks.On(
        "v1", "ConfigMap", stage, "guard",
        [](const sdk::Request& r, sdk::Stage stage, nlohmann::json*, const nlohmann::json*) {
          if (SpecIs(r, "failAt", std::string(sdk::StageName(stage)))) {
            return absl::InvalidArgumentError("spec.failAt");
          }
          return absl::OkStatus();
        });
  }
  sdk::DependentChain chain;
  for (std::string dep : {"a", "b", "c"}) {
    sdk::Dependent d{dep, "v1", "ConfigMap",
                     [dep](const sdk::Request& r) -> absl::StatusOr<nlohmann::json> {
                       nlohmann::json cm = sdk::NewObject("v1", "ConfigMap", r.name() + "-" + dep);
                       cm["data"] = {{"v", "new"}};
                       return cm;
                     }};
    if (dep == "c") d.when = [](const sdk::Request&) { return false; };
    chain.Add(std::move(d));
  }
  chain.WithCallbacks(callbacks);
  return chain.Build([log](const sdk::Request&, const sdk::ChainState&, sdk::Result* result) {
    result->Status()["phase"] = "Done";
    result->Status()["log"] = *log;
  })(req);
}

sdk::Result OperatorStatus(const sdk::Request& req) {
  auto string_at = [&](const char* field, const char* fallback) {
    auto it = req.spec().find(field);
    return it != req.spec().end() && it->is_string() ? it->get<std::string>()
                                                     : std::string(fallback);
  };
  const std::string version = string_at("version", "1.0.0");
  sdk::Result result;
  nlohmann::json& cm = result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()));
  cm["data"] = {{"version", version}};
  const nlohmann::json* child = req.Child("ConfigMap", req.name());
  const nlohmann::json* child_version =
      child != nullptr ? sdk::FindPath(*child, "data.version") : nullptr;
  const bool ready = child_version != nullptr && *child_version == version;
  sdk::SetOperatorStatus(req,
                         {.operator_version = "1.0.0",
                          .target_version = version,
                          .children_ready = ready,
                          .message = ready ? "" : "waiting for ConfigMap " + req.name(),
                          .failure = string_at("failure", "")},
                         &result);
  return result;
}

std::string LabelOf(const sdk::Request& req, const std::string& key) {
  const std::map<std::string, std::string> labels = req.labels();
  auto it = labels.find(key);
  return it != labels.end() ? it->second : "";
}

sdk::ResourceRouter& Router() {
  static sdk::ResourceRouter* router = [] {
    auto* r = new sdk::ResourceRouter();
    auto reconcile_as = [](std::string set) {
      return [set](const sdk::Request& req, const nlohmann::json& context) {
        sdk::Result result;
        result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()))["data"] = {{"set", set}};
        result.Status() = {{"phase", "Done"}, {"set", set}, {"context", context}};
        return result;
      };
    };
    (void)r->Add({"v1",
                  [](const sdk::Request& req) {
                    const std::string v = LabelOf(req, "version");
                    return v.empty() || v == "v1";
                  },
                  reconcile_as("v1")});
    (void)r->Add({"v2", [](const sdk::Request& req) { return LabelOf(req, "version") == "v2"; },
                  reconcile_as("v2"),
                  [](const sdk::Request&) -> absl::StatusOr<nlohmann::json> {
                    return nlohmann::json{{"replicas", 2}, {"set", "v2"}};
                  }});
    (void)r->Add({"canary",
                  [](const sdk::Request& req) { return LabelOf(req, "track") == "canary"; },
                  reconcile_as("canary")});
    return r;
  }();
  return *router;
}

sdk::Result Route(const sdk::Request& req) {
  const uint64_t skipped_before = Router().skipped();
  sdk::Result result = Router().Route(req);
  if (Router().skipped() > skipped_before) result.Status()["skipped"] = Router().skipped();
  return result;
}

std::string TaskFile() {
  const char* path = std::getenv("SCENARIO_TASK_FILE");
  return path != nullptr ? path : "";
}

// "namespace/name" -> token, from the lines "namespace/name token" (others are ignored).
std::map<std::string, std::string> ReadTokens() {
  std::map<std::string, std::string> tokens;
  std::ifstream in(TaskFile());
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields.size() == 2) tokens[fields[0]] = fields[1];
  }
  return tokens;
}

sdk::Result Task(const sdk::Request& req) {
  const std::map<std::string, std::string> tokens = ReadTokens();
  auto it = tokens.find(absl::StrCat(req.namespace_(), "/", req.name()));
  const std::string token = it != tokens.end() ? it->second : "";
  sdk::Result result;
  result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()))["data"] = {{"token", token}};
  result.Status() = {{"phase", "Done"}, {"token", token}};
  return result;
}

absl::Status Poke(sdk::TaskContext& ctx) {
  static std::atomic<int> runs{0};
  if (runs.fetch_add(1) == 0) {
    return absl::UnavailableError("scenario task fails on its first run");
  }
  std::map<std::string, std::string> seen;
  do {
    for (const auto& [key, token] : ReadTokens()) {
      auto it = seen.find(key);
      if (it != seen.end() && it->second == token) continue;
      seen[key] = token;
      std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 1));
      if (parts.size() != 2) continue;
      if (absl::Status s = ctx.Enqueue(parts[0], parts[1]); !s.ok()) {
        std::fprintf(stderr, "scenario task: %s\n", std::string(s.message()).c_str());
      }
    }
  } while (!ctx.Wait(absl::Milliseconds(200)));
  return absl::OkStatus();
}

sdk::Result Reconcile(const sdk::Request& req) {
  if (!req.exists() || req.deleting()) return sdk::Result();
  const std::string outcome = req.spec().value("outcome", "ok");
  if (outcome == "chain") return Chain(req);
  if (outcome == "builders") return Builders(req);
  if (outcome == "callbacks") return Callbacks(req);
  if (outcome == "status") return OperatorStatus(req);
  if (outcome == "route") return Route(req);
  if (outcome == "task") return Task(req);
  sdk::Result result;
  if (outcome == "requeue") {
    result.Status()["phase"] = "Waiting";
    result.SetRequeueAfter(absl::Seconds(30));
  } else if (outcome == "retryable") {
    return sdk::Result::RetryableError("the scenario asks for a retry");
  } else if (outcome == "retry-after") {
    return sdk::Result::RetryableError("the scenario's quota is used up", "QuotaExceeded",
                                       absl::Seconds(45));
  } else if (outcome == "terminal") {
    result.Event(sdk::EventType::kWarning, "GivingUp", "the scenario asks to stop");
    result.SetError(sdk::ErrorKind::kTerminal, "the scenario asks to stop");
  } else if (outcome == "forbidden") {
    nlohmann::json& secret = result.Desire(sdk::NewObject("v1", "Secret", req.name()));
    secret["stringData"] = {{"token", "x"}};
  } else if (outcome == "labels") {
    // Default labels: a child of another kind gets the primary's, one of its own kind none.
    result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()))["data"] = {{"k", "v"}};
    result.Desire(sdk::NewObject("e2e.ctrlhost.dev/v1", "Scenario",
                                 req.name() + "-child"))["spec"] = {{"outcome", "ok"}};
  } else {
    nlohmann::json& cm = result.Desire(sdk::NewObject("v1", "ConfigMap", req.name()));
    cm["data"] = req.spec().value("data", nlohmann::json::object());
    result.Status()["phase"] = "Done";
  }
  return result;
}

int main() {
  sdk::Plugin plugin("scenario", "1.0.0");
  sdk::ControllerBuilder scenario("scenario");
  scenario.For("e2e.ctrlhost.dev", "v1", "Scenario")
      .Owns("", "v1", "ConfigMap")
      .Owns("e2e.ctrlhost.dev", "v1", "Scenario")
      .Reconcile(Reconcile);
  if (!TaskFile().empty()) scenario.BackgroundTask("poke", Poke);
  plugin.Add(scenario);
  return plugin.Run();
}
