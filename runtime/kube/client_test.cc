#include "runtime/kube/client.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/shard_selector.h"
#include "runtime/kube/testing/scripted_http_server.h"

namespace ctrlhost::kube {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(ResourcePathTest, Paths) {
  EXPECT_EQ(ResourcePath({.version = "v1", .resource = "namespaces"}), "/api/v1/namespaces");
  EXPECT_EQ(ResourcePath({.group = "apps",
                          .version = "v1",
                          .resource = "deployments",
                          .namespace_name = "a",
                          .name = "web",
                          .subresource = "status"}),
            "/apis/apps/v1/namespaces/a/deployments/web/status");
  EXPECT_EQ(QueryEscape("app in (a,b)"), "app%20in%20%28a%2Cb%29");
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("client_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
    rest_ = &api_->rest();
  }
  static void TearDownTestSuite() {
    rest_ = nullptr;
    delete api_;
  }

  static json Parse(const absl::StatusOr<std::string>& body) {
    EXPECT_TRUE(body.ok()) << body.status();
    if (!body.ok()) return json();
    return json::parse(*body);
  }

  static apiserver::testing::EmbeddedApiServer* api_;
  static RestClient* rest_;
  Client client_{rest_};
};

apiserver::testing::EmbeddedApiServer* ClientTest::api_ = nullptr;
RestClient* ClientTest::rest_ = nullptr;

ResourceRef ConfigMap(absl::string_view name = "") {
  return {.version = "v1",
          .resource = "configmaps",
          .namespace_name = "default",
          .name = std::string(name)};
}

TEST_F(ClientTest, CrudAndPatches) {
  json created = Parse(client_.Create(
      ConfigMap(), R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"crud"},
                       "data":{"a":"1"}})"));
  const std::string uid = created["metadata"]["uid"];
  json got = Parse(client_.Get(ConfigMap("crud")));
  EXPECT_EQ(got["data"]["a"], "1");

  got["data"]["a"] = "2";
  json updated = Parse(client_.Update(ConfigMap("crud"), got.dump()));
  EXPECT_EQ(updated["data"]["a"], "2");
  // The stale resourceVersion is refused.
  got["data"]["a"] = "3";
  EXPECT_TRUE(kube::IsConflict(client_.Update(ConfigMap("crud"), got.dump()).status()));

  json merged = Parse(client_.Patch(ConfigMap("crud"), PatchType::kMerge, R"({"data":{"b":"x"}})"));
  EXPECT_EQ(merged["data"]["b"], "x");
  json patched = Parse(client_.Patch(ConfigMap("crud"), PatchType::kJson,
                                     R"([{"op":"replace","path":"/data/b","value":"y"}])"));
  EXPECT_EQ(patched["data"]["b"], "y");
  json applied = Parse(client_.Patch(
      ConfigMap("crud"), PatchType::kApply,
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"crud"},"data":{"c":"z"}})",
      {.field_manager = "ctrlhost-test", .force = true}));
  EXPECT_EQ(applied["data"]["c"], "z");
  EXPECT_EQ(client_.Patch(ConfigMap("crud"), PatchType::kApply, "{}").status().code(),
            absl::StatusCode::kInvalidArgument);  // no field manager

  // A wrong UID precondition refuses the delete.
  EXPECT_TRUE(kube::IsConflict(
      client_.Delete(ConfigMap("crud"), {.precondition_uid = "not-the-uid"}).status()));
  EXPECT_TRUE(
      client_
          .Delete(ConfigMap("crud"), {.propagation_policy = "Background", .precondition_uid = uid})
          .ok());
  EXPECT_TRUE(kube::IsNotFound(client_.Get(ConfigMap("crud")).status()));
  EXPECT_TRUE(kube::IsNotFound(client_.Delete(ConfigMap("crud")).status()));
}

