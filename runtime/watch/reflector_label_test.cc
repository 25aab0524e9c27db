// The reflector's label mode (ShardScope::EnableLabels) against the fake server acting as one
// without KEP-5866: the shard is selected by bucket label, mislabeled objects are reported, and
// an object whose label changed is never taken for a deleted one.
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
#include "runtime/cache/object.h"
#include "runtime/common/clock.h"
#include "runtime/common/mutex.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/watch/fake_lister_watcher.h"
#include "runtime/watch/mirror_handler_for_tests.h"
#include "runtime/watch/reflector.h"
#include "runtime/watch/shard_scope.h"

namespace ctrlhost::watch {
namespace {

const absl::uint128 kTop = absl::uint128(1) << 64;
const absl::uint128 kHalf = absl::uint128(1) << 63;
const std::vector<HashRange> kLow = {{0, kHalf}};
const std::vector<HashRange> kHigh = {{0x8000000000000000ull, kTop}};
const ShardLabels kLabels{"ctrlhost.dev/shard-bucket", 8};

// The fake server names its objects' uids "uid-<ns>/<name>".
uint64_t HashOf(const std::string& key) { return kube::Fnv1a64("uid-" + key); }
std::string BucketOf(const std::string& key) { return ShardBucketLabel(HashOf(key), 8); }
std::map<std::string, std::string> Labeled(const std::string& key) {
  return {{kLabels.key, BucketOf(key)}};
}

// A name (number first: FNV-1a's top bits barely move with the last characters) in ns "ns"
// whose uid hashes into `ranges`; `skip` such names are passed over.
std::string NameIn(const std::vector<HashRange>& ranges, absl::string_view what, int skip = 0) {
  for (int i = 0;; ++i) {
    const std::string name = absl::StrCat(i, "-", what);
    if (RangesContain(ranges, HashOf("ns/" + name)) && skip-- == 0) return name;
  }
}

std::map<std::string, std::string> StoreContent(const cache::Store& store) {
  std::map<std::string, std::string> out;
  for (const auto& object : store.List()) {
    out[std::string(object->key())] = std::string(object->json());
  }
  return out;
}

class ReflectorLabelTest : public ::testing::Test {
 protected:
  ReflectorLabelTest() {
    server_->SetShardSelectorSupport(false);  // Kubernetes before KEP-5866
    scope_->EnableLabels(kLabels);
    scope_->SetMislabeledHandler([this](const cache::Object& object) {
      common::MutexLock lock(&mu_);
      mislabeled_.push_back(std::string(object.key()));
    });
  }
  ~ReflectorLabelTest() override {
    if (reflector_ != nullptr) reflector_->Stop();
  }

  void StartReflector() {
    ReflectorOptions options;
    options.clock = &clock_;
    options.seed = 42;
    options.description = "labeled";
    options.page_size = 4;
    options.shard = scope_;
    options.shard_by = ShardBy::kUid;
    reflector_ = std::make_unique<Reflector>(server_, options);
    handler_ = std::make_shared<MirrorHandler>();
    reflector_->AddHandler(handler_);
    reflector_->Start();
  }

  // Creates (or updates) ns/name with its correct bucket label.
  void SetLabeled(const std::string& name, const std::string& value = "v") {
    server_->Set("ns", name, value, Labeled("ns/" + name));
  }

  // Bounded real-time polling; the fake clock moves so that no backoff waits for real.
  bool WaitFor(const std::function<bool()>& done) {
    return WaitAdvancing(clock_, done, absl::Milliseconds(100));
  }

  // The store and the handler hold exactly `want`, and a watch runs.
  void ExpectHolds(const std::map<std::string, std::string>& want) {
    EXPECT_TRUE(WaitFor([&] {
      return reflector_->HasSynced() && StoreContent(reflector_->store()) == want &&
             handler_->mirror() == want && server_->open_watches() == 1 &&
             reflector_->state() == ReflectorState::kWatching;
    }));
    EXPECT_EQ(StoreContent(reflector_->store()), want);
    EXPECT_EQ(handler_->mirror(), want);
    EXPECT_TRUE(handler_->errors().empty()) << handler_->errors()[0];
  }

