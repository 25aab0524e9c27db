#include "sdk/cpp/handlers.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::sdk {
namespace {

using testing::Outcome;
using testing::RequestBuilder;

constexpr char kPrimary[] = R"(
apiVersion: example.com/v1
kind: App
metadata: {name: shop, namespace: team-a, generation: 2}
spec: {cache: true, replicas: 2}
)";

// The controller owns the kinds the tests' layers manage (the harness refuses others, as the
// host does).
Outcome RunFn(const ReconcileFn& fn, const pluginpb::ReconcileCall& call) {
  auto controller = *ControllerBuilder("app")
                         .For("example.com", "v1", "App")
                         .Owns("", "v1", "ConfigMap")
                         .Owns("", "v1", "Service")
                         .Owns("apps", "v1", "Deployment")
                         .Reconcile(fn)
                         .Build();
  return testing::Reconcile(*controller, call);
}

TEST(HandlersTest, RoutesUpsertAndDelete) {
  int upserts = 0, deletes = 0;
  ReconcileFn fn = Handlers()
                       .OnUpsert([&](const Request&) {
                         ++upserts;
                         return Result();
                       })
                       .OnDelete([&](const Request&) {
                         ++deletes;
                         return Result();
                       })
                       .Build();
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  EXPECT_TRUE(RunFn(fn, req.Call()).ok());
  EXPECT_EQ(upserts, 1);
  Outcome fin = RunFn(fn, RequestBuilder(req).Finalizing().Call());
  EXPECT_TRUE(fin.finalized());
  EXPECT_EQ(deletes, 1);
  EXPECT_TRUE(RunFn(fn, RequestBuilder::Gone("team-a", "shop").Call()).ok());
  EXPECT_EQ(deletes, 2);
  // Being deleted without our finalizer: nothing is called.
  nlohmann::json deleting = req.primary();
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_TRUE(RunFn(fn, RequestBuilder(deleting).Call()).ok());
  EXPECT_EQ(upserts + deletes, 3);
}

TEST(HandlersTest, FailedDeleteKeepsTheFinalizer) {
  ReconcileFn fn =
      Handlers().OnDelete([](const Request&) { return Result::RetryableError("busy"); }).Build();
  Outcome out = RunFn(fn, RequestBuilder::FromYaml(kPrimary)->Finalizing().Call());
  EXPECT_TRUE(out.retryable());
  EXPECT_FALSE(out.finalized());
}

DependentChain MakeChain() {
  DependentChain chain;
  chain.Add({"config", "v1", "ConfigMap", [](const Request& r) -> absl::StatusOr<nlohmann::json> {
               nlohmann::json cm = NewObject("v1", "ConfigMap", r.name() + "-config");
               cm["data"] = {{"k", "v"}};
               return cm;
             }});
  chain.Add({"deployment", "apps/v1", "Deployment",
             [](const Request& r) -> absl::StatusOr<nlohmann::json> {
               nlohmann::json d = NewObject("apps/v1", "Deployment");
               d["spec"]["replicas"] = r.spec().value("replicas", 1);
               return d;
             },
             nullptr,
             [](const nlohmann::json& current) {
               return current.value("status", nlohmann::json::object()).value("readyReplicas", 0) >
                      0;
             }});
  chain.Add({"cache", "v1", "Service",
             [](const Request& r) -> absl::StatusOr<nlohmann::json> {
               return NewObject("v1", "Service", r.name() + "-cache");
             },
             [](const Request& r) { return r.spec().value("cache", false); }});
  return chain;
}