TEST_F(ClientTest, ListIsPaginated) {
  ResourceRef ns_ref{.version = "v1", .resource = "namespaces"};
  ASSERT_TRUE(client_.Create(ns_ref, R"({"metadata":{"name":"paged"}})").ok());
  ResourceRef cms{.version = "v1", .resource = "configmaps", .namespace_name = "paged"};
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(
        client_
            .Create(cms, absl::StrCat(R"({"metadata":{"name":"cm-)", i,
                                      R"(","labels":{"app":"x"}},"data":{"k":"v\n\"q\""}})"))
            .ok());
  }
  absl::StatusOr<ObjectList> page = client_.ListPage(cms, {.limit = 3});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->items.size(), 3u);
  EXPECT_FALSE(page->continue_token.empty());

  absl::StatusOr<ObjectList> all = client_.List(cms, {.label_selector = "app=x", .limit = 3});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->items.size(), 7u);
  EXPECT_FALSE(all->resource_version.empty());
  EXPECT_TRUE(all->continue_token.empty());
  for (int i = 0; i < 7; ++i) {
    json item = json::parse(all->items[i]);
    EXPECT_EQ(item["metadata"]["name"], absl::StrCat("cm-", i));
    EXPECT_EQ(item["data"]["k"], "v\n\"q\"");
  }
  absl::StatusOr<ObjectList> none = client_.List(cms, {.label_selector = "app=none"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->items.empty());
}

TEST_F(ClientTest, WatchFromListResourceVersion) {
  ASSERT_TRUE(
      client_
          .Create({.version = "v1", .resource = "namespaces"}, R"({"metadata":{"name":"watched"}})")
          .ok());
  ResourceRef cms{.version = "v1", .resource = "configmaps", .namespace_name = "watched"};
  absl::StatusOr<ObjectList> list = client_.List(cms);
  ASSERT_TRUE(list.ok()) << list.status();

  StreamCanceller canceller;
  common::Mutex mu;
  common::CondVar cv;
  std::vector<WatchEvent> events;
  absl::Status watch_status;
  std::thread watcher([&] {
    watch_status = client_.Watch(
        cms, {.resource_version = list->resource_version, .timeout_seconds = 60},
        [&](WatchEvent event) {
          common::MutexLock lock(&mu);
          if (event.type != "BOOKMARK") events.push_back(std::move(event));
          cv.SignalAll();
          return true;
        },
        &canceller);
  });
  ASSERT_TRUE(client_.Create(cms, R"({"metadata":{"name":"w1"}})").ok());
  ASSERT_TRUE(client_
                  .Patch({.version = "v1",
                          .resource = "configmaps",
                          .namespace_name = "watched",
                          .name = "w1"},
                         PatchType::kMerge, R"({"data":{"x":"y"}})")
                  .ok());
  ASSERT_TRUE(client_
                  .Delete({.version = "v1",
                           .resource = "configmaps",
                           .namespace_name = "watched",
                           .name = "w1"})
                  .ok());
  {
    common::MutexLock lock(&mu);
    const absl::Time limit = absl::Now() + absl::Seconds(20);
    while (events.size() < 3 && absl::Now() < limit) cv.WaitWithDeadline(&mu, limit);
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].type, "ADDED");
    EXPECT_EQ(events[1].type, "MODIFIED");
    EXPECT_EQ(events[2].type, "DELETED");
    EXPECT_EQ(json::parse(events[1].object)["data"]["x"], "y");
  }
  canceller.Cancel();
  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status;
}

TEST_F(ClientTest, WatchWithInitialEventsEndsThemWithABookmark) {
  ASSERT_TRUE(
      client_
          .Create({.version = "v1", .resource = "namespaces"}, R"({"metadata":{"name":"initial"}})")
          .ok());
  ResourceRef cms{.version = "v1", .resource = "configmaps", .namespace_name = "initial"};
  ASSERT_TRUE(client_.Create(cms, R"({"metadata":{"name":"i1"}})").ok());
  std::vector<WatchEvent> events;
  absl::Status status = client_.Watch(cms, {.timeout_seconds = 30, .send_initial_events = true},
                                      [&](WatchEvent event) {
                                        events.push_back(std::move(event));
                                        return events.back().type != "BOOKMARK";
                                      });
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "ADDED");
  EXPECT_EQ(json::parse(events[0].object)["metadata"]["name"], "i1");
  EXPECT_EQ(events[1].type, "BOOKMARK");
  EXPECT_EQ(json::parse(events[1].object)["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true");
}

