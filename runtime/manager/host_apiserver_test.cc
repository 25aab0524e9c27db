// The whole host in-process (host_test_fixture.h) against an API server that goes away, is not
// there yet, or is crowded: readiness, recovery, and the host's own seats.
#include "runtime/manager/host.h"
#include "runtime/manager/host_test_fixture.h"

namespace ctrlhost::manager {
namespace {

TEST_F(HostTest, ReadyzReportsStaleCachesWhileTheApiServerIsDownAndRecovers) {
  absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> cluster = StartCluster(0);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const int port = (*cluster)->port();
  const std::string kubeconfig = (*cluster)->kubeconfig_path();
  StartOperators(config::ParseOperators(WebAppOperatorYaml(), "operator.yaml"),
                 [&](HostOptions& options) {
                   options.kubeconfigs = {kubeconfig};
                   options.watch_stale_after = absl::Seconds(1);
                 });
  if (HasFatalFailure()) return;
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  EXPECT_EQ(Readyz().first, 200) << Readyz().second;

  (*cluster)->Stop();
  cluster->reset();
  // The caches keep serving for the grace period, then readiness says which watch is stale,
  // for how long and why.
  std::pair<int, std::string> readyz;
  EXPECT_TRUE(Eventually([&] {
    readyz = Readyz();
    return readyz.first == 503 &&
           absl::StrContains(readyz.second,
                             "controller webapp: watch apps.ctrlhost.dev/v1alpha1 WebApp stale: "
                             "failing for ");
  })) << readyz.second;
  EXPECT_TRUE(absl::StrContains(readyz.second, "[-]controllers failed: ")) << readyz.second;
  EXPECT_TRUE(absl::StrContains(readyz.second, "[+]api-server ok")) << readyz.second;
  const std::string dump = host_->manager().DumpYaml();
  EXPECT_TRUE(absl::StrContains(dump, "failingSince:")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "consecutiveFailures:")) << dump;

  // The server comes back on the same address: the watches resume and readiness recovers alone.
  cluster = StartCluster(port);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(Eventually([&] {
    readyz = Readyz();
    return readyz.first == 200;
  })) << readyz.second;
  host_->Stop();
}

// Issue 13 item 5: a host started while its cluster is unreachable exited; now it serves its
// health endpoints, says why it is not ready, and starts its controllers once the server answers.
TEST_F(HostTest, StartsWhileTheApiServerIsUnreachableAndStartsControllersOnceItAnswers) {
  absl::StatusOr<std::unique_ptr<apiserver::ApiServer>> cluster = StartCluster(0);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const int port = (*cluster)->port();
  const std::string url = (*cluster)->url();
  const std::string kubeconfig = (*cluster)->kubeconfig_path();
  (*cluster)->Stop();  // the kubeconfig and certificates stay; the port is closed
  cluster->reset();
  StartOperators(config::ParseOperators(WebAppOperatorYaml(), "operator.yaml"),
                 [&](HostOptions& options) {
                   options.kubeconfigs = {kubeconfig};
                   options.discovery_backoff = absl::Milliseconds(100);
                   options.discovery_max_backoff = absl::Milliseconds(500);
                 });
  if (HasFatalFailure()) return;
  std::pair<int, std::string> readyz = Readyz();
  EXPECT_EQ(readyz.first, 503);
  EXPECT_TRUE(absl::StrContains(
      readyz.second, absl::StrCat("[-]api-server failed: API server ", url, " unreachable for ")))
      << readyz.second;
  EXPECT_TRUE(absl::StrContains(readyz.second, "; retrying discovery")) << readyz.second;
  EXPECT_FALSE(host_->ApiServerCheck().ok());

  cluster = StartCluster(port);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(Eventually([&] { return host_->ApiServerCheck().ok(); })) << host_->ApiServerCheck();
  CreateFromYamlFile(Runfile("plugins/webapp/deploy/crd.yaml"), kCrds);
  ASSERT_TRUE(host_->manager().WaitReady(absl::Seconds(30)).ok()) << host_->manager().Ready();
  EXPECT_TRUE(Eventually([&] { return Readyz().first == 200; })) << Readyz().second;
  const std::string web = R"({"apiVersion":"apps.ctrlhost.dev/v1alpha1","kind":"WebApp",
    "metadata":{"name":"late","namespace":"default"},"spec":{"image":"nginx"}})";
  ASSERT_TRUE(host_->client().Create(WebApp(""), web).ok());
  EXPECT_TRUE(Eventually([&] {
    return !Get(kube::ResourceRef{"apps", "v1", "deployments", "default", "late", ""}).is_null();
  }));
  host_->Stop();
}