  // The server's objects in `ranges` whose label is right: what a label-mode cache holds.
  std::map<std::string, std::string> Want(const std::vector<HashRange>& ranges) const {
    std::map<std::string, std::string> out;
    for (const auto& [key, json] : server_->Snapshot()) {
      if (RangesContain(ranges, HashOf(key)) &&
          absl::StrContains(json, absl::StrCat("\"", kLabels.key, "\":\"", BucketOf(key), "\""))) {
        out[key] = json;
      }
    }
    return out;
  }

  std::vector<std::string> mislabeled() const {
    common::MutexLock lock(&mu_);
    return mislabeled_;
  }

  // Makes the changes `change` while the watch delivers nothing, then forces a relist (410).
  void ChangeWhileDisconnected(const std::function<void()>& change) {
    server_->HangWatches();
    change();
    server_->Compact();
    server_->BreakWatches(absl::UnavailableError("connection reset"));
  }

  common::FakeClock clock_;
  std::shared_ptr<FakeListerWatcher> server_ = std::make_shared<FakeListerWatcher>();
  std::shared_ptr<ShardScope> scope_ = std::make_shared<ShardScope>();
  std::unique_ptr<Reflector> reflector_;
  std::shared_ptr<MirrorHandler> handler_;
  mutable common::Mutex mu_;
  std::vector<std::string> mislabeled_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ReflectorLabelTest, SelectsTheShardByLabelWhenTheServerIgnoresTheShardSelector) {
  for (int i = 0; i < 30; ++i) SetLabeled(absl::StrCat(i, "-obj"));
  // In range but without a label: not selected until the labeler labels it.
  const std::string unlabeled = NameIn(kLow, "unlabeled");
  server_->Set("ns", unlabeled, "v");
  scope_->Set(kLow);
  StartReflector();
  ASSERT_TRUE(reflector_->WaitForSync(absl::Seconds(30)));
  ExpectHolds(Want(kLow));
  ASSERT_GT(Want(kLow).size(), 5u);
  EXPECT_EQ(Want(kLow).count("ns/" + unlabeled), 0u);

  const std::string selector = ShardLabelSelector(kLabels, kLow);
  EXPECT_TRUE(absl::StartsWith(selector, "ctrlhost.dev/shard-bucket in (0,1,2,")) << selector;
  EXPECT_EQ(server_->last_list_options().label_selector, selector);
  EXPECT_EQ(server_->last_list_options().shard_selector, "");
  EXPECT_EQ(server_->last_watch_options().label_selector, selector);
  EXPECT_EQ(server_->last_watch_options().shard_selector, "");
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_mode, "label");
  EXPECT_EQ(m.shard_filtered_total, 0u);  // the server sent only the shard
  EXPECT_EQ(m.shard_mislabeled_total, 0u);
  // One page with the shard selector (not applied), then the label-selected list.
  const int lists = server_->list_calls();
  EXPECT_EQ(lists, 1 + static_cast<int>((Want(kLow).size() + 3) / 4));

  // Events: only labeled objects of the shard arrive.
  const std::string outside = NameIn(kHigh, "new-high");
  const std::string inside = NameIn(kLow, "new-low");
  SetLabeled(outside);
  SetLabeled(inside);
  ExpectHolds(Want(kLow));
  EXPECT_NE(reflector_->store().Get("ns", inside), nullptr);
  EXPECT_EQ(reflector_->Metrics().shard_filtered_total, 0u);

  // A relist of the same generation goes straight to labels.
  ChangeWhileDisconnected([&] { SetLabeled(NameIn(kHigh, "while-away")); });
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().relists_total == 1; }));
  ExpectHolds(Want(kLow));
  EXPECT_EQ(server_->list_calls(), lists + static_cast<int>((Want(kLow).size() + 3) / 4));
  EXPECT_EQ(handler_->deletes(), 0);
  EXPECT_TRUE(mislabeled().empty());
}