TEST_F(ClientTest, WatchWithBadResourceVersionIsAnError) {
  ResourceRef cms{.version = "v1", .resource = "configmaps", .namespace_name = "default"};
  // (410 Gone as an ERROR event is covered by FakeWatchServerTest.ErrorEventIsGone.)
  absl::Status status =
      client_.Watch(cms, {.resource_version = "not-a-number", .timeout_seconds = 5},
                    [](WatchEvent) { return true; });
  EXPECT_FALSE(status.ok());
}

// KEP-5866: the selector goes out as `shardSelector` on LIST and WATCH; the server's
// metadata.shardInfo says it was applied.
TEST_F(ClientTest, ShardSelectorIsSentOnListAndWatch) {
  ASSERT_TRUE(
      client_
          .Create({.version = "v1", .resource = "namespaces"}, R"({"metadata":{"name":"shard"}})")
          .ok());
  ResourceRef cms{.version = "v1", .resource = "configmaps", .namespace_name = "shard"};
  const std::string low = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
  auto in_low = [](const std::string& uid) { return Fnv1a64(uid) < 0x8000000000000000ull; };
  std::set<std::string> low_names;
  for (int i = 0; i < 20; ++i) {
    json cm = Parse(client_.Create(cms, absl::StrCat(R"({"metadata":{"name":"cm-)", i, R"("}})")));
    if (in_low(cm["metadata"]["uid"])) low_names.insert(cm["metadata"]["name"]);
  }
  absl::StatusOr<ObjectList> all = client_.List(cms, {.limit = 7});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->items.size(), 20u);
  EXPECT_FALSE(all->shard_applied);

  absl::StatusOr<ObjectList> shard = client_.List(cms, {.limit = 3, .shard_selector = low});
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_TRUE(shard->shard_applied);
  std::set<std::string> listed;
  for (const std::string& item : shard->items) {
    json j = json::parse(item);
    EXPECT_TRUE(in_low(j["metadata"]["uid"])) << item;
    listed.insert(j["metadata"]["name"]);
  }
  EXPECT_EQ(listed, low_names);

  absl::StatusOr<ObjectList> bad =
      client_.ListPage(cms, {.shard_selector = "shardRange(object.metadata.name, '0x0', '0x1')"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("shardSelector"));

  // The watch delivers the low half's events only. Objects are created until one lands low;
  // its event comes after every earlier one, so by then any high event would have been seen.
  StreamCanceller canceller;
  common::Mutex mu;
  common::CondVar cv;
  std::vector<json> events;
  std::thread watcher([&] {
    absl::Status status = client_.Watch(
        cms,
        {.resource_version = shard->resource_version, .shard_selector = low, .timeout_seconds = 60},
        [&](WatchEvent event) {
          common::MutexLock lock(&mu);
          if (event.type != "BOOKMARK") events.push_back(json::parse(event.object));
          cv.SignalAll();
          return true;
        },
        &canceller);
    EXPECT_TRUE(status.ok()) << status;
  });
  std::string last_low;
  for (int i = 0; i < 200 && last_low.empty(); ++i) {
    json cm = Parse(client_.Create(cms, absl::StrCat(R"({"metadata":{"name":"new-)", i, R"("}})")));
    if (in_low(cm["metadata"]["uid"])) last_low = cm["metadata"]["name"];
  }
  ASSERT_FALSE(last_low.empty());
  {
    common::MutexLock lock(&mu);
    const absl::Time limit = absl::Now() + absl::Seconds(30);
    auto seen = [&] { return !events.empty() && events.back()["metadata"]["name"] == last_low; };
    while (!seen() && absl::Now() < limit) cv.WaitWithDeadline(&mu, limit);
    EXPECT_TRUE(seen());
    for (const json& e : events) EXPECT_TRUE(in_low(e["metadata"]["uid"])) << e.dump();
  }
  canceller.Cancel();
  watcher.join();
}

