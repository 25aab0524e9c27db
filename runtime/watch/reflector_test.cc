#include "runtime/watch/reflector.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/api_status.h"
#include "runtime/watch/fake_lister_watcher.h"
#include "runtime/watch/mirror_handler_for_tests.h"

namespace ctrlhost::watch {
namespace {

// MirrorHandler (mirror_handler_for_tests.h): consumers must see exactly the differences.

std::map<std::string, std::string> StoreContent(const cache::Store& store) {
  std::map<std::string, std::string> out;
  for (const auto& object : store.List()) {
    out[std::string(object->key())] = std::string(object->json());
  }
  return out;
}

class ReflectorTest : public ::testing::Test {
 protected:
  void StartReflector(ReflectorOptions options = {}) {
    options.clock = &clock_;
    options.seed = 42;
    options.description = "test";
    if (options.page_size == 500) options.page_size = 3;
    reflector_ = std::make_unique<Reflector>(server_, options);
    handler_ = std::make_shared<MirrorHandler>();
    reflector_->AddHandler(handler_);
    reflector_->Start();
  }

  // Polls `done` (bounded, real time), moving the fake clock by `step` each round so backoffs
  // and watchdogs fire without real waiting.
  bool WaitFor(const std::function<bool()>& done, absl::Duration step = absl::ZeroDuration()) {
    return WaitAdvancing(clock_, done, step);
  }

  // The store and the consumers' mirror both equal the server's list, and the reflector
  // watches from the server's current version.
  bool Converged() {
    auto want = server_->Snapshot();
    return reflector_->HasSynced() && StoreContent(reflector_->store()) == want &&
           handler_->mirror() == want && reflector_->state() == ReflectorState::kWatching &&
           server_->open_watches() == 1;
  }

  void ExpectConverged(absl::Duration step = absl::Milliseconds(100)) {
    EXPECT_TRUE(WaitFor([&] { return Converged(); }, step));
    EXPECT_EQ(StoreContent(reflector_->store()), server_->Snapshot());
    EXPECT_EQ(handler_->mirror(), server_->Snapshot());
    EXPECT_TRUE(handler_->errors().empty()) << handler_->errors()[0];
  }

  common::FakeClock clock_;
  std::shared_ptr<FakeListerWatcher> server_ = std::make_shared<FakeListerWatcher>();
  std::unique_ptr<Reflector> reflector_;
  std::shared_ptr<MirrorHandler> handler_;
};

TEST_F(ReflectorTest, ListsInPagesThenWatchesFromTheListVersion) {
  for (int i = 0; i < 7; ++i) server_->Set("ns", absl::StrCat("o", i), "v");
  StartReflector();
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(20)));
  EXPECT_EQ(server_->list_calls(), 3);  // pages of 3
  EXPECT_EQ(handler_->initial_adds(), 7);
  ASSERT_TRUE(server_->WaitForWatchCalls(1, absl::Seconds(20)));
  EXPECT_EQ(server_->last_watch_options().resource_version, "107");
  EXPECT_EQ(server_->last_watch_options().timeout_seconds, 300);
  EXPECT_TRUE(server_->last_watch_options().allow_bookmarks);

  server_->Set("ns", "o1", "changed");
  server_->Delete("ns", "o2");
  server_->Set("ns", "new", "v");
  ExpectConverged();
  EXPECT_EQ(handler_->updates(), 1);
  EXPECT_EQ(handler_->deletes(), 1);
  EXPECT_EQ(handler_->adds(), 8);
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.objects, 7u);
  EXPECT_EQ(m.resource_version, "110");
  EXPECT_EQ(m.lists_total, 1u);
  EXPECT_EQ(m.relists_total, 0u);
  EXPECT_EQ(m.events_total, 3u);
  EXPECT_GT(m.bytes, 0u);
  EXPECT_TRUE(m.synced);
}

