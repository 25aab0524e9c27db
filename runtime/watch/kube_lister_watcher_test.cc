// The reflector over the real HTTP client against the embedded API server (real HTTPS).
#include "runtime/watch/kube_lister_watcher.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/server.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/client.h"
#include "runtime/kube/discovery.h"
#include "runtime/kube/kubeconfig.h"
#include "runtime/kube/rest_client.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/watch/mirror_handler_for_tests.h"
#include "runtime/watch/reflector.h"
#include "runtime/watch/registry.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::watch {
namespace {

class KubeListerWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    server_options_.data_dir =
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/watch_apiserver_",
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    server_options_.port = 0;
    server_options_.sync_full = false;
    auto server = apiserver::ApiServer::Start(server_options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_options_.port = server_->port();  // a restart comes back on the same port
    auto config = kube::LoadKubeconfigFile(server_->kubeconfig_path());
    ASSERT_TRUE(config.ok()) << config.status();
    auto rest = kube::RestClient::Create(*config);
    ASSERT_TRUE(rest.ok()) << rest.status();
    rest_ = *std::move(rest);
    client_ = std::make_unique<kube::Client>(rest_.get());
  }

  kube::ResourceRef ConfigMaps(const std::string& name = "") {
    kube::ResourceRef ref;
    ref.version = "v1";
    ref.resource = "configmaps";
    ref.namespace_name = "default";
    ref.name = name;
    return ref;
  }

  void Create(const std::string& name, const std::string& value) {
    auto created = client_->Create(
        ConfigMaps(),
        absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
                     R"(","labels":{"app":"web"}},"data":{"v":")", value, R"("}})"));
    ASSERT_TRUE(created.ok()) << created.status();
  }

  // name -> resourceVersion, from the server and from the store.
  std::map<std::string, std::string> ServerList() {
    std::map<std::string, std::string> out;
    auto list = client_->List(ConfigMaps());
    EXPECT_TRUE(list.ok()) << list.status();
    if (!list.ok()) return out;
    cache::ObjectParser parser;
    for (const std::string& item : list->items) {
      auto object = parser.Parse(item);
      EXPECT_TRUE(object.ok()) << object.status();
      if (object.ok()) out[std::string((*object)->key())] = (*object)->meta().resource_version;
    }
    return out;
  }

  static std::map<std::string, std::string> StoreList(const Reflector& reflector) {
    std::map<std::string, std::string> out;
    for (const auto& object : reflector.store().List()) {
      out[std::string(object->key())] = std::string(object->resource_version());
    }
    return out;
  }

  bool WaitForStoreToMatchServer(const Reflector& reflector) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (StoreList(reflector) == ServerList()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  apiserver::ApiServerOptions server_options_;
  std::unique_ptr<apiserver::ApiServer> server_;
  std::unique_ptr<kube::RestClient> rest_;
  std::unique_ptr<kube::Client> client_;
};

TEST_F(KubeListerWatcherTest, ReflectorFollowsTheEmbeddedApiServer) {
  for (int i = 0; i < 7; ++i) Create(absl::StrCat("cm", i), "1");
  ReflectorOptions options;
  options.page_size = 3;  // exercises continue tokens
  options.description = "v1 configmaps default";
  Reflector reflector(std::make_shared<KubeListerWatcher>(client_.get(), ConfigMaps()), options);
  reflector.Start();
  ASSERT_TRUE(reflector.WaitForSync(absl::Seconds(30)));
  EXPECT_TRUE(WaitForStoreToMatchServer(reflector));
  EXPECT_EQ(reflector.store().ByIndex(cache::Index::kLabel, "app=web").size(), 7u);

  ASSERT_TRUE(
      client_->Patch(ConfigMaps("cm1"), kube::PatchType::kMerge, R"({"data":{"v":"2"}})").ok());
  ASSERT_TRUE(client_->Delete(ConfigMaps("cm2")).ok());
  Create("late", "1");
  EXPECT_TRUE(WaitForStoreToMatchServer(reflector));
  EXPECT_EQ(reflector.store().Get("default/cm2"), nullptr);
  ReflectorMetrics metrics = reflector.Metrics();
  EXPECT_EQ(metrics.lists_total, 1u);
  EXPECT_GE(metrics.events_total, 3u);
  EXPECT_EQ(metrics.errors_total, 0u);
  reflector.Stop();  // cancels the open HTTP watch
  EXPECT_EQ(reflector.state(), ReflectorState::kStopped);
}

