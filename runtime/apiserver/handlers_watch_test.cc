// Watch: from a resourceVersion, initial events, bookmarks, timeouts, selectors, 410 after
// compaction, and many concurrent watchers each seeing every event once, in order.
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/api_test_env.h"
#include "runtime/kube/shard_selector.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::ApiTestEnv;
using ::ctrlhost::apiserver::testing::ExpectStatus;
using ::ctrlhost::apiserver::testing::WatchReader;
using ::testing::ElementsAre;

constexpr char kCms[] = "/api/v1/namespaces/ns1/configmaps";

// "TYPE name" per event.
std::vector<std::string> Summary(const std::vector<nlohmann::json>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    std::string name = e["object"]["metadata"].value("name", "");
    out.push_back(name.empty() ? e["type"].get<std::string>()
                               : absl::StrCat(e["type"].get<std::string>(), " ", name));
  }
  return out;
}

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override { env_.CreateNamespace("ns1"); }

  std::unique_ptr<WatchReader> StartWatch(std::vector<std::pair<std::string, std::string>> query,
                                          const std::string& path = kCms) {
    query.emplace_back("watch", "true");
    ApiResponse r = env_.Get(path, query);
    EXPECT_EQ(r.code, 200) << r.body;
    EXPECT_TRUE(r.stream != nullptr);
    return std::make_unique<WatchReader>(std::move(r), &env_.clock());
  }

  std::string Rev() { return std::to_string(env_.store().Revision()); }

  ApiTestEnv env_;
};

TEST_F(WatchTest, FromResourceVersion) {
  env_.CreateConfigMap("ns1", "a");
  const std::string rv = Rev();
  env_.CreateConfigMap("ns1", "b");
  auto w = StartWatch({{"resourceVersion", rv}});
  ASSERT_EQ(
      env_.Patch(std::string(kCms) + "/a", "application/merge-patch+json", R"({"data":{"k":"v"}})")
          .code,
      200);
  ASSERT_EQ(env_.Delete(std::string(kCms) + "/b").code, 200);
  auto events = w->WaitForEvents(3);
  EXPECT_THAT(Summary(events), ElementsAre("ADDED b", "MODIFIED a", "DELETED b"));
  // resourceVersions strictly increase.
  int64_t last = 0;
  for (const auto& e : events) {
    int64_t v = std::stoll(e["object"]["metadata"]["resourceVersion"].get<std::string>());
    EXPECT_GT(v, last);
    last = v;
  }
  EXPECT_EQ(events[1]["object"]["data"]["k"], "v");
}

TEST_F(WatchTest, WithoutResourceVersionStartsWithTheCurrentState) {
  env_.CreateConfigMap("ns1", "a");
  env_.CreateConfigMap("ns1", "b");
  auto w = StartWatch({});
  env_.CreateConfigMap("ns1", "c");
  EXPECT_THAT(Summary(w->WaitForEvents(3)), ElementsAre("ADDED a", "ADDED b", "ADDED c"));
  auto w0 = StartWatch({{"resourceVersion", "0"}});
  EXPECT_THAT(Summary(w0->WaitForEvents(3)), ElementsAre("ADDED a", "ADDED b", "ADDED c"));
}

TEST_F(WatchTest, SendInitialEventsFalseStartsNow) {
  env_.CreateConfigMap("ns1", "old");
  auto w = StartWatch({{"sendInitialEvents", "false"},
                       {"resourceVersionMatch", "NotOlderThan"},
                       {"allowWatchBookmarks", "true"}});
  env_.CreateConfigMap("ns1", "new");
  EXPECT_THAT(Summary(w->WaitForEvents(1)), ElementsAre("ADDED new"));
}