TEST_F(ReflectorTest, ServerRestartMidWatchResumesFromTheLastVersion) {
  server_->Set("ns", "a", "1");
  StartReflector();
  ExpectConverged();
  server_->Restart(/*failures=*/3, /*lose_history=*/false);
  server_->Set("ns", "b", "1");  // while the host is reconnecting
  server_->Delete("ns", "a");
  ExpectConverged();
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.relists_total, 0u);  // the history was kept: no relist needed
  EXPECT_GE(m.errors_total, 3u);
  EXPECT_EQ(handler_->deletes(), 1);
}

TEST_F(ReflectorTest, RestartLosingHistoryRelistsAndReportsDeletesWhileDisconnected) {
  for (int i = 0; i < 5; ++i) server_->Set("ns", absl::StrCat("o", i), "v");
  StartReflector();
  ExpectConverged();
  server_->Restart(/*failures=*/2, /*lose_history=*/false);
  server_->Delete("ns", "o0");
  server_->Delete("ns", "o3");
  server_->Set("ns", "o1", "changed");
  server_->Set("ns", "o9", "new");
  server_->Compact();  // the changes above are no longer in the history: 410, relist
  ExpectConverged();
  EXPECT_EQ(reflector_->Metrics().relists_total, 1u);
  EXPECT_EQ(handler_->deletes(), 2);
  EXPECT_EQ(handler_->updates(), 1);
  EXPECT_EQ(handler_->adds(), 6);
}

TEST_F(ReflectorTest, GoneAsHttpErrorRelists) {
  server_->Set("ns", "a", "1");
  server_->SetGoneAsHttpError(true);
  StartReflector();
  ExpectConverged();
  server_->BreakWatches(absl::UnavailableError("unexpected EOF"));
  server_->Delete("ns", "a");
  server_->Compact();
  ExpectConverged();
  EXPECT_EQ(reflector_->Metrics().relists_total, 1u);
  EXPECT_EQ(handler_->deletes(), 1);
}

TEST_F(ReflectorTest, GoneErrorEventRelistsWithoutBackoff) {
  server_->Set("ns", "a", "1");
  StartReflector();
  ExpectConverged();
  server_->InjectEvent(
      {EventType::kError, kube::ToHttpResponse(kube::GoneError("too old")).second});
  // No clock movement: a 410 relists at once.
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().relists_total == 1; }));
  ExpectConverged(absl::ZeroDuration());
  EXPECT_EQ(reflector_->Metrics().errors_total, 0u);
}

TEST_F(ReflectorTest, ConnectionDroppedMidChunkLosesNothing) {
  StartReflector();
  ExpectConverged();
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 10; ++i) server_->Set("ns", absl::StrCat("o", i), absl::StrCat(round));
    server_->Delete("ns", absl::StrCat("o", round));
    // Whatever was still in flight is dropped with the connection.
    server_->BreakWatches(absl::UnavailableError("unexpected EOF in chunk"));
    ExpectConverged();
  }
  EXPECT_EQ(reflector_->Metrics().relists_total, 0u);
}

TEST_F(ReflectorTest, OtherErrorEventBacksOffAndRewatches) {
  StartReflector();
  ExpectConverged();
  server_->InjectEvent(
      {EventType::kError, kube::ToHttpResponse(kube::InternalError("etcd hiccup")).second});
  server_->Set("ns", "a", "1");
  ExpectConverged();
  EXPECT_EQ(reflector_->Metrics().errors_total, 1u);
}

TEST_F(ReflectorTest, SilentWatchIsClosedByTheWatchdogAndReestablished) {
  server_->Set("ns", "a", "1");
  StartReflector();
  ExpectConverged();
  server_->HangWatches();
  server_->Set("ns", "b", "1");  // not delivered on the hung connection
  ASSERT_TRUE(
      WaitFor([&] { return reflector_->Metrics().watchdog_closes_total == 1; }, absl::Seconds(1)));
  ExpectConverged(absl::ZeroDuration());
  EXPECT_EQ(reflector_->Metrics().relists_total, 0u);
  EXPECT_EQ(reflector_->Metrics().errors_total, 0u);
}

