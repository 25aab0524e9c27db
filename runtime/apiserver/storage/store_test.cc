#include "runtime/apiserver/storage/store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/storage/testing/store_test_util.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::DeleteValue;
using ::ctrlhost::apiserver::testing::NewTempDir;
using ::ctrlhost::apiserver::testing::PutValue;
using ::ctrlhost::apiserver::testing::WaitFor;
using ::testing::HasSubstr;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTempDir();
    ASSERT_FALSE(dir_.empty());
    path_ = dir_ + "/state.db";
  }

  std::unique_ptr<Store> OpenStore(StoreOptions options = {}) {
    options.path = path_;
    auto store = Store::Open(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(StoreTest, CreateUpdateNoopDelete) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Revision(), 0);

  int64_t seen_revision = 0;
  const StoredObject* seen_current = reinterpret_cast<const StoredObject*>(1);
  auto created = store->Write(
      "/a", [&](const StoredObject* current, int64_t revision) -> absl::StatusOr<Mutation> {
        seen_current = current;
        seen_revision = revision;
        return Mutation{Mutation::Op::kPut, "v1"};
      });
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(seen_current, nullptr);
  EXPECT_EQ(seen_revision, 1);
  EXPECT_EQ((*created)->key, "/a");
  EXPECT_EQ((*created)->value, "v1");
  EXPECT_EQ((*created)->create_revision, 1);
  EXPECT_EQ((*created)->mod_revision, 1);
  EXPECT_EQ(store->Revision(), 1);
  EXPECT_EQ(store->Get("/a"), *created);

  std::string current_value;
  auto updated = store->Write(
      "/a", [&](const StoredObject* current, int64_t revision) -> absl::StatusOr<Mutation> {
        current_value = current->value;
        return Mutation{Mutation::Op::kPut, absl::StrCat("v", revision)};
      });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(current_value, "v1");
  EXPECT_EQ((*updated)->value, "v2");
  EXPECT_EQ((*updated)->create_revision, 1);
  EXPECT_EQ((*updated)->mod_revision, 2);

  auto noop = store->Write(
      "/a", [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> { return Mutation{}; });
  ASSERT_TRUE(noop.ok());
  EXPECT_EQ(*noop, *updated);
  EXPECT_EQ(store->Revision(), 2);
  auto noop_absent = store->Write(
      "/absent",
      [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> { return Mutation{}; });
  ASSERT_TRUE(noop_absent.ok());
  EXPECT_EQ(*noop_absent, nullptr);

  auto deleted = store->Write("/a", DeleteValue("final"));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ((*deleted)->value, "final");
  EXPECT_EQ((*deleted)->mod_revision, 3);
  EXPECT_EQ((*deleted)->create_revision, 1);
  EXPECT_EQ(store->Get("/a"), nullptr);
  EXPECT_EQ(store->Revision(), 3);

  // Re-created: a new object with a new create revision.
  auto again = store->Write("/a", PutValue("v4"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->create_revision, 4);
}

TEST_F(StoreTest, DeleteWithoutFinalValueReturnsLastState) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Write("/a", PutValue("last")).ok());
  auto deleted = store->Write("/a", DeleteValue());
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ((*deleted)->value, "last");
}

TEST_F(StoreTest, MutatorErrorWritesNothing) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Write("/a", PutValue("v1")).ok());
  auto failed = store->Write("/a", [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
    return kube::AlreadyExistsError("", "configmaps", "a");
  });
  EXPECT_TRUE(kube::IsAlreadyExists(failed.status())) << failed.status();
  EXPECT_EQ(store->Revision(), 1);
  EXPECT_EQ(store->Get("/a")->value, "v1");
  // The failed write consumed no revision.
  auto next = store->Write("/b", PutValue("b"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->mod_revision, 2);
}

