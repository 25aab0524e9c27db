#include "runtime/controller/record/recording.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ctrlhost::controller::record {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string NewDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

pluginpb::RecordingHeader Header(const std::string& controller) {
  pluginpb::RecordingHeader h;
  h.set_format(kFormat);
  h.set_operator_("web");
  h.set_plugin("webapp");
  h.mutable_controller()->set_name(controller);
  return h;
}

pluginpb::ReconcileRecord Record(uint64_t sequence, const std::string& name) {
  pluginpb::ReconcileRecord r;
  r.set_sequence(sequence);
  r.mutable_call()->set_controller("webapp");
  r.mutable_call()->set_namespace_("team");
  r.mutable_call()->set_name(name);
  r.mutable_response()->add_desired_objects(R"({"apiVersion":"v1","kind":"ConfigMap"})");
  return r;
}

TEST(FileNames, AreNumberedAndParsedBack) {
  EXPECT_EQ(FileName(42), "00000042.ctrlrec");
  EXPECT_EQ(FileIndex("/a/b/00000042.ctrlrec"), 42u);
  EXPECT_EQ(FileIndex("123456789.ctrlrec"), 123456789u);
  EXPECT_EQ(FileIndex("42.ctrlrec"), std::nullopt);
  EXPECT_EQ(FileIndex("0000004x.ctrlrec"), std::nullopt);
  EXPECT_EQ(FileIndex("00000042.ctrlrec.tmp"), std::nullopt);
}

TEST(SecretDigest, IsSha256InHex) {
  EXPECT_EQ(SecretDigest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(RedactSecrets, ReplacesSecretValuesInCallsAndLeavesOtherKindsAlone) {
  pluginpb::ReconcileCall call;
  call.set_object(R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},
                      "data":{"password":"aHVudGVyMg=="},"stringData":{"token":"t","n":1}})");
  pluginpb::RawObject* child = call.add_children();
  child->set_object(R"({"apiVersion":"v1","kind":"ConfigMap","data":{"Secret":"plain"}})");
  pluginpb::RawObject* related = call.add_related_objects();
  related->set_object(R"({"apiVersion":"v1","kind":"Secret","data":{"k":"dg=="}})");
  RedactSecrets(&call);
  const json object = json::parse(call.object());
  EXPECT_EQ(object["data"]["password"], SecretDigest("aHVudGVyMg=="));
  EXPECT_EQ(object["stringData"]["token"], SecretDigest("t"));
  EXPECT_EQ(object["stringData"]["n"], "redacted");
  EXPECT_EQ(object["metadata"]["name"], "s");
  EXPECT_EQ(json::parse(call.children(0).object())["data"]["Secret"], "plain");
  EXPECT_EQ(json::parse(call.related_objects(0).object())["data"]["k"], SecretDigest("dg=="));
}

TEST(RedactSecrets, MayHoldSecretsIsFalseOnlyWhereRedactingChangesNothing) {
  pluginpb::ReconcileCall call;
  call.set_object(R"({"apiVersion":"v1","kind":"ConfigMap","data":{"k":"v"}})");
  call.add_children()->set_object(R"({"kind":"Deployment"})");
  EXPECT_FALSE(MayHoldSecrets(call));
  const std::string before = call.SerializeAsString();
  RedactSecrets(&call);
  EXPECT_EQ(call.SerializeAsString(), before);
  // A Secret in any place of the call: its children, its related objects.
  pluginpb::ReconcileCall child = call;
  child.add_children()->set_object(R"({"apiVersion":"v1","kind":"Secret","data":{"k":"dg=="}})");
  EXPECT_TRUE(MayHoldSecrets(child));
  pluginpb::ReconcileCall related = call;
  related.add_related_objects()->set_object(R"({"apiVersion":"v1","kind":"Secret"})");
  EXPECT_TRUE(MayHoldSecrets(related));
}

