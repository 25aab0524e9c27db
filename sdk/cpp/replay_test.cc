#include "sdk/cpp/replay.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "sdk/cpp/testing.h"

// The recordings here are written by the test itself, following the format of plugin.proto
// ("Recordings") rather than with the code under test: "CTRLREC\n", then the header and the
// records, each preceded by its length as a varint. Digests are `printf %s VALUE | sha256sum`.

namespace ctrlhost::sdk::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kS3cret[] =
    "sha256:1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0";
constexpr char kS3cret2[] =
    "sha256:3aa6105397818553ae8fc3fe6d29ad25a839a93a9c9d7e74a4cc2f8a45b54716";
constexpr char kX[] = "sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
constexpr char kY[] = "sha256:a1fce4363854ff888cff4b8e7875d600c2682390412a8cf79b37d0b11148b0fa";
constexpr char kNew[] = "sha256:11507a0e2f5e69d5dfa40a62a1bd7b6ee57e6bcd85c67c9b8431b36fff21c437";

// What differs between the recorded greeter and the new one.
struct GreeterOptions {
  std::function<std::string(const std::string&)> text = [](const std::string& who) {
    return absl::StrCat("Hello, ", who, "!");
  };
  std::function<std::string(const std::string&)> token = [](const std::string& t) { return t; };
  std::string throw_for;                          // throws when spec.name is this
  std::function<void(Result*)> extra;             // more outcomes
  std::function<void(ControllerBuilder*)> build;  // changes to the declaration
};

// A ConfigMap, a Secret when spec.token is set, a status, a condition and an event; a retryable
// error carrying a changing counter when spec.name is missing.
std::shared_ptr<const Controller> Greeter(GreeterOptions o = {}) {
  ControllerBuilder builder("greeter");
  builder.For("example.com", "v1", "Greeting").Owns("", "v1", "ConfigMap").Owns("", "v1", "Secret");
  builder.Reconcile([o](const Request& req) {
    static int checks = 0;
    const std::string who = req.spec().value("name", "");
    if (who.empty()) {
      return Result::RetryableError(absl::StrCat("spec.name is missing (check ", ++checks, ")"));
    }
    if (who == o.throw_for) throw std::runtime_error("no greeting for " + who);
    Result r;
    r.Desire(NewObject("v1", "ConfigMap", req.name() + "-greeting"))["data"]["text"] = o.text(who);
    if (const std::string token = req.spec().value("token", ""); !token.empty()) {
      r.Desire(NewObject("v1", "Secret", req.name() + "-token"))["stringData"]["token"] =
          o.token(token);
    }
    r.Status()["greetings"] = 1;
    r.SetCondition("Ready", true, "Greeted");
    r.Event(EventType::kNormal, "Greeted", o.text(who));
    if (o.extra) o.extra(&r);
    return r;
  });
  if (o.build) o.build(&builder);
  absl::StatusOr<std::shared_ptr<const Controller>> c = builder.Build();
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

pluginpb::ReconcileCall GreetingCall(const std::string& name, const json& spec) {
  pluginpb::ReconcileCall call;
  call.set_controller("greeter");
  call.set_namespace_("prod");
  call.set_name(name);
  call.set_uid("u-" + name);
  call.set_reason(pluginpb::REASON_PRIMARY_CHANGED);
  call.set_attempt(1);
  call.set_object(json{
      {"apiVersion", "example.com/v1"},
      {"kind", "Greeting"},
      {"metadata", {{"name", name}, {"namespace", "prod"}, {"uid", "u-" + name}}},
      {"spec", spec}}.dump());
  return call;
}

// The record the host would have written for c's answer to `call`: Secrets redacted (the test
// knows the only value, "s3cret"), desired objects in reverse order and 1 written as 1.0, which
// must not count.
pluginpb::ReconcileRecord Recorded(const Controller& c, uint64_t seq,
                                   pluginpb::ReconcileCall call) {
  pluginpb::ReconcileRecord r;
  pluginpb::ReconcileResponse* resp = r.mutable_response();
  *resp = Invoke(c, seq, call, AllSdkCapabilities());
  std::vector<std::string> desired(resp->desired_objects().rbegin(),
                                   resp->desired_objects().rend());
  resp->clear_desired_objects();
  for (std::string d : desired) {
    resp->add_desired_objects(
        absl::StrReplaceAll(d, {{"\"s3cret\"", absl::StrCat("\"", kS3cret, "\"")}}));
  }
  resp->set_status(absl::StrReplaceAll(resp->status(), {{":1}", ":1.0}"}}));
  r.set_sequence(seq);
  *r.mutable_call() = std::move(call);
  r.mutable_time()->set_seconds(1700000000 + seq);
  r.mutable_took()->set_nanos(3000000);
  for (pluginpb::Capability cap : AllSdkCapabilities()) r.add_capabilities(cap);
  r.mutable_action()->set_result(pluginpb::HOST_ACTION_RESULT_WRITTEN);
  r.mutable_action()->set_writes(3);
  return r;
}

pluginpb::ReconcileRecord Failed(uint64_t seq) {
  pluginpb::ReconcileRecord r;
  r.set_sequence(seq);
  *r.mutable_call() = GreetingCall("hi", {{"name", "Ada"}});
  r.mutable_failure()->set_code(4);
  r.mutable_failure()->set_message("deadline exceeded");
  return r;
}

pluginpb::RecordingHeader Header(const std::string& controller) {
  pluginpb::RecordingHeader h;
  h.set_format(1);
  h.set_operator_("greetings");
  h.set_plugin("greeter-plugin");
  h.set_host_version("0.9.0");
  h.mutable_controller()->set_name(controller);
  pluginpb::RecordedKind* primary = h.mutable_controller()->mutable_primary();
  primary->set_group("example.com");
  primary->set_version("v1");
  primary->set_resource("greetings");
  primary->set_kind("Greeting");
  primary->set_namespaced(true);
  primary->set_has_status(true);
  return h;
}

std::string Varint(uint64_t n) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteVarint64(n);
  }
  return out;
}