TEST_F(ReflectorLabelTest, RemovedLabelIsNotADeletion) {
  const std::string name = NameIn(kLow, "obj");
  SetLabeled(name);
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  ASSERT_EQ(Want(kLow).size(), 1u);

  // The server sends DELETED with the object's new, unlabeled state.
  const std::string unlabeled = server_->Set("ns", name, "unlabeled");
  const std::map<std::string, std::string> kept = {{"ns/" + name, unlabeled}};
  ExpectHolds(kept);
  EXPECT_EQ(handler_->deletes(), 0);
  EXPECT_EQ(handler_->updates(), 1);
  EXPECT_EQ(mislabeled(), std::vector<std::string>{"ns/" + name});
  EXPECT_EQ(reflector_->Metrics().shard_mislabeled_total, 1u);

  // A wrong value (another host's bucket) is no deletion either.
  server_->Set("ns", name, "relabeled");
  SetLabeled(name, "relabeled");  // ADDED: back in the selector
  ExpectHolds(Want(kLow));
  server_->Set("ns", name, "wrong", {{kLabels.key, "255"}});
  EXPECT_TRUE(WaitFor([&] { return mislabeled().size() == 2; }));
  SetLabeled(name, "fixed");
  ExpectHolds(Want(kLow));
  EXPECT_EQ(handler_->deletes(), 0);

  // With the right label, DELETED is a deletion.
  server_->Delete("ns", name);
  ExpectHolds({});
  EXPECT_EQ(handler_->deleted(), std::vector<std::string>{"ns/" + name});
  EXPECT_EQ(reflector_->Metrics().relists_total, 0u);
}

// Kubernetes 1.20's watch cache sends an object leaving a label-selected watch as DELETED with
// its *previous* state, the label it had: the event alone looks like a deletion. A name-scoped
// list tells: the object still exists, so it is kept (fresh state, reported mislabeled); a real
// deletion is still a deletion. Found by shard_kube_e2e_test (an object reconciled as deleted
// after someone removed its label).
TEST_F(ReflectorLabelTest, RegressionExitWithThePreviousStateIsNotADeletion) {
  server_->SetSelectorExitSendsPreviousState(true);
  const std::string name = NameIn(kLow, "obj");
  SetLabeled(name);
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  ASSERT_EQ(Want(kLow).size(), 1u);

  const std::string unlabeled = server_->Set("ns", name, "unlabeled");
  ExpectHolds({{"ns/" + name, unlabeled}});
  EXPECT_EQ(handler_->deletes(), 0);
  EXPECT_TRUE(WaitFor([&] { return mislabeled().size() == 1; }));
  EXPECT_GE(reflector_->Metrics().shard_label_checks_total, 1u);

  server_->Set("ns", name, "wrong", {{kLabels.key, "255"}});
  SetLabeled(name, "fixed");
  ExpectHolds(Want(kLow));
  EXPECT_EQ(handler_->deletes(), 0);

  server_->Delete("ns", name);
  ExpectHolds({});
  EXPECT_EQ(handler_->deleted(), std::vector<std::string>{"ns/" + name});
}

TEST_F(ReflectorLabelTest, RelistKeepsObjectsWhoseLabelChangedAndDeletesTheOthers) {
  const std::string relabeled = NameIn(kLow, "relabeled");
  const std::string deleted = NameIn(kLow, "deleted");
  const std::string recreated = NameIn(kLow, "recreated");
  const std::string stays = NameIn(kLow, "stays");
  for (const std::string& name : {relabeled, deleted, recreated, stays}) SetLabeled(name);
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  ASSERT_EQ(Want(kLow).size(), 4u);

  std::string relabeled_json;
  ChangeWhileDisconnected([&] {
    relabeled_json = server_->Set("ns", relabeled, "changed", {{kLabels.key, "garbage"}});
    server_->Delete("ns", deleted);
    server_->Delete("ns", recreated);
    server_->SetUidPrefix("second-");
    server_->Set("ns", recreated, "another object");  // unlabeled, another uid
  });
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().relists_total == 1; }));
  std::map<std::string, std::string> want = Want(kLow);
  want["ns/" + relabeled] = relabeled_json;
  ExpectHolds(want);
  std::vector<std::string> gone = handler_->deleted();
  std::sort(gone.begin(), gone.end());
  std::vector<std::string> want_gone = {"ns/" + deleted, "ns/" + recreated};
  std::sort(want_gone.begin(), want_gone.end());
  EXPECT_EQ(gone, want_gone);
  EXPECT_EQ(mislabeled(), std::vector<std::string>{"ns/" + relabeled});
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_label_checks_total, 3u);  // one name-scoped list per missing object
  EXPECT_EQ(m.shard_mislabeled_total, 1u);
  EXPECT_EQ(m.shard_mode, "label");
}

