// Watch: from memory, from SQLite history, across the window's edge and compaction, Stop and
// shutdown, and many watchers against concurrent writers.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/apiserver/storage/testing/store_test_util.h"
#include "runtime/common/clock.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::DeleteValue;
using ::ctrlhost::apiserver::testing::NewTempDir;
using ::ctrlhost::apiserver::testing::PutValue;
using ::ctrlhost::apiserver::testing::WaitFor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Reads events until `count` have arrived (real-time bound: a test failure, not a hang).
std::vector<WatchEvent> Collect(Watch* watch, size_t count, size_t max_events = 0) {
  std::vector<WatchEvent> events;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (events.size() < count && absl::Now() < give_up) {
    auto batch = watch->Next(absl::Now() + absl::Milliseconds(200), max_events, nullptr);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) break;
    for (auto& event : *batch) events.push_back(std::move(event));
  }
  return events;
}

std::vector<int64_t> Revisions(const std::vector<WatchEvent>& events) {
  std::vector<int64_t> revisions;
  for (const auto& event : events) revisions.push_back(event.object->mod_revision);
  return revisions;
}

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = NewTempDir() + "/state.db";
    Open();
  }

  // The real clock unless a test needs to move time itself.
  void Open(size_t window = 100000, common::Clock* clock = common::Clock::Real(),
            size_t window_bytes = 128 << 20, size_t history_bytes = size_t{1} << 30) {
    store_.reset();
    StoreOptions options;
    options.watch_window_bytes = window_bytes;
    options.retained_history_bytes = history_bytes;
    options.path = path_;
    options.sync_full = false;
    options.watch_window_events = window;
    options.clock = clock;
    options.compaction_interval = absl::ZeroDuration();
    auto store = Store::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  std::unique_ptr<Watch> NewWatch(absl::string_view prefix, int64_t from) {
    auto watch = store_->Watch(prefix, from);
    EXPECT_TRUE(watch.ok()) << watch.status();
    return watch.ok() ? std::move(*watch) : nullptr;
  }

  void Put(const std::string& key, const std::string& value) {
    ASSERT_TRUE(store_->Write(key, PutValue(value)).ok());
  }

  common::FakeClock clock_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(WatchTest, EventsFromMemoryWithTypesAndPrevious) {
  auto watch = NewWatch("/k/", 0);
  Put("/k/a", "a1");
  Put("/other/x", "x");
  Put("/k/a", "a2");
  ASSERT_TRUE(store_->Write("/k/a", DeleteValue("final")).ok());

  int64_t progress = -1;
  auto events = watch->Next(absl::InfiniteFuture(), 0, &progress);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].type, WatchEvent::Type::kAdded);
  EXPECT_EQ((*events)[0].previous, nullptr);
  EXPECT_EQ((*events)[0].object->value, "a1");
  EXPECT_EQ((*events)[1].type, WatchEvent::Type::kModified);
  EXPECT_EQ((*events)[1].object->mod_revision, 3);
  EXPECT_EQ((*events)[1].previous->value, "a1");
  EXPECT_EQ((*events)[2].type, WatchEvent::Type::kDeleted);
  EXPECT_EQ((*events)[2].object->value, "final");
  EXPECT_EQ((*events)[2].object->mod_revision, 4);
  EXPECT_EQ((*events)[2].previous->value, "a2");
  EXPECT_EQ(progress, 4);
}

TEST_F(WatchTest, MaxEventsAndProgress) {
  auto watch = NewWatch("/k/", 0);
  for (int i = 0; i < 5; ++i) Put("/k/a", absl::StrCat(i));
  Put("/other", "x");
  int64_t progress = 0;
  auto first = watch->Next(absl::InfiniteFuture(), 2, &progress);
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(Revisions(*first), ElementsAre(1, 2));
  EXPECT_EQ(progress, 2);
  auto rest = watch->Next(absl::InfiniteFuture(), 10, &progress);
  ASSERT_TRUE(rest.ok());
  EXPECT_THAT(Revisions(*rest), ElementsAre(3, 4, 5));
  EXPECT_EQ(progress, 6);  // the unrelated write is covered too (a bookmark may say 6)
}

