#include "runtime/cache/store.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ctrlhost::cache {
namespace {

ObjectPtr Make(const std::string& ns, const std::string& name, const std::string& rv,
               const std::string& labels = "{}", const std::string& owner = "") {
  ObjectParser parser;
  std::string refs = owner.empty() ? "[]" : absl::StrCat(R"([{"uid":")", owner, R"("}])");
  auto object = parser.Parse(absl::StrCat(R"({"metadata":{"namespace":")", ns, R"(","name":")",
                                          name, R"(","resourceVersion":")", rv, R"(","labels":)",
                                          labels, R"(,"ownerReferences":)", refs, "}}"));
  EXPECT_TRUE(object.ok()) << object.status();
  return *object;
}

std::vector<std::string> Keys(std::vector<ObjectPtr> objects) {
  std::vector<std::string> keys;
  for (const auto& o : objects) keys.emplace_back(o->key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(StoreTest, UpsertGetDeleteAndIndexes) {
  Store store;
  EXPECT_FALSE(store.HasSynced());
  EXPECT_EQ(store.Upsert(Make("ns1", "a", "1", R"({"app":"web"})", "p1")), nullptr);
  store.Upsert(Make("ns1", "b", "2", R"({"app":"db"})", "p1"));
  store.Upsert(Make("ns2", "c", "3", R"({"app":"web"})"));
  EXPECT_EQ(store.Size(), 3u);
  EXPECT_EQ(store.Get("ns1", "a")->meta().resource_version, "1");
  EXPECT_EQ(store.Get("ns1/b")->meta().name, "b");
  EXPECT_EQ(store.Get("nope"), nullptr);
  EXPECT_EQ(Keys(store.ByIndex(Index::kNamespace, "ns1")),
            (std::vector<std::string>{"ns1/a", "ns1/b"}));
  EXPECT_EQ(Keys(store.ByIndex(Index::kOwnerUid, "p1")),
            (std::vector<std::string>{"ns1/a", "ns1/b"}));
  EXPECT_EQ(Keys(store.ByIndex(Index::kLabel, "app=web")),
            (std::vector<std::string>{"ns1/a", "ns2/c"}));

  // An update moves the object between index entries.
  ObjectPtr old = store.Upsert(Make("ns1", "a", "4", R"({"app":"db"})"));
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->meta().resource_version, "1");  // readers holding it still see the old one
  EXPECT_EQ(Keys(store.ByIndex(Index::kLabel, "app=web")), (std::vector<std::string>{"ns2/c"}));
  EXPECT_EQ(Keys(store.ByIndex(Index::kOwnerUid, "p1")), (std::vector<std::string>{"ns1/b"}));

  EXPECT_NE(store.Delete("ns1/b"), nullptr);
  EXPECT_EQ(store.Delete("ns1/b"), nullptr);
  EXPECT_TRUE(store.ByIndex(Index::kOwnerUid, "p1").empty());
  EXPECT_EQ(Keys(store.List()), (std::vector<std::string>{"ns1/a", "ns2/c"}));
  store.Delete("ns1/a");
  store.Delete("ns2/c");
  EXPECT_EQ(store.MemoryBytes(), 0u);
  EXPECT_EQ(store.JsonBytes(), 0u);
}

TEST(StoreTest, ReplaceComputesExactDifferences) {
  Store store;
  store.Upsert(Make("ns", "same", "1"));
  store.Upsert(Make("ns", "changed", "1"));
  store.Upsert(Make("ns", "gone", "1"));
  StoreDiff diff = store.Replace(
      {Make("ns", "same", "1"), Make("ns", "changed", "5"), Make("ns", "new", "6")}, "9");
  EXPECT_TRUE(store.HasSynced());
  EXPECT_EQ(store.ResourceVersion(), "9");
  EXPECT_EQ(Keys(diff.added), (std::vector<std::string>{"ns/new"}));
  ASSERT_EQ(diff.updated.size(), 1u);
  EXPECT_EQ(diff.updated[0].first->meta().resource_version, "1");
  EXPECT_EQ(diff.updated[0].second->meta().resource_version, "5");
  EXPECT_EQ(Keys(diff.deleted), (std::vector<std::string>{"ns/gone"}));
  EXPECT_EQ(Keys(store.List()), (std::vector<std::string>{"ns/changed", "ns/new", "ns/same"}));
  EXPECT_EQ(Keys(store.ByIndex(Index::kNamespace, "ns")),
            (std::vector<std::string>{"ns/changed", "ns/new", "ns/same"}));

  // Replacing with the same content is no difference at all.
  EXPECT_TRUE(store.Replace(store.List(), "10").empty());
  // Duplicate keys in a list: the last wins.
  diff = store.Replace({Make("ns", "d", "1"), Make("ns", "d", "2")}, "11");
  EXPECT_EQ(store.Get("ns/d")->meta().resource_version, "2");
  EXPECT_EQ(store.Size(), 1u);
  EXPECT_EQ(diff.deleted.size(), 3u);
}

TEST(StoreTest, ReadersRunWhileTheWriterWrites) {
  Store store;
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      size_t seen = 0;
      while (!done.load()) {
        for (const ObjectPtr& o : store.ByIndex(Index::kLabel, "app=web")) {
          seen += o->json().size();
          EXPECT_EQ(*o->Label("app"), "web");
        }
        for (const ObjectPtr& o : store.List()) seen += o->meta().name.size();
        if (ObjectPtr o = store.Get("ns/o1")) seen += o->key().size();
        store.HasSynced();
        store.ResourceVersion();
      }
      EXPECT_GE(seen, 0u);
    });
  }
  for (int i = 0; i < 300; ++i) {
    const std::string name = absl::StrCat("o", i % 20);
    store.Upsert(Make("ns", name, absl::StrCat(i), i % 2 ? R"({"app":"web"})" : "{}"));
    if (i % 7 == 0) store.Delete(absl::StrCat("ns/o", i % 13));
    if (i % 50 == 0) {
      std::vector<ObjectPtr> all;
      for (int j = 0; j < 10; ++j) {
        all.push_back(Make("ns", absl::StrCat("o", j), absl::StrCat(i), R"({"app":"web"})"));
      }
      store.Replace(std::move(all), absl::StrCat(i));
    }
  }
  done = true;
  for (auto& t : readers) t.join();
}

}  // namespace
}  // namespace ctrlhost::cache