TEST_F(StoreTest, BadMutationsAreErrorsNotCrashes) {
  auto store = OpenStore();
  auto absent = store->Write("/nothing", DeleteValue());
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kFailedPrecondition);
  auto threw = store->Write("/a", [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
    throw std::runtime_error("boom");
  });
  EXPECT_EQ(threw.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(threw.status().message(), HasSubstr("boom"));
  EXPECT_EQ(store->Write("/a", Mutator()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Revision(), 0);
}

TEST_F(StoreTest, OversizedValueFailsOnlyItsOwnWrite) {
  auto store = OpenStore();
  auto huge = store->Write("/huge", PutValue(std::string((64 << 20) + 1, 'x')));
  EXPECT_EQ(kube::HttpCode(huge.status()), 413) << huge.status();
  EXPECT_EQ(store->Revision(), 0);
  EXPECT_TRUE(store->Write("/small", PutValue("x")).ok());
}

// Issue 14 (fault tests): a write refused for lack of room by a file size limit (EFBIG) or a
// quota (EDQUOT) reaches SQLite as SQLITE_IOERR, not SQLITE_FULL, and was answered 500 "disk
// I/O error". It is ResourceExhausted (429) like a full disk, nothing of it is stored, and
// writes succeed again once there is room. RLIMIT_FSIZE stands in for the full disk (no
// privileges needed; the test process ignores SIGXFSZ, which would otherwise kill it).
TEST_F(StoreTest, RegressionNoRoomToWriteIsResourceExhaustedAndRecovers) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write("/before", PutValue("kept")).ok());
  struct stat wal;
  ASSERT_EQ(stat((path_ + "-wal").c_str(), &wal), 0);

  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction saved_action;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &saved_action), 0);
  rlimit saved_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  rlimit low = saved_limit;
  low.rlim_cur = static_cast<rlim_t>(wal.st_size) + (4 << 20);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);

  absl::Status refused;
  int stored = 0;
  for (int i = 0; i < 16 && refused.ok(); ++i) {
    auto written = store->Write(absl::StrCat("/big", i), PutValue(std::string(1 << 20, 'x')));
    if (written.ok()) {
      ++stored;
    } else {
      refused = written.status();
    }
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &saved_action, nullptr), 0);

  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_EQ(kube::HttpCode(refused), 429) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("no room to write"));
  EXPECT_EQ(store->Get(absl::StrCat("/big", stored)), nullptr);  // the refused write
  EXPECT_EQ(store->Get("/before")->value, "kept");
  EXPECT_TRUE(store->Write("/after", PutValue("room again")).ok());

  // Everything acknowledged is there after a reopen, the refused write is not.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Get("/before")->value, "kept");
  EXPECT_EQ(store->Get("/after")->value, "room again");
  for (int i = 0; i < stored; ++i) EXPECT_NE(store->Get(absl::StrCat("/big", i)), nullptr) << i;
  EXPECT_EQ(store->Get(absl::StrCat("/big", stored)), nullptr);
}

// Holds the writer thread inside one mutator until released, so that other writes queue up
// behind it and form one batch.
class WriterBlocker {
 public:
  Mutator Blocking() {
    return [this](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
      common::MutexLock lock(&mu_);
      entered_ = true;
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      while (!released_ && absl::Now() < deadline) cv_.WaitWithDeadline(&mu_, deadline);
      return Mutation{Mutation::Op::kPut, "blocker"};
    };
  }
  bool entered() {
    common::MutexLock lock(&mu_);
    return entered_;
  }
  void Release() {
    common::MutexLock lock(&mu_);
    released_ = true;
    cv_.SignalAll();
  }

 private:
  common::Mutex mu_;
  common::CondVar cv_;
  bool entered_ = false;
  bool released_ = false;
};

TEST_F(StoreTest, LaterWritesInOneBatchSeeEarlierOnes) {
  auto store = OpenStore();
  WriterBlocker blocker;
  std::thread blocked([&] { EXPECT_TRUE(store->Write("/blocker", blocker.Blocking()).ok()); });
  ASSERT_TRUE(WaitFor([&] { return blocker.entered(); }));

  constexpr int kWriters = 10;
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&] {
      auto result = store->Write(
          "/counter", [](const StoredObject* current, int64_t) -> absl::StatusOr<Mutation> {
            const int n = current == nullptr ? 0 : std::stoi(current->value);
            return Mutation{Mutation::Op::kPut, std::to_string(n + 1)};
          });
      EXPECT_TRUE(result.ok()) << result.status();
    });
  }
  ASSERT_TRUE(WaitFor([&] { return store->GetStats().queued_writes == kWriters; }));
  const int64_t commits_before = store->GetStats().commits;
  blocker.Release();
  blocked.join();
  for (auto& writer : writers) writer.join();

  EXPECT_EQ(store->Get("/counter")->value, std::to_string(kWriters));
  const Store::Stats stats = store->GetStats();
  EXPECT_EQ(stats.writes, kWriters + 1);
  // The blocker's batch, then all queued writes in one transaction.
  EXPECT_EQ(stats.commits - commits_before, 2);
  EXPECT_EQ(store->Revision(), kWriters + 1);
}