// Issue 25: the host's own client used the kubeconfig's token and shared the users' seats, so
// clients holding them (LISTs they do not read, writes whose body never comes) starved the
// host's informers and writes with 429s. It uses the server's in-memory system token, which has
// seats of its own.
TEST_F(HostTest, RegressionUsersHoldingEverySeatDoNotStarveTheHostsClient) {
  StartOperators(std::vector<config::OperatorSpec>{}, [](HostOptions& options) {
    options.apiserver.max_requests_inflight = 1;
    options.apiserver.max_mutating_requests_inflight = 1;
    options.apiserver.write_stall_timeout = absl::Hours(1);  // held until the test ends
    options.rest.max_attempts = 1;                           // a 429 is an error at once
  });
  if (HasFatalFailure()) return;
  const std::string token =
      std::string(absl::StripAsciiWhitespace(ReadFile((dir_ / "data" / "token").string())));
  ASSERT_EQ(token.size(), 64u);
  const int port = std::atoi(host_->api_url().c_str() + host_->api_url().rfind(':') + 1);
  // A LIST larger than the largest socket send buffer plus 4 MiB, whose client reads nothing:
  // it holds the one user read seat. A create whose body never arrives holds the one user
  // write seat.
  std::istringstream wmem(ReadFile("/proc/sys/net/ipv4/tcp_wmem"));
  int64_t wmem_min = 0, wmem_default = 0, wmem_max = 0;
  wmem >> wmem_min >> wmem_default >> wmem_max;
  const int64_t list_bytes = std::max<int64_t>(wmem_max, 4 << 20) + (4 << 20);
  const kube::ResourceRef configmaps{"", "v1", "configmaps", "default", "", ""};
  const std::string value(100 * 1024, 'x');
  for (int64_t i = 0; i * static_cast<int64_t>(value.size()) < list_bytes; ++i) {
    ASSERT_TRUE(host_->client()
                    .Create(configmaps, absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap",)",
                                                     R"("metadata":{"name":"cm-)", i,
                                                     R"("},"data":{"v":")", value, R"("}})"))
                    .ok());
  }
  apiserver::testing::RawTlsClient list(port, /*receive_buffer=*/4096);
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(list.Send(absl::StrCat("GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\n",
                                     "Host: x\r\nAuthorization: Bearer ", token, "\r\n\r\n")));
  apiserver::testing::RawTlsClient write(port);
  ASSERT_TRUE(write.ok());
  ASSERT_TRUE(write.Send(apiserver::testing::RequestWithPendingBody(
      "POST", "/api/v1/namespaces/default/configmaps", token)));
  httplib::Client user(host_->api_url());
  user.enable_server_certificate_verification(false);
  user.set_bearer_token_auth(token);
  EXPECT_TRUE(Eventually([&] {
    auto r = user.Get("/api/v1/namespaces/default");
    return r && r->status == 429;
  }));
  EXPECT_TRUE(Eventually([&] {
    auto r = user.Post("/api/v1/namespaces/default/configmaps",
                       R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"u-"}})",
                       "application/json");
    return r && r->status == 429;
  }));
  // The host's client reads and writes meanwhile.
  absl::StatusOr<std::string> got =
      host_->client().Get(kube::ResourceRef{"", "v1", "namespaces", "", "default", ""});
  EXPECT_TRUE(got.ok()) << got.status();
  absl::StatusOr<std::string> created = host_->client().Create(
      configmaps, R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"by-host"}})");
  EXPECT_TRUE(created.ok()) << created.status();
  list.Close();
  write.Close();
  host_->Stop();
}

}  // namespace
}  // namespace ctrlhost::manager