TEST_F(KubeListerWatcherTest, ApiServerRestartMidWatchLosesNothing) {
  for (int i = 0; i < 4; ++i) Create(absl::StrCat("cm", i), "1");
  ReflectorOptions options;
  options.description = "v1 configmaps default";
  options.initial_backoff = absl::Milliseconds(20);  // keeps the test short on a real clock
  options.max_backoff = absl::Milliseconds(200);
  Reflector reflector(std::make_shared<KubeListerWatcher>(client_.get(), ConfigMaps()), options);
  reflector.Start();
  ASSERT_TRUE(reflector.WaitForSync(absl::Seconds(30)));
  ASSERT_TRUE(WaitForStoreToMatchServer(reflector));

  server_->Stop();  // ends the watch mid-stream; reconnects fail until it is back
  server_.reset();
  auto restarted = apiserver::ApiServer::Start(server_options_);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  server_ = *std::move(restarted);
  ASSERT_TRUE(client_->Delete(ConfigMaps("cm0")).ok());
  ASSERT_TRUE(
      client_->Patch(ConfigMaps("cm1"), kube::PatchType::kMerge, R"({"data":{"v":"2"}})").ok());
  Create("after-restart", "1");
  EXPECT_TRUE(WaitForStoreToMatchServer(reflector));
  EXPECT_EQ(reflector.store().Get("default/cm0"), nullptr);
  EXPECT_NE(reflector.store().Get("default/after-restart"), nullptr);
  reflector.Stop();
}

TEST_F(KubeListerWatcherTest, RegistryWatchOfAKindCreatedAfterStart) {
  kube::Discovery discovery(rest_.get(), absl::ZeroDuration());
  ReflectorOptions defaults;
  defaults.initial_backoff = absl::Milliseconds(20);  // keeps the test short on a real clock
  defaults.max_backoff = absl::Milliseconds(100);
  ReflectorRegistry registry(KubeListerWatcherFactory(client_.get(), &discovery), defaults);
  WatchKey key;
  key.group = "ctrlhost.dev";
  key.version = "v1";
  key.kind = "Gadget";
  key.namespace_ = "default";
  auto handle = registry.Acquire(key);  // the kind does not exist yet
  ASSERT_TRUE(handle.ok()) << handle.status();
  // It lists, gets 404 and backs off (bounded wait for the first failure).
  const absl::Time failed_by = absl::Now() + absl::Seconds(30);
  while ((*handle)->Metrics().errors_total == 0 && absl::Now() < failed_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE((*handle)->Metrics().errors_total, 1u);
  EXPECT_FALSE((*handle)->HasSynced());

  kube::ResourceRef crds;
  crds.group = "apiextensions.k8s.io";
  crds.version = "v1";
  crds.resource = "customresourcedefinitions";
  auto crd = client_->Create(
      crds, R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
          "metadata":{"name":"gadgets.ctrlhost.dev"},
          "spec":{"group":"ctrlhost.dev","scope":"Namespaced",
                  "names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
                  "versions":[{"name":"v1","served":true,"storage":true,
                               "schema":{"openAPIV3Schema":{"type":"object",
                                 "x-kubernetes-preserve-unknown-fields":true}}}]}})");
  ASSERT_TRUE(crd.ok()) << crd.status();
  ASSERT_TRUE((*handle)->WaitForSync(absl::Seconds(30)));

  kube::ResourceRef gadgets;
  gadgets.group = "ctrlhost.dev";
  gadgets.version = "v1";
  gadgets.resource = "gadgets";
  gadgets.namespace_name = "default";
  auto created = client_->Create(
      gadgets, R"({"apiVersion":"ctrlhost.dev/v1","kind":"Gadget","metadata":{"name":"g1"}})");
  ASSERT_TRUE(created.ok()) << created.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*handle)->store().Get("default/g1") == nullptr && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_NE((*handle)->store().Get("default/g1"), nullptr);
}