TEST_F(WatchTest, LongRunsOfOtherPrefixesAreSkipped) {
  auto watch = NewWatch("/mine/", 0);
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int n = 0; n < 700; ++n) {
        ASSERT_TRUE(store_->Write(absl::StrCat("/other/", w), PutValue("o")).ok());
      }
    });
  }
  for (auto& writer : writers) writer.join();
  Put("/mine/x", "mine");
  int64_t progress = 0;
  auto events = watch->Next(absl::Now() + absl::Seconds(10), 0, &progress);
  ASSERT_TRUE(events.ok());
  EXPECT_THAT(Revisions(*events), ElementsAre(5601));
  EXPECT_EQ(progress, 5601);
}

TEST_F(WatchTest, TimesOutOnTheStoreClock) {
  Open(/*window=*/100, &clock_);
  Put("/other", "x");
  auto watch = NewWatch("/k/", 0);
  int64_t progress = 0;
  // A deadline already passed: whatever is there (nothing for us), at once.
  auto now = watch->Next(clock_.Now(), 10, &progress);
  ASSERT_TRUE(now.ok());
  EXPECT_THAT(*now, IsEmpty());
  EXPECT_EQ(progress, 1);

  std::atomic<bool> returned{false};
  const absl::Time deadline = clock_.Now() + absl::Seconds(30);
  std::thread waiter([&] {
    auto events = watch->Next(deadline, 10, nullptr);
    EXPECT_TRUE(events.ok());
    EXPECT_THAT(*events, IsEmpty());
    returned = true;
  });
  clock_.Advance(absl::Seconds(31));
  EXPECT_TRUE(WaitFor([&] { return returned.load(); }));
  if (!returned) watch->Stop();  // do not hang the test binary
  waiter.join();
}

