#include "runtime/watch/fake_lister_watcher.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/kube/api_status.h"
#include "runtime/kube/shard_selector.h"

namespace ctrlhost::watch {
namespace {

TEST(FakeListerWatcherTest, PaginatesASnapshot) {
  FakeListerWatcher server;
  for (const char* name : {"a", "b", "c"}) server.Set("ns", name, "v");
  auto page = server.List({"", "", 2, ""});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->items.size(), 2u);
  EXPECT_EQ(page->resource_version, "103");
  server.Set("ns", "d", "v");  // not in the snapshot
  auto last = server.List({"", "", 2, page->continue_token});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->items.size(), 1u);
  EXPECT_TRUE(last->continue_token.empty());
  EXPECT_EQ(last->resource_version, "103");
  EXPECT_TRUE(kube::IsGone(server.List({"", "", 2, page->continue_token}).status()));
  EXPECT_FALSE(server.List({"", "", 2, "garbage"}).ok());
}

TEST(FakeListerWatcherTest, WatchReplaysHistoryAndReportsGoneAfterCompaction) {
  FakeListerWatcher server;
  server.Set("ns", "a", "1");
  server.Set("ns", "a", "2");
  server.Delete("ns", "a");
  auto stream = server.Watch({"", "", "101", 0, true});
  ASSERT_TRUE(stream.ok());
  auto e1 = (*stream)->Next();
  ASSERT_TRUE(e1.ok() && e1->has_value());
  EXPECT_EQ((*e1)->type, EventType::kModified);
  auto e2 = (*stream)->Next();
  ASSERT_TRUE(e2.ok() && e2->has_value());
  EXPECT_EQ((*e2)->type, EventType::kDeleted);

  server.Compact();
  auto old = server.Watch({"", "", "101", 0, true});
  ASSERT_TRUE(old.ok());
  auto error = (*old)->Next();
  ASSERT_TRUE(error.ok() && error->has_value());
  EXPECT_EQ((*error)->type, EventType::kError);
  server.SetGoneAsHttpError(true);
  EXPECT_TRUE(kube::IsGone(server.Watch({"", "", "101", 0, true}).status()));
}

TEST(FakeListerWatcherTest, CloseUnblocksNextFromAnotherThread) {
  FakeListerWatcher server;
  auto stream = server.Watch({});
  ASSERT_TRUE(stream.ok());
  std::thread closer([&] { (*stream)->Close(); });
  auto event = (*stream)->Next();
  closer.join();
  ASSERT_TRUE(event.ok());
  EXPECT_FALSE(event->has_value());
}

TEST(FakeListerWatcherTest, FaultsReachOpenStreams) {
  FakeListerWatcher server;
  auto stream = server.Watch({});
  ASSERT_TRUE(stream.ok());
  server.InjectStreamError(absl::DataLossError("bad line"));
  EXPECT_EQ((*stream)->Next().status().code(), absl::StatusCode::kDataLoss);
  server.BreakWatches(absl::UnavailableError("reset"));
  EXPECT_EQ((*stream)->Next().status().code(), absl::StatusCode::kUnavailable);
  server.FailNextCalls(1, absl::UnavailableError("down"));
  EXPECT_FALSE(server.List({}).ok());
  EXPECT_TRUE(server.List({}).ok());
  server.SetResourceMissing(true);
  EXPECT_TRUE(kube::IsNotFound(server.Watch({}).status()));
}

TEST(FakeListerWatcherTest, ShardSelectorsAreIgnoredUnlessSupported) {
  FakeListerWatcher server;
  for (int i = 0; i < 20; ++i) server.Set("ns", absl::StrCat(i, "-obj"), "v");
  const std::string low = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
  ListOptions options;
  options.shard_selector = low;
  auto ignored = server.List(options);
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_EQ(ignored->items.size(), 20u);
  EXPECT_FALSE(ignored->shard_applied);

  server.SetShardSelectorSupport(true);
  auto applied = server.List(options);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(applied->shard_applied);
  size_t expected = 0;
  for (int i = 0; i < 20; ++i) {
    expected += kube::Fnv1a64(absl::StrCat("uid-ns/", i, "-obj")) < 0x8000000000000000ull;
  }
  EXPECT_EQ(applied->items.size(), expected);
  EXPECT_GT(expected, 0u);
  EXPECT_LT(expected, 20u);
  EXPECT_EQ(server.last_list_options().shard_selector, low);
  options.shard_selector = "shardRange(object.metadata.name, '0x0', '0x1')";
  EXPECT_EQ(server.List(options).status().code(), absl::StatusCode::kInvalidArgument);

  // A watch from the start replays only the matching history.
  WatchOptions watch;
  watch.resource_version = "100";
  watch.shard_selector = low;
  auto stream = server.Watch(watch);
  ASSERT_TRUE(stream.ok());
  server.EndWatches();
  size_t events = 0;
  while (true) {
    auto e = (*stream)->Next();
    ASSERT_TRUE(e.ok());
    if (!e->has_value()) break;
    ++events;
  }
  EXPECT_EQ(events, expected);
}

TEST(FakeListerWatcherTest, LabelAndFieldSelectorsApplyToListsAndWatches) {
  FakeListerWatcher server;
  server.Set("ns", "a", "v", {{"b", "1"}});
  server.Set("ns", "b", "v", {{"b", "2"}});
  server.Set("other", "a", "v");
  auto names = [&](const ListOptions& options) {
    std::vector<std::string> out;
    auto page = server.List(options);
    EXPECT_TRUE(page.ok()) << page.status();
    if (page.ok()) {
      for (const auto& item : page->items) {
        out.push_back(nlohmann::json::parse(item)["metadata"]["name"].get<std::string>());
      }
    }
    return out;
  };
  EXPECT_EQ(names({"b in (1,3)", "", 0, ""}), std::vector<std::string>{"a"});
  EXPECT_EQ(names({"b notin (1)", "", 0, ""}).size(), 2u);  // also the unlabeled one
  EXPECT_EQ(names({"!b", "", 0, ""}).size(), 1u);
  EXPECT_EQ(names({"", "metadata.name=a", 0, ""}).size(), 2u);
  EXPECT_EQ(names({"", "metadata.name=a,metadata.namespace=ns", 0, ""}).size(), 1u);
  EXPECT_EQ(server.List({"", "spec.x=y", 0, ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.List({"in in in", "", 0, ""}).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A watch sees an object entering its selector as ADDED and leaving it as DELETED.
  auto stream = server.Watch({"b in (1)", "", "", 0, true});
  ASSERT_TRUE(stream.ok());
  server.Set("ns", "b", "v", {{"b", "1"}});             // enters
  server.Set("ns", "b", "w", {{"b", "1"}});             // stays
  const std::string left = server.Set("ns", "b", "x");  // leaves: DELETED with the new state
  server.Set("ns", "b", "y");                           // still out: nothing
  server.Delete("ns", "a");
  std::vector<std::pair<EventType, std::string>> want = {{EventType::kAdded, ""},
                                                         {EventType::kModified, ""},
                                                         {EventType::kDeleted, left},
                                                         {EventType::kDeleted, ""}};
  for (const auto& [type, object] : want) {
    auto event = (*stream)->Next();
    ASSERT_TRUE(event.ok() && event->has_value());
    EXPECT_EQ((*event)->type, type);
    if (!object.empty()) {
      EXPECT_EQ((*event)->object, object);
    }
  }
}

}  // namespace
}  // namespace ctrlhost::watch