TEST_F(KubeListerWatcherTest, CloseEndsABlockedNext) {
  KubeListerWatcher lister_watcher(client_.get(), ConfigMaps());
  auto page = lister_watcher.List({});
  ASSERT_TRUE(page.ok()) << page.status();
  WatchOptions options;
  options.resource_version = page->resource_version;
  auto stream = lister_watcher.Watch(options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let Next() block first
    (*stream)->Close();
  });
  auto event = (*stream)->Next();
  closer.join();
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_FALSE(event->has_value());
  stream->reset();  // joins the reader thread
}

TEST_F(KubeListerWatcherTest, TooOldVersionIsGone) {
  KubeListerWatcher lister_watcher(client_.get(), ConfigMaps());
  WatchOptions options;
  options.resource_version = "1";
  Create("a", "1");
  auto stream = lister_watcher.Watch(options);
  ASSERT_TRUE(stream.ok());
  // The embedded server keeps a bounded history; version 1 may still be in it. Either the
  // watch replays (an ADDED event) or answers 410: both are correct server behaviour.
  auto event = (*stream)->Next();
  if (!event.ok()) {
    EXPECT_TRUE(kube::IsGone(event.status())) << event.status();
  } else {
    ASSERT_TRUE(event->has_value());
    EXPECT_EQ((*event)->type, EventType::kAdded);
  }
}

// KEP-5866 against the embedded server: the selector goes out on LIST and WATCH, the server
// applies it and says so, and a sharded reflector runs in "server" mode.
class KubeShardTest : public KubeListerWatcherTest {
 protected:
  static constexpr uint64_t kHalf = 0x8000000000000000ull;
  // Creates `n` ConfigMaps; name -> whether its uid hashes into the lower half.
  std::map<std::string, bool> CreateMany(const std::string& prefix, int n) {
    std::map<std::string, bool> out;
    cache::ObjectParser parser;
    for (int i = 0; i < n; ++i) {
      const std::string name = absl::StrCat(prefix, i);
      auto created =
          client_->Create(ConfigMaps(), absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                                                     R"("metadata":{"name":")", name, R"("}})"));
      EXPECT_TRUE(created.ok()) << created.status();
      if (!created.ok()) continue;
      auto object = parser.Parse(*created);
      EXPECT_TRUE(object.ok()) << object.status();
      if (object.ok()) out["default/" + name] = kube::Fnv1a64((*object)->uid()) < kHalf;
    }
    return out;
  }
  static std::set<std::string> Keys(const std::map<std::string, bool>& objects, bool low) {
    std::set<std::string> out;
    for (const auto& [key, is_low] : objects) {
      if (is_low == low) out.insert(key);
    }
    return out;
  }
  static std::set<std::string> StoreKeys(const Reflector& reflector) {
    std::set<std::string> out;
    for (const auto& object : reflector.store().List()) out.insert(std::string(object->key()));
    return out;
  }
  static bool WaitForKeys(const Reflector& reflector, const std::set<std::string>& want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      if (StoreKeys(reflector) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return StoreKeys(reflector) == want;
  }
};

