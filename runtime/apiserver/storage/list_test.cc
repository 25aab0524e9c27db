// List: prefix / after_key / limit / filter / more / last_key, on the current state and at a
// past revision (read from SQLite history), and the errors around the history bounds.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/storage/store.h"
#include "runtime/apiserver/storage/testing/store_test_util.h"
#include "runtime/kube/api_status.h"

namespace ctrlhost::apiserver {
namespace {

using ::ctrlhost::apiserver::testing::DeleteValue;
using ::ctrlhost::apiserver::testing::NewTempDir;
using ::ctrlhost::apiserver::testing::PutValue;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Keys(const Store::ListResult& result) {
  std::vector<std::string> keys;
  for (const ObjectPtr& item : result.items) keys.push_back(item->key);
  return keys;
}

std::vector<std::string> Values(const Store::ListResult& result) {
  std::vector<std::string> values;
  for (const ObjectPtr& item : result.items) values.push_back(item->value);
  return values;
}

class ListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.path = NewTempDir() + "/state.db";
    options.extract_labels = [](absl::string_view json) {
      return Labels{{"tier", std::string(json.substr(0, 1))}};
    };
    auto store = Store::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  void Put(const std::string& key, const std::string& value) {
    ASSERT_TRUE(store_->Write(key, PutValue(value)).ok());
  }

