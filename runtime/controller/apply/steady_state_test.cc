// The host's write path end to end against the embedded API server: real reflectors and
// caches, the runner, the real Applier, and a dispatcher that answers like a plugin (two
// Secrets per primary, one with `data: {}`, and a finalizer). After convergence, reconciling
// the same objects again makes no API request at all (a steady state must not turn the host's
// own no-op writes into work).
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/apply/applier.h"
#include "runtime/controller/runner.h"
#include "runtime/kube/client.h"
#include "runtime/kube/rest_client.h"
#include "runtime/watch/kube_lister_watcher.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::controller::apply {
namespace {

using nlohmann::json;

constexpr char kFinalizer[] = "ctrlhost.dev/cleanup";

// Answers like a plugin: for primary NAME, Secrets NAME-data and NAME-empty (`data: {}`);
// releases the finalizer when asked to finalize.
class PluginLikeDispatcher : public Dispatcher {
 public:
  void Dispatch(pluginpb::ReconcileCall call, absl::Time, ReconcileCallback done) override {
    pluginpb::ReconcileResponse response;
    if (call.finalizing()) {
      response.set_finalized(true);
    } else if (!call.object().empty()) {
      response.add_desired_objects(json{
          {"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", call.name() + "-data"}, {"labels", {{"app", call.name()}}}}},
          {"data", {{"k", "dg=="}}}}.dump());
      response.add_desired_objects(json{
          {"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", call.name() + "-empty"}}},
          {"data", json::object()}}.dump());
    }
    done(std::move(response));
  }
};

// Counts what the real applier does.
class CountingApplier : public ResponseApplier {
 public:
  explicit CountingApplier(Applier* applier) : applier_(applier) {}
  ApplyOutcome Apply(const ReconcileContext& context,
                     const pluginpb::ReconcileResponse& response) override {
    ApplyOutcome outcome = applier_->Apply(context, response);
    common::MutexLock lock(&mu_);
    ++applies_;
    writes_ += outcome.writes;
    if (outcome.kind != OutcomeKind::kDone) ++not_done_;
    cv_.SignalAll();
    return outcome;
  }
  absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(const ReconcileContext& context) override {
    return applier_->EnsureFinalizer(context);
  }
  void RecordTerminal(const ReconcileContext& context, const absl::Status& status) override {
    applier_->RecordTerminal(context, status);
  }

  struct Counts {
    uint64_t applies = 0, writes = 0, not_done = 0;
  };
  Counts Get() {
    common::MutexLock lock(&mu_);
    return {applies_, writes_, not_done_};
  }
  // Waits (bounded, real time) until at least `applies` Apply calls have returned.
  bool WaitForApplies(uint64_t applies) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (applies_ < applies) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) return applies_ >= applies;
    }
    return true;
  }

 private:
  Applier* const applier_;
  common::Mutex mu_;
  common::CondVar cv_;
  uint64_t applies_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t not_done_ ABSL_GUARDED_BY(mu_) = 0;
};

kube::ResourceRef Ref(const std::string& resource, const std::string& name = "") {
  kube::ResourceRef ref;
  ref.version = "v1";
  ref.resource = resource;
  ref.namespace_name = "default";
  ref.name = name;
  return ref;
}