TEST(RedactSecrets, ReplacesSecretValuesInDesiredObjectsAndPatches) {
  pluginpb::ReconcileResponse response;
  response.add_desired_objects(R"({"apiVersion":"v1","kind":"Secret","data":{"a":"YQ=="}})");
  pluginpb::Patch* merge = response.add_patches();
  merge->set_target(pluginpb::PATCH_TARGET_OWNED);
  merge->set_api_version("v1");
  merge->set_kind("Secret");
  merge->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  merge->set_patch(R"({"data":{"a":"Yg=="},"metadata":{"labels":{"x":"y"}}})");
  pluginpb::Patch* ops = response.add_patches();
  *ops = *merge;
  ops->set_type(pluginpb::PATCH_TYPE_JSON_PATCH);
  ops->set_patch(R"([{"op":"add","path":"/data/b","value":"Yw=="},
                     {"op":"replace","path":"/stringData","value":{"c":"d"}},
                     {"op":"add","path":"/metadata/labels/x","value":"kept"}])");
  pluginpb::Patch* configmap = response.add_patches();
  *configmap = *merge;
  configmap->set_kind("ConfigMap");
  RedactSecrets(&response, /*primary_is_secret=*/false);
  EXPECT_EQ(json::parse(response.desired_objects(0))["data"]["a"], SecretDigest("YQ=="));
  const json m = json::parse(response.patches(0).patch());
  EXPECT_EQ(m["data"]["a"], SecretDigest("Yg=="));
  EXPECT_EQ(m["metadata"]["labels"]["x"], "y");
  const json j = json::parse(response.patches(1).patch());
  EXPECT_EQ(j[0]["value"], SecretDigest("Yw=="));
  EXPECT_EQ(j[1]["value"]["c"], SecretDigest("d"));
  EXPECT_EQ(j[2]["value"], "kept");
  EXPECT_EQ(json::parse(response.patches(2).patch())["data"]["a"], "Yg==");
}

TEST(RedactSecrets, PatchesOfAPrimarySecret) {
  pluginpb::ReconcileResponse response;
  pluginpb::Patch* p = response.add_patches();
  p->set_target(pluginpb::PATCH_TARGET_PRIMARY);
  p->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  p->set_patch(R"({"data":{"a":"YQ=="}})");
  pluginpb::ReconcileResponse untouched = response;
  RedactSecrets(&untouched, /*primary_is_secret=*/false);
  EXPECT_EQ(json::parse(untouched.patches(0).patch())["data"]["a"], "YQ==");
  RedactSecrets(&response, /*primary_is_secret=*/true);
  EXPECT_EQ(json::parse(response.patches(0).patch())["data"]["a"], SecretDigest("YQ=="));
}

TEST(ControllerInfo, RoundTripsThroughTheHeader) {
  ControllerInfo info;
  info.name = "webapp";
  info.primary = {"example.com", "v1", "webapps", "WebApp", true, true, {}};
  info.owns.push_back({{"apps", "v1", "deployments", "Deployment", true, true, {}}, true});
  info.finalizer = "example.com/cleanup";
  info.field_manager = "ctrlhost-webapp";
  info.host_status = true;
  pluginpb::RecordingHeader header = Header("webapp");
  *header.mutable_controller() = ToRecorded(info);
  const ControllerInfo back = FromRecorded(header);
  EXPECT_EQ(back.operator_name, "web");
  EXPECT_EQ(back.plugin, "webapp");
  EXPECT_EQ(back.name, "webapp");
  EXPECT_EQ(back.primary.resource, "webapps");
  EXPECT_TRUE(back.primary.namespaced);
  ASSERT_EQ(back.owns.size(), 1u);
  EXPECT_EQ(back.owns[0].mapping.kind, "Deployment");
  EXPECT_TRUE(back.owns[0].delete_absent);
  EXPECT_EQ(back.finalizer, "example.com/cleanup");
  EXPECT_TRUE(back.host_status);
}

TEST(RecordingReader, ReadsWhatWasFramed) {
  const std::string dir = NewDir("reads");
  const std::string path = dir + "/" + FileName(1);
  WriteFile(path, FileStart(Header("webapp")) + Frame(Record(1, "a")) + Frame(Record(2, "b")));
  absl::StatusOr<std::unique_ptr<RecordingReader>> reader = RecordingReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->header().controller().name(), "webapp");
  auto first = (*reader)->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->call().name(), "a");
  EXPECT_EQ((*reader)->offset(), FileStart(Header("webapp")).size());
  auto second = (*reader)->Next();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->sequence(), 2u);
  auto end = (*reader)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(RecordingReader, ARecordCutShortNamesTheFileAndOffset) {
  const std::string dir = NewDir("cut");
  const std::string path = dir + "/" + FileName(1);
  const std::string start = FileStart(Header("webapp")) + Frame(Record(1, "a"));
  const std::string second = Frame(Record(2, "b"));
  WriteFile(path, start + second.substr(0, second.size() - 3));
  auto reader = RecordingReader::Open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Next().ok());
  absl::StatusOr<std::optional<pluginpb::ReconcileRecord>> cut = (*reader)->Next();
  EXPECT_TRUE(absl::IsDataLoss(cut.status())) << cut.status();
  EXPECT_EQ(
      cut.status().message(),
      absl::StrCat(path, ": record at offset ", start.size(), " is cut short (", second.size() - 3,
                   " of ", second.size(), " bytes): the recording was interrupted"));

  // Cut inside the length prefix of a large record.
  pluginpb::ReconcileRecord big = Record(3, std::string(300, 'x'));
  WriteFile(path, start + Frame(big).substr(0, 1));
  reader = RecordingReader::Open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Next().ok());
  cut = (*reader)->Next();
  EXPECT_TRUE(absl::IsDataLoss(cut.status()));
  EXPECT_EQ(cut.status().message(),
            absl::StrCat(path, ": record at offset ", start.size(),
                         " is cut short (1 of 2 bytes): the recording was interrupted"));
}