  Store::ListResult List(Store::ListOptions options) {
    auto result = store_->List(options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : Store::ListResult();
  }

  std::unique_ptr<Store> store_;
};

TEST_F(ListTest, PrefixSelectsInByteOrder) {
  Put("/pods/ns2/b", "b");
  Put("/pods/ns1/z", "z");
  Put("/pods/ns1/a", "a");
  Put("/podsx/ns1/a", "other resource");
  Put("/pod", "shorter");
  Store::ListOptions options;
  options.prefix = "/pods/";
  Store::ListResult result = List(options);
  EXPECT_THAT(Keys(result), ElementsAre("/pods/ns1/a", "/pods/ns1/z", "/pods/ns2/b"));
  EXPECT_EQ(result.revision, 5);
  EXPECT_FALSE(result.more);
  EXPECT_EQ(result.last_key, "/pods/ns2/b");

  options.prefix = "/pods/ns1/";
  EXPECT_THAT(Keys(List(options)), ElementsAre("/pods/ns1/a", "/pods/ns1/z"));
  options.prefix = "";
  EXPECT_EQ(List(options).items.size(), 5u);
  options.prefix = "/nothing/";
  result = List(options);
  EXPECT_THAT(result.items, IsEmpty());
  EXPECT_EQ(result.last_key, "");
  EXPECT_FALSE(result.more);
}

TEST_F(ListTest, PagesWithLimitAndAfterKey) {
  for (int i = 0; i < 10; ++i) Put(absl::StrCat("/k/", i), absl::StrCat(i));
  Store::ListOptions options;
  options.prefix = "/k/";
  options.limit = 3;
  std::vector<std::string> all;
  int pages = 0;
  for (;;) {
    Store::ListResult page = List(options);
    ++pages;
    for (const auto& key : Keys(page)) all.push_back(key);
    if (!page.more) break;
    EXPECT_EQ(page.items.size(), 3u);
    options.after_key = page.last_key;
  }
  EXPECT_EQ(pages, 4);
  EXPECT_EQ(all.size(), 10u);
  EXPECT_EQ(all.front(), "/k/0");
  EXPECT_EQ(all.back(), "/k/9");

  // Exactly `limit` items left: no phantom page.
  options.after_key = "/k/6";
  Store::ListResult last = List(options);
  EXPECT_THAT(Keys(last), ElementsAre("/k/7", "/k/8", "/k/9"));
  EXPECT_FALSE(last.more);

  // after_key before the prefix starts at the prefix.
  options.after_key = "/a";
  EXPECT_EQ(List(options).items.front()->key, "/k/0");
}

TEST_F(ListTest, LimitCountsFilteredItems) {
  for (int i = 0; i < 10; ++i) Put(absl::StrCat("/k/", i), i % 2 == 0 ? "even" : "odd");
  Store::ListOptions options;
  options.prefix = "/k/";
  options.limit = 2;
  options.filter = [](const StoredObject& object) {
    return object.labels.at("tier") == "o";  // labels from the extractor
  };
  Store::ListResult page = List(options);
  EXPECT_THAT(Keys(page), ElementsAre("/k/1", "/k/3"));
  EXPECT_TRUE(page.more);
  options.after_key = "/k/7";
  page = List(options);
  EXPECT_THAT(Keys(page), ElementsAre("/k/9"));
  EXPECT_FALSE(page.more);
}

TEST_F(ListTest, PastRevisionIsASnapshot) {
  Put("/k/a", "a1");                                             // 1
  Put("/k/b", "b1");                                             // 2
  Put("/k/c", "c1");                                             // 3
  Put("/k/a", "a2");                                             // 4
  ASSERT_TRUE(store_->Write("/k/b", DeleteValue("gone")).ok());  // 5
  Put("/k/d", "d1");                                             // 6
  Put("/k/b", "b2");                                             // 7 (re-created)

  Store::ListOptions options;
  options.prefix = "/k/";
  options.revision = 3;
  Store::ListResult at3 = List(options);
  EXPECT_THAT(Values(at3), ElementsAre("a1", "b1", "c1"));
  EXPECT_EQ(at3.revision, 3);
  EXPECT_EQ(at3.items[0]->mod_revision, 1);
  EXPECT_EQ(at3.items[0]->create_revision, 1);
  options.revision = 4;
  EXPECT_THAT(Values(List(options)), ElementsAre("a2", "b1", "c1"));
  EXPECT_EQ(List(options).items[0]->create_revision, 1);
  options.revision = 5;
  EXPECT_THAT(Values(List(options)), ElementsAre("a2", "c1"));
  options.revision = 6;
  EXPECT_THAT(Values(List(options)), ElementsAre("a2", "c1", "d1"));
  options.revision = 7;  // == current: from memory
  EXPECT_THAT(Values(List(options)), ElementsAre("a2", "b2", "c1", "d1"));
  options.revision = 0;
  EXPECT_EQ(List(options).revision, 7);

  // Paging through a past revision while the present moves on.
  options.revision = 4;
  options.limit = 2;
  Store::ListResult page = List(options);
  EXPECT_THAT(Values(page), ElementsAre("a2", "b1"));
  EXPECT_TRUE(page.more);
  Put("/k/c", "c2");
  ASSERT_TRUE(store_->Write("/k/a", DeleteValue()).ok());
  options.after_key = page.last_key;
  page = List(options);
  EXPECT_THAT(Values(page), ElementsAre("c1"));
  EXPECT_FALSE(page.more);
  EXPECT_EQ(page.revision, 4);

  // Filters and labels apply to history too.
  options = Store::ListOptions();
  options.prefix = "/k/";
  options.revision = 3;
  options.filter = [](const StoredObject& object) { return object.labels.at("tier") != "b"; };
  EXPECT_THAT(Values(List(options)), ElementsAre("a1", "c1"));
}

TEST_F(ListTest, RevisionBoundsAreKubernetesErrors) {
  Put("/k/a", "a1");
  Put("/k/a", "a2");
  Put("/k/a", "a3");
  Store::ListOptions options;
  options.revision = 4;
  auto too_large = store_->List(options);
  EXPECT_EQ(kube::HttpCode(too_large.status()), 504) << too_large.status();
  EXPECT_EQ(kube::Reason(too_large.status()), "Timeout");
  ASSERT_TRUE(store_->Compact(2).ok());
  options.revision = 2;
  auto gone = store_->List(options);
  EXPECT_TRUE(kube::IsGone(gone.status())) << gone.status();
  EXPECT_EQ(kube::HttpCode(gone.status()), 410);
  options.revision = 1;
  EXPECT_TRUE(kube::IsGone(store_->List(options).status()));
  options.revision = 3;
  EXPECT_THAT(Values(List(options)), ElementsAre("a3"));
}

TEST_F(ListTest, UnusualKeyBytes) {
  Put(std::string("/\xff\xff/a"), "high bytes");
  Put(std::string("/\xff\xfe/a"), "lower");
  Put("/\x7f/a", "ascii");
  Store::ListOptions options;
  options.prefix = std::string("/\xff");
  EXPECT_THAT(Values(List(options)), ElementsAre("lower", "high bytes"));
  options.revision = 2;  // the same through SQLite
  EXPECT_THAT(Values(List(options)), ElementsAre("lower", "high bytes"));
  options.prefix = std::string("/\xff\xff");
  EXPECT_THAT(Values(List(options)), ElementsAre("high bytes"));
}

}  // namespace
}  // namespace ctrlhost::apiserver