std::string Frame(const google::protobuf::MessageLite& m) {
  const std::string body = m.SerializeAsString();
  return Varint(body.size()) + body;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

void WriteRecording(const std::string& path, const pluginpb::RecordingHeader& h,
                    const std::vector<pluginpb::ReconcileRecord>& records) {
  std::string data = absl::StrCat("CTRLREC\n", Frame(h));
  for (const pluginpb::ReconcileRecord& r : records) data += Frame(r);
  WriteFile(path, data);
}

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/replay-XXXXXX");
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

// Ada (with a Secret) and a failed dispatch, then Bob and a Greeting without a name.
void GreeterRecording(const std::string& dir) {
  auto c = Greeter();
  WriteRecording(
      dir + "/00000001.ctrlrec", Header("greeter"),
      {Recorded(*c, 1, GreetingCall("hi", {{"name", "Ada"}, {"token", "s3cret"}})), Failed(2)});
  WriteRecording(dir + "/00000002.ctrlrec", Header("greeter"),
                 {Recorded(*c, 3, GreetingCall("ho", {{"name", "Bob"}})),
                  Recorded(*c, 4, GreetingCall("nameless", json::object()))});
}

std::vector<std::string> Keys(const ReplayResult& res) {
  std::vector<std::string> keys;
  for (const ReplayDifference& d : res.differences) {
    keys.push_back(absl::StrCat(d.key, ": ", absl::StrJoin(d.members, ", ")));
  }
  return keys;
}

using Strings = std::vector<std::string>;

TEST(ReplayTest, TheSameControllerFindsNoDifference) {
  const std::string dir = TempDir();
  GreeterRecording(dir);
  absl::StatusOr<ReplayResult> res = Replay(*Greeter(), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->compared, 3);
  EXPECT_EQ(res->same, 3) << res->Summary();
  EXPECT_EQ(res->skipped, 1);
  EXPECT_EQ(res->files, Strings({dir + "/00000001.ctrlrec", dir + "/00000002.ctrlrec"}));
  EXPECT_TRUE(ReplayMatches(*Greeter(), dir));
  // A single file, and a directory with one subdirectory per controller.
  res = Replay(*Greeter(), dir + "/00000002.ctrlrec");
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->same, 2);
  const std::string root = TempDir();
  GreeterRecording(root + "/greeter");
  EXPECT_TRUE(ReplayMatches(*Greeter(), root));
}