TEST(SteadyStateTest, ReconcilingConvergedObjectsMakesNoRequestsIssue13) {
  auto api = apiserver::testing::EmbeddedApiServer::Start("steady_state");
  ASSERT_TRUE(api.ok()) << api.status();
  // The host's own transport (its requests are counted) and the fixture's for the test's setup.
  auto host_rest = (*api)->NewRestClient();
  ASSERT_TRUE(host_rest.ok()) << host_rest.status();
  kube::Client host(host_rest->get());
  kube::Client& client = (*api)->client();

  constexpr int kPrimaries = 3;
  for (int i = 0; i < kPrimaries; ++i) {
    ASSERT_TRUE(
        client
            .Create(Ref("configmaps"), json{{"metadata", {{"name", absl::StrCat("web", i)}}},
                                            {"data", {{"replicas", "1"}}}}
                                           .dump())
            .ok());
  }

  watch::ReflectorOptions reflector_options;
  reflector_options.description = "v1/configmaps";
  watch::Reflector configmaps(std::make_shared<watch::KubeListerWatcher>(&host, Ref("configmaps")),
                              reflector_options);
  reflector_options.description = "v1/secrets";
  watch::Reflector secrets(std::make_shared<watch::KubeListerWatcher>(&host, Ref("secrets")),
                           reflector_options);

  ControllerInfo info;
  info.name = "web";
  info.primary.version = "v1";
  info.primary.kind = "ConfigMap";
  info.primary.resource = "configmaps";
  info.primary.namespaced = true;
  OwnedResource owned;
  owned.mapping.version = "v1";
  owned.mapping.kind = "Secret";
  owned.mapping.resource = "secrets";
  owned.mapping.namespaced = true;
  owned.delete_absent = true;
  info.owns.push_back(owned);
  info.finalizer = kFinalizer;
  info.field_manager = "ctrlhost-web";

  PluginLikeDispatcher dispatcher;
  Applier real_applier(&host);
  CountingApplier applier(&real_applier);
  RunnerSources sources;
  sources.primary = &configmaps.store();
  sources.owned = {&secrets.store()};
  RunnerOptions options;
  options.include_children = true;
  options.max_concurrent_reconciles = 2;
  auto runner = Runner::Create(&info, sources, &dispatcher, &applier, options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int primary_id = configmaps.AddHandler((*runner)->PrimaryHandler());
  const int owned_id = secrets.AddHandler((*runner)->OwnedHandler(0));
  configmaps.Start();
  secrets.Start();
  ASSERT_TRUE(configmaps.WaitForSync(absl::Seconds(30)));
  ASSERT_TRUE(secrets.WaitForSync(absl::Seconds(30)));
  ASSERT_TRUE((*runner)->Start().ok());

  // Convergence: rounds of reconciles of every primary until two rounds in a row write nothing
  // (the first ones add finalizers and create the Secrets; later ones may run on caches that
  // have not seen those writes yet, and under TSan one quiet round can still be followed by a
  // reconcile that sees a late cache event). Bounded.
  int quiet_rounds = 0;
  for (int round = 0; round < 30 && quiet_rounds < 2; ++round) {
    const CountingApplier::Counts before = applier.Get();
    ASSERT_EQ((*runner)->EnqueueAll(pluginpb::REASON_RESYNC), static_cast<size_t>(kPrimaries));
    ASSERT_TRUE(applier.WaitForApplies(before.applies + kPrimaries));
    quiet_rounds = applier.Get().writes == before.writes ? quiet_rounds + 1 : 0;
  }
  ASSERT_EQ(quiet_rounds, 2);
  for (int i = 0; i < kPrimaries; ++i) {
    const std::string name = absl::StrCat("web", i);
    json primary = json::parse(client.Get(Ref("configmaps", name)).value());
    EXPECT_EQ(primary["metadata"]["finalizers"], json::array({kFinalizer}));
    json data = json::parse(client.Get(Ref("secrets", name + "-data")).value());
    EXPECT_EQ(data["data"]["k"], "dg==");
    EXPECT_EQ(data["metadata"]["ownerReferences"][0]["uid"], primary["metadata"]["uid"]);
    EXPECT_TRUE(client.Get(Ref("secrets", name + "-empty")).ok());
  }

  // Steady state: N more rounds of reconciles of the same objects, zero requests.
  const int64_t requests_before = (*host_rest)->attempts();
  const CountingApplier::Counts before = applier.Get();
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t applies = applier.Get().applies;
    ASSERT_EQ((*runner)->EnqueueAll(pluginpb::REASON_RESYNC), static_cast<size_t>(kPrimaries));
    ASSERT_TRUE(applier.WaitForApplies(applies + kPrimaries));
  }
  const CountingApplier::Counts after = applier.Get();
  EXPECT_GE(after.applies - before.applies, static_cast<uint64_t>(kRounds * kPrimaries));
  EXPECT_EQ(after.writes, before.writes);
  EXPECT_EQ(after.not_done, before.not_done);
  EXPECT_EQ((*host_rest)->attempts(), requests_before)
      << "requests the host made while reconciling converged objects";

  EXPECT_TRUE((*runner)->Shutdown(absl::Seconds(30)).empty());
  configmaps.RemoveHandler(primary_id);
  secrets.RemoveHandler(owned_id);
  configmaps.Stop();
  secrets.Stop();
}

}  // namespace
}  // namespace ctrlhost::controller::apply