TEST(RecordingReader, RefusesOtherFilesNewerFormatsAndGarbage) {
  const std::string dir = NewDir("refuses");
  const std::string path = dir + "/" + FileName(1);
  WriteFile(path, "apiVersion: v1\nkind: ConfigMap\n");
  auto reader = RecordingReader::Open(path);
  EXPECT_EQ(reader.status().message(),
            path + ": not a ctrlhost recording (no CTRLREC magic at offset 0)");

  pluginpb::RecordingHeader newer = Header("webapp");
  newer.set_format(2);
  WriteFile(path, FileStart(newer));
  reader = RecordingReader::Open(path);
  EXPECT_TRUE(absl::IsFailedPrecondition(reader.status()));
  EXPECT_EQ(reader.status().message(),
            path + ": recording format 2 is newer than this reader (it reads format 1)");

  WriteFile(path, std::string(kMagic));
  reader = RecordingReader::Open(path);
  EXPECT_TRUE(absl::IsDataLoss(reader.status()));
  EXPECT_THAT(reader.status().message(), HasSubstr("ends before its header at offset 8"));

  const std::string start = FileStart(Header("webapp"));
  WriteFile(path, start + std::string("\x03\xff\xff\xff", 4));
  reader = RecordingReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto bad = (*reader)->Next();
  EXPECT_EQ(bad.status().message(), absl::StrCat(path, ": record at offset ", start.size(),
                                                 " is not a valid ReconcileRecord"));

  WriteFile(path, start + std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x01", 9));
  reader = RecordingReader::Open(path);
  ASSERT_TRUE(reader.ok());
  bad = (*reader)->Next();
  EXPECT_THAT(bad.status().message(), HasSubstr("more than the limit"));
}

TEST(FindRecording, TakesAFileADirectoryOrOneControllersSubdirectory) {
  const std::string dir = NewDir("find");
  std::filesystem::create_directories(dir + "/webapp");
  std::filesystem::create_directories(dir + "/other");
  WriteFile(dir + "/webapp/" + FileName(2), FileStart(Header("webapp")));
  WriteFile(dir + "/webapp/" + FileName(10), FileStart(Header("webapp")));
  WriteFile(dir + "/webapp/notes.txt", "x");

  auto files = FindRecording(dir + "/webapp", "");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir + "/webapp/" + FileName(2), dir + "/webapp/" + FileName(10)));
  files = FindRecording(dir, "");
  ASSERT_TRUE(files.ok()) << files.status();  // "other" holds no recording
  EXPECT_EQ(files->size(), 2u);
  files = FindRecording(dir + "/webapp/" + FileName(2), "");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 1u);

  WriteFile(dir + "/other/" + FileName(1), FileStart(Header("other")));
  files = FindRecording(dir, "");
  EXPECT_EQ(files.status().message(),
            dir +
                ": holds recordings of several controllers (found: other, webapp): name one "
                "with --controller");
  files = FindRecording(dir, "other");
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, ElementsAre(dir + "/other/" + FileName(1)));
  files = FindRecording(dir, "missing");
  EXPECT_TRUE(absl::IsNotFound(files.status()));
  EXPECT_EQ(files.status().message(),
            dir + ": holds no recording of controller missing (found: other, webapp)");
  files = FindRecording(dir + "/nowhere", "");
  EXPECT_TRUE(absl::IsNotFound(files.status()));
}

}  // namespace
}  // namespace ctrlhost::controller::record