TEST(ReplayTest, AChangedControllerNamesExactlyTheChangedKeys) {
  const std::string dir = TempDir();
  GreeterRecording(dir);
  GreeterOptions o;
  o.text = [](const std::string& who) {
    return who == "Bob" ? std::string("Hi, Bob.") : absl::StrCat("Hello, ", who, "!");
  };
  absl::StatusOr<ReplayResult> res = Replay(*Greeter(o), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(Keys(*res), Strings({"prod/ho: desired, events"})) << res->Summary();
  const ReplayDifference& d = res->differences[0];
  EXPECT_EQ(d.file, dir + "/00000002.ctrlrec");
  EXPECT_EQ(d.offset, 8 + Frame(Header("greeter")).size());
  EXPECT_EQ(d.sequence, 3u);
  EXPECT_EQ(d.patch, json::parse(R"([
    {"op": "replace", "path": "/desired/v1 ConfigMap prod~1ho-greeting/data/text", "value": "Hi, Bob."},
    {"op": "replace", "path": "/events/0/message", "value": "Hi, Bob."}])"));
  EXPECT_EQ(d.ToString(),
            absl::StrCat(dir, "/00000002.ctrlrec: record at offset ", d.offset,
                         " (sequence 3) prod/ho: desired, events differ\n"
                         "    ~ /desired/v1 ConfigMap prod~1ho-greeting/data/text: \"Hello, Bob!\" "
                         "-> \"Hi, Bob.\"\n"
                         "    ~ /events/0/message: \"Hello, Bob!\" -> \"Hi, Bob.\""));
}

TEST(ReplayTest, ComparesSecretsRedactedAndErrorsByKindAndReason) {
  const std::string dir = TempDir();
  GreeterRecording(dir);
  GreeterOptions o;
  o.token = [](const std::string& t) { return t + "2"; };
  absl::StatusOr<ReplayResult> res = Replay(*Greeter(o), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(Keys(*res), Strings({"prod/hi: desired"}));
  const std::string text = res->Summary();
  EXPECT_EQ(text.find("s3cret"), std::string::npos) << text;
  EXPECT_NE(text.find(kS3cret2), std::string::npos) << text;
  // An exception is the new run's answer (a retryable error), compared like any other.
  o = GreeterOptions();
  o.throw_for = "Bob";
  res = Replay(*Greeter(o), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(Keys(*res), Strings({"prod/ho: desired, status, conditions, events, error"}));
  EXPECT_EQ(res->differences[0].replayed["error"], json({{"kind", "retryable"}}));
  // An error's kind counts (its message does not: "nameless" carries a new count each run).
  o = GreeterOptions();
  o.build = [](ControllerBuilder* b) {
    b->Reconcile([](const Request&) { return Result::TerminalError("spec.name is missing"); });
  };
  res = Replay(*Greeter(o), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->different, 3);
  EXPECT_EQ(res->differences[2].replayed["error"], json({{"kind", "terminal"}}));
}

TEST(ReplayTest, RedactsPatchesOfSecrets) {
  GreeterOptions o;
  o.extra = [](Result* r) {
    r->PatchOwned("v1", "Secret", "hi-token", PatchType::kMergePatch,
                  {{"data", {{"a", "x"}}}, {"stringData", {{"b", 2}}}});
    r->PatchOwned("v1", "Secret", "hi-token", PatchType::kJsonPatch,
                  json::parse(R"([{"op": "add", "path": "/data/a", "value": "x"},
                                  {"op": "replace", "path": "/stringData", "value": {"b": "y"}},
                                  {"op": "remove", "path": "/data/c"}])"));
    r->PatchOwned("v1", "ConfigMap", "hi-greeting", PatchType::kMergePatch,
                  {{"data", {{"a", "x"}}}});
  };
  auto c = Greeter(o);
  pluginpb::ReconcileRecord rec = Recorded(*c, 1, GreetingCall("hi", {{"name", "Ada"}}));
  auto* patches = rec.mutable_response()->mutable_patches();
  (*patches)[0].set_patch(json{{"data", {{"a", kX}}}, {"stringData", {{"b", "redacted"}}}}.dump());
  (*patches)[1].set_patch(
      json::array({{{"op", "add"}, {"path", "/data/a"}, {"value", kX}},
                   {{"op", "replace"}, {"path", "/stringData"}, {"value", {{"b", kY}}}},
                   {{"op", "remove"}, {"path", "/data/c"}}})
          .dump());
  const std::string dir = TempDir();
  WriteRecording(dir + "/00000001.ctrlrec", Header("greeter"), {rec});
  EXPECT_TRUE(ReplayMatches(*c, dir));
  // With secret data recorded, the values are compared as they are.
  pluginpb::RecordingHeader h = Header("greeter");
  h.set_secret_data(true);
  WriteRecording(dir + "/00000001.ctrlrec", h, {rec});
  absl::StatusOr<ReplayResult> res = Replay(*c, dir);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(Keys(*res), Strings({"prod/hi: patches"}));
}

TEST(ReplayTest, RedactsPatchesOfASecretPrimary) {
  auto c = *ControllerBuilder("rotator")
                .For("", "v1", "Secret")
                .Reconcile([](const Request&) {
                  Result r;
                  r.PatchPrimary(PatchType::kMergePatch, {{"data", {{"k", "new"}}}});
                  return r;
                })
                .Build();
  pluginpb::ReconcileRecord rec;
  rec.set_sequence(1);
  rec.mutable_call()->set_controller("rotator");
  rec.mutable_call()->set_namespace_("prod");
  rec.mutable_call()->set_name("s");
  rec.mutable_call()->set_object(
      R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"prod"}})");
  pluginpb::Patch* p = rec.mutable_response()->add_patches();
  p->set_target(pluginpb::PATCH_TARGET_PRIMARY);
  p->set_type(pluginpb::PATCH_TYPE_MERGE_PATCH);
  p->set_patch(json{{"data", {{"k", kNew}}}}.dump());
  pluginpb::RecordingHeader h = Header("rotator");
  h.mutable_controller()->mutable_primary()->set_group("");
  h.mutable_controller()->mutable_primary()->set_kind("Secret");
  const std::string dir = TempDir();
  WriteRecording(dir + "/00000001.ctrlrec", h, {rec});
  EXPECT_TRUE(ReplayMatches(*c, dir));
}

TEST(ReplayTest, UpdateRewritesTheChangedFilesThenReplaysClean) {
  const std::string dir = TempDir();
  GreeterRecording(dir);
  chmod((dir + "/00000002.ctrlrec").c_str(), 0640);
  const std::string first = ReadFile(dir + "/00000001.ctrlrec");
  const std::string before = ReadFile(dir + "/00000002.ctrlrec");
  GreeterOptions o;
  o.text = [](const std::string& who) { return absl::StrCat("Hi, ", who, "."); };
  auto changed = Greeter(o);
  absl::StatusOr<ReplayResult> res = Replay(*changed, dir, {.update = true});
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->different, 2);
  EXPECT_EQ(res->updated, res->files);
  EXPECT_TRUE(ReplayMatches(*changed, dir, {.update = true}));
  EXPECT_TRUE(ReplayMatches(*changed, dir));
  res = Replay(*Greeter(), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->different, 2) << "the old controller against the updated recording";
  // The header, the skipped record and the record that did not change keep their bytes; the
  // changed one keeps every field but its answer, and the file its mode.
  const std::string after = ReadFile(dir + "/00000002.ctrlrec");
  const size_t start = 8 + Frame(Header("greeter")).size();
  EXPECT_EQ(after.substr(0, start), before.substr(0, start));
  const std::string failed = Frame(Failed(2));
  EXPECT_EQ(first.substr(first.size() - failed.size()), failed);
  const std::string first_after = ReadFile(dir + "/00000001.ctrlrec");
  EXPECT_EQ(first_after.substr(first_after.size() - failed.size()), failed);
  absl::StatusOr<RecordingFile> file = ReadRecording(dir + "/00000002.ctrlrec");
  ASSERT_TRUE(file.ok()) << file.status();
  pluginpb::ReconcileRecord rec = file->records[0].record;
  pluginpb::ReconcileRecord want = Recorded(*Greeter(), 3, GreetingCall("ho", {{"name", "Bob"}}));
  EXPECT_NE(rec.response().desired_objects(0).find("Hi, Bob."), std::string::npos);
  rec.clear_response();
  want.clear_response();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(rec, want)) << rec.DebugString();
  struct stat info;
  ASSERT_EQ(stat((dir + "/00000002.ctrlrec").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2)
      << "temporary files left";
}

