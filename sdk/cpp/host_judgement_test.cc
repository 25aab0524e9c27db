// The harness judges a reconcile as the live host does: every case of
// sdk/testdata/host_judgement_cases.json (the cases every SDK's harness passes).
//
// First contact: the harness accepted what the live host refuses (a desired kind the controller
// does not own; only `ctrlhost test --check` caught it), handed the plugin children without an
// owner reference and ignored the label selector.
#include "sdk/cpp/host_judgement.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

namespace ctrlhost::sdk::testing {
namespace {

using nlohmann::json;

json LoadCases() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string path = absl::StrCat(srcdir != nullptr ? srcdir : ".",
                                        "/ctrlhost/sdk/testdata/host_judgement_cases.json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

// The case's controller: it answers case["answer"] and records the children it was given.
std::shared_ptr<const Controller> CaseController(const json& c,
                                                 std::shared_ptr<std::vector<std::string>> seen) {
  const json& decl = c["controller"];
  ControllerBuilder builder(decl["name"].get<std::string>());
  builder.For(decl["primary"][0].get<std::string>(), decl["primary"][1].get<std::string>(),
              decl["primary"][2].get<std::string>());
  for (const json& o : decl["owns"]) {
    builder.Owns(o[0].get<std::string>(), o[1].get<std::string>(), o[2].get<std::string>());
  }
  if (decl.contains("labelSelector"))
    builder.LabelSelector(decl["labelSelector"].get<std::string>());
  if (decl.contains("namespaces")) {
    builder.Namespaces(decl["namespaces"].get<std::vector<std::string>>());
  }
  builder.Reconcile([answer = c["answer"], seen](const Request& req) {
    for (const Object& child : req.children()) {
      const json& ref = child.json["metadata"]["ownerReferences"][0];
      seen->push_back(absl::StrCat(child.name(), ":", ref.value("kind", ""), "/",
                                   ref.value("name", ""), "/", ref.value("uid", ""), "/",
                                   ref.value("controller", false) ? "true" : "false"));
    }
    Result r;
    for (const json& d : answer.value("desired", json::array())) r.Desire(d);
    if (answer.contains("status")) r.MergeStatus(answer["status"]);
    if (answer.contains("condition")) {
      r.SetCondition(answer["condition"][0].get<std::string>(), answer["condition"][1] == "True",
                     answer["condition"][2].get<std::string>());
    }
    if (answer.contains("statusPatch")) {
      r.PatchPrimaryStatus(PatchType::kMergePatch, answer["statusPatch"]);
    }
    if (answer.contains("ownedPatch")) {
      const json& p = answer["ownedPatch"];
      r.PatchOwned(p[0].get<std::string>(), p[1].get<std::string>(), p[2].get<std::string>(),
                   PatchType::kMergePatch, json::object());
    }
    if (answer.contains("event")) {
      const json& e = answer["event"];
      r.Event(e[0] == "Warning" ? EventType::kWarning : EventType::kNormal, e[1].get<std::string>(),
              e[2].get<std::string>());
    }
    return r;
  });
  absl::StatusOr<std::shared_ptr<const Controller>> built = builder.Build();
  EXPECT_TRUE(built.ok()) << built.status();
  return built.ok() ? *built : nullptr;
}

TEST(HostJudgementTest, EverySharedCase) {
  const json cases = LoadCases();
  ASSERT_TRUE(cases.is_object()) << "cannot read sdk/testdata/host_judgement_cases.json";
  ASSERT_GE(cases["cases"].size(), 20u);
  for (const json& c : cases["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto seen = std::make_shared<std::vector<std::string>>();
    std::shared_ptr<const Controller> controller = CaseController(c, seen);
    ASSERT_NE(controller, nullptr);
    RequestBuilder request = RequestBuilder::Gone("prod", "hi");
    if (!c["primary"].is_null()) {
      json primary = cases["primaries"][c["primary"].get<std::string>()];
      if (c.contains("labels")) primary["metadata"]["labels"] = c["labels"];
      request = RequestBuilder(primary);
    }
    request.Controller(controller->name());
    for (const json& child : c.value("children", json::array())) request.Child(child);
    for (const json& e : c.value("existing", json::array())) request.Existing(e);
    Outcome out = Reconcile(*controller, request);
    if (c.contains("notSent")) {
      EXPECT_NE(out.not_sent.find(c["notSent"].get<std::string>()), std::string::npos)
          << out.not_sent;
      EXPECT_EQ(out.not_sent.rfind("the host would not send this request: ", 0), 0u);
      EXPECT_FALSE(out.ok());
      EXPECT_TRUE(seen->empty()) << "a request the host would not send was run";
      continue;
    }
    EXPECT_FALSE(out.response.has_error()) << out.response.error().message();
    if (c["refused"].is_null()) {
      EXPECT_EQ(out.refused, "");
      EXPECT_TRUE(out.ok()) << out.error_message();
    } else {
      EXPECT_NE(out.refused.find(c["refused"].get<std::string>()), std::string::npos)
          << out.refused;
      EXPECT_EQ(out.error_message(), out.refused);
      EXPECT_FALSE(out.ok());
    }
    if (c.contains("childrenSeen")) {
      EXPECT_EQ(*seen, c["childrenSeen"].get<std::vector<std::string>>());
    }
  }
}

TEST(HostJudgementTest, StatusOnEveryKindWithoutAStatusSubresourceIsRefused) {
  const json cases = LoadCases();
  ASSERT_EQ(cases["withoutStatusSubresource"].size(), 20u);
  for (const json& gk : cases["withoutStatusSubresource"]) {
    const std::string group = gk[0].get<std::string>();
    const std::string kind = gk[1].get<std::string>();
    SCOPED_TRACE(kind);
    const std::string api_version = group.empty() ? "v1" : absl::StrCat(group, "/v1");
    std::shared_ptr<const Controller> controller = *ControllerBuilder("statusful")
                                                        .For(group, "v1", kind)
                                                        .Reconcile([](const Request&) {
                                                          Result r;
                                                          r.MergeStatus({{"phase", "Done"}});
                                                          return r;
                                                        })
                                                        .Build();
    const json obj = {{"apiVersion", api_version},
                      {"kind", kind},
                      {"metadata", {{"name", "x"}, {"namespace", "prod"}, {"uid", "u-x"}}}};
    EXPECT_EQ(
        Reconcile(*controller, RequestBuilder(obj).Controller("statusful")).refused,
        absl::StrCat("the host would refuse this answer: status: kind ", api_version, " ", kind,
                     " has no status subresource, so it has no status to write; record the "
                     "outcome with an event instead"));
  }
}

TEST(HostJudgementTest, ThroughAPluginAndARawCall) {
  const json cases = LoadCases();
  const json& c = cases["cases"][0];  // a desired Secret the controller does not own
  Plugin plugin("p", "1");
  plugin.Add(CaseController(c, std::make_shared<std::vector<std::string>>()));
  const pluginpb::ReconcileCall call =
      RequestBuilder(cases["primaries"]["greeting"]).Controller("greeter").Call();
  EXPECT_EQ(Reconcile(plugin, call).refused,
            "the host would refuse this answer: desired_objects[1]: kind v1 Secret is not owned by "
            "controller greeter");
  EXPECT_EQ(Reconcile(*plugin.Find("greeter"), call).refused, Reconcile(plugin, call).refused);
}

TEST(HostJudgementTest, SelectorSyntax) {
  const std::map<std::string, std::string> labels = {{"a", "1"}, {"b", "2"}};
  EXPECT_TRUE(*MatchesSelector("a=1, b==2", labels));
  EXPECT_TRUE(*MatchesSelector("a!=2,c!=1,!c,a", labels));
  EXPECT_TRUE(*MatchesSelector("b in (1, 2),c notin (x)", labels));
  EXPECT_FALSE(*MatchesSelector("a notin (1)", labels));
  EXPECT_FALSE(MatchesSelector("a in 1", labels).ok());
  EXPECT_FALSE(MatchesSelector("a,,b", labels).ok());
  EXPECT_FALSE(HasStatusSubresource("", "ConfigMap"));
  EXPECT_TRUE(HasStatusSubresource("apps", "Deployment"));
}

}  // namespace
}  // namespace ctrlhost::sdk::testing