TEST_F(ReflectorTest, ServerTimeoutEndsTheWatchAndItIsReestablishedAtOnce) {
  StartReflector();
  ExpectConverged();
  for (int i = 0; i < 3; ++i) {
    server_->EndWatches();
    server_->Set("ns", absl::StrCat("o", i), "v");
    ExpectConverged(absl::ZeroDuration());  // no backoff: the clock does not move
  }
  EXPECT_EQ(server_->watch_calls(), 4);
  EXPECT_EQ(reflector_->Metrics().errors_total, 0u);
}

TEST_F(ReflectorTest, MalformedEventsAreLoggedAndCauseARelist) {
  server_->Set("ns", "a", "1");
  StartReflector();
  ExpectConverged();
  const std::vector<std::function<void()>> faults = {
      [&] { server_->InjectStreamError(absl::DataLossError("invalid character 'x'")); },
      [&] {
        server_->InjectEvent({EventType::kAdded, "{\"metadata\":{\"name\":"});
      },
      [&] {
        server_->InjectEvent({EventType::kModified, "[1,2]"});
      },
      [&] {
        server_->InjectEvent({EventType::kDeleted, "{\"metadata\":{}}"});
      },
      [&] {
        server_->InjectEvent({EventType::kBookmark, "{}"});
      },
      [&] {
        server_->InjectEvent({EventType::kError, "not a status"});
      },
  };
  uint64_t relists = 0;
  for (const auto& fault : faults) {
    fault();
    server_->Set("ns", "a", absl::StrCat(relists));
    ExpectConverged();
    relists = reflector_->Metrics().relists_total;
  }
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.relists_total, 5u);  // all but the unknown ERROR event, which re-watches
  EXPECT_EQ(m.parse_errors_total, 5u);
}

TEST_F(ReflectorTest, AKindAppearingLaterIsSyncedOnceItExists) {
  server_->SetResourceMissing(true);
  StartReflector();
  EXPECT_TRUE(WaitFor(
      [&] { return server_->list_calls() >= 5 && reflector_->state() == ReflectorState::kBackoff; },
      absl::Seconds(1)));
  EXPECT_FALSE(reflector_->HasSynced());
  server_->SetResourceMissing(false);  // the CRD was created
  server_->Set("ns", "a", "1");
  ExpectConverged(absl::Seconds(1));
  EXPECT_EQ(handler_->initial_adds(), 1);
}

TEST_F(ReflectorTest, BackoffDoublesFrom800MsTo30SWithJitterAndResetsWhenHealthy) {
  server_->FailNextCalls(12, absl::UnavailableError("connection refused"));
  StartReflector();
  absl::Duration expected = absl::Milliseconds(800);
  for (int failure = 1; failure <= 12; ++failure) {
    ASSERT_TRUE(WaitFor([&] {
      return server_->list_calls() == failure && reflector_->state() == ReflectorState::kBackoff;
    }));
    const absl::Duration delay = reflector_->Metrics().last_backoff;
    EXPECT_LE(delay, expected) << failure;
    EXPECT_GE(delay, expected * 0.8) << failure;
    clock_.Advance(expected);
    expected = std::min(expected * 2, absl::Seconds(30));
  }
  ExpectConverged(absl::ZeroDuration());
  // Healthy for longer than the reset period: the next failure starts from 800 ms again.
  clock_.Advance(absl::Minutes(3));
  server_->FailNextCalls(1, absl::UnavailableError("connection refused"));
  server_->BreakWatches(absl::UnavailableError("reset"));
  ASSERT_TRUE(WaitFor([&] { return reflector_->state() == ReflectorState::kBackoff; }));
  EXPECT_LE(reflector_->Metrics().last_backoff, absl::Milliseconds(800));
  ExpectConverged();
}

