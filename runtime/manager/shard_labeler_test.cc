#include "runtime/manager/shard_labeler.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/kube/discovery.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/manager/shard_assignment.h"
#include "runtime/watch/kube_lister_watcher.h"
#include "runtime/watch/registry.h"

namespace ctrlhost::manager {
namespace {

using apiserver::testing::EmbeddedApiServer;

const kube::ResourceMapping kConfigMaps{.group = "",
                                        .version = "v1",
                                        .resource = "configmaps",
                                        .kind = "ConfigMap",
                                        .namespaced = true};

kube::ResourceRef Ref(const std::string& name = "") {
  return {.version = "v1", .resource = "configmaps", .namespace_name = "default", .name = name};
}

// A server, a registry of watches on it and a labeler.
struct Fixture {
  explicit Fixture(bool sharded_list_and_watch) {
    apiserver::ApiServerOptions options;
    options.sharded_list_and_watch = sharded_list_and_watch;
    auto started = EmbeddedApiServer::Start(
        sharded_list_and_watch ? "labeler_kep" : "labeler_no_kep", options);
    EXPECT_TRUE(started.ok()) << started.status();
    api = *std::move(started);
    discovery = std::make_unique<kube::Discovery>(&api->rest());
    registry = std::make_unique<watch::ReflectorRegistry>(
        watch::KubeListerWatcherFactory(&api->client(), discovery.get()),
        watch::ReflectorOptions{});
    labeler = std::make_unique<ShardLabeler>(&api->client(), registry.get());
  }
  ~Fixture() {
    labeler->Stop();
    labeler.reset();
    registry.reset();
  }

  std::string Create(const std::string& name) {
    nlohmann::json cm = {{"apiVersion", "v1"},
                         {"kind", "ConfigMap"},
                         {"metadata", {{"name", name}, {"namespace", "default"}}}};
    absl::StatusOr<std::string> created = api->client().Create(Ref(), cm.dump());
    EXPECT_TRUE(created.ok()) << created.status();
    return nlohmann::json::parse(*created)["metadata"]["uid"];
  }
  nlohmann::json Get(const std::string& name) {
    absl::StatusOr<std::string> got = api->client().Get(Ref(name));
    EXPECT_TRUE(got.ok()) << got.status();
    return nlohmann::json::parse(got.ok() ? *got : "{}");
  }
  std::string Label(const std::string& name) {
    nlohmann::json cm = Get(name);
    const nlohmann::json& labels = cm["metadata"]["labels"];
    return labels.is_object() && labels.contains(kShardBucketLabel) ? labels[kShardBucketLabel]
                                                                    : "";
  }
  void SetLabel(const std::string& name, const nlohmann::json& value) {
    nlohmann::json patch = {{"metadata", {{"labels", {{kShardBucketLabel, value}}}}}};
    ASSERT_TRUE(api->client().Patch(Ref(name), kube::PatchType::kMerge, patch.dump()).ok());
  }
  // Polls (real time, bounded) until `name` carries the bucket of its uid.
  bool WaitLabelled(const std::string& name) {
    for (int i = 0; i < 2000; ++i) {
      nlohmann::json cm = Get(name);
      const nlohmann::json& labels = cm["metadata"]["labels"];
      if (labels.is_object() && labels.value(kShardBucketLabel, "") ==
                                    BucketLabelOf(cm["metadata"]["uid"].get<std::string>())) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<EmbeddedApiServer> api;
  std::unique_ptr<kube::Discovery> discovery;
  std::unique_ptr<watch::ReflectorRegistry> registry;
  std::unique_ptr<ShardLabeler> labeler;
};

TEST(ShardLabelerTest, BucketLabelIsTheTopBitsOfTheUidsHash) {
  const std::string uid = "6f1c1f6e-3d0b-4f0a-9a47-5b8f0c2d1e33";
  EXPECT_EQ(BucketLabelOf(uid), absl::StrCat(kube::Fnv1a64(uid) >> 56));
  EXPECT_EQ(UnlabelledSelector().rfind("ctrlhost.dev/shard-bucket notin (0,1,2,", 0), 0u);
  EXPECT_NE(UnlabelledSelector().find(",255)"), std::string::npos);
}

// On a server without KEP-5866 the active labeller labels every object lacking a right bucket
// (also one whose label someone removed), and a wrong value reported by a watch is put right.
// Inactive, it labels nothing but still fixes what it is told.
TEST(ShardLabelerTest, LabelsWhatTheServerCannotFilter) {
  Fixture f(/*sharded_list_and_watch=*/false);
  for (int i = 0; i < 20; ++i) f.Create(absl::StrCat("cm-", i));
  f.labeler->AddKind(kConfigMaps);
  ASSERT_EQ(f.labeler->Status().kinds.size(), 1u);
  EXPECT_EQ(f.labeler->Status().kinds[0], "v1 ConfigMap: labelled by another host");
  f.labeler->SetActive(true);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.WaitLabelled(absl::StrCat("cm-", i))) << i;
  EXPECT_EQ(f.labeler->Status().kinds[0], "v1 ConfigMap: labelling");
  EXPECT_GE(f.labeler->Status().labelled_total, 20u);

  // Someone removes a label, writes a value that is no bucket, creates an object later.
  f.SetLabel("cm-3", nullptr);
  f.SetLabel("cm-4", "not-a-bucket");
  f.Create("late");
  for (const char* name : {"cm-3", "cm-4", "late"}) ASSERT_TRUE(f.WaitLabelled(name)) << name;

  // A wrong bucket is not in the unlabelled watch: a host's watch reports it.
  f.labeler->SetActive(false);
  const nlohmann::json cm5 = f.Get("cm-5");
  const std::string right = f.Label("cm-5");
  f.SetLabel("cm-5", std::to_string((std::stoi(right) + 1) % kShardBuckets));
  auto object = std::make_shared<cache::Object>(
      cm5.dump(), cache::ObjectMeta{.namespace_ = "default",
                                    .name = "cm-5",
                                    .uid = cm5["metadata"]["uid"].get<std::string>()});
  f.labeler->Fix(*object);
  ASSERT_TRUE(f.WaitLabelled("cm-5"));
  EXPECT_EQ(f.Label("cm-5"), right);
  EXPECT_GE(f.labeler->Status().fixed_total, 1u);
  EXPECT_EQ(f.labeler->Status().failures_total, 0u);
}

// Where the server filters by uid itself, no object is labelled.
TEST(ShardLabelerTest, NoLabelsWhereTheServerFilters) {
  Fixture f(/*sharded_list_and_watch=*/true);
  f.Create("cm-0");
  f.labeler->AddKind(kConfigMaps);
  f.labeler->SetActive(true);
  EXPECT_EQ(f.labeler->Status().kinds[0], "v1 ConfigMap: the server filters by uid");
  f.Create("cm-1");
  // Nothing to wait for: give a wrongly labelling loop the chance to show (a GET round trip),
  // then check that no label appeared.
  for (int i = 0; i < 20; ++i) f.Get("cm-1");
  EXPECT_EQ(f.Label("cm-0"), "");
  EXPECT_EQ(f.Label("cm-1"), "");
  EXPECT_EQ(f.labeler->Status().labelled_total, 0u);
}

}  // namespace
}  // namespace ctrlhost::manager