TEST_F(ReflectorLabelTest, ManyMissingObjectsAreConfirmedByOneFullList) {
  std::vector<std::string> names;
  for (int i = 0; i < 110; ++i) names.push_back(NameIn(kLow, "many", i));
  for (const std::string& name : names) SetLabeled(name);
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  ASSERT_EQ(Want(kLow).size(), 110u);

  std::map<std::string, std::string> unlabeled;
  ChangeWhileDisconnected([&] {
    for (const std::string& name : names) unlabeled["ns/" + name] = server_->Set("ns", name, "x");
  });
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().relists_total == 1; }));
  ExpectHolds(unlabeled);
  EXPECT_EQ(handler_->deletes(), 0);
  EXPECT_EQ(reflector_->Metrics().shard_label_checks_total, 1u);
  EXPECT_EQ(mislabeled().size(), 110u);
}

// A label that names one of our buckets but not the object's own: reported, and kept out of the
// cache by the range check when the object's hash is not ours.
TEST_F(ReflectorLabelTest, WrongLabelInOurBucketsIsReportedAndFilteredByRange) {
  const std::string foreign = NameIn(kHigh, "foreign");
  const std::string ours = NameIn(kLow, "ours");
  server_->Set("ns", foreign, "v", {{kLabels.key, "3"}});  // bucket 3 is ours, its hash is not
  SetLabeled(ours);
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  EXPECT_EQ(mislabeled(), std::vector<std::string>{"ns/" + foreign});
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_filtered_total, 1u);
  EXPECT_EQ(m.shard_mislabeled_total, 1u);

  // In a watch event too; an object of ours with a wrong value in our set is cached.
  const std::string foreign2 = NameIn(kHigh, "foreign2");
  server_->Set("ns", foreign2, "v", {{kLabels.key, "4"}});
  const std::string ours2 = NameIn(kLow, "ours2");
  const std::string wrong_bucket = BucketOf("ns/" + ours2) == "0" ? "1" : "0";
  const std::string ours2_json = server_->Set("ns", ours2, "v", {{kLabels.key, wrong_bucket}});
  std::map<std::string, std::string> want = Want(kLow);
  want["ns/" + ours2] = ours2_json;
  ExpectHolds(want);
  EXPECT_TRUE(WaitFor([&] { return mislabeled().size() == 3; }));
  EXPECT_EQ(mislabeled()[1], "ns/" + foreign2);
  EXPECT_EQ(mislabeled()[2], "ns/" + ours2);
  EXPECT_EQ(reflector_->store().Get("ns", foreign2), nullptr);
  EXPECT_EQ(handler_->deletes(), 0);
}

TEST_F(ReflectorLabelTest, ScopeChangeRelistsWithTheNewLabelSelector) {
  for (int i = 0; i < 30; ++i) SetLabeled(absl::StrCat(i, "-obj"));
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  const int low = static_cast<int>(Want(kLow).size());

  scope_->Set(kHigh);
  ExpectHolds(Want(kHigh));
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().shard_generation == 2; }));
  EXPECT_EQ(server_->last_list_options().label_selector, ShardLabelSelector(kLabels, kHigh));
  EXPECT_EQ(server_->last_watch_options().label_selector, ShardLabelSelector(kLabels, kHigh));
  EXPECT_EQ(handler_->deletes(), low);  // out of range: they leave without checks
  ReflectorMetrics m = reflector_->Metrics();
  EXPECT_EQ(m.shard_mode, "label");
  EXPECT_EQ(m.shard_label_checks_total, 0u);
  EXPECT_EQ(m.shard_relists_total, 1u);
}