TEST_F(ReflectorTest, FailingWatchReportsSinceWhenAndItsLastErrorUntilItRecovers) {
  StartReflector();
  ExpectConverged(absl::ZeroDuration());
  EXPECT_FALSE(reflector_->Metrics().failing);
  const absl::Time broke = clock_.Now();
  server_->FailNextCalls(1000, absl::UnavailableError("connection refused"));
  server_->BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(WaitFor([&] { return reflector_->state() == ReflectorState::kBackoff; }));
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_TRUE(m.failing);
  EXPECT_EQ(m.failing_since, broke);
  EXPECT_EQ(m.last_error_code, absl::StatusCode::kUnavailable);
  EXPECT_EQ(m.last_error_message, "connection reset");
  // Every retry fails for a minute: failing_since stays at the first failure.
  ASSERT_TRUE(
      WaitFor([&] { return reflector_->Metrics().consecutive_failures >= 4; }, absl::Seconds(1)));
  m = reflector_->Metrics();
  EXPECT_TRUE(m.failing);
  EXPECT_EQ(m.failing_since, broke);
  EXPECT_EQ(m.last_error_message, "connection refused");
  server_->FailNextCalls(0, absl::OkStatus());
  ExpectConverged(absl::Seconds(1));
  m = reflector_->Metrics();
  EXPECT_FALSE(m.failing);
  EXPECT_EQ(m.consecutive_failures, 0u);
  EXPECT_EQ(m.last_error_message, "connection refused");  // kept for /debug/dump
}

// A real client connects inside the stream: Watch() returns a stream, and its first item is
// "connection refused". Such a retry is no recovery, or /readyz would call a watch that has
// failed for minutes fresh again after every retry (it did, against a killed API server).
TEST_F(ReflectorTest, AStreamThatFailsToConnectIsNoRecovery) {
  StartReflector();
  ExpectConverged(absl::ZeroDuration());
  server_->SetLazyConnect(true);
  const absl::Time broke = clock_.Now();
  server_->FailNextCalls(1000, absl::UnavailableError("connection refused"));
  server_->BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(WaitFor([&] { return reflector_->state() == ReflectorState::kBackoff; }));
  EXPECT_EQ(reflector_->Metrics().failing_since, broke);
  ASSERT_TRUE(
      WaitFor([&] { return reflector_->Metrics().consecutive_failures >= 4; }, absl::Seconds(1)));
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_TRUE(m.failing);
  EXPECT_EQ(m.failing_since, broke);
  EXPECT_EQ(m.last_error_message, "connection refused");
  // The server answers again: the watch is established, and that is the recovery.
  server_->FailNextCalls(0, absl::OkStatus());
  ExpectConverged(absl::Seconds(1));
  ASSERT_TRUE(WaitFor([&] { return !reflector_->Metrics().failing; }, absl::Seconds(1)));
  EXPECT_EQ(reflector_->Metrics().consecutive_failures, 0u);
}