TEST(ReplayTest, RefusesBrokenRecordingsNamingFileAndOffset) {
  const std::string dir = TempDir();
  const std::string good = dir + "/good.ctrlrec";
  WriteRecording(good, Header("greeter"),
                 {Recorded(*Greeter(), 1, GreetingCall("hi", {{"name", "Ada"}}))});
  const std::string data = ReadFile(good);
  const size_t start = 8 + Frame(Header("greeter")).size();
  pluginpb::RecordingHeader newer = Header("greeter");
  newer.set_format(2);
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"magic", "CTRLREX\n" + data.substr(8),
       "not a ctrlhost recording (no CTRLREC magic at offset 0)"},
      {"empty", "", "not a ctrlhost recording (no CTRLREC magic at offset 0)"},
      {"format", "CTRLREC\n" + Frame(newer),
       "recording format 2 is newer than this reader (it reads format 1)"},
      {"body", data.substr(0, data.size() - 3),
       absl::StrCat("record at offset ", start, " is cut short (", data.size() - 3 - start, " of ",
                    data.size() - start, " bytes): the recording was interrupted")},
      {"varint", data + "\x80",
       absl::StrCat("record at offset ", data.size(),
                    " is cut short (1 of 2 bytes): the recording was interrupted")},
      {"invalid", data + "\x02\xff\xff",
       absl::StrCat("record at offset ", data.size(), " is not a valid ReconcileRecord")},
      {"too long", data + Varint(uint64_t{300} << 20),
       absl::StrCat("record at offset ", data.size(), " claims ", uint64_t{300} << 20,
                    " bytes, more than the limit of 268435456 bytes: the file is corrupt")},
      {"header", "CTRLREC\n", "ends before its header at offset 8: the recording was interrupted"},
  };
  for (const auto& [name, bytes, want] : cases) {
    const std::string path = absl::StrCat(dir, "/", name, ".ctrlrec");
    WriteFile(path, bytes);
    absl::StatusOr<ReplayResult> res = Replay(*Greeter(), path);
    EXPECT_EQ(res.status().message(), absl::StrCat(path, ": ", want)) << name;
    EXPECT_FALSE(ReplayMatches(*Greeter(), path)) << name;
  }
  auto other = *ControllerBuilder("other")
                    .For("example.com", "v1", "Greeting")
                    .Reconcile([](const Request&) { return Result(); })
                    .Build();
  EXPECT_EQ(Replay(*other, good).status().message(),
            good + ": holds controller greeter, not other");
}