namespace ctrlhost::cache {
namespace {

std::vector<std::string> KeysInOrder(const std::vector<ObjectPtr>& objects) {
  std::vector<std::string> keys;
  for (const auto& o : objects) keys.emplace_back(o->key());
  return keys;
}

TEST(StoreTest, ReplaceReportsInKeyOrderWhateverTheListOrder) {
  Store store;
  StoreDiff diff =
      store.Replace({Make("ns", "b", "1"), Make("ns", "c", "1"), Make("ns", "a", "1")}, "1");
  EXPECT_EQ(KeysInOrder(diff.added), (std::vector<std::string>{"ns/a", "ns/b", "ns/c"}));
  diff = store.Replace({Make("ns", "d", "2"), Make("ns", "c", "2"), Make("ns", "b", "2")}, "2");
  EXPECT_EQ(KeysInOrder(diff.added), (std::vector<std::string>{"ns/d"}));
  ASSERT_EQ(diff.updated.size(), 2u);
  EXPECT_EQ(diff.updated[0].second->key(), "ns/b");
  EXPECT_EQ(diff.updated[1].second->key(), "ns/c");
  EXPECT_EQ(KeysInOrder(diff.deleted), (std::vector<std::string>{"ns/a"}));
}

TEST(StoreTest, ReplaceWithTheSameObjectTwiceReportsItOnce) {
  Store store;
  ObjectPtr a = Make("ns", "a", "1", R"({"app":"web"})", "p1");
  StoreDiff diff = store.Replace({a, nullptr, a}, "1");
  EXPECT_EQ(KeysInOrder(diff.added), (std::vector<std::string>{"ns/a"}));
  EXPECT_EQ(store.Size(), 1u);
  EXPECT_EQ(Keys(store.ByIndex(Index::kLabel, "app=web")), (std::vector<std::string>{"ns/a"}));
  EXPECT_EQ(Keys(store.ByIndex(Index::kOwnerUid, "p1")), (std::vector<std::string>{"ns/a"}));
  EXPECT_EQ(store.MemoryBytes(), a->MemoryBytes());
  // Replacing with nothing deletes it and empties the indexes.
  diff = store.Replace({}, "2");
  EXPECT_EQ(KeysInOrder(diff.deleted), (std::vector<std::string>{"ns/a"}));
  EXPECT_TRUE(store.ByIndex(Index::kLabel, "app=web").empty());
  EXPECT_EQ(store.MemoryBytes(), 0u);
}

}  // namespace
}  // namespace ctrlhost::cache