TEST_F(StoreTest, CreateAndDeleteInOneBatch) {
  auto store = OpenStore();
  WriterBlocker blocker;
  std::thread blocked([&] { EXPECT_TRUE(store->Write("/blocker", blocker.Blocking()).ok()); });
  ASSERT_TRUE(WaitFor([&] { return blocker.entered(); }));
  absl::StatusOr<ObjectPtr> create, remove;
  std::thread t1([&] { create = store->Write("/x", PutValue("x")); });
  ASSERT_TRUE(WaitFor([&] { return store->GetStats().queued_writes == 1; }));
  std::thread t2([&] { remove = store->Write("/x", DeleteValue()); });
  ASSERT_TRUE(WaitFor([&] { return store->GetStats().queued_writes == 2; }));
  blocker.Release();
  blocked.join();
  t1.join();
  t2.join();
  ASSERT_TRUE(create.ok());
  ASSERT_TRUE(remove.ok()) << remove.status();
  EXPECT_EQ((*remove)->value, "x");
  EXPECT_EQ((*remove)->create_revision, (*create)->mod_revision);
  EXPECT_EQ(store->Get("/x"), nullptr);
  EXPECT_EQ(store->GetStats().objects, 1);  // the blocker
}

TEST_F(StoreTest, CloseFailsQueuedWritesWithUnavailable) {
  auto store = OpenStore();
  std::atomic<bool> closing{false};
  common::SetLogSink([&](absl::string_view line) {
    if (absl::StrContains(line, "storage closing")) closing = true;
  });
  WriterBlocker blocker;
  std::thread blocked([&] { EXPECT_TRUE(store->Write("/blocker", blocker.Blocking()).ok()); });
  ASSERT_TRUE(WaitFor([&] { return blocker.entered(); }));
  constexpr int kQueued = 5;
  std::vector<absl::Status> results(kQueued);
  std::vector<std::thread> writers;
  for (int i = 0; i < kQueued; ++i) {
    writers.emplace_back(
        [&, i] { results[i] = store->Write(absl::StrCat("/q", i), PutValue("q")).status(); });
  }
  ASSERT_TRUE(WaitFor([&] { return store->GetStats().queued_writes == kQueued; }));
  Store* raw = store.get();
  std::thread closer([&] { store.reset(); });
  ASSERT_TRUE(WaitFor([&] { return closing.load(); }));
  (void)raw;
  blocker.Release();
  closer.join();
  blocked.join();
  for (auto& writer : writers) writer.join();
  common::SetLogSink(nullptr);
  for (const absl::Status& status : results) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  }
  // The write in flight at close was committed; the queued ones were not.
  auto reopened = OpenStore();
  ASSERT_NE(reopened, nullptr);
  EXPECT_NE(reopened->Get("/blocker"), nullptr);
  EXPECT_EQ(reopened->Get("/q0"), nullptr);
  EXPECT_EQ(reopened->Revision(), 1);
}

TEST_F(StoreTest, ReopenAfterCleanClose) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Write("/a", PutValue("a1")).ok());
    ASSERT_TRUE(store->Write("/b", PutValue("b1")).ok());
    ASSERT_TRUE(store->Write("/a", PutValue("a2")).ok());
    ASSERT_TRUE(store->Write("/c", PutValue("c1")).ok());
    ASSERT_TRUE(store->Write("/c", DeleteValue()).ok());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Revision(), 5);
  ASSERT_NE(store->Get("/a"), nullptr);
  EXPECT_EQ(store->Get("/a")->value, "a2");
  EXPECT_EQ(store->Get("/a")->create_revision, 1);
  EXPECT_EQ(store->Get("/a")->mod_revision, 3);
  EXPECT_EQ(store->Get("/b")->mod_revision, 2);
  EXPECT_EQ(store->Get("/c"), nullptr);
  auto next = store->Write("/d", PutValue("d"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->mod_revision, 6);
  const Store::Stats stats = store->GetStats();
  EXPECT_EQ(stats.objects, 3);
  EXPECT_EQ(stats.bytes, 2 + 2 + 1);
}