TEST_F(ReflectorTest, ForbiddenListIsReportedAtOnceAndRetriedWithinFiveSeconds) {
  const std::string message =
      "configmaps is forbidden: User \"system:serviceaccount:x:y\" cannot list resource "
      "\"configmaps\" in API group \"\" in the namespace \"x\"";
  server_->FailNextCalls(12, kube::ForbiddenError(message));
  StartReflector();
  for (int failure = 1; failure <= 12; ++failure) {
    ASSERT_TRUE(WaitFor([&] {
      return server_->list_calls() == failure && reflector_->state() == ReflectorState::kBackoff;
    }));
    const ReflectorMetrics m = reflector_->Metrics();
    EXPECT_TRUE(m.failing);
    EXPECT_FALSE(m.synced);
    EXPECT_EQ(m.last_error_code, absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(m.last_error_message, message);
    // Capped: a permission granted now is seen within 5 s, not after a 30 s backoff.
    EXPECT_LE(m.last_backoff, absl::Seconds(5)) << failure;
    clock_.Advance(m.last_backoff);
  }
  ExpectConverged(absl::ZeroDuration());
  EXPECT_FALSE(reflector_->Metrics().failing);
}

TEST_F(ReflectorTest, FailureLogLinesAreRateLimitedAndRecoveryIsLogged) {
  common::Mutex mu;
  std::vector<std::string> lines;
  common::SetLogSink([&](absl::string_view line) {
    common::MutexLock lock(&mu);
    lines.emplace_back(line);
  });
  auto count = [&](absl::string_view text) {
    common::MutexLock lock(&mu);
    int n = 0;
    for (const std::string& line : lines) n += absl::StrContains(line, text) ? 1 : 0;
    return n;
  };
  server_->FailNextCalls(40, absl::UnavailableError("connection refused"));
  StartReflector();
  // 40 failures over a few minutes (backoff at most 30 s): one line at first, then at most
  // one per minute.
  ASSERT_TRUE(WaitFor([&] { return server_->list_calls() > 40; }, absl::Seconds(1)));
  ExpectConverged(absl::Seconds(1));
  common::SetLogSink(nullptr);
  const absl::Duration failed_for = absl::Seconds(40 * 30);  // upper bound on the fake time
  EXPECT_GE(count("watch failed; retrying watch=test error=\"connection refused\""), 1);
  EXPECT_LE(count("watch failed; retrying"), 1 + failed_for / absl::Minutes(1));
  EXPECT_LT(count("watch failed; retrying"), 40);
  EXPECT_EQ(count("watch recovered watch=test after=list"), 1);
}

TEST_F(ReflectorTest, GoneAndTheRelistAfterItAreNotFailures) {
  server_->SetGoneAsHttpError(true);
  StartReflector();
  ExpectConverged(absl::ZeroDuration());
  server_->BreakWatches(absl::UnavailableError("unexpected EOF"));  // one failure
  server_->Set("ns", "a", "v");
  server_->Compact();  // the re-watch gets 410, then the reflector relists
  ExpectConverged();
  const ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.relists_total, 1u);
  EXPECT_FALSE(m.failing);
  EXPECT_EQ(m.errors_total, 1u);
}

TEST_F(ReflectorTest, EventsPerSecondIsMeasuredOverTenSecondWindows) {
  StartReflector();
  ExpectConverged(absl::ZeroDuration());
  clock_.Advance(absl::Seconds(10));  // closes the (empty) window the reflector started with
  server_->Set("ns", "first", "v");
  ASSERT_TRUE(WaitFor([&] { return reflector_->Metrics().events_total == 1; }));
  for (int i = 0; i < 19; ++i) server_->Set("ns", absl::StrCat("o", i), "v");
  ASSERT_TRUE(WaitFor([&] { return reflector_->Metrics().events_total == 20; }));
  clock_.Advance(absl::Seconds(10));
  server_->Set("ns", "next", "v");  // the first event of the next window closes this one
  ASSERT_TRUE(WaitFor([&] { return reflector_->Metrics().events_total == 21; }));
  EXPECT_DOUBLE_EQ(reflector_->Metrics().events_per_second, 2.0);
}

TEST_F(ReflectorTest, BookmarksKeepTheVersionFreshSoNoRelistIsNeeded) {
  StartReflector();
  ExpectConverged();
  server_->Set("other", "x", "1");  // imagine it filtered out by a selector: still no event
  server_->SendBookmark();
  ASSERT_TRUE(WaitFor([&] { return reflector_->Metrics().bookmarks_total == 1; }));
  EXPECT_EQ(reflector_->store().ResourceVersion(), absl::StrCat(server_->resource_version()));
  server_->Compact();
  server_->EndWatches();
  ASSERT_TRUE(server_->WaitForWatchCalls(2, absl::Seconds(20)));
  ExpectConverged(absl::ZeroDuration());
  EXPECT_EQ(reflector_->Metrics().relists_total, 0u);
}