TEST(ReplayTest, APluginReplaysTheControllerItsHeaderNames) {
  const std::string root = TempDir();
  GreeterRecording(root + "/greeter");
  pluginpb::ReconcileRecord rec;
  rec.set_sequence(1);
  *rec.mutable_call() = GreetingCall("hi", {{"name", "Ada"}});
  rec.mutable_call()->set_controller("other");
  rec.mutable_response();
  WriteRecording(root + "/other/00000001.ctrlrec", Header("other"), {rec});
  Plugin plugin("greetings", "1.0.0");
  plugin.Add(Greeter());
  plugin.Add(
      ControllerBuilder("other").For("example.com", "v1", "Greeting").Reconcile([](const Request&) {
        return Result();
      }));
  EXPECT_EQ(Replay(plugin, root).status().message(),
            root + ": holds recordings of several controllers (found: greeter, other): name one");
  EXPECT_EQ(Replay(plugin, root, {.controller = "gone"}).status().message(),
            root + ": holds no recording of controller gone (found: greeter, other)");
  for (const std::string name : {"greeter", "other"}) {
    absl::StatusOr<ReplayResult> res = Replay(plugin, root, {.controller = name});
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_GT(res->compared, 0) << name;
    EXPECT_EQ(res->different, 0) << res->Summary();
  }
  EXPECT_TRUE(ReplayMatches(plugin, root + "/other/00000001.ctrlrec"));
  Plugin lone("lone", "1.0.0");
  lone.Add(
      ControllerBuilder("other").For("example.com", "v1", "Greeting").Reconcile([](const Request&) {
        return Result();
      }));
  EXPECT_EQ(Replay(lone, root + "/greeter").status().message(),
            root + "/greeter/00000001.ctrlrec: plugin \"lone\" has no controller \"greeter\"");
}