TEST(DependentChainTest, CreatesInOrderOnceEachPredecessorIsReady) {
  ReconcileFn fn = MakeChain().Build();
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  // Nothing exists: the first dependent is created; the others wait for it.
  Outcome first = RunFn(fn, req.Call());
  ASSERT_TRUE(first.ok()) << first.error_message();
  ASSERT_EQ(first.desired.size(), 1u);
  EXPECT_NE(first.Desired("ConfigMap", "shop-config"), nullptr);
  EXPECT_EQ(first.Condition("DependentsReady")->status(), pluginpb::CONDITION_STATUS_FALSE);
  EXPECT_NE(first.Condition("DependentsReady")->message().find("deployment"), std::string::npos);

  // The ConfigMap exists (ready by existing): the Deployment comes next, the Service waits.
  req.ChildrenFrom(first);
  Outcome second = RunFn(fn, req.Call());
  ASSERT_EQ(second.desired.size(), 2u);
  EXPECT_EQ((*second.Desired("Deployment", "shop"))["spec"]["replicas"], 2);
  EXPECT_EQ(second.Desired("Service", "shop-cache"), nullptr);

  // The Deployment exists but is not ready yet: still no Service.
  req.ChildrenFrom(second);
  EXPECT_EQ(RunFn(fn, req.Call()).Desired("Service", "shop-cache"), nullptr);

  // Ready: everything is desired and the condition turns True.
  nlohmann::json ready_dep = *second.Desired("Deployment", "shop");
  ready_dep["metadata"]["namespace"] = "team-a";
  ready_dep["status"]["readyReplicas"] = 2;
  RequestBuilder ready = *RequestBuilder::FromYaml(kPrimary);
  ready.Child(*first.Desired("ConfigMap", "shop-config")).Child(ready_dep);
  Outcome third = RunFn(fn, ready.Call());
  EXPECT_NE(third.Desired("Service", "shop-cache"), nullptr);
  ready.ChildrenFrom(third).Child(ready_dep);
  Outcome fourth = RunFn(fn, ready.Call());
  EXPECT_EQ(fourth.desired.size(), 3u);
}

TEST(DependentChainTest, EnsureDeletedInReverseOrder) {
  DependentChain chain;
  auto named = [](std::string name) {
    return [name](const Request&) -> absl::StatusOr<nlohmann::json> {
      return NewObject("v1", "ConfigMap", name);
    };
  };
  auto off = [](const Request&) { return false; };
  chain.Add({"a", "v1", "ConfigMap", named("a"), off});
  chain.Add({"b", "v1", "ConfigMap", named("b"), off});
  ReconcileFn fn = chain.Build();
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(NewObject("v1", "ConfigMap", "a")).Child(NewObject("v1", "ConfigMap", "b"));
  // Both unwanted and present: "b" (later) goes first, "a" is kept until then.
  Outcome out = RunFn(fn, req.Call());
  EXPECT_NE(out.Desired("ConfigMap", "a"), nullptr);
  EXPECT_EQ(out.Desired("ConfigMap", "b"), nullptr);
  EXPECT_EQ(out.Condition("DependentsReady")->status(), pluginpb::CONDITION_STATUS_FALSE);
  // "b" is gone: now "a" goes.
  RequestBuilder after = *RequestBuilder::FromYaml(kPrimary);
  after.Child(NewObject("v1", "ConfigMap", "a"));
  EXPECT_TRUE(RunFn(fn, after.Call()).desired.empty());
  // Nothing left: all ready (nothing wanted).
  EXPECT_EQ(
      RunFn(fn, RequestBuilder::FromYaml(kPrimary)->Call()).Condition("DependentsReady")->status(),
      pluginpb::CONDITION_STATUS_TRUE);
}

TEST(DependentChainTest, DesiredErrorsBecomeResultErrors) {
  DependentChain chain;
  chain.Add({"bad", "v1", "ConfigMap", [](const Request&) -> absl::StatusOr<nlohmann::json> {
               return absl::InvalidArgumentError("spec.x missing");
             }});
  Outcome out = RunFn(chain.Build(), RequestBuilder::FromYaml(kPrimary)->Call());
  EXPECT_TRUE(out.terminal());
  EXPECT_NE(out.error_message().find("dependent bad: spec.x missing"), std::string::npos);
}

