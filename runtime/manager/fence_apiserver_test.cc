// Per-operator write fencing against a real API server (the embedded one): the host's API client
// asks the calling thread's fence (ScopedWriteFence, installed by FencedApplier) before each
// write, as Host wires it for per-operator Leases.
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/common/clock.h"
#include "runtime/kube/client.h"
#include "runtime/kube/rest_client.h"
#include "runtime/manager/fence.h"

namespace ctrlhost::manager {
namespace {

const kube::ResourceRef kConfigMaps{
    .version = "v1", .resource = "configmaps", .namespace_name = "default"};

std::string ConfigMap(absl::string_view name) {
  return absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")", name,
                      R"(","namespace":"default"},"data":{"a":"b"}})");
}

TEST(FenceApiServerTest, WritesFollowTheCallingThreadsFence) {
  auto api = apiserver::testing::EmbeddedApiServer::Start("fence_apiserver");
  ASSERT_TRUE(api.ok()) << api.status();
  kube::RestClientOptions options;
  options.write_fence = [] { return CurrentWriteDeadline(); };  // as Host sets it
  auto rest = (*api)->NewRestClient(options);
  ASSERT_TRUE(rest.ok()) << rest.status();
  kube::Client client(rest->get());

  common::FakeClock clock;  // the fence's clock; the client's is real
  clock.Advance(absl::Now() - clock.Now());
  Fence alpha(&clock);  // an operator whose Lease this host does not hold
  Fence beta(&clock);   // one it holds
  beta.Open(absl::InfiniteFuture());

  {
    ScopedWriteFence scope(&alpha);
    absl::StatusOr<std::string> refused = client.Create(kConfigMaps, ConfigMap("alpha"));
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(refused.status().message().find("not the leader: standby"), std::string::npos)
        << refused.status();
    // Reads are never fenced.
    EXPECT_TRUE(
        client.Get(kube::ResourceRef{.version = "v1", .resource = "namespaces", .name = "default"})
            .ok());
  }
  {
    ScopedWriteFence scope(&beta);
    ASSERT_TRUE(client.Create(kConfigMaps, ConfigMap("beta")).ok());
    // Another thread of the same client, inside alpha's scope, is refused meanwhile.
    absl::Status other;
    std::thread([&] {
      ScopedWriteFence inner(&alpha);
      other = client.Create(kConfigMaps, ConfigMap("alpha-2")).status();
    }).join();
    EXPECT_EQ(other.code(), absl::StatusCode::kUnavailable) << other;
  }
  // Outside any scope (the host's own writes): not fenced.
  ASSERT_TRUE(client.Create(kConfigMaps, ConfigMap("host")).ok());
  // beta's fence trips: its next write is refused before it is sent.
  beta.Trip("lost the Lease");
  {
    ScopedWriteFence scope(&beta);
    absl::StatusOr<std::string> refused = client.Create(kConfigMaps, ConfigMap("beta-2"));
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("lost the Lease"), std::string::npos)
        << refused.status();
  }
  // What reached the server: only the writes made through an open fence or none.
  for (const char* name : {"alpha", "alpha-2", "beta-2"}) {
    kube::ResourceRef ref = kConfigMaps;
    ref.name = name;
    EXPECT_EQ(client.Get(ref).status().code(), absl::StatusCode::kNotFound) << name;
  }
  for (const char* name : {"beta", "host"}) {
    kube::ResourceRef ref = kConfigMaps;
    ref.name = name;
    EXPECT_TRUE(client.Get(ref).ok()) << name;
  }
}

}  // namespace
}  // namespace ctrlhost::manager
