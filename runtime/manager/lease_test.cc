#include "runtime/manager/lease.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/apiserver/testing/embedded_apiserver.h"
#include "runtime/kube/api_status.h"
#include "runtime/kube/client.h"

namespace ctrlhost::manager {
namespace {

using nlohmann::json;

TEST(LeaseRefTest, NamedAndCollection) {
  const kube::ResourceRef named = LeaseRef("ops", "ctrlhost");
  EXPECT_EQ(kube::ResourcePath(named),
            "/apis/coordination.k8s.io/v1/namespaces/ops/leases/ctrlhost");
  EXPECT_EQ(kube::ResourcePath(LeaseRef("ops", "")),
            "/apis/coordination.k8s.io/v1/namespaces/ops/leases");
}

TEST(LeaseSecondsTest, RoundsUp) {
  EXPECT_EQ(LeaseSeconds(absl::Seconds(15)), 15);
  EXPECT_EQ(LeaseSeconds(absl::Milliseconds(1500)), 2);
  EXPECT_EQ(LeaseSeconds(absl::Milliseconds(1)), 1);
  EXPECT_EQ(LeaseSeconds(absl::ZeroDuration()), 0);
}

TEST(FormatMicroTimeTest, Rfc3339MicrosecondsUtc) {
  EXPECT_EQ(FormatMicroTime(absl::FromUnixMicros(1'800'000'000'123'456)),
            "2027-01-15T08:00:00.123456Z");
  EXPECT_EQ(FormatMicroTime(absl::FromUnixSeconds(0)), "1970-01-01T00:00:00.000000Z");
}

TEST(FieldTest, WrongTypesReadAsAbsent) {
  const json spec = {{"holderIdentity", "a"},
                     {"leaseTransitions", 3},
                     {"renewTime", 7},
                     {"leaseDurationSeconds", "15"}};
  EXPECT_EQ(StringField(spec, "holderIdentity"), "a");
  EXPECT_EQ(StringField(spec, "renewTime"), "");
  EXPECT_EQ(StringField(spec, "missing"), "");
  EXPECT_EQ(StringField(json::array({1}), "holderIdentity"), "");
  EXPECT_EQ(StringField(json(), "holderIdentity"), "");
  EXPECT_EQ(IntField(spec, "leaseTransitions", 0), 3);
  EXPECT_EQ(IntField(spec, "leaseDurationSeconds", 15), 15);
  EXPECT_EQ(IntField(spec, "missing", -1), -1);
  EXPECT_EQ(IntField(json("x"), "leaseTransitions", 9), 9);
}

class LeaseApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto api = apiserver::testing::EmbeddedApiServer::Start("lease_apiserver");
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
  }
  static void TearDownTestSuite() { delete api_; }
  kube::Client* client() { return &api_->client(); }

  inline static apiserver::testing::EmbeddedApiServer* api_ = nullptr;
};

TEST_F(LeaseApiTest, GetCreateAndConditionalUpdate) {
  const kube::ResourceRef ref = LeaseRef("default", "lease-test");
  absl::StatusOr<json> missing = GetLease(client(), ref);
  EXPECT_TRUE(kube::IsNotFound(missing.status())) << missing.status();

  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "lease-test"}, {"namespace", "default"}}},
                {"spec", {{"holderIdentity", "a"}}}};
  absl::StatusOr<std::string> created = CreateLease(client(), ref, lease);  // ref's name ignored
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(kube::IsAlreadyExists(CreateLease(client(), ref, lease).status()));

  absl::StatusOr<json> first = GetLease(client(), ref);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<json> second = GetLease(client(), ref);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(StringField((*first)["spec"], "holderIdentity"), "a");

  // Both read the same resourceVersion: exactly one update wins.
  (*first)["spec"]["holderIdentity"] = "b";
  (*second)["spec"]["holderIdentity"] = "c";
  absl::StatusOr<std::string> won = UpdateLease(client(), ref, *first);
  ASSERT_TRUE(won.ok()) << won.status();
  EXPECT_TRUE(kube::IsConflict(UpdateLease(client(), ref, *second).status()));

  absl::StatusOr<json> now = GetLease(client(), ref);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(StringField((*now)["spec"], "holderIdentity"), "b");
}

}  // namespace
}  // namespace ctrlhost::manager