// The chain state after a failed dependent says "not ready" (as in every SDK): the walk stopped.
TEST(DependentChainTest, StateAfterAFailureIsNotReady) {
  DependentChain chain;
  chain.Add({"bad", "v1", "ConfigMap", [](const Request&) -> absl::StatusOr<nlohmann::json> {
               return absl::InvalidArgumentError("spec.x missing");
             }});
  bool seen = false;
  ChainState seen_state;
  Outcome out = RunFn(chain.Build([&](const Request&, const ChainState& state, Result*) {
    seen = true;
    seen_state = state;
  }),
                      RequestBuilder::FromYaml(kPrimary)->Call());
  EXPECT_TRUE(out.terminal());
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen_state.failed_at, "bad");
  EXPECT_FALSE(seen_state.all_ready());
  EXPECT_TRUE(seen_state.pending.empty());
}

TEST(CrudResourceTest, PlansCreateUpdateDelete) {
  CrudResource copies("v1", "ConfigMap", [](const Request&) {
    std::vector<nlohmann::json> out;
    for (const char* name : {"new", "same", "changed"}) {
      nlohmann::json cm = NewObject("v1", "ConfigMap", name);
      cm["data"] = {{"v", "1"}};
      out.push_back(cm);
    }
    return out;
  });
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  auto existing = [](const char* name, const char* value) {
    nlohmann::json cm = NewObject("v1", "ConfigMap", name);
    cm["metadata"]["namespace"] = "team-a";
    cm["metadata"]["resourceVersion"] = "5";
    cm["data"] = {{"v", value}};
    return cm;
  };
  req.Child(existing("same", "1")).Child(existing("changed", "2")).Child(existing("old", "1"));
  absl::StatusOr<Request> request = Request::FromCall(req.Call());
  ASSERT_TRUE(request.ok());
  absl::StatusOr<CrudPlan> plan = copies.Plan(*request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->create.size(), 1u);
  EXPECT_EQ(plan->create[0]["metadata"]["name"], "new");
  ASSERT_EQ(plan->update.size(), 1u);
  EXPECT_EQ(plan->update[0]["metadata"]["name"], "changed");
  ASSERT_EQ(plan->unchanged.size(), 1u);
  ASSERT_EQ(plan->remove.size(), 1u);
  EXPECT_EQ(plan->remove[0].name(), "old");
  EXPECT_FALSE(plan->empty());

  Outcome out = RunFn(copies.Build(), req.Call());
  ASSERT_EQ(out.desired.size(), 3u);
  EXPECT_EQ(out.desired[0]["metadata"]["name"], "new");  // create, update, unchanged
  EXPECT_EQ(out.desired[1]["metadata"]["name"], "changed");
  EXPECT_EQ(out.desired[2]["metadata"]["name"], "same");
  EXPECT_TRUE(out.HasEvent("Created"));
  EXPECT_TRUE(out.HasEvent("Updated"));
  EXPECT_TRUE(out.HasEvent("Deleted"));
}

TEST(CrudResourceTest, RefusesNamelessAndDuplicateObjects) {
  CrudResource nameless("v1", "ConfigMap", [](const Request&) {
    return std::vector<nlohmann::json>{NewObject("v1", "ConfigMap")};
  });
  EXPECT_TRUE(RunFn(nameless.Build(), RequestBuilder::FromYaml(kPrimary)->Call()).terminal());
  CrudResource twice("v1", "ConfigMap", [](const Request&) {
    return std::vector<nlohmann::json>{NewObject("v1", "ConfigMap", "x"),
                                       NewObject("v1", "ConfigMap", "x")};
  });
  EXPECT_TRUE(RunFn(twice.Build(), RequestBuilder::FromYaml(kPrimary)->Call()).terminal());
}

// Three ConfigMaps a, b, c; the step of `step_of` runs `step` (the others set "seen-<name>").
DependentChain FlagChain(const std::string& step_of, StepFn step) {
  DependentChain chain;
  for (std::string name : {"a", "b", "c"}) {
    Dependent d{name, "v1", "ConfigMap", [name](const Request&) -> absl::StatusOr<nlohmann::json> {
                  nlohmann::json cm = NewObject("v1", "ConfigMap", name);
                  cm["data"] = {{"v", "2"}};
                  return cm;
                }};
    d.on_pass = name == step_of ? step
                                : StepFn([name](const Request&, const nlohmann::json&,
                                                const nlohmann::json*, PassContext* ctx) {
                                    ctx->SetFlag("seen-" + name);
                                    return absl::OkStatus();
                                  });
    chain.Add(std::move(d));
  }
  return chain;
}