TEST_F(KubeShardTest, ListAndWatchApplyTheShardSelector) {
  std::map<std::string, bool> objects = CreateMany("cm", 20);
  const std::string low = UidShardSelector({{0, absl::uint128(kHalf)}});
  KubeListerWatcher lister_watcher(client_.get(), ConfigMaps());
  ListOptions list_options;
  list_options.shard_selector = low;
  auto page = lister_watcher.List(list_options);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->shard_applied);
  cache::ObjectParser parser;
  std::set<std::string> listed;
  for (const std::string& item : page->items) {
    auto object = parser.Parse(item);
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_LT(kube::Fnv1a64((*object)->uid()), kHalf) << item;
    listed.insert(std::string((*object)->key()));
  }
  EXPECT_EQ(listed, Keys(objects, true));
  auto unsharded = lister_watcher.List({});
  ASSERT_TRUE(unsharded.ok()) << unsharded.status();
  EXPECT_FALSE(unsharded->shard_applied);
  EXPECT_EQ(unsharded->items.size(), 20u);

  ListOptions bad;
  bad.shard_selector = "shardRange(object.metadata.name, '0x0', '0x1')";
  auto refused = lister_watcher.List(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();

  // Watch: events of the lower half only. Objects are made until one lands low; its event
  // follows every earlier one's, so by then a high one would have been seen.
  WatchOptions watch_options;
  watch_options.resource_version = page->resource_version;
  watch_options.shard_selector = low;
  auto stream = lister_watcher.Watch(watch_options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::string last_low;
  for (int i = 0; i < 100 && last_low.empty(); ++i) {
    for (const auto& [key, is_low] : CreateMany(absl::StrCat("new", i, "-"), 1)) {
      if (is_low) last_low = key;
    }
  }
  ASSERT_FALSE(last_low.empty());
  while (true) {
    auto event = (*stream)->Next();
    ASSERT_TRUE(event.ok()) << event.status();
    ASSERT_TRUE(event->has_value());
    if ((*event)->type == EventType::kBookmark) continue;
    auto object = parser.Parse((*event)->object);
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_LT(kube::Fnv1a64((*object)->uid()), kHalf) << (*event)->object;
    if ((*object)->key() == last_low) break;
  }
  (*stream)->Close();
}

TEST_F(KubeShardTest, ShardedReflectorFollowsItsScope) {
  std::map<std::string, bool> objects = CreateMany("cm", 24);
  auto scope = std::make_shared<ShardScope>();
  scope->Set({{0, absl::uint128(kHalf)}});
  ReflectorOptions options;
  options.page_size = 5;
  options.description = "v1 configmaps default (sharded)";
  options.shard = scope;
  Reflector reflector(std::make_shared<KubeListerWatcher>(client_.get(), ConfigMaps()), options);
  reflector.Start();
  ASSERT_TRUE(reflector.WaitForSync(absl::Seconds(30)));
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, true)));
  ReflectorMetrics m = reflector.Metrics();
  EXPECT_EQ(m.shard_mode, "server");
  EXPECT_EQ(m.shard_filtered_total, 0u);

  // New objects: only the low ones arrive.
  for (const auto& [key, is_low] : CreateMany("late", 10)) objects[key] = is_low;
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, true)));

  // The ring moves this host to the upper half: a relist, still server-side.
  scope->Set({{kHalf, absl::uint128(1) << 64}});
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, false)));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (reflector.Metrics().shard_generation != 2 && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  m = reflector.Metrics();
  EXPECT_EQ(m.shard_generation, 2u);
  EXPECT_EQ(m.shard_relists_total, 1u);
  EXPECT_EQ(m.shard_mode, "server");
  EXPECT_EQ(m.errors_total, 0u);
  for (const auto& [key, is_low] : CreateMany("later", 10)) objects[key] = is_low;
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, false)));
  reflector.Stop();
}

// Label mode against the embedded server with KEP-5866 off (a server from before 1.36): the
// reflector selects its buckets by label, and a real server's watch reports an object whose
// label is removed as DELETED, which must not delete it.
class KubeLabelShardTest : public KubeShardTest {
 protected:
  KubeLabelShardTest() { server_options_.sharded_list_and_watch = false; }

