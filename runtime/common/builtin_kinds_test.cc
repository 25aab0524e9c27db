#include "runtime/common/builtin_kinds.h"

#include "gtest/gtest.h"

namespace ctrlhost::common {
namespace {

TEST(BuiltinKindsTest, KindsWithoutStatusAreKnownAndEveryOtherHasOne) {
  EXPECT_FALSE(HasStatusSubresource("", "ConfigMap"));
  EXPECT_FALSE(HasStatusSubresource("", "Secret"));
  EXPECT_FALSE(HasStatusSubresource("rbac.authorization.k8s.io", "ClusterRole"));
  EXPECT_FALSE(HasStatusSubresource("coordination.k8s.io", "Lease"));
  EXPECT_TRUE(HasStatusSubresource("", "Pod"));
  EXPECT_TRUE(HasStatusSubresource("apps", "Deployment"));
  EXPECT_TRUE(HasStatusSubresource("apps.ctrlhost.dev", "WebApp"));
  // The group counts: an Event of events.k8s.io has none, a custom group's "Event" has one.
  EXPECT_FALSE(HasStatusSubresource("events.k8s.io", "Event"));
  EXPECT_TRUE(HasStatusSubresource("example.com", "Event"));
}

}  // namespace
}  // namespace ctrlhost::common