nlohmann::json ExistingConfigMap(const char* name, const char* value) {
  nlohmann::json cm = NewObject("v1", "ConfigMap", name);
  cm["metadata"]["namespace"] = "team-a";
  cm["metadata"]["resourceVersion"] = "7";
  cm["metadata"]["labels"] = {{"owner", "someone"}};
  cm["data"] = {{"v", value}, {"extra", "x"}};
  return cm;
}

TEST(PassContextTest, CancelPassSkipsLaterDependentsAndKeepsThoseThatExist) {
  DependentChain chain = FlagChain(
      "b", [](const Request&, const nlohmann::json&, const nlohmann::json*, PassContext* ctx) {
        ctx->CancelPass("waiting for a migration");
        return absl::OkStatus();
      });
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(ExistingConfigMap("a", "1")).Child(ExistingConfigMap("c", "1"));
  Outcome out = RunFn(chain.Build(), req.Call());
  ASSERT_TRUE(out.ok()) << out.error_message();
  // a and b (the canceller's own resource) are applied; c exists and is kept as it is: its
  // current values for the fields the pass would set, nothing else.
  EXPECT_EQ((*out.Desired("ConfigMap", "a"))["data"]["v"], "2");
  EXPECT_EQ((*out.Desired("ConfigMap", "b"))["data"]["v"], "2");
  const nlohmann::json* c = out.Desired("ConfigMap", "c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["data"], nlohmann::json({{"v", "1"}}));
  EXPECT_FALSE((*c)["metadata"].contains("resourceVersion"));
  const pluginpb::Condition* cond = out.Condition("DependentsReady");
  EXPECT_EQ(cond->status(), pluginpb::CONDITION_STATUS_FALSE);
  EXPECT_EQ(cond->reason(), "Cancelled");
  EXPECT_EQ(cond->message(),
            "b cancelled the pass: waiting for a migration; skipped: c; "
            "waiting for b");

  // c absent: it is not created.
  RequestBuilder fresh = *RequestBuilder::FromYaml(kPrimary);
  fresh.Child(ExistingConfigMap("a", "1")).Child(ExistingConfigMap("b", "1"));
  EXPECT_EQ(RunFn(chain.Build(), fresh.Call()).Desired("ConfigMap", "c"), nullptr);
}

TEST(PassContextTest, CancelResourceSkipsOnlyThatDependent) {
  DependentChain chain = FlagChain("b", [](const Request&, const nlohmann::json&,
                                           const nlohmann::json* current, PassContext* ctx) {
    if (current != nullptr) ctx->CancelResource("updates are paused");
    return absl::OkStatus();
  });
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(ExistingConfigMap("a", "2")).Child(ExistingConfigMap("b", "1"));
  req.Child(ExistingConfigMap("c", "1"));
  absl::StatusOr<Request> request = Request::FromCall(req.Call());
  ASSERT_TRUE(request.ok());
  Result result;
  ChainState state = chain.Reconcile(*request, &result);
  EXPECT_EQ(state.cancelled, std::vector<std::string>{"b"});
  EXPECT_EQ(state.cancel_reasons.at("b"), "updates are paused");
  EXPECT_TRUE(state.pass_cancelled_by.empty());
  EXPECT_EQ(state.flags, (std::map<std::string, bool>{{"seen-a", true}, {"seen-c", true}}));
  EXPECT_FALSE(state.all_ready());
  Outcome out = RunFn(chain.Build(), req.Call());
  EXPECT_EQ((*out.Desired("ConfigMap", "b"))["data"]["v"], "1");  // kept
  EXPECT_EQ((*out.Desired("ConfigMap", "c"))["data"]["v"], "2");  // later ones still run
  EXPECT_EQ(out.Condition("DependentsReady")->message(), "skipped: b (updates are paused)");
}

TEST(PassContextTest, FlagsSetEarlierAreSeenLater) {
  DependentChain chain;
  auto cm = [](std::string name) {
    return [name](const Request&) -> absl::StatusOr<nlohmann::json> {
      nlohmann::json out = NewObject("v1", "ConfigMap", name);
      out["data"] = {{"v", "2"}};
      return out;
    };
  };
  Dependent first{"first", "v1", "ConfigMap", cm("first")};
  first.on_pass = [](const Request& r, const nlohmann::json& desired, const nlohmann::json* current,
                     PassContext* ctx) {
    ctx->SetFlag(PassContext::kUpdateAllowed, r.spec().value("cache", false));
    ctx->SetFlag(PassContext::kUpdateNecessary, current != nullptr && !IsSubset(desired, *current));
    return absl::OkStatus();
  };
  Dependent second{"second", "v1", "ConfigMap", cm("second")};
  std::vector<std::pair<bool, bool>> seen;
  second.on_pass = [&seen](const Request&, const nlohmann::json&, const nlohmann::json*,
                           PassContext* ctx) {
    seen.emplace_back(ctx->Flag(PassContext::kUpdateAllowed),
                      ctx->Flag(PassContext::kUpdateNecessary));
    if (!ctx->Flag(PassContext::kUpdateAllowed)) ctx->CancelResource("updates not allowed");
    return absl::OkStatus();
  };
  chain.Add(first).Add(second);
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);  // spec.cache: true
  req.Child(ExistingConfigMap("first", "1"));
  Outcome out = RunFn(chain.Build(), req.Call());
  EXPECT_NE(out.Desired("ConfigMap", "second"), nullptr);
  nlohmann::json off = req.primary();
  off["spec"]["cache"] = false;
  RequestBuilder req_off(off);
  req_off.Child(ExistingConfigMap("first", "1"));
  EXPECT_EQ(RunFn(chain.Build(), req_off.Call()).Desired("ConfigMap", "second"), nullptr);
  EXPECT_EQ(seen, (std::vector<std::pair<bool, bool>>{{true, true}, {false, true}}));
}

