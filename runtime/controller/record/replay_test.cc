#include "runtime/controller/record/replay.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/controller/record/recording.h"

namespace ctrlhost::controller::record {
namespace {

using ::testing::HasSubstr;

pluginpb::RecordingHeader Header(bool secret_data = false) {
  ControllerInfo info;
  info.name = "webapp";
  info.primary = {"example.com", "v1", "webapps", "WebApp", true, true, {}};
  info.owns.push_back({{"", "v1", "services", "Service", true, false, {}}, false});
  info.owns.push_back({{"", "v1", "secrets", "Secret", true, false, {}}, false});
  info.field_manager = "ctrlhost-webapp";
  pluginpb::RecordingHeader header;
  header.set_format(kFormat);
  *header.mutable_controller() = ToRecorded(info);
  header.set_secret_data(secret_data);
  return header;
}

std::string Service(int port) {
  return nlohmann::json{{"apiVersion", "v1"},
                        {"kind", "Service"},
                        {"metadata", {{"name", "web"}}},
                        {"spec", {{"ports", {{{"port", port}}}}}}}
      .dump();
}

constexpr char kSecret[] =
    R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"web"},"data":{"pw":"aHVudGVyMg=="}})";

pluginpb::ReconcileRecord Recorded(const std::string& desired) {
  pluginpb::ReconcileRecord r;
  r.mutable_call()->set_controller("webapp");
  r.mutable_call()->set_namespace_("team");
  r.mutable_call()->set_name("web");
  r.mutable_call()->set_attempt(1);
  r.mutable_call()->set_object(
      R"({"apiVersion":"example.com/v1","kind":"WebApp","metadata":{"name":"web","namespace":"team","uid":"u1"}})");
  r.mutable_response()->add_desired_objects(desired);
  return r;
}

pluginpb::ReconcileResponse Answer(const std::string& desired) {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(desired);
  return response;
}

TEST(ReplayJudge, TheSameAnswerIsTheSameAndAChangedPortIsShownAsSuch) {
  ReplayJudge judge(Header());
  EXPECT_EQ(judge.controller().primary.kind, "WebApp");
  const pluginpb::ReconcileRecord record = Recorded(Service(80));
  EXPECT_TRUE(judge.Compare(record, Answer(Service(80))).same);
  apply::OutcomeDiff diff = judge.Compare(record, Answer(Service(8080)));
  EXPECT_FALSE(diff.same);
  EXPECT_EQ(diff.summary, "applies");
  ASSERT_EQ(diff.patch.size(), 1u);
  EXPECT_THAT(diff.patch[0]["path"].get<std::string>(), HasSubstr("/spec/ports/0/port"));
  EXPECT_EQ(diff.patch[0]["value"], 8080);
}

TEST(ReplayJudge, SecretValuesAreComparedByDigestWhenTheRecordingHasDigests) {
  pluginpb::ReconcileRecord record = Recorded(kSecret);
  RedactSecrets(record.mutable_response(), false);  // as the recorder stored it
  EXPECT_TRUE(ReplayJudge(Header()).Compare(record, Answer(kSecret)).same);
  std::string other = kSecret;
  other.replace(other.find("aHVudGVyMg=="), 12, "b3RoZXI=");
  EXPECT_FALSE(ReplayJudge(Header()).Compare(record, Answer(other)).same);
  // Recorded with secretData: include, the values are compared as they are.
  EXPECT_TRUE(ReplayJudge(Header(true)).Compare(Recorded(kSecret), Answer(kSecret)).same);
}

// A controller that copies a Secret's value into its answer gets a digest in a replayed call and
// answers with it: not digested twice, so it answers as recorded.
TEST(ReplayJudge, ACopiedSecretValueIsNotDigestedTwice) {
  pluginpb::ReconcileRecord record = Recorded(kSecret);
  RedactSecrets(record.mutable_call());
  RedactSecrets(record.mutable_response(), false);
  std::string replayed = kSecret;
  replayed.replace(replayed.find("aHVudGVyMg=="), 12, SecretDigest("aHVudGVyMg=="));
  EXPECT_TRUE(ReplayJudge(Header()).Compare(record, Answer(replayed)).same);
}

TEST(ReplayJudge, APluginThatFailsNowDiffers) {
  apply::OutcomeDiff diff = ReplayJudge(Header()).Compare(
      Recorded(Service(80)), DispatchResult(absl::UnavailableError("plugin crashed")));
  EXPECT_FALSE(diff.same);
}

}  // namespace
}  // namespace ctrlhost::controller::record
