// The replicator through the SDK's in-process harness, with the sample objects as fixtures.
#include "plugins/configmap-replicator/replicator.h"

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::replicator {
namespace {

using sdk::testing::Outcome;
using sdk::testing::RequestBuilder;

class ReplicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto objects = sdk::testing::LoadObjects("plugins/configmap-replicator/samples/replicate.yaml");
    ASSERT_TRUE(objects.ok()) << objects.status();
    for (const nlohmann::json& o : *objects) {
      if (o["kind"] == "Namespace") namespaces_[o["metadata"]["name"]] = o;
      if (o["kind"] == "ConfigMap") sources_.push_back(o);
    }
    ASSERT_EQ(namespaces_.size(), 4u);
    ASSERT_EQ(sources_.size(), 1u);
    auto controller = MakeController().Build();
    ASSERT_TRUE(controller.ok()) << controller.status();
    controller_ = *controller;
  }

  RequestBuilder For(const std::string& ns, const std::vector<nlohmann::json>& sources) {
    RequestBuilder req(namespaces_.at(ns));
    req.Controller("configmap-replicator");
    for (const nlohmann::json& s : sources) req.Related(s);
    return req;
  }
  Outcome Reconcile(const RequestBuilder& req) {
    return sdk::testing::Reconcile(*controller_, req.Call());
  }
  static nlohmann::json Source(const std::string& ns, const std::string& name,
                               const std::string& selector, bool labelled = true) {
    nlohmann::json cm = sdk::NewObject("v1", "ConfigMap", name);
    cm["metadata"]["namespace"] = ns;
    if (labelled) cm["metadata"]["labels"] = {{kReplicateLabel, "true"}};
    cm["metadata"]["annotations"] = {{kReplicateToAnnotation, selector}};
    cm["data"] = {{"from", ns}};
    return cm;
  }

  std::map<std::string, nlohmann::json> namespaces_;
  std::vector<nlohmann::json> sources_;
  std::shared_ptr<const sdk::Controller> controller_;
};

TEST_F(ReplicatorTest, SpecMakesTheNamespaceThePrimary) {
  const pluginpb::ControllerSpec& spec = controller_->spec();
  EXPECT_EQ(spec.primary().kind(), "Namespace");
  EXPECT_EQ(spec.primary().group(), "");
  ASSERT_EQ(spec.watches_size(), 1);
  EXPECT_EQ(spec.watches(0).kind().kind(), "ConfigMap");
  EXPECT_EQ(spec.watches(0).mapping_case(), pluginpb::WatchedKind::kEnqueueAll);
  EXPECT_EQ(spec.watches(0).label_selector(), "ctrlhost.dev/replicate=true");
  EXPECT_TRUE(spec.watches(0).include_in_requests());
  ASSERT_EQ(spec.owns_size(), 1);
  EXPECT_TRUE(spec.owns(0).delete_absent());
  EXPECT_TRUE(spec.request_contents().children());
  EXPECT_TRUE(spec.request_contents().related_objects());
  EXPECT_EQ(MakeController({"env=prod"}).Spec().label_selector(), "env=prod");
}

TEST_F(ReplicatorTest, CopiesIntoMatchingNamespacesOnly) {
  Outcome a = Reconcile(For("team-a", sources_));
  ASSERT_TRUE(a.ok()) << a.error_message();
  ASSERT_EQ(a.desired.size(), 1u);
  const nlohmann::json* copy = a.Desired("ConfigMap", "shared-settings");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ((*copy)["metadata"]["namespace"], "team-a");
  EXPECT_EQ((*copy)["metadata"]["labels"],
            (nlohmann::json{{"ctrlhost.dev/replica-of", "platform.shared-settings"}}));
  EXPECT_EQ((*copy)["data"]["REGION"], "eu-west-1");
  EXPECT_TRUE(a.HasEvent("Created"));

  EXPECT_EQ(Reconcile(For("team-b", sources_)).desired.size(), 1u);
  EXPECT_TRUE(Reconcile(For("sandbox", sources_)).desired.empty());
  // Never into the source's own namespace (whatever its labels).
  nlohmann::json platform = namespaces_["platform"];
  platform["metadata"]["labels"] = {{"team", "platform"}};
  namespaces_["platform"] = platform;
  EXPECT_TRUE(Reconcile(For("platform", sources_)).desired.empty());
}

TEST_F(ReplicatorTest, SteadyStateAndPruning) {
  RequestBuilder req = For("team-a", sources_);
  Outcome first = Reconcile(req);
  req.ChildrenFrom(first);
  Outcome second = Reconcile(req);
  EXPECT_EQ(second.desired, first.desired);  // Still desired (apply keeps it), no events.
  EXPECT_EQ(second.response.events_size(), 0);

  // The namespace loses its label: the copy is no longer desired and the host prunes it.
  nlohmann::json unlabelled = namespaces_["team-a"];
  unlabelled["metadata"].erase("labels");
  req.Primary(unlabelled);
  Outcome pruned = Reconcile(req);
  EXPECT_TRUE(pruned.desired.empty());
  EXPECT_TRUE(pruned.HasEvent("Deleted"));
}

TEST_F(ReplicatorTest, BadSelectorsConflictsAndUnlabelledSources) {
  std::vector<nlohmann::json> sources = {
      Source("ops", "broken", "team in (a"),           // invalid selector
      Source("ops", "plain", "", /*labelled=*/false),  // not a source
      Source("x", "dup", "team=a"),                    // first of two with one name
      Source("y", "dup", "team=a"),                    // loses: reported
      Source("z", "everywhere", ""),                   // "" selects every namespace
  };
  Outcome out = Reconcile(For("team-a", sources));
  ASSERT_TRUE(out.ok()) << out.error_message();
  ASSERT_EQ(out.desired.size(), 2u);
  EXPECT_EQ((*out.Desired("ConfigMap", "dup"))["data"]["from"], "x");
  EXPECT_NE(out.Desired("ConfigMap", "everywhere"), nullptr);
  int warnings = 0;
  for (const pluginpb::Event& e : out.response.events()) {
    if (e.type() == pluginpb::EVENT_TYPE_WARNING) {
      ++warnings;
      EXPECT_EQ(e.reason(), "ReplicationSkipped");
    }
  }
  EXPECT_EQ(warnings, 2);
}

TEST_F(ReplicatorTest, GoneNamespaceNeedsNothing) {
  Outcome out = sdk::testing::Reconcile(*controller_, RequestBuilder::Gone("", "team-a").Call());
  EXPECT_TRUE(out.ok());
  EXPECT_TRUE(out.desired.empty());
}

}  // namespace
}  // namespace ctrlhost::replicator