// Labels enabled after the ranges: a new generation, listed again by label.
TEST_F(ReflectorLabelTest, EnablingLabelsLaterRelistsByLabel) {
  scope_->EnableLabels({});  // off
  for (int i = 0; i < 12; ++i) SetLabeled(absl::StrCat(i, "-obj"));
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));
  EXPECT_EQ(reflector_->Metrics().shard_mode, "client");
  EXPECT_EQ(server_->last_watch_options().label_selector, "");

  scope_->EnableLabels(kLabels);
  EXPECT_EQ(scope_->Get().generation, 2u);
  EXPECT_TRUE(WaitFor([&] { return reflector_->Metrics().shard_mode == "label"; }));
  ExpectHolds(Want(kLow));
  EXPECT_EQ(server_->last_watch_options().label_selector, ShardLabelSelector(kLabels, kLow));
  EXPECT_EQ(handler_->deletes(), 0);
}

// A server with KEP-5866 filters by uid itself: no labels needed.
TEST_F(ReflectorLabelTest, ServerThatAppliesTheShardSelectorNeedsNoLabels) {
  server_->SetShardSelectorSupport(true);
  for (int i = 0; i < 12; ++i) server_->Set("ns", absl::StrCat(i, "-obj"), "v");  // unlabeled
  scope_->Set(kLow);
  StartReflector();
  std::map<std::string, std::string> want;
  for (const auto& [key, json] : server_->Snapshot()) {
    if (RangesContain(kLow, HashOf(key))) want[key] = json;
  }
  ExpectHolds(want);
  EXPECT_EQ(reflector_->Metrics().shard_mode, "server");
  EXPECT_EQ(server_->last_watch_options().label_selector, "");
  EXPECT_TRUE(mislabeled().empty());
}

// A server that refuses the shard selector (422) is asked by label.
TEST_F(ReflectorLabelTest, RefusedShardSelectorFallsBackToLabels) {
  for (int i = 0; i < 12; ++i) SetLabeled(absl::StrCat(i, "-obj"));
  scope_->Set(kLow);
  server_->FailNextCalls(1, absl::InvalidArgumentError("shardSelector: Invalid value"));
  StartReflector();
  ExpectHolds(Want(kLow));
  EXPECT_EQ(reflector_->Metrics().shard_mode, "label");
  EXPECT_EQ(server_->last_list_options().label_selector, ShardLabelSelector(kLabels, kLow));
  EXPECT_EQ(reflector_->Metrics().errors_total, 0u);
}

// An object deleted while its label was missing sends no event to a label-selected watch: the
// next re-watch confirms it is gone.
TEST_F(ReflectorLabelTest, ObjectDeletedWhileOutsideTheSelectorLeavesAtTheNextWatch) {
  const std::string name = NameIn(kLow, "obj");
  const std::string other = NameIn(kLow, "other");
  SetLabeled(name);
  SetLabeled(other);
  scope_->Set(kLow);
  StartReflector();
  ExpectHolds(Want(kLow));

  const std::string unlabeled = server_->Set("ns", name, "unlabeled");
  const std::string other_unlabeled = server_->Set("ns", other, "unlabeled");
  ExpectHolds({{"ns/" + name, unlabeled}, {"ns/" + other, other_unlabeled}});
  server_->Delete("ns", name);  // outside the selector: no event
  const int lists = server_->list_calls();
  server_->EndWatches();  // the server's timeoutSeconds: a re-watch
  ExpectHolds({{"ns/" + other, other_unlabeled}});
  EXPECT_EQ(handler_->deleted(), std::vector<std::string>{"ns/" + name});
  EXPECT_EQ(server_->list_calls(), lists + 2);  // one check each, no relist
  EXPECT_EQ(reflector_->Metrics().relists_total, 0u);

  // Labeled again: back in the selector, no more checks.
  SetLabeled(other, "back");
  ExpectHolds(Want(kLow));
  server_->EndWatches();
  EXPECT_TRUE(server_->WaitForWatchCalls(3, absl::Seconds(30)));
  ExpectHolds(Want(kLow));
  EXPECT_EQ(server_->list_calls(), lists + 2);
}

}  // namespace
}  // namespace ctrlhost::watch
