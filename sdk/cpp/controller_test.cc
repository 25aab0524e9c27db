#include "sdk/cpp/controller.h"

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"

namespace ctrlhost::sdk {
namespace {

Result Noop(const Request&) { return Result(); }

TEST(ControllerBuilderTest, ProducesTheSpec) {
  absl::StatusOr<std::shared_ptr<const Controller>> c =
      ControllerBuilder("webapp")
          .For("apps.ctrlhost.dev", "v1alpha1", "WebApp")
          .Owns("apps", "v1", "Deployment")
          .Owns("", "v1", "ConfigMap", {/*delete_absent=*/true, /*cluster_scoped=*/false})
          .Watches("", "v1", "Secret", Mapping::NameLabel("apps.ctrlhost.dev/webapp"),
                   {"role=db", /*include_in_requests=*/true})
          .Watches("", "v1", "Namespace", Mapping::EnqueueAll())
          .Finalizer("apps.ctrlhost.dev/external-record")
          .MaxConcurrent(4)
          .Resync(absl::Minutes(10))
          .Namespaces({"team-a", "team-b"})
          .LabelSelector("tier in (front)")
          .Predicates({/*primary_status_changes=*/false, /*ignore_child_status_changes=*/true})
          .Reconcile(Noop)
          .Build();
  ASSERT_TRUE(c.ok()) << c.status();
  const pluginpb::ControllerSpec& spec = (*c)->spec();
  EXPECT_EQ((*c)->name(), "webapp");
  EXPECT_EQ(spec.primary().group(), "apps.ctrlhost.dev");
  EXPECT_EQ(spec.primary().kind(), "WebApp");
  ASSERT_EQ(spec.owns_size(), 2);
  EXPECT_FALSE(spec.owns(0).delete_absent());
  EXPECT_TRUE(spec.owns(1).delete_absent());
  ASSERT_EQ(spec.watches_size(), 2);
  EXPECT_EQ(spec.watches(0).label().name_label(), "apps.ctrlhost.dev/webapp");
  EXPECT_EQ(spec.watches(0).label_selector(), "role=db");
  EXPECT_TRUE(spec.watches(0).include_in_requests());
  EXPECT_EQ(spec.watches(1).mapping_case(), pluginpb::WatchedKind::kEnqueueAll);
  EXPECT_EQ(spec.finalizer(), "apps.ctrlhost.dev/external-record");
  EXPECT_EQ(spec.max_concurrent_reconciles(), 4u);
  EXPECT_EQ(spec.resync_period().seconds(), 600);
  EXPECT_EQ(spec.namespaces_size(), 2);
  EXPECT_EQ(spec.label_selector(), "tier in (front)");
  EXPECT_TRUE(spec.predicates().ignore_child_status_changes());
  // Defaults derived from the declaration.
  EXPECT_TRUE(spec.request_contents().children());
  EXPECT_TRUE(spec.request_contents().related_objects());
  ASSERT_EQ(spec.request_contents().strip_fields_size(), 1);
  EXPECT_EQ(spec.request_contents().strip_fields(0), "metadata.managedFields");
  std::vector<pluginpb::Capability> caps = (*c)->RequiredCapabilities();
  EXPECT_EQ(caps, (std::vector<pluginpb::Capability>{pluginpb::CAPABILITY_CHILDREN,
                                                     pluginpb::CAPABILITY_RELATED_OBJECTS,
                                                     pluginpb::CAPABILITY_SERVER_SIDE_APPLY}));
}

TEST(ControllerBuilderTest, MinimalControllerNeedsNoCapability) {
  auto c = ControllerBuilder("cm").For("", "v1", "ConfigMap").Reconcile(Noop).Build();
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE((*c)->spec().request_contents().children());
  EXPECT_FALSE((*c)->spec().has_resync_period());
  EXPECT_TRUE((*c)->RequiredCapabilities().empty());
  EXPECT_EQ(ApiVersion((*c)->spec().primary()), "v1");
}

TEST(ControllerBuilderTest, RefusesBrokenDeclarations) {
  auto code = [](const ControllerBuilder& b) { return b.Build().status().code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(ControllerBuilder("Bad_Name").For("", "v1", "ConfigMap").Reconcile(Noop)),
            kInvalid);
  EXPECT_EQ(code(ControllerBuilder("").For("", "v1", "ConfigMap").Reconcile(Noop)), kInvalid);
  EXPECT_EQ(code(ControllerBuilder("x").Reconcile(Noop)), kInvalid);
  EXPECT_EQ(code(ControllerBuilder("x").For("", "v1", "ConfigMap")), kInvalid);
  EXPECT_EQ(code(ControllerBuilder("x").For("", "v1", "A").Finalizer("nodomain").Reconcile(Noop)),
            kInvalid);
  EXPECT_EQ(
      code(ControllerBuilder("x").For("", "v1", "A").Resync(absl::Seconds(-1)).Reconcile(Noop)),
      kInvalid);
  EXPECT_EQ(code(ControllerBuilder("x").For("", "v1", "A").Owns("", "", "B").Reconcile(Noop)),
            kInvalid);
  absl::Status s = ControllerBuilder("x")
                       .For("", "v1", "A")
                       .Finalizer("nodomain")
                       .Reconcile(Noop)
                       .Build()
                       .status();
  EXPECT_NE(s.message().find("controller \"x\""), std::string::npos) << s;
}

}  // namespace
}  // namespace ctrlhost::sdk
