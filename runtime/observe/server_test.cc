#include "runtime/observe/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace ctrlhost::observe {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<ObserveServer> StartServer(const MetricsRegistry* metrics) {
  ObserveServerOptions options;
  options.port = 0;
  options.metrics = metrics;
  absl::StatusOr<std::unique_ptr<ObserveServer>> server = ObserveServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

httplib::Result Get(const ObserveServer& server, const std::string& path) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  return client.Get(path.c_str());
}

TEST(ObserveServerTest, MetricsOverHttp) {
  MetricsRegistry metrics;
  metrics.AddProvider([](Figures& f) {
    QueueFigures q;
    q.name = "web";
    q.depth = {0, 4};  // by priority: low, high
    f.queues.push_back(q);
  });
  std::unique_ptr<ObserveServer> server = StartServer(&metrics);
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()));
  httplib::Result res = Get(*server, "/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kPrometheusTextContentType);
  EXPECT_THAT(
      res->body,
      HasSubstr("# TYPE workqueue_depth gauge\nworkqueue_depth{name=\"web\",priority=\"low\"} 0\n"
                "workqueue_depth{name=\"web\",priority=\"high\"} 4"));
}

TEST(ObserveServerTest, MetricsDisabledIs404AndUnknownPaths404) {
  std::unique_ptr<ObserveServer> server = StartServer(nullptr);
  ASSERT_NE(server, nullptr);
  httplib::Result res = Get(*server, "/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = Get(*server, "/nothing-here");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST(ObserveServerTest, HealthzIsLive) {
  std::unique_ptr<ObserveServer> server = StartServer(nullptr);
  ASSERT_NE(server, nullptr);
  httplib::Result res = Get(*server, "/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
}

// Issue 14 item 8: httplib's fixed pool of 8 threads served the port, so 64 idle connections
// held /healthz back for 8 rounds of the 5 s read timeout; a kubelet liveness probe (1 s)
// would have restarted a healthy host. The client's 10 s is far below those 40 s.
TEST(ObserveServerTest, RegressionHealthzAnsweredWith64IdleConnections) {
  std::unique_ptr<ObserveServer> server = StartServer(nullptr);
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(fd);
  }
  for (int i = 0; i < 3; ++i) {
    httplib::Result res = Get(*server, "/healthz");
    ASSERT_TRUE(res) << "no answer, error " << static_cast<int>(res.error());
    EXPECT_EQ(res->status, 200);
  }
  for (int fd : idle) close(fd);
}

TEST(ObserveServerTest, ReadinessFlipsWithItsChecks) {
  std::unique_ptr<ObserveServer> server = StartServer(nullptr);
  ASSERT_NE(server, nullptr);
  // No checks: ready.
  httplib::Result res = Get(*server, "/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");

  std::atomic<bool> synced{false};
  server->SetReadyCheck("informers-synced", [&] {
    return synced ? absl::OkStatus() : absl::UnavailableError("2 of 3 watches synced");
  });
  server->SetReadyCheck("leader", [] { return absl::OkStatus(); });
  res = Get(*server, "/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body,
            "[-]informers-synced failed: 2 of 3 watches synced\n[+]leader ok\n"
            "readyz check failed\n");
  res = Get(*server, "/readyz/leader");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = Get(*server, "/readyz/informers-synced");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  res = Get(*server, "/readyz/unknown");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  synced = true;
  res = Get(*server, "/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
  res = Get(*server, "/readyz?verbose");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "[+]informers-synced ok\n[+]leader ok\nreadyz check passed\n");
  // A passing check may say more in verbose mode (a leader-election standby says so).
  server->SetReadyDetail("leader", [] { return std::string("standby, leader host-a"); });
  res = Get(*server, "/readyz?verbose");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body,
            "[+]informers-synced ok\n[+]leader ok: standby, leader host-a\nreadyz check passed\n");
  server->SetReadyDetail("leader", [] { return std::string(); });

  synced = false;
  server->RemoveReadyCheck("informers-synced");
  res = Get(*server, "/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(ObserveServerTest, DebugDump) {
  std::unique_ptr<ObserveServer> server = StartServer(nullptr);
  ASSERT_NE(server, nullptr);
  httplib::Result res = Get(*server, "/debug/dump");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);

  server->SetDumpProvider([]() -> absl::StatusOr<std::string> {
    return std::string("plugins:\n  - name: webapp\n    up: true\n");
  });
  res = Get(*server, "/debug/dump");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/yaml");
  EXPECT_EQ(res->body, "plugins:\n  - name: webapp\n    up: true\n");

  server->SetDumpProvider(
      []() -> absl::StatusOr<std::string> { return absl::InternalError("cache went away"); });
  res = Get(*server, "/debug/dump");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_THAT(res->body, HasSubstr("cache went away"));

  server->SetDumpProvider(nullptr);
  res = Get(*server, "/debug/dump");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
}

TEST(ObserveServerTest, StopRightAfterStartAndTwice) {
  std::unique_ptr<ObserveServer> server = StartServer(nullptr);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  server->Stop();
  server->Stop();
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  EXPECT_FALSE(client.Get("/healthz"));
}

TEST(ObserveServerTest, BadOptions) {
  ObserveServerOptions options;
  options.port = 70000;
  EXPECT_EQ(ObserveServer::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.port = 0;
  options.bind = "203.0.113.7";  // TEST-NET-3: not an address of this machine
  EXPECT_EQ(ObserveServer::Start(options).status().code(), absl::StatusCode::kUnavailable);
  // A port already taken.
  std::unique_ptr<ObserveServer> first = StartServer(nullptr);
  ASSERT_NE(first, nullptr);
  options.bind = "127.0.0.1";
  options.port = first->port();
  EXPECT_EQ(ObserveServer::Start(options).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ObserveServerTest, ConcurrentScrapesAndCheckChanges) {
  MetricsRegistry metrics;
  std::atomic<int> depth{0};
  metrics.AddProvider([&](Figures& f) {
    QueueFigures q;
    q.name = "q";
    q.depth = {0, static_cast<double>(depth.load())};
    f.queues.push_back(q);
  });
  std::unique_ptr<ObserveServer> server = StartServer(&metrics);
  ASSERT_NE(server, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        httplib::Result res = Get(*server, t % 2 == 0 ? "/metrics" : "/readyz");
        if (!res || (res->status != 200 && res->status != 503)) ++failures;
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    depth = i;
    server->SetReadyCheck(
        "flip", [i] { return i % 2 == 0 ? absl::OkStatus() : absl::UnavailableError("odd"); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace ctrlhost::observe