TEST_F(StoreTest, RevisionsAreNotReusedAfterCompactingTheLastDelete) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Write("/a", PutValue("a")).ok());
    ASSERT_TRUE(store->Write("/a", DeleteValue()).ok());
    ASSERT_TRUE(store->Compact(2).ok());
  }
  auto store = OpenStore();
  EXPECT_EQ(store->Revision(), 2);
  EXPECT_EQ(store->CompactedRevision(), 2);
  auto next = store->Write("/a", PutValue("again"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*next)->mod_revision, 3);
}

TEST_F(StoreTest, NotADatabaseIsAClearError) {
  {
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    const std::string garbage(8192, 'x');
    ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
    close(fd);
  }
  StoreOptions options;
  options.path = path_;
  auto store = Store::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

// Changes one byte of every stored value containing `marker` (as a bad disk or a stray write
// would), behind the store's back.
void FlipByteOfValues(const std::string& path, const std::string& marker) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string flipped = marker;
  flipped.back() ^= 0x01;
  const std::string sql = "UPDATE log SET value = CAST(replace(CAST(value AS TEXT), '" + marker +
                          "', '" + flipped + "') AS BLOB)";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  EXPECT_GT(sqlite3_changes(db), 0);
  sqlite3_close(db);
}

// Issue 14 item 10: a flipped byte inside a stored value went undetected (and later made LISTs
// unparseable). Every row carries a checksum; a mismatch marks the object corrupt.
TEST_F(StoreTest, RegressionFlippedByteInAStoredValueIsDetected) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Write("/a", PutValue(R"({"v":"MARKER"})")).ok());
    ASSERT_TRUE(store->Write("/b", PutValue(R"({"v":"fine"})")).ok());
  }
  FlipByteOfValues(path_, "MARKER");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_NE(store->Get("/a"), nullptr);
  EXPECT_TRUE(store->Get("/a")->corrupt);
  EXPECT_FALSE(store->Get("/b")->corrupt);
  // History reads verify too: a past list and a watch from the beginning.
  Store::ListOptions past;
  past.revision = 2;
  auto list = store->List(past);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_TRUE(list->items[0]->corrupt);
  EXPECT_FALSE(list->items[1]->corrupt);
  auto watch = store->Watch("/", 0);
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto events = (*watch)->Next(absl::Now() + absl::Seconds(5), 0, nullptr);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_FALSE(events->empty());
  EXPECT_TRUE((*events)[0].object->corrupt);
  // A new version is intact again.
  ASSERT_TRUE(store->Write("/a", PutValue(R"({"v":"rewritten"})")).ok());
  EXPECT_FALSE(store->Get("/a")->corrupt);
}

TEST_F(StoreTest, RowsWithoutAChecksumAreReadUnverified) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Write("/a", PutValue(R"({"v":"old"})")).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE log SET checksum = NULL", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->Get("/a")->corrupt);
}

TEST_F(StoreTest, ForeignSqliteDatabaseIsRefused) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "CREATE TABLE accounts(id INTEGER PRIMARY KEY)", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  StoreOptions options;
  options.path = path_;
  auto store = Store::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("not a ctrlhost store"));
}

TEST_F(StoreTest, CorruptHeaderIsDataLoss) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Write("/a", PutValue("a")).ok());
  }
  const int fd = open(path_.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, "garbage!garbage!", 16, 0), 16);
  close(fd);
  StoreOptions options;
  options.path = path_;
  auto store = Store::Open(options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
}