TEST(PassContextTest, StepErrorNamesTheDependent) {
  DependentChain chain =
      FlagChain("a", [](const Request&, const nlohmann::json&, const nlohmann::json*,
                        PassContext*) { return absl::InvalidArgumentError("no such mode"); });
  Outcome out = RunFn(chain.Build(), RequestBuilder::FromYaml(kPrimary)->Call());
  EXPECT_TRUE(out.terminal());
  EXPECT_EQ(out.error_message(), "dependent a: no such mode");
  EXPECT_TRUE(out.desired.empty());
}

TEST(PassContextTest, CrudStepsSkipObjectsAndTheRestOfThePass) {
  CrudResource copies("v1", "ConfigMap", [](const Request&) {
    std::vector<nlohmann::json> out;
    for (const char* name : {"a", "b", "c", "d"}) {
      nlohmann::json cm = NewObject("v1", "ConfigMap", name);
      cm["data"] = {{"v", "2"}};
      out.push_back(cm);
    }
    return out;
  });
  std::vector<std::string> stepped;
  copies.OnPass([&stepped](const Request&, const nlohmann::json& desired, const nlohmann::json*,
                           PassContext* ctx) {
    const std::string name = desired["metadata"]["name"];
    stepped.push_back(name);
    if (name == "a") ctx->CancelResource("frozen by policy");
    if (name == "b") ctx->CancelPass("budget spent");
    return absl::OkStatus();
  });
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(ExistingConfigMap("a", "1")).Child(ExistingConfigMap("c", "1"));
  Outcome out = RunFn(copies.Build(), req.Call());
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_EQ(stepped, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ((*out.Desired("ConfigMap", "a"))["data"]["v"], "1");  // kept
  EXPECT_EQ((*out.Desired("ConfigMap", "b"))["data"]["v"], "2");  // the canceller's own
  EXPECT_EQ((*out.Desired("ConfigMap", "c"))["data"]["v"], "1");  // kept after the cancel
  EXPECT_EQ(out.Desired("ConfigMap", "d"), nullptr);              // not created
  EXPECT_TRUE(out.HasEvent("Skipped"));
  absl::StatusOr<Request> request = Request::FromCall(req.Call());
  absl::StatusOr<CrudPlan> plan = copies.Plan(*request);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->skipped.size(), 3u);
  EXPECT_EQ(plan->skipped[0].second, "frozen by policy");
  EXPECT_EQ(plan->skipped[2].second, "pass cancelled: budget spent");
  EXPECT_TRUE(plan->pass_cancelled);
}