TEST_F(ReflectorTest, ExpiredContinueTokenRestartsTheList) {
  for (int i = 0; i < 7; ++i) server_->Set("ns", absl::StrCat("o", i), "v");
  server_->ExpireNextContinueToken();
  StartReflector();
  ExpectConverged(absl::ZeroDuration());  // no backoff: the list starts over at once
  EXPECT_EQ(server_->list_calls(), 5);    // page 1, expired page 2, then pages 1-3 again
  EXPECT_EQ(handler_->initial_adds(), 7);
  EXPECT_EQ(reflector_->Metrics().errors_total, 0u);
}

TEST_F(ReflectorTest, HandlersAddedLaterGetAReplayAndRemovedOnesNoMoreCalls) {
  server_->Set("ns", "a", "1");
  server_->Set("ns", "b", "1");
  StartReflector();
  ExpectConverged();
  auto late = std::make_shared<MirrorHandler>();
  const int id = reflector_->AddHandler(late);
  EXPECT_EQ(late->initial_adds(), 2);
  server_->Set("ns", "c", "1");
  ExpectConverged();
  EXPECT_TRUE(WaitFor([&] { return late->mirror() == server_->Snapshot(); }));
  reflector_->RemoveHandler(id);
  server_->Set("ns", "d", "1");
  ExpectConverged();
  EXPECT_EQ(late->adds(), 3);
}

TEST_F(ReflectorTest, StopWakesABackoffAndTheWatch) {
  server_->FailNextCalls(1, absl::UnavailableError("down"));
  StartReflector();
  ASSERT_TRUE(WaitFor([&] { return reflector_->state() == ReflectorState::kBackoff; }));
  reflector_->Stop();  // the fake clock never moves: Stop must not wait for the backoff
  EXPECT_EQ(reflector_->state(), ReflectorState::kStopped);

  reflector_.reset();
  StartReflector();
  ExpectConverged(absl::ZeroDuration());
  reflector_->Stop();  // blocked in Next()
  reflector_->Stop();  // idempotent
  EXPECT_EQ(server_->open_watches(), 0);
}

TEST_F(ReflectorTest, ReadersNeverSeeATornStoreWhileTheReflectorWrites) {
  for (int i = 0; i < 20; ++i) server_->Set("ns", absl::StrCat("o", i), "v");
  StartReflector();
  ExpectConverged();
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        for (const auto& object : reflector_->store().ByIndex(cache::Index::kNamespace, "ns")) {
          EXPECT_EQ(object->meta().namespace_, "ns");
        }
        reflector_->Metrics();
        reflector_->store().Get("ns/o1");
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    server_->Set("ns", absl::StrCat("o", i % 30), absl::StrCat(i));
    if (i % 9 == 0) server_->Delete("ns", absl::StrCat("o", i % 11));
    if (i % 50 == 0) {
      server_->Compact();
      server_->BreakWatches(absl::UnavailableError("reset"));
    }
  }
  ExpectConverged();
  done = true;
  for (auto& t : readers) t.join();
}

TEST(ReflectorRealClockTest, SyncsWatchesAndStopsPromptly) {
  auto server = std::make_shared<FakeListerWatcher>();
  server->Set("ns", "a", "1");
  Reflector reflector(server, ReflectorOptions{});  // Clock::Real(), watchdog idle
  auto handler = std::make_shared<MirrorHandler>();
  reflector.AddHandler(handler);
  reflector.Start();
  ASSERT_TRUE(reflector.WaitForSync(absl::Seconds(20)));
  ASSERT_TRUE(server->WaitForWatchCalls(1, absl::Seconds(20)));
  server->Set("ns", "b", "1");
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (handler->mirror() != server->Snapshot() && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(handler->mirror(), server->Snapshot());
  reflector.Stop();
  EXPECT_EQ(server->open_watches(), 0);
}

}  // namespace
}  // namespace ctrlhost::watch
