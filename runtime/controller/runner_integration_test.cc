// The runner over real reflectors of the embedded API server (real HTTPS, list + watch), with
// a fake dispatcher and applier: what the manager will wire, minus the plugin and the writes.
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/common/mutex.h"
#include "runtime/controller/runner.h"
#include "runtime/kube/client.h"
#include "runtime/kube/rest_client.h"
#include "runtime/watch/kube_lister_watcher.h"
#include "runtime/watch/reflector.h"

namespace ctrlhost::controller {
namespace {

// Answers every call with an empty response and keeps the calls.
class RecordingDispatcher : public Dispatcher {
 public:
  void Dispatch(pluginpb::ReconcileCall call, absl::Time, ReconcileCallback done) override {
    {
      common::MutexLock lock(&mu_);
      calls_.push_back(std::move(call));
      cv_.SignalAll();
    }
    done(pluginpb::ReconcileResponse());
  }
  // Waits (bounded, real time) for a call matching `match`; returns it.
  std::optional<pluginpb::ReconcileCall> WaitFor(
      const std::function<bool(const pluginpb::ReconcileCall&)>& match) {
    common::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (true) {
      for (const pluginpb::ReconcileCall& call : calls_) {
        if (match(call)) return call;
      }
      if (cv_.WaitWithDeadline(&mu_, deadline)) return std::nullopt;
    }
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  std::vector<pluginpb::ReconcileCall> calls_ ABSL_GUARDED_BY(mu_);
};

class NoopApplier : public ResponseApplier {
 public:
  ApplyOutcome Apply(const ReconcileContext&, const pluginpb::ReconcileResponse&) override {
    return ApplyOutcome();
  }
  absl::StatusOr<cache::ObjectPtr> EnsureFinalizer(const ReconcileContext&) override {
    return cache::ObjectPtr();
  }
  void RecordTerminal(const ReconcileContext&, const absl::Status&) override {}
};

kube::ResourceRef Ref(const std::string& resource, const std::string& name = "") {
  kube::ResourceRef ref;
  ref.version = "v1";
  ref.resource = resource;
  ref.namespace_name = "default";
  ref.name = name;
  return ref;
}

TEST(RunnerIntegrationTest, ReconcilesFromRealReflectors) {
  auto api = apiserver::testing::EmbeddedApiServer::Start("runner_integration");
  ASSERT_TRUE(api.ok()) << api.status();
  kube::Client& client = (*api)->client();

  // A primary that exists before the reflector lists (list items carry no apiVersion/kind).
  auto web = client.Create(
      Ref("configmaps"),
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"},"data":{"a":"1"}})");
  ASSERT_TRUE(web.ok()) << web.status();
  const std::string web_uid = nlohmann::json::parse(*web)["metadata"]["uid"];

  watch::ReflectorOptions reflector_options;
  reflector_options.description = "v1/configmaps";
  watch::Reflector configmaps(
      std::make_shared<watch::KubeListerWatcher>(&client, Ref("configmaps")), reflector_options);
  reflector_options.description = "v1/secrets";
  watch::Reflector secrets(std::make_shared<watch::KubeListerWatcher>(&client, Ref("secrets")),
                           reflector_options);

  ControllerInfo info;
  info.name = "configmaps";
  info.primary.version = "v1";
  info.primary.kind = "ConfigMap";
  info.primary.resource = "configmaps";
  info.primary.namespaced = true;
  OwnedResource owned;
  owned.mapping.version = "v1";
  owned.mapping.kind = "Secret";
  owned.mapping.resource = "secrets";
  owned.mapping.namespaced = true;
  info.owns.push_back(owned);
  RecordingDispatcher dispatcher;
  NoopApplier applier;
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

  auto first =
      dispatcher.WaitFor([](const pluginpb::ReconcileCall& c) { return c.name() == "web"; });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->namespace_(), "default");
  EXPECT_EQ(first->uid(), web_uid);
  nlohmann::json object = nlohmann::json::parse(first->object());
  EXPECT_EQ(object["apiVersion"], "v1");
  EXPECT_EQ(object["kind"], "ConfigMap");
  EXPECT_EQ(object["data"]["a"], "1");

  // A child with a controller reference reconciles its owner and travels in the request.
  auto child = client.Create(
      Ref("secrets"),
      absl::StrCat(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"web-secret",)",
                   R"("ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"web",)",
                   R"("uid":")", web_uid, R"(","controller":true}]},"data":{}})"));
  ASSERT_TRUE(child.ok()) << child.status();
  auto with_child = dispatcher.WaitFor(
      [](const pluginpb::ReconcileCall& c) { return c.name() == "web" && c.children_size() == 1; });
  ASSERT_TRUE(with_child.has_value());
  EXPECT_EQ(with_child->children(0).kind(), "Secret");
  EXPECT_EQ(nlohmann::json::parse(with_child->children(0).object())["metadata"]["name"],
            "web-secret");

  // A spec change reconciles; the deletion sends one request with an empty object.
  auto updated =
      client.Patch(Ref("configmaps", "web"), kube::PatchType::kMerge, R"({"data":{"a":"2"}})");
  ASSERT_TRUE(updated.ok()) << updated.status();
  ASSERT_TRUE(dispatcher
                  .WaitFor([](const pluginpb::ReconcileCall& c) {
                    return c.name() == "web" && !c.object().empty() &&
                           nlohmann::json::parse(c.object())["data"]["a"] == "2";
                  })
                  .has_value());
  ASSERT_TRUE(client.Delete(Ref("configmaps", "web")).ok());
  auto deleted = dispatcher.WaitFor([](const pluginpb::ReconcileCall& c) {
    return c.reason() == pluginpb::REASON_PRIMARY_DELETED;
  });
  ASSERT_TRUE(deleted.has_value());
  EXPECT_TRUE(deleted->object().empty());
  EXPECT_EQ(deleted->uid(), web_uid);

  // The server's garbage collector deletes the Secret its owner left, which queues "web" once
  // more: that key may still be queued when the runner stops (returned, not lost). Nothing else.
  for (const std::string& left : (*runner)->Shutdown(absl::Seconds(30))) {
    EXPECT_EQ(left, "default/web");
  }
  configmaps.RemoveHandler(primary_id);
  secrets.RemoveHandler(owned_id);
  configmaps.Stop();
  secrets.Stop();
  EXPECT_GE((*runner)->Metrics().reconciles_for(ReconcileResult::kSuccess), 4u);
}

}  // namespace
}  // namespace ctrlhost::controller