TEST(FreezeOntoTest, KeepsCurrentValuesOfDesiredFields) {
  nlohmann::json desired = {{"apiVersion", "v1"},
                            {"kind", "ConfigMap"},
                            {"metadata", {{"name", "x"}, {"labels", {{"a", "1"}}}}},
                            {"data", {{"k", "new"}, {"gone", "y"}}}};
  nlohmann::json current = {{"apiVersion", "v1"},
                            {"kind", "ConfigMap"},
                            {"metadata", {{"name", "x"}, {"uid", "u"}, {"labels", {{"a", "0"}}}}},
                            {"data", {{"k", "old"}, {"other", "z"}}}};
  EXPECT_EQ(FreezeOnto(desired, current),
            nlohmann::json({{"apiVersion", "v1"},
                            {"kind", "ConfigMap"},
                            {"metadata", {{"name", "x"}, {"labels", {{"a", "0"}}}}},
                            {"data", {{"k", "old"}}}}));
}

// Records "<callback>:<stage>:<name>" and labels the desired object at pre-* stages.
StageCallbacks RecordingCallbacks(std::vector<std::string>* log) {
  StageCallbacks callbacks;
  for (Stage stage : {Stage::kPreCreate, Stage::kPostCreate, Stage::kPreUpdate, Stage::kPostUpdate,
                      Stage::kPreDelete, Stage::kPostDelete}) {
    for (std::string cb : {"label", "record"}) {
      callbacks.On("v1", "ConfigMap", stage, cb,
                   [cb, log](const Request&, Stage stage, nlohmann::json* desired,
                             const nlohmann::json* current) {
                     const nlohmann::json& obj = desired != nullptr ? *desired : *current;
                     log->push_back(absl::StrCat(cb, ":", StageName(stage), ":",
                                                 obj["metadata"]["name"].get<std::string>()));
                     if (cb == "label" && desired != nullptr) {
                       (*desired)["metadata"]["labels"]["stage"] = std::string(StageName(stage));
                     }
                     return absl::OkStatus();
                   });
    }
  }
  return callbacks;
}

TEST(StageCallbacksTest, ChainRunsCallbacksPerStageInRegistrationOrder) {
  std::vector<std::string> log;
  DependentChain chain;
  auto cm = [](std::string name) {
    return [name](const Request&) -> absl::StatusOr<nlohmann::json> {
      nlohmann::json out = NewObject("v1", "ConfigMap", name);
      out["data"] = {{"v", "2"}};
      return out;
    };
  };
  chain.Add({"a", "v1", "ConfigMap", cm("a")})
      .Add({"b", "v1", "ConfigMap", cm("b")})
      .Add({"same", "v1", "ConfigMap", cm("same")})
      .Add({"c", "v1", "ConfigMap", cm("c"), [](const Request&) { return false; }});
  chain.WithCallbacks(RecordingCallbacks(&log));
  nlohmann::json same = ExistingConfigMap("same", "2");
  same["data"].erase("extra");
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(ExistingConfigMap("a", "1")).Child(same).Child(ExistingConfigMap("c", "1"));
  Outcome out = RunFn(chain.Build(), req.Call());
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_EQ(log, (std::vector<std::string>{
                     "label:pre-update:a", "record:pre-update:a", "label:post-update:a",
                     "record:post-update:a", "label:pre-create:b", "record:pre-create:b",
                     "label:post-create:b", "record:post-create:b", "label:pre-delete:c",
                     "record:pre-delete:c", "label:post-delete:c", "record:post-delete:c"}));
  // Pre-stage changes reach the answer; post-stage ones do not.
  EXPECT_EQ((*out.Desired("ConfigMap", "a"))["metadata"]["labels"]["stage"], "pre-update");
  EXPECT_EQ((*out.Desired("ConfigMap", "b"))["metadata"]["labels"]["stage"], "pre-create");
  EXPECT_FALSE((*out.Desired("ConfigMap", "same"))["metadata"].contains("labels"));
  EXPECT_EQ(out.Desired("ConfigMap", "c"), nullptr);
}