TEST_F(WatchTest, SendInitialEventsEndsWithAnnotatedBookmark) {
  env_.CreateConfigMap("ns1", "a");
  auto w = StartWatch({{"sendInitialEvents", "true"},
                       {"resourceVersionMatch", "NotOlderThan"},
                       {"allowWatchBookmarks", "true"}});
  auto events = w->WaitForEvents(2);
  ASSERT_THAT(Summary(events), ElementsAre("ADDED a", "BOOKMARK"));
  EXPECT_EQ(events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  EXPECT_EQ(events[1]["object"]["metadata"]["resourceVersion"], Rev());
  EXPECT_EQ(events[1]["object"]["kind"], "ConfigMap");
}

// client-go 0.32+'s WatchList builds its list from the blueprint the initial-events-end
// bookmark carries; without it, it falls back to a plain LIST.
TEST_F(WatchTest, TheInitialEventsEndBookmarkCarriesTheListBlueprint) {
  env_.CreateConfigMap("ns1", "a");
  auto w = StartWatch({{"sendInitialEvents", "true"},
                       {"resourceVersionMatch", "NotOlderThan"},
                       {"allowWatchBookmarks", "true"}});
  auto events = w->WaitForEvents(2);
  ASSERT_THAT(Summary(events), ElementsAre("ADDED a", "BOOKMARK"));
  const nlohmann::json& annotations = events[1]["object"]["metadata"]["annotations"];
  ASSERT_TRUE(annotations.contains("kubernetes.io/initial-events-list-blueprint"));
  std::string blueprint;
  ASSERT_TRUE(absl::Base64Unescape(
      annotations["kubernetes.io/initial-events-list-blueprint"].get<std::string>(), &blueprint));
  const nlohmann::json list = nlohmann::json::parse(blueprint);
  EXPECT_EQ(list["kind"], "ConfigMapList");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_TRUE(list["metadata"].is_object());
  EXPECT_FALSE(list["metadata"].contains("shardInfo"));

  // KEP-5866: with a shard selector, the list built from the blueprint says which shard it is.
  const char* kAll = "shardRange(object.metadata.uid, '0x0', '0x10000000000000000')";
  auto sharded = StartWatch({{"sendInitialEvents", "true"},
                             {"resourceVersionMatch", "NotOlderThan"},
                             {"allowWatchBookmarks", "true"},
                             {"shardSelector", kAll}});
  events = sharded->WaitForEvents(2);
  ASSERT_THAT(Summary(events), ElementsAre("ADDED a", "BOOKMARK"));
  ASSERT_TRUE(absl::Base64Unescape(
      events[1]["object"]["metadata"]["annotations"]["kubernetes.io/initial-events-list-blueprint"]
          .get<std::string>(),
      &blueprint));
  EXPECT_EQ(nlohmann::json::parse(blueprint)["metadata"]["shardInfo"]["selector"], kAll);
}

// client-go's metadata client (metadata-only informers) asks for PartialObjectMetadata: the watch
// sends metadata only, bookmarks included, and the list and a get answer in kind.
TEST_F(WatchTest, PartialObjectMetadataForTheMetadataClient) {
  env_.CreateConfigMap("ns1", "a");
  const std::string accept =
      "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
      "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
  ApiResponse r = env_.Do("GET", kCms, "", "",
                          {{"watch", "true"},
                           {"sendInitialEvents", "true"},
                           {"resourceVersionMatch", "NotOlderThan"},
                           {"allowWatchBookmarks", "true"}},
                          accept);
  ASSERT_EQ(r.code, 200) << r.body;
  WatchReader w(std::move(r), &env_.clock());
  env_.CreateConfigMap("ns1", "b");
  auto events = w.WaitForEvents(3);
  ASSERT_THAT(Summary(events), ElementsAre("ADDED a", "BOOKMARK", "ADDED b"));
  for (const nlohmann::json& e : events) {
    EXPECT_EQ(e["object"]["kind"], "PartialObjectMetadata") << e.dump();
    EXPECT_EQ(e["object"]["apiVersion"], "meta.k8s.io/v1");
    EXPECT_FALSE(e["object"].contains("data")) << e.dump();
  }
  std::string blueprint;
  ASSERT_TRUE(absl::Base64Unescape(
      events[1]["object"]["metadata"]["annotations"]["kubernetes.io/initial-events-list-blueprint"]
          .get<std::string>(),
      &blueprint));
  EXPECT_EQ(nlohmann::json::parse(blueprint)["kind"], "PartialObjectMetadataList");

  ApiResponse list = env_.Do("GET", kCms, "", "", {},
                             "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
  ASSERT_EQ(list.code, 200);
  const nlohmann::json l = nlohmann::json::parse(list.body);
  EXPECT_EQ(l["kind"], "PartialObjectMetadataList");
  EXPECT_EQ(l["apiVersion"], "meta.k8s.io/v1");
  ASSERT_EQ(l["items"].size(), 2u);
  EXPECT_EQ(l["items"][0]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(l["items"][0]["metadata"]["name"], "a");
  EXPECT_FALSE(l["items"][0].contains("data"));

  ApiResponse one = env_.Do("GET", std::string(kCms) + "/a", "", "", {}, accept);
  ASSERT_EQ(one.code, 200);
  EXPECT_EQ(nlohmann::json::parse(one.body)["kind"], "PartialObjectMetadata");
  // A plain range first wins: the object itself.
  ApiResponse plain =
      env_.Do("GET", std::string(kCms) + "/a", "", "", {},
              "application/json,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
  EXPECT_EQ(nlohmann::json::parse(plain.body)["kind"], "ConfigMap");
}

TEST_F(WatchTest, SendInitialEventsOnAnEmptyCollectionStillBookmarks) {
  auto w = StartWatch({{"sendInitialEvents", "true"},
                       {"resourceVersionMatch", "NotOlderThan"},
                       {"allowWatchBookmarks", "true"}});
  auto events = w->WaitForEvents(1);
  ASSERT_THAT(Summary(events), ElementsAre("BOOKMARK"));
  EXPECT_EQ(events[0]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  env_.CreateConfigMap("ns1", "later");
  EXPECT_THAT(Summary(w->WaitForEvents(2)), ElementsAre("BOOKMARK", "ADDED later"));
}

TEST_F(WatchTest, PeriodicBookmarks) {
  env_.CreateConfigMap("ns1", "a");
  auto w = StartWatch({{"resourceVersion", Rev()}, {"allowWatchBookmarks", "true"}});
  // Time passes with no events: the watch reports its progress.
  ASSERT_TRUE(testing::WaitFor([&] {
    env_.clock().Advance(absl::Seconds(11));
    return !w->Events().empty();
  }));
  auto events = w->Events();
  EXPECT_EQ(events[0]["type"], "BOOKMARK");
  EXPECT_EQ(events[0]["object"]["metadata"]["resourceVersion"], Rev());
  // No bookmarks unless asked for.
  auto quiet = StartWatch({{"resourceVersion", Rev()}});
  env_.clock().Advance(absl::Seconds(60));
  env_.CreateConfigMap("ns1", "b");
  EXPECT_THAT(Summary(quiet->WaitForEvents(1)), ElementsAre("ADDED b"));
}

TEST_F(WatchTest, TimeoutSecondsEndsTheWatch) {
  auto w = StartWatch({{"resourceVersion", Rev()}, {"timeoutSeconds", "5"}});
  EXPECT_FALSE(w->Finished());
  ASSERT_TRUE(testing::WaitFor([&] {
    env_.clock().Advance(absl::Seconds(1));
    return w->Finished();
  }));
  EXPECT_TRUE(w->Events().empty());
}

TEST_F(WatchTest, LabelSelectorTurnsLeavingIntoDeleted) {
  env_.CreateConfigMap("ns1", "a", {{"app", "web"}});
  auto w = StartWatch({{"resourceVersion", Rev()}, {"labelSelector", "app=web"}});
  const std::string a = std::string(kCms) + "/a";
  const char* kMerge = "application/merge-patch+json";
  ASSERT_EQ(env_.Patch(a, kMerge, R"({"metadata":{"labels":{"app":"db"}}})").code, 200);
  env_.CreateConfigMap("ns1", "other", {{"app", "db"}});
  ASSERT_EQ(env_.Patch(a, kMerge, R"({"metadata":{"labels":{"app":"web"}}})").code, 200);
  ASSERT_EQ(env_.Patch(a, kMerge, R"({"data":{"k":"v"}})").code, 200);
  EXPECT_THAT(Summary(w->WaitForEvents(3)), ElementsAre("DELETED a", "ADDED a", "MODIFIED a"));
}

// KEP-5866: two watchers with the two halves of the uid hash space see each object's events
// on exactly one of them, with the initial events split the same way.
TEST_F(WatchTest, ShardSelectorsSplitEventsByUidHash) {
  for (int i = 0; i < 10; ++i) env_.CreateConfigMap("ns1", absl::StrCat("old-", i));
  const char* kLow = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
  const char* kHigh =
      "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";
  auto low = StartWatch({{"shardSelector", kLow}});
  auto high = StartWatch({{"shardSelector", kHigh}});
  for (int i = 0; i < 30; ++i) env_.CreateConfigMap("ns1", absl::StrCat("new-", i));
  // Every object once, on the side its uid hashes to; 40 events in all.
  std::set<std::string> seen;
  size_t low_count = 0;
  auto check = [&](const std::vector<nlohmann::json>& events, bool is_low) {
    for (const auto& e : events) {
      const std::string uid = e["object"]["metadata"]["uid"];
      EXPECT_EQ(kube::Fnv1a64(uid) < 0x8000000000000000ull, is_low) << uid;
      EXPECT_TRUE(seen.insert(e["object"]["metadata"]["name"].get<std::string>()).second);
    }
  };
  // Each half gets a share (a hash: 40 objects all on one side has probability 2^-39).
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (low->Events().size() + high->Events().size() < 40 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const std::vector<nlohmann::json> low_events = low->Events();
  const std::vector<nlohmann::json> high_events = high->Events();
  check(low_events, true);
  check(high_events, false);
  low_count = low_events.size();
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_GT(low_count, 0u);
  EXPECT_LT(low_count, 40u);
}

TEST_F(WatchTest, WatchOneObjectByName) {
  env_.CreateConfigMap("ns1", "a");
  env_.CreateConfigMap("ns1", "b");
  auto w = StartWatch({{"resourceVersion", Rev()}}, std::string(kCms) + "/b");
  ASSERT_EQ(env_.Delete(std::string(kCms) + "/a").code, 200);
  ASSERT_EQ(env_.Delete(std::string(kCms) + "/b").code, 200);
  EXPECT_THAT(Summary(w->WaitForEvents(1)), ElementsAre("DELETED b"));
  // Legacy /watch/ path.
  ApiResponse legacy =
      env_.Get("/api/v1/watch/namespaces/ns1/configmaps", {{"resourceVersion", Rev()}});
  EXPECT_EQ(legacy.code, 200);
  EXPECT_TRUE(legacy.stream != nullptr);
  ExpectStatus(env_.Do("POST", "/api/v1/watch/namespaces/ns1/configmaps", "{}"), 405,
               "MethodNotAllowed");
}

TEST(WatchGoneTest, CompactedResourceVersionIsGone) {
  // A small event window, so that old revisions must come from (compacted) history.
  testing::ApiTestEnvOptions o;
  o.watch_window_events = 2;
  ApiTestEnv env(o);
  env.CreateNamespace("ns1");
  env.CreateConfigMap("ns1", "a");
  const std::string old = std::to_string(env.store().Revision());
  for (const char* n : {"b", "c", "d", "e"}) env.CreateConfigMap("ns1", n);
  ASSERT_TRUE(env.store().Compact(env.store().Revision()).ok());
  ApiResponse r = env.Get(kCms, {{"watch", "true"}, {"resourceVersion", old}});
  ExpectStatus(r, 410, "Expired");
  EXPECT_EQ(ApiTestEnv::Json(r).value("code", 0), 410);
  // The server keeps serving watches from the current revision.
  ApiResponse ok = env.Get(
      kCms, {{"watch", "true"}, {"resourceVersion", std::to_string(env.store().Revision())}});
  ASSERT_EQ(ok.code, 200) << ok.body;
  WatchReader w(std::move(ok), &env.clock());
  env.CreateConfigMap("ns1", "f");
  EXPECT_THAT(Summary(w.WaitForEvents(1)), ElementsAre("ADDED f"));
}

TEST_F(WatchTest, BadParameters) {
  ExpectStatus(env_.Get(kCms, {{"watch", "1"}, {"resourceVersion", "x"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(kCms, {{"watch", "1"}, {"timeoutSeconds", "soon"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(kCms, {{"watch", "1"}, {"labelSelector", "a in"}}), 400, "BadRequest");
  ExpectStatus(env_.Get(kCms, {{"watch", "1"}, {"resourceVersionMatch", "NotOlderThan"}}), 400,
               "BadRequest");
  ExpectStatus(env_.Get(kCms, {{"watch", "1"}, {"sendInitialEvents", "true"}}), 422, "Invalid");
  ExpectStatus(env_.Get(kCms, {{"watch", "1"},
                               {"sendInitialEvents", "true"},
                               {"resourceVersionMatch", "NotOlderThan"}}),
               422, "Invalid");  // requires allowWatchBookmarks
  const std::string future = std::to_string(env_.store().Revision() + 1000);
  ExpectStatus(env_.Get(kCms, {{"watch", "1"}, {"resourceVersion", future}}), 504, "Timeout");
}

TEST_F(WatchTest, ManyWatchersSeeEveryEventOnceInOrder) {
  constexpr int kWatchers = 16;
  constexpr int kWriters = 4;
  constexpr int kPerWriter = 25;
  const std::string from = Rev();
  std::vector<std::unique_ptr<WatchReader>> watchers;
  for (int i = 0; i < kWatchers; ++i) watchers.push_back(StartWatch({{"resourceVersion", from}}));
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([this, w] {
      for (int i = 0; i < kPerWriter; ++i) {
        nlohmann::json cm = {{"apiVersion", "v1"},
                             {"kind", "ConfigMap"},
                             {"metadata", {{"name", absl::StrCat("w", w, "-", i)}}}};
        ApiResponse r = env_.Post(kCms, cm);
        EXPECT_EQ(r.code, 201) << r.body;
      }
    });
  }
  for (auto& t : writers) t.join();
  constexpr size_t kTotal = kWriters * kPerWriter;
  for (auto& w : watchers) {
    auto events = w->WaitForEvents(kTotal);
    ASSERT_EQ(events.size(), kTotal);
    int64_t last = 0;
    std::set<std::string> names;
    for (const auto& e : events) {
      EXPECT_EQ(e["type"], "ADDED");
      int64_t v = std::stoll(e["object"]["metadata"]["resourceVersion"].get<std::string>());
      EXPECT_GT(v, last);
      last = v;
      names.insert(e["object"]["metadata"]["name"].get<std::string>());
    }
    EXPECT_EQ(names.size(), kTotal);
  }
}

}  // namespace
}  // namespace ctrlhost::apiserver