TEST_F(StoreTest, BadOptionsAndDoubleOpen) {
  EXPECT_EQ(Store::Open(StoreOptions()).status().code(), absl::StatusCode::kInvalidArgument);
  StoreOptions missing_dir;
  missing_dir.path = dir_ + "/no/such/dir/state.db";
  EXPECT_FALSE(Store::Open(missing_dir).ok());

  auto store = OpenStore();
  StoreOptions options;
  options.path = path_;
  auto second = Store::Open(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  store.reset();
  EXPECT_TRUE(Store::Open(options).ok());
}

TEST_F(StoreTest, LabelsComeFromTheExtractor) {
  StoreOptions options;
  options.extract_labels = [](absl::string_view json) {
    return Labels{{"app", std::string(json)}};
  };
  {
    auto store = OpenStore(options);
    auto object = store->Write("/a", PutValue("web"));
    ASSERT_TRUE(object.ok());
    EXPECT_EQ((*object)->labels, (Labels{{"app", "web"}}));
  }
  auto store = OpenStore(options);  // rebuilt at open
  EXPECT_EQ(store->Get("/a")->labels, (Labels{{"app", "web"}}));
}

TEST_F(StoreTest, LabelsGivenWithTheMutationAreNotExtracted) {
  std::atomic<int> extractions{0};
  StoreOptions options;
  options.extract_labels = [&extractions](absl::string_view json) {
    ++extractions;
    return Labels{{"app", std::string(json)}};
  };
  auto store = OpenStore(options);
  auto put = store->Write("/a", [](const StoredObject*, int64_t) -> absl::StatusOr<Mutation> {
    return Mutation(Mutation::Op::kPut, "web", Labels{{"tier", "front"}});
  });
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*put)->labels, (Labels{{"tier", "front"}}));
  EXPECT_EQ(store->Get("/a")->labels, (Labels{{"tier", "front"}}));
  EXPECT_EQ(extractions.load(), 0);
  // A delete that keeps the current value keeps its labels without extracting them.
  auto deleted = store->Write("/a", DeleteValue());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ((*deleted)->labels, (Labels{{"tier", "front"}}));
  EXPECT_EQ(extractions.load(), 0);
  // Without labels in the mutation the extractor runs.
  auto extracted = store->Write("/b", PutValue("db"));
  ASSERT_TRUE(extracted.ok());
  EXPECT_EQ((*extracted)->labels, (Labels{{"app", "db"}}));
  EXPECT_EQ(extractions.load(), 1);
}

TEST_F(StoreTest, CompactKeepsLatestVersions) {
  auto store = OpenStore();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store->Write("/a", PutValue(absl::StrCat(i))).ok());
  ASSERT_TRUE(store->Write("/b", PutValue("b")).ok());  // 11
  ASSERT_TRUE(store->Write("/b", DeleteValue()).ok());  // 12
  ASSERT_TRUE(store->Write("/c", PutValue("c")).ok());  // 13
  EXPECT_EQ(store->Compact(99).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store->Compact(12).ok());
  EXPECT_EQ(store->CompactedRevision(), 12);
  EXPECT_TRUE(store->Compact(5).ok());  // below: no-op
  EXPECT_EQ(store->CompactedRevision(), 12);
  EXPECT_EQ(store->Get("/a")->value, "9");

  Store::ListOptions at;
  at.revision = 12;
  EXPECT_TRUE(kube::IsGone(store->List(at).status()));
  at.revision = 13;
  auto list = store->List(at);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[0]->value, "9");
  EXPECT_EQ(list->items[1]->key, "/c");
}

TEST_F(StoreTest, BackgroundCompactionKeepsRetainedRevisions) {
  common::FakeClock clock;
  StoreOptions options;
  options.clock = &clock;
  options.retained_revisions = 5;
  options.compaction_interval = absl::Minutes(1);
  auto store = OpenStore(options);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->Write("/a", PutValue(absl::StrCat(i))).ok());
  EXPECT_EQ(store->CompactedRevision(), 0);
  clock.Advance(absl::Seconds(61));
  ASSERT_TRUE(WaitFor([&] { return store->CompactedRevision() == 15; }))
      << store->CompactedRevision();
  Store::ListOptions at;
  at.revision = 16;
  auto list = store->List(at);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0]->value, "15");
}

TEST_F(StoreTest, CompactionOfManyRevisionsRunsInChunksBetweenWrites) {
  StoreOptions options;
  options.sync_full = false;
  auto store = OpenStore(options);
  std::atomic<bool> done{false};
  // Writers keep going while compaction deletes the history in chunks.
  std::thread writer([&] {
    int i = 0;
    while (!done) {
      ASSERT_TRUE(store->Write(absl::StrCat("/w", i % 7), PutValue(absl::StrCat(i))).ok());
      ++i;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return store->Revision() > 5000; }, absl::Seconds(60)));
  ASSERT_TRUE(store->Compact(5000).ok());
  done = true;
  writer.join();
  EXPECT_EQ(store->CompactedRevision(), 5000);
  Store::ListOptions at;
  at.revision = 5001;
  auto list = store->List(at);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 7u);
}

}  // namespace
}  // namespace ctrlhost::apiserver