TEST(StageCallbacksTest, AnErrorStopsTheStepAndNamesTheCallback) {
  DependentChain chain;
  chain.Add({"a", "v1", "ConfigMap", [](const Request&) -> absl::StatusOr<nlohmann::json> {
               return NewObject("v1", "ConfigMap", "a");
             }});
  chain.Add({"b", "v1", "ConfigMap", [](const Request&) -> absl::StatusOr<nlohmann::json> {
               return NewObject("v1", "ConfigMap", "b");
             }});
  StageCallbacks callbacks;
  int later = 0;
  callbacks.On("v1", "ConfigMap", Stage::kPreCreate, "quota",
               [](const Request&, Stage, nlohmann::json* desired, const nlohmann::json*) {
                 if ((*desired)["metadata"]["name"] == "b") {
                   return absl::InvalidArgumentError("over quota");
                 }
                 return absl::OkStatus();
               });
  callbacks.On("v1", "ConfigMap", Stage::kPreCreate, "after",
               [&later](const Request&, Stage, nlohmann::json*, const nlohmann::json*) {
                 ++later;
                 return absl::OkStatus();
               });
  chain.WithCallbacks(callbacks);
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(NewObject("v1", "ConfigMap", "a"));
  Outcome out = RunFn(chain.Build(), req.Call());
  EXPECT_TRUE(out.terminal());
  EXPECT_EQ(out.error_message(), "dependent b: callback quota at pre-create: over quota");
  EXPECT_EQ(out.Desired("ConfigMap", "b"), nullptr);
  EXPECT_EQ(later, 0);  // a exists unchanged: no step; b stopped before "after"
}

TEST(StageCallbacksTest, CrudRunsCallbacksAroundCreatesUpdatesAndRemovals) {
  std::vector<std::string> log;
  CrudResource copies("v1", "ConfigMap", [](const Request&) {
    std::vector<nlohmann::json> out;
    for (const char* name : {"a", "b"}) {
      nlohmann::json cm = NewObject("v1", "ConfigMap", name);
      cm["data"] = {{"v", "2"}};
      out.push_back(cm);
    }
    return out;
  });
  copies.WithCallbacks(RecordingCallbacks(&log));
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Child(ExistingConfigMap("a", "1")).Child(ExistingConfigMap("old", "1"));
  Outcome out = RunFn(copies.Build(), req.Call());
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_EQ(log, (std::vector<std::string>{
                     "label:pre-update:a", "record:pre-update:a", "label:post-update:a",
                     "record:post-update:a", "label:pre-create:b", "record:pre-create:b",
                     "label:post-create:b", "record:post-create:b", "label:pre-delete:old",
                     "record:pre-delete:old", "label:post-delete:old", "record:post-delete:old"}));
  EXPECT_EQ((*out.Desired("ConfigMap", "b"))["metadata"]["labels"]["stage"], "pre-create");
}

TEST(IsSubsetTest, ComparesFieldsRecursively) {
  nlohmann::json current = {{"a", {{"b", 1}, {"c", 2}}}, {"l", {1, 2}}};
  EXPECT_TRUE(IsSubset({{"a", {{"b", 1}}}}, current));
  EXPECT_FALSE(IsSubset({{"a", {{"b", 2}}}}, current));
  EXPECT_FALSE(IsSubset({{"x", 1}}, current));
  EXPECT_FALSE(IsSubset({{"l", {1}}}, current));
}

}  // namespace
}  // namespace ctrlhost::sdk
