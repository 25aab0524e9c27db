#include "sdk/cpp/testing.h"

#include <cstdlib>
#include <fstream>

#include "ctrlhost/plugin/v1alpha1/pluginpb.h"
#include "gtest/gtest.h"

namespace ctrlhost::sdk::testing {
namespace {

Result CopyOnce(const Request& req) {
  Result r;
  if (!req.exists()) {
    r.Event(EventType::kNormal, "Gone", req.name());
    return r;
  }
  if (req.finalizing()) return Result::Finalized();
  nlohmann::json& cm = r.Desire(NewObject("v1", "ConfigMap", req.name() + "-copy"));
  cm["data"] = req.object().value("data", nlohmann::json::object());
  r.Status()["copies"] = req.ChildrenOfKind("ConfigMap").size();
  r.SetCondition("Ready", !req.ChildrenOfKind("ConfigMap").empty(), "Copied");
  return r;
}

std::shared_ptr<const Controller> MakeController() {
  return *ControllerBuilder("copier")
              .For("example.com", "v1", "Settings")
              .Owns("", "v1", "ConfigMap")
              .Reconcile(CopyOnce)
              .Build();
}

// A kind with a status subresource: the copier writes status and conditions.
constexpr char kPrimary[] = R"(
apiVersion: example.com/v1
kind: Settings
metadata:
  name: settings
  namespace: team-a
data:
  mode: fast
)";

TEST(HarnessTest, RunsAControllerOnAYamlFixtureAndConverges) {
  absl::StatusOr<RequestBuilder> req = RequestBuilder::FromYaml(kPrimary);
  ASSERT_TRUE(req.ok()) << req.status();
  req->Controller("copier");
  const pluginpb::ReconcileCall call = req->Call();
  EXPECT_EQ(call.namespace_(), "team-a");
  EXPECT_EQ(call.name(), "settings");
  EXPECT_EQ(call.uid(), "uid-settings");
  EXPECT_EQ(call.attempt(), 1u);

  auto controller = MakeController();
  Outcome first = Reconcile(*controller, call);
  ASSERT_TRUE(first.ok()) << first.error_message();
  const nlohmann::json* copy = first.Desired("ConfigMap", "settings-copy");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ((*copy)["data"]["mode"], "fast");
  EXPECT_EQ((*copy)["metadata"]["namespace"], "team-a");
  EXPECT_EQ(first.status["copies"], 0);
  EXPECT_EQ(first.Condition("Ready")->status(), pluginpb::CONDITION_STATUS_FALSE);
  EXPECT_EQ(first.DesiredOfKind("ConfigMap").size(), 1u);

  // Round two: what was desired is now a child.
  req->ChildrenFrom(first);
  Outcome second = Reconcile(*controller, req->Call());
  EXPECT_EQ(second.status["copies"], 1);
  EXPECT_EQ(second.Condition("Ready")->status(), pluginpb::CONDITION_STATUS_TRUE);
  EXPECT_EQ(second.Condition("Nope"), nullptr);
}

TEST(HarnessTest, FinalizingGoneAndCapabilities) {
  auto controller = MakeController();
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  req.Finalizing();
  EXPECT_TRUE(req.primary()["metadata"].contains("deletionTimestamp"));
  Outcome fin = Reconcile(*controller, req.Call());
  EXPECT_TRUE(fin.finalized());

  Outcome gone = Reconcile(*controller, RequestBuilder::Gone("team-a", "settings").Call());
  EXPECT_TRUE(gone.ok());
  EXPECT_TRUE(gone.HasEvent("Gone"));
  EXPECT_FALSE(gone.HasEvent("Other"));

  // Without server-side apply in effect, desired objects are an error (retryable).
  Outcome no_ssa = Reconcile(*controller, RequestBuilder::FromYaml(kPrimary)->Call(), {});
  EXPECT_TRUE(no_ssa.retryable());
  EXPECT_NE(no_ssa.error_message().find("CAPABILITY_SERVER_SIDE_APPLY"), std::string::npos);
}

TEST(HarnessTest, RunsThroughAPlugin) {
  Plugin plugin("p", "1");
  plugin.Add(MakeController());
  RequestBuilder req = *RequestBuilder::FromYaml(kPrimary);
  EXPECT_TRUE(Reconcile(plugin, req.Controller("copier").Call()).ok());
  EXPECT_TRUE(Reconcile(plugin, req.Controller("other").Call()).terminal());
}

TEST(HarnessTest, LoadsFixtureFiles) {
  const std::string dir = std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string path = dir + "/fixture.yaml";
  {
    std::ofstream out(path);
    out << kPrimary << "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
  }
  absl::StatusOr<std::vector<nlohmann::json>> objs = LoadObjects(path);
  ASSERT_TRUE(objs.ok()) << objs.status();
  ASSERT_EQ(objs->size(), 2u);
  EXPECT_EQ((*objs)[1]["kind"], "Secret");
  absl::StatusOr<RequestBuilder> req = RequestBuilder::FromFile(path);
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->Call().name(), "settings");

  EXPECT_EQ(LoadObjects(dir + "/missing.yaml").status().code(), absl::StatusCode::kNotFound);
  {
    std::ofstream out(dir + "/bad.yaml");
    out << "a: [unclosed\n";
  }
  EXPECT_EQ(LoadObjects(dir + "/bad.yaml").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RequestBuilder::FromYaml("- a list").ok());
}

}  // namespace
}  // namespace ctrlhost::sdk::testing