TEST(ReplayTest, TheAssertionListsTheFirst20DifferencesAndTheTotals) {
  auto c = Greeter();
  std::vector<pluginpb::ReconcileRecord> records;
  for (int i = 1; i <= 25; ++i) {
    records.push_back(
        Recorded(*c, i, GreetingCall(absl::StrFormat("g%02d", i), {{"name", "Ada"}})));
  }
  const std::string dir = TempDir();
  WriteRecording(dir + "/00000001.ctrlrec", Header("greeter"), records);
  GreeterOptions o;
  o.text = [](const std::string&) { return "Yo"; };
  const ::testing::AssertionResult result = ReplayMatches(*Greeter(o), dir);
  ASSERT_FALSE(result);
  const std::string report = result.message();
  EXPECT_EQ(report.rfind("25 of 25 replayed answers differ (0 same, 0 skipped, 1 files)\n", 0), 0u)
      << report;
  size_t count = 0;
  for (size_t at = report.find(" differ\n"); at != std::string::npos;
       at = report.find(" differ\n", at + 1))
    ++count;
  EXPECT_EQ(count, 20u) << report;
  EXPECT_NE(report.find("prod/g20:"), std::string::npos);
  EXPECT_EQ(report.find("prod/g21:"), std::string::npos);
  EXPECT_EQ(report.substr(report.size() - 15), "\n... and 5 more");
}

TEST(ReplayTest, JudgesTheNewAnswerAsTheHost) {
  const std::string dir = TempDir();
  GreeterRecording(dir);
  GreeterOptions o;
  o.extra = [](Result* r) { r->Desire(NewObject("apps/v1", "Deployment", "web")); };
  o.build = [](ControllerBuilder* b) { b->LabelSelector("greet=yes"); };
  absl::StatusOr<ReplayResult> res = Replay(*Greeter(o), dir);
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->different, 2);
  const std::string text = res->differences[0].ToString();
  EXPECT_NE(text.find("the host would not send this request: the object's labels"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the host would refuse the replayed answer: desired_objects[2]: kind apps/v1 "
                      "Deployment is not owned by controller greeter"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace ctrlhost::sdk::testing