TEST_F(ClientTest, StatusSubresourceLeaseAndEvent) {
  ResourceRef deploy{
      .group = "apps", .version = "v1", .resource = "deployments", .namespace_name = "default"};
  ASSERT_TRUE(client_
                  .Create(deploy, R"({"metadata":{"name":"web"},"spec":{"replicas":1,
      "selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
      "spec":{"containers":[{"name":"c","image":"nginx"}]}}}})")
                  .ok());
  deploy.name = "web";
  deploy.subresource = "status";
  json status = Parse(client_.Patch(deploy, PatchType::kMerge,
                                    R"({"status":{"observedGeneration":1,"replicas":1}})"));
  EXPECT_EQ(status["status"]["replicas"], 1);
  deploy.subresource.clear();
  EXPECT_EQ(Parse(client_.Get(deploy))["status"]["observedGeneration"], 1);

  ResourceRef lease{.group = "coordination.k8s.io",
                    .version = "v1",
                    .resource = "leases",
                    .namespace_name = "default"};
  json l = Parse(client_.Create(lease, R"({"metadata":{"name":"leader"},
      "spec":{"holderIdentity":"me","leaseDurationSeconds":15}})"));
  EXPECT_EQ(l["spec"]["holderIdentity"], "me");

  ResourceRef event{.version = "v1", .resource = "events", .namespace_name = "default"};
  json e = Parse(client_.Create(event, R"({"metadata":{"name":"web.1"},
      "involvedObject":{"kind":"Deployment","namespace":"default","name":"web"},
      "reason":"Scaled","message":"scaled up","type":"Normal"})"));
  EXPECT_EQ(e["reason"], "Scaled");
}

// A server that sends hand-written watch streams.
class FakeWatchServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get(R"(/api/v1/namespaces/(bad|gone|cut)/configmaps)", [](const httplib::Request& req,
                                                                      httplib::Response& res) {
      std::string body;
      const std::string ns = req.matches[1];
      const std::string added = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"
                                "\n";
      if (ns == "bad") body = added + "this is not json\n" + added;
      if (ns == "gone") {
        body =
            added +
            R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}})"
            "\n";
      }
      if (ns == "cut") body = added + R"({"type":"ADDED","obj)";
      res.set_chunked_content_provider("application/json", [body](size_t, httplib::DataSink& sink) {
        sink.write(body.data(), body.size());
        sink.done();
        return true;
      });
    });
    absl::StatusOr<int> port = server_.Start();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    RestConfig config;
    config.host = absl::StrCat("http://127.0.0.1:", port_);
    auto rest = RestClient::Create(config);
    ASSERT_TRUE(rest.ok());
    rest_ = std::move(*rest);
  }
  void TearDown() override { server_.Stop(); }

  absl::Status WatchNamespace(const std::string& ns, int* events) {
    Client client(rest_.get());
    return client.Watch({.version = "v1", .resource = "configmaps", .namespace_name = ns}, {},
                        [events](WatchEvent e) {
                          EXPECT_EQ(e.type, "ADDED");
                          ++*events;
                          return true;
                        });
  }

  testing::ScriptedHttpServer server_;
  int port_ = 0;
  std::unique_ptr<RestClient> rest_;
};

TEST_F(FakeWatchServerTest, MalformedLineIsAnError) {
  int events = 0;
  absl::Status status = WatchNamespace("bad", &events);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_EQ(events, 1);
}

TEST_F(FakeWatchServerTest, ErrorEventIsGone) {
  int events = 0;
  absl::Status status = WatchNamespace("gone", &events);
  EXPECT_TRUE(kube::IsGone(status)) << status;
  EXPECT_EQ(events, 1);
}

TEST_F(FakeWatchServerTest, TruncatedStreamIsAnError) {
  int events = 0;
  absl::Status status = WatchNamespace("cut", &events);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_EQ(events, 1);
}

}  // namespace
}  // namespace ctrlhost::kube