  // Sets the bucket label of default/<name> (`value` "" removes it).
  void Label(const std::string& key, const std::string& value) {
    const std::string name = key.substr(key.find('/') + 1);
    const std::string patch =
        value.empty() ? R"({"metadata":{"labels":{"ctrlhost.dev/shard-bucket":null}}})"
                      : absl::StrCat(R"({"metadata":{"labels":{"ctrlhost.dev/shard-bucket":")",
                                     value, R"("}}})");
    auto patched = client_->Patch(ConfigMaps(name), kube::PatchType::kMerge, patch);
    ASSERT_TRUE(patched.ok()) << patched.status();
  }
  std::string BucketOf(const std::string& key) {
    auto got = client_->Get(ConfigMaps(key.substr(key.find('/') + 1)));
    EXPECT_TRUE(got.ok()) << got.status();
    auto object = cache::ObjectParser().Parse(got.ok() ? *got : "{}");
    return object.ok() ? ShardBucketLabel(kube::Fnv1a64((*object)->uid()), 8) : "";
  }
  static bool WaitUntil(const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline && !done()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done();
  }
};

TEST_F(KubeLabelShardTest, LabelModeKeepsObjectsWhoseLabelIsRemoved) {
  std::map<std::string, bool> objects = CreateMany("cm", 16);
  for (const auto& [key, is_low] : objects) Label(key, BucketOf(key));
  auto scope = std::make_shared<ShardScope>();
  scope->EnableLabels({"ctrlhost.dev/shard-bucket", 8});
  common::Mutex mu;
  std::vector<std::string> mislabeled;
  scope->SetMislabeledHandler([&](const cache::Object& object) {
    common::MutexLock lock(&mu);
    mislabeled.push_back(std::string(object.key()));
  });
  scope->Set({{0, absl::uint128(kHalf)}});
  ReflectorOptions options;
  options.page_size = 5;
  options.description = "v1 configmaps default (by label)";
  options.shard = scope;
  Reflector reflector(std::make_shared<KubeListerWatcher>(client_.get(), ConfigMaps()), options);
  auto handler = std::make_shared<MirrorHandler>();
  reflector.AddHandler(handler);
  reflector.Start();
  ASSERT_TRUE(reflector.WaitForSync(absl::Seconds(30)));
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, true)));
  EXPECT_EQ(reflector.Metrics().shard_mode, "label");

  // The label removed: the server's watch says DELETED; the object stays, updated.
  const std::string key = *Keys(objects, true).begin();
  const std::string bucket = BucketOf(key);
  Label(key, "");
  EXPECT_TRUE(WaitUntil([&] {
    common::MutexLock lock(&mu);
    return mislabeled == std::vector<std::string>{key};
  }));
  ASSERT_NE(reflector.store().Get(key), nullptr);
  EXPECT_FALSE(reflector.store().Get(key)->Label("ctrlhost.dev/shard-bucket").has_value());
  // Put back (as the labeler does): an ADDED event, stored as an update.
  Label(key, bucket);
  EXPECT_TRUE(WaitUntil([&] {
    auto stored = reflector.store().Get(key);
    return stored != nullptr && stored->Label("ctrlhost.dev/shard-bucket").has_value();
  }));
  EXPECT_EQ(handler->deletes(), 0);

  // A real deletion leaves.
  ASSERT_TRUE(client_->Delete(ConfigMaps(key.substr(key.find('/') + 1))).ok());
  objects.erase(key);
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, true)));
  EXPECT_EQ(handler->deleted(), std::vector<std::string>{key});

  // The other half, still by label.
  scope->Set({{kHalf, absl::uint128(1) << 64}});
  EXPECT_TRUE(WaitForKeys(reflector, Keys(objects, false)));
  EXPECT_TRUE(WaitUntil([&] { return reflector.Metrics().shard_generation == 2; }));
  ReflectorMetrics m = reflector.Metrics();
  EXPECT_EQ(m.shard_mode, "label");
  EXPECT_EQ(m.shard_mislabeled_total, 1u);
  EXPECT_EQ(m.errors_total, 0u);
  EXPECT_TRUE(handler->errors().empty()) << handler->errors()[0];
  reflector.Stop();
}

}  // namespace
}  // namespace ctrlhost::watch