TEST_F(WatchTest, StopWakesNext) {
  auto watch = NewWatch("/k/", 0);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    auto events = watch->Next(absl::InfiniteFuture(), 10, nullptr);
    EXPECT_EQ(events.status().code(), absl::StatusCode::kCancelled);
    returned = true;
  });
  watch->Stop();
  EXPECT_TRUE(WaitFor([&] { return returned.load(); }));
  waiter.join();
  EXPECT_EQ(watch->Next(absl::InfiniteFuture(), 1, nullptr).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(WatchTest, StoreShutdownCancelsWatchesThatOutliveIt) {
  auto watch = NewWatch("/k/", 0);
  EXPECT_EQ(store_->GetStats().watchers, 1);
  std::thread waiter([&] {
    EXPECT_EQ(watch->Next(absl::InfiniteFuture(), 10, nullptr).status().code(),
              absl::StatusCode::kCancelled);
  });
  store_.reset();
  waiter.join();
  EXPECT_EQ(watch->Next(absl::InfiniteFuture(), 10, nullptr).status().code(),
            absl::StatusCode::kCancelled);
}

TEST_F(WatchTest, FromHistoryThenIntoTheRing) {
  for (int i = 1; i <= 10; ++i) Put(absl::StrCat("/k/", i % 3), absl::StrCat(i));
  Open();  // the ring starts empty at revision 10: older events come from SQLite
  auto watch = NewWatch("/k/", 3);
  Put("/k/new", "11");
  Put("/k/1", "12");
  std::vector<WatchEvent> events = Collect(watch.get(), 9, /*max_events=*/4);
  EXPECT_THAT(Revisions(events), ElementsAre(4, 5, 6, 7, 8, 9, 10, 11, 12));
  EXPECT_EQ(events[0].type, WatchEvent::Type::kModified);  // "/k/1", created at 1
  EXPECT_EQ(events[0].object->key, "/k/1");
  EXPECT_EQ(events[0].previous->value, "1");
  EXPECT_EQ(events[3].type, WatchEvent::Type::kModified);  // "/k/1" again at 7
  EXPECT_EQ(events[3].previous->value, "4");
  EXPECT_EQ(events[7].type, WatchEvent::Type::kAdded);  // "/k/new"
  EXPECT_EQ(events[8].previous->value, "10");
  EXPECT_EQ(store_->GetStats().watchers, 1);
}

TEST_F(WatchTest, SlowConsumerFallsOutOfTheWindowAndCatchesUpFromHistory) {
  Open(/*window=*/4);
  auto watch = NewWatch("", 0);
  for (int i = 1; i <= 50; ++i) Put(absl::StrCat("/k/", i % 5), absl::StrCat(i));
  std::vector<WatchEvent> events = Collect(watch.get(), 50, /*max_events=*/3);
  std::vector<int64_t> expected;
  for (int i = 1; i <= 50; ++i) expected.push_back(i);
  EXPECT_EQ(Revisions(events), expected);
  // And it keeps going from memory.
  Put("/k/x", "51");
  EXPECT_THAT(Revisions(Collect(watch.get(), 1)), ElementsAre(51));
}

// Issue 14 item 5: repeatedly writing one 2.9 MB object grew RSS by ~3.2 MB per update, never
// released (the window held 100,000 versions). The window is bounded in bytes too (a watcher
// behind it reads history), and history past its byte budget is compacted (410 from before).
TEST_F(WatchTest, RegressionLargeObjectVersionsAreBoundedInBytes) {
  Open(/*window=*/100000, common::Clock::Real(), /*window_bytes=*/300 << 10,
       /*history_bytes=*/1 << 20);
  auto slow = NewWatch("/k/", 0);
  const std::string big(100 << 10, 'x');
  for (int i = 1; i <= 30; ++i) Put("/k/a", absl::StrCat(i, big));
  EXPECT_LE(store_->GetStats().watch_window_bytes, 300 << 10);
  // History holds about 1 MiB: the oldest revisions are compacted (asynchronously, by the
  // writer thread).
  ASSERT_TRUE(WaitFor([&] { return store_->CompactedRevision() >= 20; }))
      << store_->CompactedRevision();
  auto old = store_->Watch("/k/", 1);
  EXPECT_TRUE(kube::IsGone(old.status())) << old.status();
  // The watcher from before the compaction gets 410 too, as from kube-apiserver.
  auto next = slow->Next(absl::Now() + absl::Seconds(5), 0, nullptr);
  EXPECT_TRUE(kube::IsGone(next.status())) << next.status();
  // A recent watch is served.
  auto recent = NewWatch("/k/", 29);
  EXPECT_THAT(Revisions(Collect(recent.get(), 1)), ElementsAre(30));
}

TEST_F(WatchTest, WatcherBehindTheByteWindowCatchesUpFromHistory) {
  Open(/*window=*/100000, common::Clock::Real(), /*window_bytes=*/250 << 10);
  auto watch = NewWatch("/k/", 0);
  const std::string big(100 << 10, 'x');
  for (int i = 1; i <= 10; ++i) Put("/k/a", absl::StrCat(i, big));
  EXPECT_LE(store_->GetStats().watch_window_bytes, 250 << 10);
  std::vector<int64_t> expected;
  for (int i = 1; i <= 10; ++i) expected.push_back(i);
  EXPECT_EQ(Revisions(Collect(watch.get(), 10, /*max_events=*/2)), expected);
}

TEST_F(WatchTest, TooOldAndTooNewStartRevisions) {
  for (int i = 1; i <= 10; ++i) Put("/k/a", absl::StrCat(i));
  Open(/*window=*/2);
  auto future = store_->Watch("/k/", 11);
  EXPECT_EQ(kube::HttpCode(future.status()), 504) << future.status();
  ASSERT_TRUE(store_->Compact(6).ok());
  auto old = store_->Watch("/k/", 5);
  EXPECT_TRUE(kube::IsGone(old.status())) << old.status();
  EXPECT_THAT(std::string(old.status().message()), HasSubstr("too old resource version: 5 (6)"));
  // Exactly the compacted revision still works: events after it are all kept.
  auto at = NewWatch("/k/", 6);
  EXPECT_THAT(Revisions(Collect(at.get(), 4)), ElementsAre(7, 8, 9, 10));
}

TEST_F(WatchTest, HistoryWatcherOvertakenByCompactionGetsGone) {
  for (int i = 1; i <= 20; ++i) Put("/k/a", absl::StrCat(i));
  Open(/*window=*/2);
  auto watch = NewWatch("/k/", 2);
  auto first = watch->Next(absl::InfiniteFuture(), 3, nullptr);
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(Revisions(*first), ElementsAre(3, 4, 5));
  ASSERT_TRUE(store_->Compact(15).ok());
  auto next = watch->Next(absl::InfiniteFuture(), 3, nullptr);
  EXPECT_TRUE(kube::IsGone(next.status())) << next.status();
}

TEST_F(WatchTest, RingWatcherIsUnaffectedByCompaction) {
  auto watch = NewWatch("/k/", 0);
  for (int i = 1; i <= 20; ++i) Put("/k/a", absl::StrCat(i));
  ASSERT_TRUE(store_->Compact(15).ok());
  EXPECT_EQ(Collect(watch.get(), 20).size(), 20u);
}

// 50 watchers, 8 writers: every watcher sees every event of its prefix exactly once, in
// order. Half the watchers read in small steps through a small window, so they fall out of
// memory, continue from SQLite and rejoin.
void RunManyWatchers(Store* store) {
  constexpr int kWriters = 8;
  constexpr int kWritesPerWriter = 60;
  constexpr int kWatchers = 50;
  constexpr int64_t kTotal = kWriters * kWritesPerWriter;
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i < kWatchers; ++i) {
    auto watch = store->Watch(i % 5 == 0 ? "/w3/" : "/", 0);
    ASSERT_TRUE(watch.ok());
    watches.push_back(std::move(*watch));
  }
  std::vector<std::vector<WatchEvent>> received(kWatchers);
  std::vector<std::thread> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.emplace_back([&, i] {
      const size_t want = i % 5 == 0 ? kWritesPerWriter : kTotal;
      received[i] = Collect(watches[i].get(), want, /*max_events=*/i % 2 == 0 ? 3 : 0);
    });
  }
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int n = 0; n < kWritesPerWriter; ++n) {
        auto key = absl::StrCat("/w", w, "/", n % 4);
        ASSERT_TRUE(store->Write(key, PutValue(absl::StrCat(w, ":", n))).ok());
      }
    });
  }
  for (auto& writer : writers) writer.join();
  for (auto& watcher : watchers) watcher.join();

  std::vector<int64_t> all;
  for (int64_t r = 1; r <= kTotal; ++r) all.push_back(r);
  for (int i = 0; i < kWatchers; ++i) {
    const std::vector<int64_t> revisions = Revisions(received[i]);
    if (i % 5 == 0) {
      ASSERT_EQ(revisions.size(), static_cast<size_t>(kWritesPerWriter)) << "watcher " << i;
      for (size_t k = 1; k < revisions.size(); ++k) ASSERT_LT(revisions[k - 1], revisions[k]);
      for (size_t k = 0; k < revisions.size(); ++k) {
        ASSERT_EQ(received[i][k].object->value, absl::StrCat("3:", k)) << "watcher " << i;
      }
    } else {
      ASSERT_EQ(revisions, all) << "watcher " << i;
    }
  }
}

TEST_F(WatchTest, FiftyWatchersEightWritersLargeWindow) { RunManyWatchers(store_.get()); }

TEST_F(WatchTest, FiftyWatchersEightWritersSmallWindow) {
  Open(/*window=*/16);
  RunManyWatchers(store_.get());
}

}  // namespace
}  // namespace ctrlhost::apiserver
